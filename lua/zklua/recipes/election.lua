--- zklua.recipes.election — kazoo's Election, plus a non-blocking "latch" form.
--
--   local election = zk:Election("/app/election", "worker-1")
--   election:run(function(...) ... end, ...)     -- blocks until elected; leads while fn runs
--
--   election:on_leader(function(e) ... end)      -- latch form (beyond kazoo)
--   election:on_lost(function(e) ... end)
--   election:start()                             -- joins, returns at once
--   if election:await(5) then ... end            -- true once leader
--   election:stop()                              -- leaves (releases or withdraws)
--
-- An Election IS a Lock on its path (kazoo: `self.lock = client.Lock(path, identifier)`): the
-- same `<uuid>__lock__<seq>` nodes holding the identifier, the state machine of
-- src/recipes/lock.c (its contract, SUSPENDED and LOST included: src/recipes/lock.h), so kazoo
-- Elections, kazoo Locks and zklua members of one path exclude each other.  The leader is the
-- contender with the lowest sequence.  `election.lock` is that Lock.
-- opts {layout = "curator"}: the Lock is on Curator's LeaderLatch nodes instead
-- (`_c_<uuid>-latch-<seq>` holding the identifier, containers for a missing path), so zklua
-- members and Curator LeaderLatch members of one path elect one leader among them; Curator
-- reads a zklua member's identifier as its participant id.  opts.container as Lock's;
-- opts.error_policy below.
-- opts {layout = "curator-selector"}: a member of Curator's LeaderSelector instead, whose
-- leader holds an InterProcessMutex on the path (`_c_<uuid>-lock-<seq>` holding the
-- identifier, Curator's getParticipants() ids): run(fn) is its takeLeadership, and
-- run({requeue = true}, fn) its autoRequeue (after each term, join again at the end of the
-- queue).  error_policy defaults to "standard" as with "curator" (Curator's
-- LeaderSelectorListenerAdapter cancels leadership on SUSPENDED and LOST): fn cannot be
-- interrupted as Curator interrupts takeLeadership, so while SUSPENDED it sees is_leader
-- false and on_lost runs; it should return (its node is released, and with requeue it
-- queues again).  Everything else (LOST, timeouts, sharing) is the run form's, below.
--
-- * run(fn, ...) -> true, fn's results: blocks until elected, calls fn(...), then releases
--   leadership, also when fn raises (the error is re-raised after the release).  When cancel()
--   ends the wait, fn is not called and run returns false (kazoo's run swallows the
--   CancelledError and returns None).  A ZooKeeper error that retries cannot fix is raised.
-- * cancel(): a run waiting to be elected returns false and its node is deleted; with no run
--   waiting, the next run returns false at once (kazoo's Lock.cancel).  A leader is never
--   interrupted (kazoo's note).  On a started latch that is not leading, cancel() is stop().
-- * contenders() -> the identifiers (node data) of the contenders, the leader first.
-- * Latch form: start() joins without blocking; the wait is done by the C lock while the event
--   loop runs (any blocking call, handler wait, or zk:dispatch()).  When this member becomes
--   leader, is_leader turns true and every on_leader(fn) callback runs fn(election), from the
--   event loop.  await(timeout) runs the event loop until leader (true) or timeout (false).
--   stop() leaves: a leader deletes its node (waits for it like Lock:release), a waiting
--   member withdraws its node.  A started latch is kept alive by its client until stop().
-- * opts.error_policy: which connection states end leadership, as Curator's
--   ConnectionStateErrorPolicy.  "standard" (the default with layout = "curator", Curator
--   5.4's default StandardConnectionStateErrorPolicy, which its LeaderLatch follows): SUSPENDED
--   and LOST.  "session" (the default with kazoo's layout; Curator's
--   SessionConnectionStateErrorPolicy, kazoo's behaviour): LOST only.
-- * SUSPENDED with error_policy "session": a leader stays leader (is_leader true, as kazoo's
--   lock): its ephemeral node lives as long as the session does.  With "standard" (Curator's
--   LeaderLatch): is_leader turns false and every on_lost(fn) callback runs (Curator's
--   notLeader), but the node is kept (as Curator keeps it), so no other member leads while
--   the session lives; once CONNECTED again on the same session the member is leader again
--   (its node is still the lowest: Curator re-reads the children and calls isLeader) and
--   on_leader runs again.  Either way a waiting member goes on waiting after reconnecting.
-- * LOST (session expired): the node is gone, so is_leader turns false and every on_lost(fn)
--   callback runs fn(election).  A latch then rejoins on the new session by itself (a new
--   node, at the end of the queue: it keeps competing) and may lead again (on_leader again).
--   In run(), fn cannot be stopped: it keeps running, but is_leader is false and on_lost ran;
--   fn should check is_leader (or fencing_token) before acting as leader; run then returns
--   normally.  (With "standard", a SUSPENDED fn sees is_leader false and on_lost run too, and
--   is_leader true again with on_leader run when the same session reconnects.)  Stopping
--   the client (zk:stop()/close()) is a LOST too, and ends a latch.
-- * is_running: a run() is under way or the latch is started.  A latch ends by stop(), by
--   cancel() while not leading, when the client stops, or when the lock fails with an error
--   that retries cannot fix (kept in election.error, logged, raised by await()).
-- * Waiting (Lua): run() and await() wait to be elected, which has no end by design (kazoo's
--   run blocks for ever) unless given a timeout (run({timeout = t}, fn, ...): TimeoutError,
--   await(t): false): they end only when elected, on cancel() (run: false) or stop()
--   (await: false), on zk:stop()/close() (ConnectionClosedError) or on AUTH_FAILED
--   (AuthFailedError); await(timeout) also at its timeout.  start(timeout) and stop(timeout)
--   wait only for a node being deleted: at most timeout seconds (default: the client's
--   timeout), TimeoutError then.
-- * Sharing: run() is the Lock's acquire (zklua.recipes.base: the object's turn); a second
--   run() or start() on one object while one is under way raises KazooException at once, so
--   coroutines never lead twice through one Election.  await() only waits for a state every
--   waiter sees: any number of coroutines may await one latch.
-- * fencing_token: while leader, the czxid of the leader's node, a number that grows with
--   every new leader of the path (nil when not leader).
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"
local locks = require "zklua.recipes.lock"
local base = require "zklua.recipes.base"

local recipes = {}

local ZCLOSING = core.codes.ZCLOSING

local Election = { __name = "zklua.Election" }

local POLICIES = { standard = true, session = true }
local SELECTOR = "curator-selector" -- Curator's LeaderSelector: an InterProcessMutex

-- Whether this member must not count as leader now: its policy makes SUSPENDED an error
-- (Curator's StandardConnectionStateErrorPolicy) and the connection is not up.
local function suspended(self)
  return self.error_policy == "standard" and self.client.state ~= "CONNECTED"
end

local fields = {
  is_leader = function(self) return self._leading end,
  fencing_token = function(self)
    if not self._leading then return nil end
    return self._ud:fencing_token()
  end,
  is_running = function(self) return self._mode ~= nil end,
}

function Election.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return Election[key]
end

function Election.__tostring(self)
  return string.format("zklua.Election(%s, %s)", self.path,
                       self._leading and "leader" or self._mode or "idle")
end

local function usable(client, fname)
  return client:_usable_session(fname)
end

local function callback(fname, fn)
  if not check.callable(fn) then
    check.fail(fname, "fn", "fn must be a function or a callable table (got " .. type(fn) .. ")")
  end
  return fn
end

-- Runs the callbacks of list, in order, as one user callback (Client:_callback: never nested
-- in another callback's wait).
local function fire(self, list, what)
  local copy = {}
  for i, fn in ipairs(list) do copy[i] = fn end
  self.client:_callback(function()
    for _, fn in ipairs(copy) do
      local ok, err = pcall(fn, self)
      if not ok then
        self.client:_log("ERROR", "error in election " .. what .. " callback: " .. tostring(err))
      end
    end
  end)
end

-- ---------------------------------------------------------------- the latch

-- Ends the latch without touching its node (the client stopped, or the lock failed).
local function end_latch(self)
  self._mode = nil
  if self._listener then
    self.client:remove_listener(self._listener)
    self._listener = nil
  end
end

-- Brings is_leader in line with the C lock and runs the callbacks; rejoins after a loss.
function Election:_sync()
  if self._syncing then return end
  self._syncing = true
  local ok, err = pcall(function()
    local ud = self._ud
    local phase = ud:phase()
    if self._mode == "run" then
      if not self._elected then return end
      local leads = ud:is_held() and not suspended(self)
      if self._leading and not leads then
        self._leading = false
        fire(self, self._lost_callbacks, "on_lost")
      elseif not self._leading and leads then -- the same session reconnected ("standard")
        self._leading = true
        fire(self, self._leader_callbacks, "on_leader")
      end
      return
    end
    if self._mode ~= "latch" then return end
    local leads = phase == "held" and not suspended(self)
    if self._leading and not leads then
      self._leading = false
      fire(self, self._lost_callbacks, "on_lost")
    elseif not self._leading and leads then
      self._leading = true
      fire(self, self._leader_callbacks, "on_leader")
    end
    if self._mode ~= "latch" or ud:phase() ~= "idle" then return end
    local client = self.client
    local outcome, rc = ud:outcome()
    if client._stopped or not client._session or rc == ZCLOSING then
      end_latch(self) -- zk:stop()/close() ends the latch
    elseif outcome == "failed" then
      end_latch(self)
      self.error = errors.from_code(rc, self.path)
      client:_log("ERROR", "election on " .. self.path .. " stopped: " .. tostring(self.error))
    else
      ud:acquire(true, true) -- lost (expiry): compete again on the new session
    end
  end)
  self._syncing = false
  if not ok then error(err, 0) end
end

--- Joins the election without blocking (it waits only for an earlier stop() still deleting
-- its node: at most timeout seconds, default the client's).  Returns true, or false when
-- already started.
function Election:start(timeout)
  timeout = check.timeout("start", timeout)
  local client = self.client
  usable(client, "start")
  if self._mode == "latch" then return false end
  if self._mode == "run" then
    errors.raise(errors.KazooException, "start: a run() of this election is under way", self.path)
  end
  local ud = self._ud
  if ud:phase() == "abandoning" or ud:phase() == "releasing" then -- an earlier stop()
    local state = base.wait(self, function()
      local p = ud:phase()
      return (p ~= "abandoning" and p ~= "releasing") or client.state ~= "CONNECTED"
    end, base.deadline(timeout, client._timeout))
    base.check_wait(state, errors.TimeoutError, "start", self.path, timeout or client._timeout,
                    "the earlier stop()")
  end
  self.error = nil
  self._mode = "latch"
  self._leading = false
  self._listener = function() self:_sync() end
  client:add_listener(self._listener)
  local started, why = ud:acquire(true, true)
  if not started then
    end_latch(self)
    errors.raise(errors.ConnectionClosedError, "start: cannot join (" .. tostring(why) .. ")",
                 self.path)
  end
  self:_sync()
  return true
end

--- Waits (running the event loop) until leader: true, or false after timeout seconds (nil:
-- no limit: waiting to be elected has no end by design) or when the latch ended meanwhile.
-- Raises the error that ended a latch, ConnectionClosedError (the client stopped or closed)
-- or AuthFailedError (AUTH_FAILED).
function Election:await(timeout)
  timeout = check.timeout("await", timeout)
  if self._mode ~= "latch" then
    usable(self.client, "await") -- a client that stopped ended the latch: say so first
    if self.error then error(self.error, 0) end
    errors.raise(errors.KazooException, "await: the election is not started (start() it)",
                 self.path)
  end
  local state = base.wait(self, function()
    self:_sync()
    return self._leading or self._mode ~= "latch"
  end, base.deadline(timeout))
  if self._mode ~= "latch" and self.error then error(self.error, 0) end
  if state == "closed" or state == "auth_failed" then
    base.check_wait(state, errors.TimeoutError, "await", self.path, timeout)
  end
  return self._leading == true
end

--- Leaves the election: a leader releases (deletes its node, waiting as Lock:release does);
-- a waiting member withdraws its node (waiting at most timeout seconds, default the client's:
-- TimeoutError then, the withdrawal going on in C).  Returns true if the latch was started.
function Election:stop(timeout)
  timeout = check.timeout("stop", timeout)
  if self._mode ~= "latch" then return false end
  end_latch(self)
  local ud, client = self._ud, self.client
  self._leading = false
  local phase = ud:phase()
  if phase == "acquiring" then
    ud:cancel()
    local state = base.wait(self, function()
      return ud:phase() ~= "abandoning" or client.state ~= "CONNECTED"
    end, base.deadline(timeout, client._timeout))
    if state == "timeout" or state == "auth_failed" then -- the withdrawal goes on in C
      base.check_wait(state, errors.TimeoutError, "stop", self.path, timeout or client._timeout,
                      "withdrawing the node")
    end
  elseif phase == "held" or phase == "releasing" then
    self.lock:release()
  end
  return true
end

--- on_leader(fn): fn(election) runs (from the event loop) each time a started latch becomes
-- leader.  Returns fn.
function Election:on_leader(fn)
  self._leader_callbacks[#self._leader_callbacks + 1] = callback("on_leader", fn)
  return fn
end

--- on_lost(fn): fn(election) runs when leadership is lost: with the session (LOST), or, under
-- error_policy "standard", with the connection (SUSPENDED; on_leader runs again if the same
-- session reconnects).
function Election:on_lost(fn)
  self._lost_callbacks[#self._lost_callbacks + 1] = callback("on_lost", fn)
  return fn
end

-- ---------------------------------------------------------------- kazoo's API

-- One term: waits to be elected (at most timeout seconds), runs fn, gives leadership up.
-- Returns "cancelled", or "led" and fn's packed results; raises fn's error after the release.
local function term(self, timeout, fn, ...)
  local ok, got = pcall(self.lock.acquire, self.lock, true, timeout)
  if not ok or not got then
    if not ok and errors.is(got, errors.LockTimeout) then
      base.raise_timeout(errors.TimeoutError, "run", self.path, timeout, "the election")
    end
    if not ok and not errors.is(got, errors.CancelledError) then error(got, 0) end
    return "cancelled" -- kazoo's run swallows CancelledError
  end
  local listener -- "standard": SUSPENDED ends leadership, CONNECTED brings it back
  if self.error_policy == "standard" then
    listener = self.client:add_listener(function() self:_sync() end)
  end
  self._elected = true
  self._leading = self._ud:is_held() and not suspended(self)
  local results = compat.pack(pcall(fn, ...))
  if listener then self.client:remove_listener(listener) end
  self._elected = false
  self._leading = false
  local released, err = pcall(self.lock.release, self.lock)
  if not results[1] then error(results[2], 0) end
  if not released then error(err, 0) end
  return "led", results
end

local function run(self, timeout, requeue, fn, ...)
  callback("run", fn)
  usable(self.client, "run")
  if self._mode then
    errors.raise(errors.KazooException, "run: this election is already " ..
                 (self._mode == "latch" and "started" or "running"), self.path)
  end
  self._mode = "run"
  local terms = 0
  while true do
    local ok, status, results = pcall(term, self, timeout, fn, ...)
    if not ok then
      self._mode = nil
      error(status, 0)
    end
    if status == "cancelled" then
      self._mode = nil
      if requeue then return terms > 0, terms end
      return false
    end
    terms = terms + 1
    if not requeue then
      self._mode = nil
      return true, compat.unpack(results, 2, results.n)
    end
    local usable_ok, why = pcall(usable, self.client, "run") -- the client stopped meanwhile
    if not usable_ok then
      self._mode = nil
      error(why, 0)
    end
  end
end

local RUN_OPTIONS = { timeout = true, requeue = true }

--- run(fn, ...) -> true, fn's results; false when cancelled before being elected.
-- run({timeout = seconds}, fn, ...): TimeoutError when not elected within timeout seconds
-- (its node deleted, fn not called).  run({requeue = true}, fn, ...): after each term the
-- member joins again at the end of the queue (Curator's LeaderSelector.autoRequeue), until
-- cancel() ends a wait: then true, the number of terms led (false, 0 when none).
function Election:run(fn, ...)
  if type(fn) == "table" and not check.callable(fn) then
    for key in pairs(fn) do
      if not RUN_OPTIONS[key] then
        check.fail("run", "opts", "unknown option '" .. tostring(key) ..
                   "' (timeout and requeue only)")
      end
    end
    local requeue = fn.requeue
    if requeue ~= nil then requeue = check.flag("run", requeue, "requeue") end
    return run(self, check.timeout("run", fn.timeout), requeue, ...)
  end
  return run(self, nil, false, fn, ...)
end

--- Cancels a run() waiting to be elected (it returns false), or the next run; stops a
-- started latch that is not leading.  Never interrupts a leader.
function Election:cancel()
  if self._mode == "latch" then
    if not self._leading and self._ud:phase() ~= "held" then self:stop() end
    return
  end
  self.lock:cancel()
end

--- The identifiers of the contenders, in order: the leader first.
function Election:contenders()
  return self.lock:contenders()
end

function recipes.Election(client, path, identifier, opts)
  path = check.kazoo_path("Election", path)
  if identifier ~= nil and type(identifier) ~= "string" then
    check.fail("Election", "identifier", "identifier must be a string or nil (got " ..
               type(identifier) .. ")")
  end
  check.value("Election", identifier, path, "identifier")
  if type(opts) == "table" then
    check.layout("Election", opts.layout, { "kazoo", "curator", SELECTOR })
  end
  local policy
  if type(opts) == "table" and opts.error_policy ~= nil then
    policy = opts.error_policy
    if not POLICIES[policy] then
      check.fail("Election", "error_policy", "option 'error_policy' must be \"standard\" " ..
                 "or \"session\" (got " .. (type(policy) == "string" and
                 string.format("%q", policy) or type(policy)) .. ")")
    end
  end
  local selector = type(opts) == "table" and opts.layout == SELECTOR
  if policy or selector then
    local rest = {}
    for k, v in pairs(opts) do if k ~= "error_policy" then rest[k] = v end end
    if selector then rest.layout = "curator" end
    opts = rest
  end
  local lock = (selector and locks.SelectorLock or locks.ElectionLock)(client, path, identifier,
                                                                        opts)
  policy = policy or (lock.layout == "curator" and "standard" or "session")
  local self = setmetatable({ client = client, path = path, identifier = identifier,
                              error_policy = policy,
                              layout = selector and SELECTOR or lock.layout,
                              lock = lock, _ud = lock._lock, _leading = false,
                              _leader_callbacks = {}, _lost_callbacks = {} }, Election)
  lock:on_lost(function() self:_sync() end)
  lock._on_decided = function() self:_sync() end -- the C lock says when it decided
  return self
end

recipes.class = Election

return recipes
