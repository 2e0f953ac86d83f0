--- zklua.recipes.party — kazoo's Party and ShallowParty.
--
--   local p = zk:Party("/app/workers", "worker-1")
--   p:join(); for _, id in ipairs(p:members()) do ... end; print(#p); p:leave()
--   (#p counts the members; under LuaJIT, whose # ignores __len on tables, p:len())
--   p:on_lost(function(party) ... end)          -- the session expired while joined
--   local s = zk:ShallowParty("/app/names", "worker-1")   -- the identifier is in the name
--
-- The membership is the C state machine of src/recipes/party.c, on kazoo's nodes (kazoo and
-- zklua processes share a party).  Its contract — layout, and what SUSPENDED (connection
-- lost: a member stays joined) and LOST (session expired: the member is out and, as kazoo,
-- not re-joined) do — is stated once, in src/recipes/party.h.  What this layer adds:
--
-- * join() returns once the node exists; joining a joined party does nothing.  leave()
--   deletes the node and returns true, or false when there was none (as kazoo).  Both take a
--   timeout (default: the client's `timeout`; TimeoutError) and wait through a connection
--   loss until then.  members() (Party: the children's data; ShallowParty: the names after
--   their first '-') and #party read the children (a member leaving meanwhile is skipped).
-- * on_lost(fn): fn(party) runs when a joined member learns of LOST (participating turns
--   false), so the user can join() again; zk:stop() is a LOST too.
-- * Sharing (zklua.recipes.base): join() and leave() from coroutines sharing one party take
--   turns (one member node per object); their timeout counts the wait for the turn; they end
--   with ConnectionClosedError when the client stops or closes and AuthFailedError when its
--   auth is refused.  members() and len() are independent reads.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local base = require "zklua.recipes.base"

local recipes = {}


local Party = { __name = "zklua.Party" }

local fields = {
  participating = function(self)
    local phase = self._party:phase()
    return phase == "joined" or phase == "leaving"
  end,
}

function Party.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return Party[key]
end

local function usable(client, fname)
  return client:_usable_session(fname)
end

local join_path = require("zklua.paths").join

-- Waits while phase is `busy` (at most until deadline); raises TimeoutError, or
-- ConnectionClosedError / AuthFailedError when the client went away meanwhile.
local function wait_phase(self, fname, busy, timeout, deadline)
  local ud = self._party
  base.check_wait(base.wait(self, function() return ud:phase() ~= busy end, deadline),
                  errors.TimeoutError, fname, self.path, timeout)
end

local function join_in_turn(self, timeout, deadline)
  usable(self.client, "join")
  local ud = self._party
  -- an earlier join or leave that timed out (or was interrupted) finishes first
  if ud:phase() == "leaving" then wait_phase(self, "join", "leaving", timeout, deadline) end
  if ud:phase() == "joining" then wait_phase(self, "join", "joining", timeout, deadline) end
  local ok, why = ud:join()
  if not ok then
    if why == "joined" then return end
    errors.raise(why == "busy" and errors.KazooException or errors.ConnectionClosedError,
                 "join: cannot start (" .. why .. ")", self.path)
  end
  wait_phase(self, "join", "joining", timeout, deadline)
  if ud:phase() ~= "joined" then
    error(errors.from_code(ud:rc() ~= 0 and ud:rc() or core.codes.ZCLOSING, self.path), 0)
  end
end

local function leave_in_turn(self, timeout, deadline)
  usable(self.client, "leave")
  local ud = self._party
  if ud:phase() == "joining" then wait_phase(self, "leave", "joining", timeout, deadline) end
  if ud:phase() == "leaving" then -- an earlier leave timed out: its answer is this one's
    wait_phase(self, "leave", "leaving", timeout, deadline)
    if ud:rc() ~= 0 then error(errors.from_code(ud:rc(), self.path), 0) end
    return ud:deleted()
  end
  local ok, why = ud:leave()
  if not ok then
    errors.raise(why == "busy" and errors.KazooException or errors.ConnectionClosedError,
                 "leave: cannot start (" .. why .. ")", self.path)
  end
  wait_phase(self, "leave", "leaving", timeout, deadline)
  if ud:rc() ~= 0 then error(errors.from_code(ud:rc(), self.path), 0) end
  return ud:deleted()
end

local function serial(self, fname, timeout, fn)
  timeout = check.timeout(fname, timeout)
  usable(self.client, fname)
  self.client:_check_wait()
  if timeout == nil then timeout = self.client._timeout end
  return base.serial_timed(self, fname, timeout, nil, errors.TimeoutError, fn, self, timeout,
                           base.deadline(timeout))
end

--- join(timeout): the member node exists once it returns.  TimeoutError after timeout
-- seconds (nil: the client's timeout; its wait for the object's turn included): the join
-- goes on, and the next join() or leave() lets it finish first.  Coroutines sharing the
-- party take turns.
function Party:join(timeout)
  return serial(self, "join", timeout, join_in_turn)
end

--- leave(timeout) -> true if the node was deleted, false if there was none.  TimeoutError
-- as join().
function Party:leave(timeout)
  return serial(self, "leave", timeout, leave_in_turn)
end

local function member_names(self)
  local client = self.client
  usable(client, "members")
  client:ensure_path(self.path)
  local names = client:get_children(self.path)
  if self._kind == "party" then
    local kept = {}
    for _, name in ipairs(names) do
      if name:find("__party__", 1, true) then kept[#kept + 1] = name end
    end
    names = kept
  end
  return names
end

--- members() -> the identifiers of the members (unordered, like the children).
function Party:members()
  local names = member_names(self)
  local ids = {}
  if self._kind == "shallow" then
    for i, name in ipairs(names) do ids[i] = name:match("^[^-]*%-(.*)$") or name end
    return ids
  end
  local futures = {}
  for i, name in ipairs(names) do futures[i] = self.client:get_async(join_path(self.path, name)) end
  for _, f in ipairs(futures) do
    local ok, data = pcall(f.get, f)
    if ok then
      ids[#ids + 1] = data
    elseif not errors.is(data, errors.NoNodeError) then -- a member left meanwhile: skipped
      error(data, 0)
    end
  end
  return ids
end

--- len() -> how many members there are: #party, under LuaJIT too (whose # ignores __len on
-- a table, as Lua 5.1 does).
function Party:len()
  return #member_names(self)
end

Party.__len = Party.len

function Party.__pairs(self)
  return ipairs(self:members())
end

function Party.__tostring(self)
  return string.format("zklua.%s(%s, %s)", self._class, self.path, self._party:phase())
end

-- on_lost(fn): fn(party) runs when the session expired (or stopped) while joined.
base.install_lost(Party, "party")

local function new(class, kind, client, path, identifier)
  local fname = class
  path = check.kazoo_path(fname, path)
  if identifier ~= nil and type(identifier) ~= "string" then
    check.fail(fname, "identifier", "identifier must be a string or nil (got " ..
               type(identifier) .. ")")
  end
  local data = check.value(fname, identifier, path, "identifier")
  if kind == "shallow" then -- the identifier is part of the node's name
    if data:find("/", 1, true) then
      check.fail(fname, "identifier", "a ShallowParty identifier must not contain '/'")
    end
    check.path(fname, join_path(path, string.rep("0", 32) .. "-" .. data), "identifier")
  end
  local session = usable(client, fname)
  local ud = core.party(session, path, data, kind, client:_acl())
  local self = setmetatable({ client = client, path = path, identifier = identifier,
                              data = data, node = ud:node(), _kind = kind, _class = class,
                              _party = ud }, Party)
  base.init(self)
  self.create_path = join_path(path, self.node)
  client:_add_notify_target(ud:id(), self)
  return self
end

function recipes.Party(client, path, identifier)
  return new("Party", "party", client, path, identifier)
end

function recipes.ShallowParty(client, path, identifier)
  return new("ShallowParty", "shallow", client, path, identifier)
end

recipes.class = Party

return recipes
