--- zklua.recipes.lease — kazoo's NonBlockingLease and MultiNonBlockingLease: time-based
-- leases that never block waiting for a holder.
--
--   local lease = zk:NonBlockingLease("/db_leases/hourly_cleanup", 70 * 60, "cleanup@db1")
--   if lease.obtained then do_hourly_cleanup() end
--   local multi = zk:MultiNonBlockingLease(2, "/leases/reporters", 600)
--   if multi.obtained then report() end
--
-- The attempt is the C state machine of src/recipes/lease.c, on kazoo 2.8's znodes and JSON
-- record (kazoo and zklua processes share a lease).  Its contract — the record, when a lease
-- is obtained or refused, and what SUSPENDED and LOST do (nothing once obtained: a lease is
-- time-based; during an attempt they end it with ConnectionLoss or SessionExpiredError) — is
-- stated once, in src/recipes/lease.h.  What this layer adds:
--
-- * MultiNonBlockingLease(count, ...) tries <path>/0 .. <path>/<count-1> in order and stops at
--   the first one obtained.  A record kazoo could not read raises KazooException.
-- * duration is in seconds (kazoo: a timedelta); the end is written in whole seconds.
-- * identifier: default (nil or "", as kazoo) the host's name, socket.gethostname()'s; it must
--   be UTF-8 text (it is stored in JSON).  Renew by using the same identifier.
-- * utcnow: a function returning the current UTC time as seconds since the epoch (default:
--   the system clock, zklua.core.utcnow); kazoo's returns a datetime.  It is called once the
--   internal lock is held, as kazoo's.  Clocks of the hosts sharing a lease must be roughly
--   in step (kazoo's caveat).
-- * When the client is not CONNECTED the constructor raises ConnectionLoss at once
--   (ConnectionClosedError when it is stopped).
-- * Timeout (beyond kazoo, whose constructors have none): the attempt (all the slots of a
--   MultiNonBlockingLease) takes at most timeout seconds, the trailing argument (default:
--   the client's timeout), then raises TimeoutError; stop()/close() raise
--   ConnectionClosedError and AUTH_FAILED AuthFailedError.  The attempt is then abandoned
--   and its internal lock released in the background; the record may or may not have been
--   written (renew to know).
-- * Sharing: nothing to share.  Each constructor call is its own attempt with its own C
--   object and returns a new lease object holding only results, so coroutines need no turn;
--   coroutines obtaining one path exclude each other through the internal kazoo Lock, as
--   processes do.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local join = require("zklua.paths").join
local base = require "zklua.recipes.base"

local recipes = {}

local ZBADARGUMENTS = -8
local MAX_COUNT = 1000000

local Lease = { __name = "zklua.NonBlockingLease" }
Lease.__index = Lease

function Lease.__tostring(self)
  return string.format("zklua.NonBlockingLease(%s, %s, %s)", self.path, self.identifier,
                       self.obtained and "obtained" or "not obtained")
end

local Multi = { __name = "zklua.MultiNonBlockingLease" }
Multi.__index = Multi

function Multi.__tostring(self)
  return string.format("zklua.MultiNonBlockingLease(%d, %s, %s)", self.count, self.path,
                       self.obtained and "obtained" or "not obtained")
end

local function check_identifier(fname, identifier, path)
  if identifier == nil or identifier == "" then return core.hostname() end -- kazoo: `or`
  if type(identifier) ~= "string" then
    check.fail(fname, "identifier", "identifier must be a string or nil (got " ..
               type(identifier) .. ")")
  end
  if not core.utf8_valid(identifier) then
    check.fail(fname, "identifier", "identifier must be UTF-8 text (kazoo stores it in JSON)")
  end
  -- JSON escaping may make a byte six characters long in the record
  if #identifier * 6 + #path + 256 > core.max_packet then
    check.fail(fname, "identifier", "identifier is too long for the lease record (" ..
               #identifier .. " bytes)")
  end
  return identifier
end

local function check_duration(fname, duration)
  if type(duration) ~= "number" or duration ~= duration or duration < 0
     or duration == math.huge then
    check.fail(fname, "duration", "duration must be a finite number of seconds >= 0 (got " ..
               tostring(duration) .. ")")
  end
  return duration
end

local function check_utcnow(fname, utcnow)
  if utcnow ~= nil and type(utcnow) ~= "function" then
    check.fail(fname, "utcnow", "utcnow must be a function or nil (got " .. type(utcnow) .. ")")
  end
  return utcnow or core.utcnow
end

-- Runs the attempt: waits (with the client's handler, until deadline), hands the C lease the
-- time when it asks, and returns once it has decided.  A timeout, stop()/close() or
-- AUTH_FAILED abandons the attempt (its internal lock is released in the background).
local function run(self, ud, fname, utcnow, timeout, deadline)
  local client = self.client
  local function settled()
    local phase = ud:phase()
    return phase == "needs_time" or phase == "idle" or not client._session
           or (phase == "finishing" and client.state ~= "CONNECTED")
  end
  local ok, err = pcall(function()
    while true do
      base.check_wait(base.wait(self, settled, deadline), errors.TimeoutError, fname,
                      self.path, timeout, "the attempt")
      if ud:phase() ~= "needs_time" or not client._session then return end
      local now = utcnow()
      if type(now) ~= "number" or now ~= now or now == math.huge or now == -math.huge then
        check.fail(fname, "utcnow", "utcnow must return the UTC time in seconds since the " ..
                   "epoch (got " .. tostring(now) .. ")")
      end
      ud:decide(now)
    end
  end)
  if not ok then -- utcnow failed, or the wait ended: let go of the internal lock
    ud:abandon()
    error(err, 0)
  end
end

local function result(self, ud, fname)
  local outcome, rc, why = ud:outcome()
  if outcome == "obtained" then
    self.obtained = true
    self.expires = ud:end_time()
  elseif outcome == "bad_record" then
    errors.raise(errors.KazooException, fname .. ": " .. join(self.path, "lease_holder") ..
                 " is not a lease record kazoo can read (" .. tostring(why) .. ")", self.path)
  elseif outcome == "failed" and rc == ZBADARGUMENTS then
    errors.raise(errors.BadArgumentsError, fname .. ": the lease's end (now + duration) is " ..
                 "outside the years 1000 to 9999", self.path, { argument = "duration" })
  elseif outcome == "failed" then
    error(errors.from_code(rc, self.path), 0)
  elseif outcome == "pending" or outcome == "abandoned" then
    errors.raise(errors.ConnectionClosedError, fname .. ": the client was closed", self.path)
  end
  return self
end

local function attempt(client, path, duration, identity, utcnow, fname, timeout, deadline)
  local session = client:_usable_session(fname)
  if client.state ~= "CONNECTED" then
    errors.raise(errors.ConnectionLoss, fname .. ": not connected (the client is " ..
                 client.state .. ")", path)
  end
  local self = setmetatable({ client = client, path = path, identifier = identity,
                              duration = duration, obtained = false }, Lease)
  local ud = core.lease(session, path, identity, duration, client:_acl())
  local started = ud:obtain()
  if not started then
    errors.raise(errors.ConnectionLoss, fname .. ": not connected", path)
  end
  run(self, ud, fname, utcnow, timeout, deadline)
  return result(self, ud, fname)
end

-- The timeout of an attempt (nil: the client's) and its deadline.
local function timeout_of(client, fname, timeout)
  timeout = check.timeout(fname, timeout)
  if timeout == nil then timeout = client._timeout end
  return timeout, base.deadline(timeout)
end

--- NonBlockingLease(client, path, duration, identifier = hostname, utcnow = system clock,
-- timeout = the client's)
function recipes.NonBlockingLease(client, path, duration, identifier, utcnow, timeout)
  local fname = "NonBlockingLease"
  path = check.kazoo_path(fname, path)
  duration = check_duration(fname, duration)
  identifier = check_identifier(fname, identifier, path)
  utcnow = check_utcnow(fname, utcnow)
  local seconds, deadline = timeout_of(client, fname, timeout)
  client:_check_wait()
  return attempt(client, path, duration, identifier, utcnow, fname, seconds, deadline)
end

--- MultiNonBlockingLease(client, count, path, duration, identifier = hostname, utcnow,
-- timeout = the client's: for all the slots tried)
function recipes.MultiNonBlockingLease(client, count, path, duration, identifier, utcnow,
                                       timeout)
  local fname = "MultiNonBlockingLease"
  if type(count) ~= "number" or count ~= math.floor(count) or count < 1 or count > MAX_COUNT then
    check.fail(fname, "count", "count must be an integer from 1 to " .. MAX_COUNT .. " (got " ..
               tostring(count) .. ")")
  end
  path = check.kazoo_path(fname, path)
  duration = check_duration(fname, duration)
  identifier = check_identifier(fname, identifier, path .. "/" .. count)
  utcnow = check_utcnow(fname, utcnow)
  local seconds, deadline = timeout_of(client, fname, timeout)
  client:_check_wait()
  local self = setmetatable({ client = client, count = count, path = path,
                              identifier = identifier, duration = duration, obtained = false },
                            Multi)
  for num = 0, count - 1 do
    local lease = attempt(client, join(path, string.format("%d", num)), duration, identifier,
                          utcnow, fname, seconds, deadline)
    if lease.obtained then
      self.obtained = true
      self.lease = lease -- the slot's lease: lease.path, lease.expires
      self.expires = lease.expires
      break
    end
  end
  return self
end

recipes.NonBlockingLease_class = Lease
recipes.MultiNonBlockingLease_class = Multi

return recipes
