--- zklua.recipes.patient_children — kazoo's PatientChildrenWatch.
--
--   local watch = zk:PatientChildrenWatch("/app/workers", 5)
--   local children, changed = watch:start():get()   -- once unchanged for 5 seconds
--   changed:rawlink(function(f) ... end)            -- set on their next change
--
-- The watch is the C state machine of src/recipes/patient_children.c, timed by the session's
-- timers.  Its contract — a burst of changes is waited out, a missing node is NoNodeError,
-- and what SUSPENDED (the boundary starts again, whole, once reconnected) and LOST (a settling
-- round reads again on the new session; a settled one compares the children there) do — is
-- stated once, in src/recipes/patient_children.h.  What this layer adds:
--
-- * start() returns a future (zklua.future, like the _async calls) that is set with two values
--   once the children of the node have stayed unchanged for time_boundary seconds (default
--   30): the children (sorted bytewise) and a second future, set on their next change with
--   the wall-clock time it was seen (kazoo's time.time()).  Unlike DataWatch and
--   ChildrenWatch there is no callback: it reports once per start().  The futures are set
--   from the event loop whatever the script waits on (any blocking call, a future's get,
--   zklua.sleep, or zk:dispatch() in a host loop).
-- * start() while a round is settling returns that round's future; after it settled, start()
--   begins a new round (the earlier change future is still set by the next change seen).
-- * Waiting: start() never waits; the waits are the futures' get(timeout)/wait(timeout),
--   bounded by their timeout (nil: until set, as kazoo's IAsyncResult; a round takes at least
--   time_boundary, 30 s by default, so the client's timeout cannot be its default).  No
--   future is left waiting: zk:stop()/close() sets a pending one (the round's, or a change
--   future) with ConnectionClosedError, and AUTH_FAILED with AuthFailedError.  While a future
--   of it is pending the watch is kept alive (its futures need it), even if the script
--   dropped the object.
-- * Sharing: safe without a turn.  start() hands every caller the same in-progress future
--   (the C round is started once), and a settled round hands each waiter the same children;
--   any number of coroutines may wait on one future (each wakes when it is set).
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local Future = require "zklua.future"

local recipes = {}

local NOTIFY = core.notify.patient_children
local NOTIFY_SETTLED, NOTIFY_CHANGED, NOTIFY_FAILED = NOTIFY.SETTLED, NOTIFY.CHANGED, NOTIFY.FAILED
local MAX_BOUNDARY = 2000000

local PatientChildrenWatch = { __name = "zklua.PatientChildrenWatch" }
PatientChildrenWatch.__index = PatientChildrenWatch

-- Watches with a pending future, held strongly: a future's resolution needs its watch.
local active = {} -- luacheck: ignore 241 (an anchor table: held, never read)

local function keep_alive(self)
  local pending = (self._round ~= nil and not self._round.done) or #self._changes > 0
  active[self] = pending or nil
end

--- start() -> a future of (children, a future set on their next change).
function PatientChildrenWatch:start()
  local client = self.client
  client:_usable_session("start")
  local round = self._round
  if round and not round.done then return round end -- settling (or settled, not yet told)
  local started, why = self._watch:start()
  if not started then
    errors.raise(errors.ConnectionClosedError, "start: cannot start (" .. tostring(why) .. ")",
                 self.path)
  end
  round = Future.new(client.handler)
  round._path = self.path
  self._round = round
  keep_alive(self)
  return round
end

local function settled(self)
  local change = Future.new(self.client.handler)
  change._path = self.path
  self._changes[#self._changes + 1] = change
  local round = self._round
  if round and not round.done then round:set(self._watch:children(), change) end
end

local function changed(self)
  local waiting = self._changes
  self._changes = {}
  local at = self._watch:changed_at()
  for _, f in ipairs(waiting) do f:set(at) end
end

local function failed(self)
  local rc = self._watch:rc()
  local err = errors.from_code(rc ~= 0 and rc or core.codes.ZCLOSING, self.path)
  local waiting = self._changes
  self._changes = {}
  local round = self._round
  if round and not round.done then round:set_exception(err) end
  for _, f in ipairs(waiting) do f:set_exception(err) end
end

-- The C watch's news (through the client's dispatch).
function PatientChildrenWatch:_notified(code)
  if code == NOTIFY_SETTLED then
    settled(self)
  elseif code == NOTIFY_CHANGED then
    changed(self)
  elseif code == NOTIFY_FAILED then
    failed(self)
  end
  keep_alive(self)
end

function PatientChildrenWatch.__tostring(self)
  return string.format("zklua.PatientChildrenWatch(%s, %s, %s)", self.path,
                       tostring(self.time_boundary), self._watch:phase())
end

function recipes.PatientChildrenWatch(client, path, time_boundary)
  local fname = "PatientChildrenWatch"
  path = check.kazoo_path(fname, path)
  if time_boundary == nil then time_boundary = 30 end
  if type(time_boundary) ~= "number" or not (time_boundary >= 0 and
                                             time_boundary <= MAX_BOUNDARY) then
    check.fail(fname, "time_boundary", "time_boundary must be a number of seconds from 0 to " ..
               MAX_BOUNDARY .. " (got " .. tostring(time_boundary) .. ")")
  end
  local session = client:_usable_session(fname)
  local ud = core.patient_children(session, path, time_boundary)
  local self = setmetatable({ client = client, path = path, time_boundary = time_boundary,
                              _watch = ud, _changes = {} }, PatientChildrenWatch)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.class = PatientChildrenWatch

return recipes
