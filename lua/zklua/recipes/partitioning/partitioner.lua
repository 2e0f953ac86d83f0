--- zklua.recipes.partitioning.partitioner — kazoo's SetPartitioner, with a dynamic set and no endless
-- ALLOCATING.
--
--   local qp = zk:SetPartitioner{path = "/work_queues", set = {"queue-1", "queue-2", "queue-3"}}
--   while true do
--     if qp.failed then error("Lost or unable to acquire partition")
--     elseif qp.release then qp:release_set()
--     elseif qp.acquired then for queue in qp:iter() do work_on(queue) end
--     elseif qp.allocating then qp:wait_for_acquire() end
--   end
--
-- The partitioner is the C state machine of src/recipes/partitioning/set_partitioner.c, on kazoo's nodes
-- (kazoo and zklua members of one path split one set).  Its contract — layout, the states
-- ALLOCATING / ACQUIRED / RELEASE / FAILURE, ownership through the items' locks, the end of
-- endless ALLOCATING (kazoo #392), and what SUSPENDED (ACQUIRED turns RELEASE at once, as
-- kazoo; no new claims until reconnected) and LOST (FAILURE, as kazoo) do — is stated
-- once, in src/recipes/partitioning/set_partitioner.h.  What this layer adds:
--
-- * partition_func(identifier, members, set) runs here, in Lua, when the C side asks for it
--   (default: kazoo's round-robin stride over the sorted set and the sorted members); an
--   error it raises is a FAILURE.  qp.error says why FAILURE (nil after finish()); a conflict
--   is a LockTimeout naming the item and its holder.
-- * Items are strings or numbers (not mixed), distinct, each usable as a znode name.  An item
--   names its lock as Python's str() would: strings as they are, integral numbers as ints
--   ("3"), other numbers as Python's repr of a float ("0.5"); so kazoo members with the same
--   set lock the same nodes.  Sorting is Python's: strings bytewise, numbers numerically.
-- * conflict_timeout default: time_boundary + the session timeout + 10 * max_reaction_time
--   (a holder that died, or the previous process of a restarted member with the same
--   identifier, holds its locks until its session expires).
-- * update_set(new_set) (kazoo #386): each member has its own set: update every member.
-- * fencing_token(item) is the item's lock token.
-- * state_change_event: fn(state, qp), called from the event loop on every state change.
-- * A SetPartitioner is kept alive by zklua until it reaches FAILURE (it acts on events).
-- * Timeouts: wait_for_acquire(timeout) is kazoo's (default 30 s; false when it passes); the
--   constructor's join (option timeout), release_set(timeout) and finish(timeout) take at
--   most timeout seconds (default: the client's timeout), then raise TimeoutError while the
--   work goes on in C (a later release_set/finish waits for it; a timed-out constructor
--   leaves the party again).  A wait ends with ConnectionClosedError on stop()/close() and
--   AuthFailedError on AUTH_FAILED.
-- * Sharing: no turn is needed.  Every call only asks the C state machine for a step that
--   is idempotent where it is under way (a release or finish started twice is one release)
--   and then waits for a state every waiter sees; nothing is read then written in Lua, so
--   coroutines sharing one partitioner each end when the state is reached, with no work done
--   twice (zklua.recipes.base's waits).
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local join = require("zklua.paths").join
local waits = require "zklua.recipes.waits"
local turn = require "zklua.recipes.turn"
local base = require "zklua.recipes.base"

local recipes = {}

local NOTIFY_PARTITION = core.notify.set_partitioner.PARTITION
local NOTIFY_STATE = core.notify.set_partitioner.STATE
local STATES = { "ALLOCATING", "ACQUIRED", "RELEASE", "FAILURE" }
local FNAME = "SetPartitioner"

-- Partitioners not yet in FAILURE: they act on events, so they stay alive (held, never read).
local active = {} -- luacheck: ignore 241 (an anchor table)

local SetPartitioner = { __name = "zklua.SetPartitioner" }

local failure_error -- (below)

local fields = {
  state = function(self) return self._ud:state() end,
  failed = function(self) return self._ud:state() == "FAILURE" end,
  -- qp.error is set when the FAILURE notice is handled; the state is C's and can be ahead of
  -- that notice, so a script that saw qp.failed first gets the error made here, from the
  -- state (kept: the notice finds it set)
  error = function(self)
    if self._ud:state() ~= "FAILURE" then return nil end
    local err = failure_error(self)
    rawset(self, "error", err)
    return err
  end,
  release = function(self) return self._ud:state() == "RELEASE" end,
  acquired = function(self) return self._ud:state() == "ACQUIRED" end,
  allocating = function(self) return self._ud:state() == "ALLOCATING" end,
}

function SetPartitioner.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return SetPartitioner[key]
end

function SetPartitioner.__tostring(self)
  return string.format("zklua.SetPartitioner(%s, %s, %s)", self.path, self.identifier,
                       self._ud:state())
end

-- ---------------------------------------------------------------- items and their names

local function copy(list)
  local out = {}
  for i = 1, #list do out[i] = list[i] end
  return out
end

-- Python's repr() of a float: the shortest digits that read back as x, laid out as Python does
-- (positional for exponents -5 < e < 16, with ".0" when integral; else d.ddde+XX).
local function python_float(x)
  local sign = x < 0 and "-" or ""
  x = math.abs(x)
  if x == 0 then return sign .. "0.0" end
  local digits, exp
  for precision = 1, 17 do
    local s = string.format("%." .. (precision - 1) .. "e", x)
    if tonumber(s) == x then
      local mantissa, e = s:match("^([%d%.]+)e([-+]%d+)$")
      digits, exp = mantissa:gsub("%.", ""):gsub("0+$", ""), tonumber(e)
      break
    end
  end
  if exp < -4 or exp >= 16 then
    local m = #digits > 1 and digits:sub(1, 1) .. "." .. digits:sub(2) or digits
    return string.format("%s%se%s%02d", sign, m, exp < 0 and "-" or "+", math.abs(exp))
  end
  if exp < 0 then return sign .. "0." .. string.rep("0", -exp - 1) .. digits end
  if #digits <= exp + 1 then return sign .. digits .. string.rep("0", exp + 1 - #digits) .. ".0" end
  return sign .. digits:sub(1, exp + 1) .. "." .. digits:sub(exp + 2)
end
recipes.python_float = python_float

local function is_integral(x)
  if math.type then
    if math.type(x) == "integer" then return true end
  end
  return x == math.floor(x) and math.abs(x) < 2 ^ 53
end

--- The lock name of an item (as Python's str()), or nil and why it cannot be one.
local function item_name(item)
  if type(item) == "number" then
    if item ~= item or item == math.huge or item == -math.huge then
      return nil, "numbers must be finite"
    end
    return is_integral(item) and string.format("%d", item) or python_float(item)
  elseif type(item) ~= "string" then
    return nil, "items must be strings or numbers (got " .. type(item) .. ")"
  elseif item == "" or item == "." or item == ".." or item:find("/", 1, true) then
    return nil, "an item must be a znode name: not empty, '.', '..' or containing '/' (got " ..
                string.format("%q", item) .. ")"
  end
  return item
end
recipes.item_name = item_name

local function bytewise_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- Lua's < on strings follows the locale (strcoll); under "C" it is bytewise already.
local function string_less()
  local locale = os.setlocale(nil, "collate")
  if locale == "C" or locale == "POSIX" then return nil end
  return bytewise_less
end

--- A sorted copy of list (strings bytewise, numbers numerically: Python's sorted()).
local function sorted(list)
  local out = copy(list)
  table.sort(out, type(out[1]) == "string" and string_less() or nil)
  return out
end

--- kazoo's default partition_func: member i (0-based, among the sorted members) owns the
-- items i, i+n, i+2n, ... of the sorted set.
function recipes.round_robin(identifier, members, set)
  local workers = sorted(members)
  local at
  for i, member in ipairs(workers) do
    if member == identifier then at = i; break end
  end
  if not at then error("identifier " .. tostring(identifier) .. " is not a party member", 0) end
  local items, share = sorted(set), {}
  for i = at, #items, #workers do share[#share + 1] = items[i] end
  return share
end

-- Checks a set: a list of distinct strings, or of distinct numbers, each a znode name under
-- lock_path.  Returns a copy and name -> item.
local function check_set(fname, set, lock_path, argument)
  argument = argument or "set"
  if type(set) ~= "table" then
    check.fail(fname, argument, argument .. " must be a list of strings or numbers (got " ..
               type(set) .. ")")
  end
  local n = #set
  for k in pairs(set) do
    if type(k) ~= "number" or k < 1 or k > n or k ~= math.floor(k) then
      check.fail(fname, argument, argument .. " must be a list (a table with keys 1..n): " ..
                 "found key " .. tostring(k))
    end
  end
  local items, names, kind = {}, {}, nil
  for i = 1, n do
    local item = set[i]
    local name, why = item_name(item)
    if not name then check.fail(fname, argument, argument .. "[" .. i .. "]: " .. why) end
    kind = kind or type(item)
    if type(item) ~= kind then
      check.fail(fname, argument, argument .. " mixes strings and numbers (Python cannot " ..
                 "sort them either)")
    end
    if names[name] ~= nil then
      check.fail(fname, argument, argument .. "[" .. i .. "] repeats the item " ..
                 string.format("%q", name))
    end
    check.path(fname, join(lock_path, name), argument .. "[" .. i .. "] (as a lock path)")
    names[name] = item
    items[i] = item
  end
  return items, names
end

-- ---------------------------------------------------------------- the C side's requests

local function log(self, message)
  self.client:_log("ERROR", "SetPartitioner on " .. self.path .. ": " .. message)
end

-- The names of the share partition_func returned, or nil and what is wrong with it.
local function share_names(self, share)
  if type(share) ~= "table" then
    return nil, "partition_func must return a list of items of the set (got " .. type(share) .. ")"
  end
  local names, seen = {}, {}
  for i = 1, #share do
    local name = item_name(share[i])
    if not name or self._names[name] == nil then
      return nil, "partition_func returned an item that is not in the set: " ..
                  tostring(share[i])
    end
    if seen[name] then return nil, "partition_func returned the item " .. name .. " twice" end
    seen[name] = true
    names[i] = name
  end
  return names
end

-- The C side settled the party and asks for this member's share.
function SetPartitioner:_partition()
  local ud = self._ud
  local attempt, nodes = ud:wanted()
  if not attempt then return end -- answered already, or moot
  local members = {}
  for i, node in ipairs(nodes) do members[i] = node:match("^[^-]*%-(.*)$") or node end
  local set, by_name = self._set, self._names
  local ok, share = pcall(self._partition_func, self.identifier, members, copy(set))
  local names, why
  if ok then
    names, why = share_names(self, share)
  else
    why = "partition_func raised an error: " .. tostring(share)
  end
  if self._set ~= set then return end -- update_set() ran meanwhile: that attempt is moot
  if not names then
    self.error = errors.KazooException(why, self.path)
    log(self, why)
    ud:fail(attempt)
    return
  end
  if ud:assign(attempt, names) then
    self._owned = by_name -- maps the share's names back to the items
  end
end

-- Who holds item's lock (the first contender's identifier), for the conflict message.
local function holder_of(self, name)
  local path = join(self._lock_path, name)
  local ok, holder = pcall(function()
    local contenders = core.lock_contenders(self.client:get_children(path))
    if not contenders[1] then return nil end
    return (self.client:get(join(path, contenders[1])))
  end)
  if not ok or holder == nil then return "an unknown member" end
  if holder == "" then return "a member that names itself nowhere (a kazoo process?)" end
  return string.format("member %q", holder)
end

function failure_error(self)
  local why, rc = self._ud:failure()
  if why == "lost" then
    return errors.SessionExpiredError("the session expired: the partition is lost (make a " ..
                                      "new SetPartitioner)", self.path)
  elseif why == "closed" then
    return errors.ConnectionClosedError("the client was stopped", self.path)
  elseif why == "error" then
    return errors.from_code(rc, self.path)
  elseif why == "conflict" then
    local name, blocker = self._ud:conflict()
    local holder = holder_of(self, name) -- (its requests in a pcall: never raises)
    local reason = holder == string.format("member %q", self.identifier)
      and "another member uses the same identifier"
      or "the members disagree on the set or on partition_func (kazoo #392)"
    return errors.LockTimeout(string.format("item %q is still held by %s, and no lock of this " ..
      "member's (%q) share came free for %s s: %s", name, holder, self.identifier,
      tostring(self.conflict_timeout), reason), join(self._lock_path, name),
      { item = (self._owned or self._names)[name] or name, holder = holder, blocker = blocker })
  end
  return nil -- finished (or the partition error, set already)
end

function SetPartitioner:_notified(code)
  if code == NOTIFY_PARTITION then
    self:_partition()
    return
  end
  local state = STATES[code - NOTIFY_STATE + 1]
  if not state then return end
  if state == "FAILURE" then
    active[self] = nil
    if rawget(self, "error") == nil then self.error = failure_error(self) end
  end
  local on_state = self._on_state
  if on_state then
    local partitioner = self
    self.client:_callback(function() -- user code: never nested (Client:_callback)
      local ok, err = pcall(on_state, state, partitioner)
      if not ok then log(partitioner, "error in state_change_event: " .. tostring(err)) end
    end)
  end
end

-- ---------------------------------------------------------------- kazoo's API

--- Waits (running the event loop) until the state is no longer ALLOCATING, at most timeout
-- seconds (default 30, as kazoo; math.huge: no limit).  Returns qp.acquired.  Raises
-- ConnectionClosedError (the client stopped or closed) or AuthFailedError (AUTH_FAILED) when
-- that ends the wait first.
function SetPartitioner:wait_for_acquire(timeout)
  timeout = check.timeout("wait_for_acquire", timeout)
  if timeout == nil then timeout = 30 end
  local ud = self._ud
  local state = base.wait(self, function() return ud:state() ~= "ALLOCATING" end,
                          base.deadline(timeout))
  if state ~= "timeout" then
    base.check_wait(state, errors.TimeoutError, "wait_for_acquire", self.path, timeout)
  end
  return ud:state() == "ACQUIRED"
end

-- Waits for done() (the releases or the leave under way in C) at most timeout seconds (nil:
-- the client's timeout): TimeoutError then (the work goes on in C, a later call waits for
-- it); while disconnected at most a session timeout (then false: the nodes are deleted once
-- reconnected, or vanish with the session).  Ends with ConnectionClosedError or
-- AuthFailedError when the client is stopped, closed or AUTH_FAILED.
-- timeout nil: the client's timeout without progress (one more lock released starts it
-- again), so that a share of any size can be released while a stuck release still ends.
local function wait_reachable(self, fname, timeout, done)
  local client = self.client
  local ok, why
  if timeout == nil then
    timeout = client._timeout
    repeat
      local left = self._ud:releasing()
      ok, why = waits.while_reachable(client, function()
        return done() or self._ud:releasing() < left
      end, base.deadline(timeout))
    until not ok or done()
  else
    ok, why = waits.while_reachable(client, done, base.deadline(timeout))
  end
  if ok then return true end
  if why == "timeout" then
    base.raise_timeout(errors.TimeoutError, fname, self.path, timeout)
  end
  if turn.ended(client) then turn.raise_ended(client, fname, self.path) end
  return false
end

--- Releases the set (deletes every item lock, waiting for it) and allocates again.  In
-- ALLOCATING it starts the allocation over; in FAILURE it does nothing.  timeout (beyond
-- kazoo): seconds, default the client's timeout without progress (each lock released starts
-- it again); TimeoutError then, the release going on.
-- While disconnected it waits at most a session timeout: then the locks count as released
-- (they are deleted once reconnected, or vanish with the session).
function SetPartitioner:release_set(timeout)
  timeout = check.timeout("release_set", timeout)
  local ud = self._ud
  if not self.client._session then return end
  self.client:_check_wait()
  ud:release_set()
  if not wait_reachable(self, "release_set", timeout,
                        function() return ud:state() ~= "RELEASE" end) then
    ud:release_in_background()
  end
end

--- Releases the set and leaves the party: FAILURE (kazoo's finish()).  Waits for the deletes
-- (timeout as release_set's; at most a session timeout while disconnected).
function SetPartitioner:finish(timeout)
  timeout = check.timeout("finish", timeout)
  local ud = self._ud
  active[self] = nil
  if not self.client._session then return end
  self.client:_check_wait()
  ud:finish()
  wait_reachable(self, "finish", timeout, function() return not ud:busy() end)
end

--- The items this member owns: while ACQUIRED, and in RELEASE until released (kazoo's
-- list(qp)); empty otherwise.  A new table, in partition_func's order.
function SetPartitioner:list()
  local owned, out = self._owned, {}
  if not owned then return out end
  for i, name in ipairs(self._ud:items()) do out[i] = owned[name] end
  return out
end

--- for item in qp:iter() do ... end (kazoo's `for partition in qp`).
function SetPartitioner:iter()
  local list, i = self:list(), 0
  return function()
    i = i + 1
    return list[i]
  end
end

--- len() -> how many items this member owns (kazoo's len(qp)): #qp, under LuaJIT too (whose
-- # ignores __len on tables) qp:len().
function SetPartitioner:len()
  return #self:list()
end
SetPartitioner.__len = SetPartitioner.len

--- The fencing token of an owned item (its lock's czxid, growing with every owner); nil when
-- this member does not own it.
function SetPartitioner:fencing_token(item)
  local name, why = item_name(item)
  if not name then check.fail("fencing_token", "item", why) end
  return self._ud:fencing_token(name)
end

--- Replaces the set (kazoo #386): ACQUIRED becomes RELEASE (release_set() then allocates with
-- the new set); an allocation under way starts over.  Checked like the constructor's set.
function SetPartitioner:update_set(new_set)
  local set, names = check_set("update_set", new_set, self._lock_path, "new_set")
  self._set, self._names = set, names
  self._ud:set_changed()
end

--- The set this member partitions (a copy).
function SetPartitioner:get_set()
  return copy(self._set)
end

-- ---------------------------------------------------------------- construction

local OPTIONS = {
  path = "string", set = "table", partition_func = "function", identifier = "string",
  time_boundary = "number", max_reaction_time = "number", state_change_event = "function",
  conflict_timeout = "number", timeout = "number",
}
local POSITIONAL = { "path", "set", "partition_func", "identifier", "time_boundary",
                     "max_reaction_time", "state_change_event" }

-- zk:SetPartitioner{path, set, ...} (named, or path and set first), or kazoo's positional
-- order zk:SetPartitioner(path, set, partition_func, identifier, time_boundary, ...).
local function options(...)
  local first = ...
  local opts = {}
  if type(first) == "table" then
    if select("#", ...) > 1 then
      check.fail(FNAME, "options", "pass one options table, or kazoo's positional arguments")
    end
    for k, v in pairs(first) do
      local key = k == 1 and "path" or k == 2 and "set" or k
      if not OPTIONS[key] then check.fail(FNAME, tostring(k), "unknown option '" .. tostring(k) .. "'") end
      if opts[key] ~= nil then check.fail(FNAME, key, key .. " is given twice") end
      opts[key] = v
    end
  else
    local args = { n = select("#", ...), ... }
    if args.n > #POSITIONAL then check.fail(FNAME, "arguments", "too many arguments") end
    for i = 1, args.n do opts[POSITIONAL[i]] = args[i] end
  end
  for key, want in pairs(OPTIONS) do
    local v = opts[key]
    if v ~= nil and type(v) ~= want then
      check.fail(FNAME, key, key .. " must be a " .. want .. " (got " .. type(v) .. ")")
    end
  end
  return opts
end

local function seconds(value, default, argument, positive)
  if value == nil then return default end
  if not (value >= 0 and value <= 1e7) or (positive and value == 0) then -- refuses NaN
    check.fail(FNAME, argument, argument .. " must be a number of seconds " ..
               (positive and "> 0" or ">= 0") .. " (got " .. tostring(value) .. ")")
  end
  return value
end

local function default_identifier()
  return core.host_fqdn() .. "-" .. core.getpid()
end
recipes.default_identifier = default_identifier

function recipes.SetPartitioner(client, ...)
  local o = options(...)
  local path = check.kazoo_path(FNAME, o.path)
  if o.set == nil then check.fail(FNAME, "set", "set is required (a list of items)") end
  local lock_path, party_path = join(path, "locks"), join(path, "party")
  local set, names = check_set(FNAME, o.set, lock_path)
  local identifier = o.identifier
  if identifier == nil or identifier == "" then identifier = default_identifier() end
  if identifier:find("/", 1, true) then
    check.fail(FNAME, "identifier", "identifier must not contain '/' (it is part of a node name)")
  end
  check.path(FNAME, join(party_path, string.rep("0", 32) .. "-" .. identifier),
             "identifier (in the party node's name)")
  local time_boundary = seconds(o.time_boundary, 30, "time_boundary")
  local max_reaction_time = seconds(o.max_reaction_time, 1, "max_reaction_time")
  local conflict_timeout = seconds(o.conflict_timeout, nil, "conflict_timeout", true)
  check.timeout(FNAME, o.timeout)
  client:_check_wait()
  local session = client:_usable_session(FNAME)
  if not conflict_timeout then -- a dead holder's session lingers a session timeout at most
    conflict_timeout = time_boundary + math.max(client:session_timeout(), client._timeout) +
                       10 * max_reaction_time
  end
  local timeout = o.timeout
  if timeout == nil then timeout = client._timeout end
  local deadline = base.deadline(timeout)
  for _, p in ipairs({ path, lock_path, party_path }) do
    client:ensure_path_async(p):get(base.remaining(deadline))
  end
  local ud = core.set_partitioner(session, path, identifier, time_boundary, conflict_timeout,
                                  client:_acl())
  local self = setmetatable({
    client = client, path = path, identifier = identifier, time_boundary = time_boundary,
    max_reaction_time = max_reaction_time, conflict_timeout = conflict_timeout,
    _ud = ud, _set = set, _names = names, _lock_path = lock_path, _party_path = party_path,
    _partition_func = o.partition_func or recipes.round_robin,
    _on_state = o.state_change_event,
  }, SetPartitioner)
  client:_add_notify_target(ud:id(), self)
  active[self] = true
  -- kazoo joins the party in its constructor: so does this, within timeout
  local joined = base.wait(self, function() return not ud:joining() end, deadline)
  if joined ~= "done" then
    active[self] = nil
    ud:finish() -- the join goes on in C: leave again once it is done
    base.check_wait(joined, errors.TimeoutError, FNAME, party_path, timeout, "joining the party")
  end
  -- Only a join that failed raises.  One pass over the events may hold the join's reply and
  -- what followed it (the listing, a time_boundary of 0, the partition asked for): a FAILURE
  -- after the join (partition_func raised, a conflict, the session lost) is the object's
  -- state, as it is once kazoo's constructor has returned: qp.failed, qp.error.
  if ud:state() == "FAILURE" and not ud:joined() then
    active[self] = nil
    error(self.error or failure_error(self) or
          errors.KazooException("could not join the party", party_path), 0)
  end
  return self
end

recipes.class = SetPartitioner

return recipes
