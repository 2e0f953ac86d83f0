--- zklua.client — a ZooKeeper client with kazoo's API.
--
--   local zk = zklua.client{hosts = "127.0.0.1:2181", timeout = 10}
--   zk:start()
--   zk:create("/app/x", "v", {makepath = true})
--
-- Guarantees:
-- * Every operation has a synchronous form and an `_async` twin returning a future; every
--   future is resolved exactly once, whatever happens to the connection: ConnectionLoss when
--   it drops, SessionExpiredError when the session dies, ConnectionClosedError after stop().
-- * `zk.state` follows kazoo: LOST until connected, CONNECTED, SUSPENDED while the connection
--   is down (the session, its watches and ephemerals may live), LOST when the session expired,
--   the connection stayed down for a whole session timeout (it counts as expired), or the
--   client stopped.  After an expiry a new session is opened at once (auth re-applied)
--   and CONNECTED follows.  Listeners hear each change.  One-shot watches die with a session:
--   on its expiry each is called once, after the LOST listeners, with the event
--   {type = "NONE", state = "EXPIRED_SESSION"} (kazoo's); DataWatch and ChildrenWatch re-arm
--   themselves.
-- * A request made while the connection is down (SUSPENDED, or before the first connection)
--   waits for it and then runs, as kazoo queues it; it fails with SessionExpiredError if the
--   session expires first, ConnectionClosedError if the client stops (also when the
--   connection retry policy gives up), AuthFailedError after AUTH_FAILED.  A request already
--   sent when the connection dropped fails with ConnectionLoss: its reply is lost, though
--   the server may have carried it out.
-- * Arguments are checked before anything is sent (zklua.check).
-- * Callbacks (watches, listeners, rawlinks) run from Lua, in the thread that owns the client,
--   while a blocking call waits or when the host calls zk:dispatch().  State fields change
--   only there too.  Callbacks never nest (kazoo's one callback thread): one that waits lets
--   op results and recipe steps through, and the callbacks that come meanwhile run after it,
--   in order (zklua.handlers.blocking), so no burst of events deepens the C stack.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"
local paths = require "zklua.paths"
local hosts_mod = require "zklua.hosts"
local Future = require "zklua.future"
local Retry = require "zklua.retry"
local tls = require "zklua.tls"
local sasl = require "zklua.sasl"
local blocking = require "zklua.handlers.blocking"

local Client = {}
Client.__index = Client

local FLAG_EPHEMERAL, FLAG_SEQUENCE = 1, 2
local DEFAULT_HOSTS = "127.0.0.1:2181"

local CLIENT_OPTIONS = {
  hosts = "any", timeout = "number", read_only = "boolean", auth_data = "table",
  default_acl = "table", command_retry = "table", connection_retry = "table",
  logger = "any", log_level = "string", handler = "any", client_id = "table",
  randomize_hosts = "boolean", max_in_flight = "number",
  -- kazoo's TLS options (zklua.tls)
  use_ssl = "boolean", certfile = "string", keyfile = "string", keyfile_password = "string",
  ca = "string", verify_certs = "boolean",
  -- kazoo's SASL options (zklua.sasl)
  sasl_options = "table",
}

local LOG_LEVELS = { NONE = 0, ERROR = 1, WARN = 2, WARNING = 2, INFO = 3, DEBUG = 4 }
local LEVEL_NAMES = '"ERROR", "WARN", "INFO", "DEBUG" or "NONE"'

--- A hosts argument read as kazoo reads it (zklua.hosts): the {host, port} pairs, the chroot
-- ("" when none: "h:2181/" has none; normalised, "/a/" is "/a") and the string handed to
-- libzookeeper ("host:port,...[/chroot]", every port written out, IPv6 unbracketed as the
-- library reads it).  Malformed (zklua.hosts' rules, a chroot that is no path): raises
-- BadArgumentsError.
local function parse_hosts(fname, value)
  local list, chroot = hosts_mod.collect_hosts(value, fname)
  local ok, normal = pcall(paths.normpath, chroot or "")
  if not ok then
    check.fail(fname, "hosts (chroot)", "hosts: the chroot may not hold \".\" or \"..\" (got " ..
               string.format("%q", chroot) .. ")")
  end
  chroot = normal
  if chroot == "/" then chroot = "" end
  if chroot ~= "" then check.path(fname, chroot, "hosts (chroot)") end
  local addresses = {}
  for i, pair in ipairs(list) do addresses[i] = hosts_mod.address(pair) end
  return list, chroot, table.concat(addresses, ",") .. chroot
end

local function check_auth_data(auth_data)
  for i, pair in ipairs(auth_data) do
    if type(pair) ~= "table" or type(pair[1]) ~= "string" or type(pair[2]) ~= "string" then
      check.fail("client", "auth_data", "auth_data[" .. i .. "] must be {scheme, credential}")
    end
  end
  return auth_data
end

--- n random whole numbers (0 to 2^32 - 1) from /dev/urandom: math.random would give every
-- LuaJIT process the same sequence (it is not seeded at start), and every client of a fleet
-- would try the servers in the same order.  math.random where /dev/urandom cannot be read.
local function random_words(n)
  local f = io.open("/dev/urandom", "rb")
  local bytes = f and f:read(4 * n)
  if f then f:close() end
  local words = {}
  for i = 1, n do
    local b1, b2, b3, b4 = (bytes or ""):byte(4 * i - 3, 4 * i)
    words[i] = b4 and ((b1 * 256 + b2) * 256 + b3) * 256 + b4 or math.random(0, 2 ^ 31 - 1)
  end
  return words
end

--- The hosts string handed to libzookeeper: the servers in a random order (kazoo's
-- randomize_hosts; the library is told to keep the order it is given), or as given.
local function connect_order(hosts, randomize)
  local servers, chroot = hosts:match("^([^/]*)(.*)$")
  if not randomize then return hosts end
  local entries = {}
  for entry in servers:gmatch("[^,]+") do entries[#entries + 1] = entry end
  local words, list = random_words(#entries), {}
  for i, entry in ipairs(entries) do table.insert(list, words[i] % i + 1, entry) end
  return table.concat(list, ",") .. chroot
end

--- A session id as the C core takes it to resume a session: "0x..." hex (a string given is
-- passed as it is; an integer, or an int64 cdata under LuaJIT, is printed).
local function session_hex(id)
  if type(id) == "string" then return id end
  return string.format("0x%x", id)
end
Client._session_hex = session_hex

local callable = check.callable

local function level_number(value, argument, what)
  local level = type(value) == "string" and LOG_LEVELS[value:upper()]
  if not level then
    check.fail("client", argument, what .. " (got " .. tostring(value) .. ")")
  end
  return level
end

--- A logger printing lines at threshold or more severe on stderr.
local function stderr_logger(threshold)
  return function(level, message)
    if (LOG_LEVELS[level] or LOG_LEVELS.ERROR) <= threshold then
      io.stderr:write("zklua ", level, ": ", message, "\n")
    end
  end
end

--- The logger option (a function, or a level name printing to stderr) and log_level (the
-- most verbose level a logger hears: default INFO for a function, the name's own level)
-- -> the function to call (nil: zklua's own errors go to stderr, nothing else is said) and
-- its level (0..4), which is also what libzookeeper is asked for.
local function configure_logger(logger, log_level)
  local level = log_level ~= nil and
    level_number(log_level, "log_level", "log_level must be " .. LEVEL_NAMES) or nil
  if logger == nil then
    if level ~= nil then check.fail("client", "log_level", "log_level needs a logger") end
    return nil, 0
  end
  if type(logger) == "function" then return logger, level or LOG_LEVELS.INFO end
  local named = level_number(logger, "logger", "logger must be a function(level, message) " ..
                             "or a level name printing to stderr: " .. LEVEL_NAMES)
  level = level or named
  if level == 0 then return nil, 0 end
  return stderr_logger(level), level
end

--- The handler a client gets without the handler option: the blocking one, except inside
-- nginx (ngx_lua), where it would stall the worker's event loop: there the option is demanded.
local function default_handler()
  local host = rawget(_G, "ngx")
  if type(host) == "table" and host.get_phase then
    check.fail("client", "handler", "inside nginx a client needs the ngx handler: " ..
               "zklua.client{..., handler = require(\"zklua.handlers.ngx\").new()} " ..
               "(the blocking handler would stall the worker)")
  end
  return blocking
end

--- zklua.client(hosts) or zklua.client{hosts = ..., timeout = ..., ...}
-- connection_retry (kazoo's): with every server down, the client makes a pass over its hosts,
-- then pauses (delay, growing by backoff up to max_delay, times 1 +- max_jitter) before the
-- next; after max_tries failed passes or past the deadline it gives up and stops (LOST,
-- CLOSED; a start() waiting raises TimeoutError).  A connection made resets the count.
-- Without it: for ever, 0.1 s doubling up to a tenth of the session timeout (0.1 to 1 s).
-- max_in_flight (zklua's; default 1000): at most that many requests sent and not yet answered
-- per session; the rest wait in order and go out as answers come back, so that no burst can
-- put the session's pings behind its own requests for longer than its timeout.
function Client.new(arg)
  local opts = type(arg) == "string" and { hosts = arg } or arg or {}
  check.options("client", opts, CLIENT_OPTIONS, "options")
  local host_list, chroot, hosts = parse_hosts("client",
                                              opts.hosts or os.getenv("ZKLUA_HOSTS") or DEFAULT_HOSTS)
  local timeout = opts.timeout or 10
  if not (timeout > 0 and timeout <= 2000000) then -- also refuses NaN
    check.fail("client", "timeout", "timeout must be a number of seconds > 0 (got " ..
               tostring(timeout) .. ")")
  end
  local window = opts.max_in_flight
  if window ~= nil and not (window >= 1 and window <= 2147483647 and window % 1 == 0) then
    check.fail("client", "max_in_flight", "max_in_flight must be a whole number of ops >= 1 " ..
               "(got " .. tostring(window) .. ")")
  end
  if opts.default_acl and next(opts.default_acl) ~= nil then
    check.acls("client", opts.default_acl, "default_acl")
  end
  local handler = opts.handler or default_handler()
  if type(handler) ~= "table" or type(handler.attach) ~= "function" or
     type(handler.wait) ~= "function" then
    errors.raise(errors.ConfigurationError, "client: handler must be a handler module such " ..
                 "as require(\"zklua.handlers.blocking\") or a coroutine handler's new() " ..
                 "(got " .. type(handler) .. ")")
  end
  local randomize = opts.randomize_hosts ~= false
  local logger, log_level = configure_logger(opts.logger, opts.log_level)
  local auth_data = {}
  for i, pair in ipairs(check_auth_data(opts.auth_data or {})) do
    auth_data[i] = { pair[1], pair[2] }
  end
  local self = setmetatable({
    hosts = host_list, -- kazoo's: {host, port} pairs
    randomize_hosts = randomize,
    auth_data = auth_data, -- kazoo's: the {scheme, credential} pairs sent with every session
    default_acl = opts.default_acl, -- nil or {}: ZooKeeper's open ACL; settable, as kazoo's
    _hosts = hosts,
    chroot = chroot, -- kazoo's: "" when none
    state = "LOST",
    client_state = "CLOSED",
    connected = false,
    handler = handler,
    _timeout = timeout,
    _waits_alone = false, -- set by the blocking handler (zklua.handlers.blocking)
    _logger = logger,
    _log_level = log_level,
    _pending = {},   -- op id -> future
    _watchers = {},  -- op id -> watch: a callable, or an object routing its own (call_watch)
    _data_watches = false, -- the DataWatches' shared list (zklua.watchers), from the first
    _listeners = {},        -- in the order added; false where one was removed
    _listener_slot = {},    -- listener -> its index in _listeners
    _listener_holes = 0,    -- how many false entries _listeners holds
    _notify_targets = setmetatable({}, { __mode = "v" }), -- recipe id -> its Lua object
    _stopped = true,
    _has_auth = opts.auth_data ~= nil and #opts.auth_data > 0,
  }, Client)
  self.retry_policy = Retry.new(opts.command_retry, handler.sleep)
  -- kazoo's KazooRetry, defaults included (max_tries 1: give up after the second failed pass)
  local r = opts.connection_retry and Retry.new(opts.connection_retry)
  self._connection_retry = r
  local resume = opts.client_id
  if resume and not (resume[1] and type(resume[2]) == "string") then
    check.fail("client", "client_id", "client_id must be {session_id, password} as " ..
               "zk:client_id() returns them")
  end
  local sasl_params = sasl.params(opts) -- first: it refuses use_ssl with sasl_options if it must
  self._sasl = sasl_params and sasl.describe(sasl_params)
  self._sasl_causes = sasl_params and sasl.causes(sasl_params)
  local tls_cert = tls.cert_string(opts)
  self.use_ssl = tls_cert ~= nil
  self._session = core.session(connect_order(hosts, randomize), math.floor(timeout * 1000 + 0.5),
                               opts.read_only == true, resume and session_hex(resume[1]),
                               resume and resume[2], log_level, tls_cert, sasl_params)
  if window then self._session:set_window(math.tointeger and math.tointeger(window) or window) end
  if r then
    self._session:set_connection_retry(r.max_tries, r.delay, r.backoff, r.max_jitter,
                                       r.max_delay, r.deadline)
  end
  for _, pair in ipairs(auth_data) do
    self._session:add_auth(pair[1], pair[2]) -- remembered: sent with every new session
  end
  handler.attach(self)
  return self
end

-- ---------------------------------------------------------------- event loop

--- Hands a line to the logger: zklua's own (level "ERROR" or "WARN") and libzookeeper's
-- (they arrive as "log" events, already filtered and rate-limited in C: src/core/log.c).
-- Without a logger, only zklua's own errors are printed (on stderr).
function Client:_log(level, message)
  if self._logger then
    if (LOG_LEVELS[level] or LOG_LEVELS.ERROR) <= self._log_level then
      pcall(self._logger, level, message)
    end
  elseif level == "ERROR" then
    io.stderr:write("zklua: ", message, "\n")
  end
end

--- Runs fn(...) as a user callback (a watch function, a listener, a recipe hook: code that may
-- wait): through the handler's run_callback, which never nests one callback inside another's
-- wait (zklua.handlers.blocking), or at once under a handler without one (a coroutine
-- handler runs each in a coroutine of its own).  fn may run later: recipes hand it closures
-- that catch and report their own errors.
function Client:_callback(fn, ...)
  local run = self.handler.run_callback
  if run then return run(fn, ...) end
  return fn(...)
end

local function call_logged(client, what, fn, ...)
  local ok, result = pcall(fn, ...)
  if not ok then client:_log("ERROR", "error in " .. what .. ": " .. tostring(result)) end
end

--- Runs fn(arg) as a user callback (Client:_callback), logging "error in <what>" if it
-- raises.  No closure per call: a burst of 100k watch events makes none.
local function call_user(client, what, fn, arg)
  client:_callback(call_logged, client, what, fn, arg)
end

function Client:_complete(id, rc, watch_dropped, r1, r2)
  if watch_dropped then self._watchers[id] = nil end
  local future = self._pending[id]
  if not future then return end -- an auth remembered before start
  self._pending[id] = nil
  if future._complete then
    future._complete(future, rc, r1, r2)
  elseif rc == 0 then
    future:set(r1, r2)
  else
    future:set_exception(errors.from_code(rc, future._path))
  end
end

--- Calls watch with event as a user callback.  A watch is a callable, or an object whose
-- metatable has _watch_event(watch, event), called instead: a DataWatch arms its reads with
-- itself, so 100k of them hold no closure each.
local function call_watch(client, watch, event)
  local mt = type(watch) == "table" and getmetatable(watch)
  local route = type(mt) == "table" and rawget(mt, "_watch_event")
  if route then
    client:_callback(call_logged, client, "watch callback", route, watch, event)
  else
    call_user(client, "watch callback", watch, event)
  end
end

function Client:_fire_watch(id, event_type, keeper_state, path)
  local fn = self._watchers[id]
  if not fn then return end
  self._watchers[id] = nil
  call_watch(self, fn, { type = event_type, state = keeper_state, path = path })
end

function Client:_change_state(state, client_state)
  self.client_state = client_state
  self.connected = state == "CONNECTED"
  if client_state == "CLOSED" and not self._stopped and self._session
     and self._session:gave_up_connecting() then
    self._stopped = true -- as kazoo: stopped until start() is called again
    self:_log("WARN", "gave up connecting to " .. self._hosts ..
              " within the connection retry policy")
  end
  if state == self.state then return end
  self.state = state
  local died -- one-shot watches died with the session
  if state == "LOST" then died, self._watchers = self._watchers, {} end
  local listeners = {}
  for _, fn in ipairs(self._listeners) do
    if fn then listeners[#listeners + 1] = fn end
  end
  local client = self
  local run = self.handler.run_listener -- at once, as kazoo's: see zklua.handlers.blocking
  for _, fn in ipairs(listeners) do
    local function call()
      local ok, remove = pcall(fn, state)
      if not ok then
        client:_log("ERROR", "error in state listener: " .. tostring(remove))
      elseif remove == true then
        client:remove_listener(fn)
      end
    end
    if run then run(call) else call() end
  end
  if died and client_state == "EXPIRED_SESSION" then
    -- as kazoo: each is called once with a NONE event, so that a watch loop learns of it
    local ids = {}
    for id in pairs(died) do ids[#ids + 1] = id end
    table.sort(ids) -- in the order they were set
    local event = { type = "NONE", state = "EXPIRED_SESSION" }
    for _, id in ipairs(ids) do call_watch(self, died[id], event) end
  end
end

function Client:_handle(kind, a, b, c, d, e)
  if kind == "op" then
    self:_complete(a, b, c, d, e)
  elseif kind == "watch" then
    self:_fire_watch(a, b, c, d)
  elseif kind == "state" then
    self:_change_state(a, b)
  elseif kind == "notify" then
    local target = self._notify_targets[a]
    if target then target:_notified(b) end
  elseif kind == "log" then
    self:_log(a, b)
  else
    return false
  end
  return true
end

--- Handles the events waiting, after waiting at most timeout seconds for the first
-- (nil or 0: never waits).  Returns how many were handled.
function Client:dispatch(timeout)
  check.timeout("dispatch", timeout)
  local session = self._session
  if not session then return 0 end
  if timeout and timeout > 0 then session:wait(timeout) end
  local handled = 0
  while true do
    -- plain op completions resolve their futures in C (session:drain); the others come here
    local settled, kind, a, b, c, d, e = session:drain(self._pending)
    handled = handled + settled
    if not self:_handle(kind, a, b, c, d, e) then break end
    handled = handled + 1
    session = self._session -- a callback may have closed the client
    if not session then break end
  end
  -- callbacks a finished wait left queued (zklua.handlers.blocking)
  local drain = self.handler.drain
  if drain then handled = handled + drain() end
  return handled
end

--- Blocks until events wait or timeout seconds pass (nil: up to 0.2 s; it returns at least
-- that often so that signals are seen).  The caller then dispatches them all.
function Client:wait_for_events(timeout)
  check.timeout("wait_for_events", timeout)
  local session = self._session
  if not session then return false end
  return session:wait(timeout)
end

--- The fd that is readable while events wait (for host event loops); nil once closed.
function Client:fileno()
  return self._session and self._session:fileno()
end

-- ---------------------------------------------------------------- lifecycle

--- Connects, waiting at most timeout seconds (default 15); raises TimeoutError (and stops)
-- when no server answered in time, AuthFailedError when the server refused the auth.
function Client:start(timeout)
  timeout = check.timeout("start", timeout) or 15
  if not self._session then errors.raise(errors.ConnectionClosedError, "client is closed") end
  self:_check_wait()
  if self._stopped then
    local ok, why = self._session:start() -- fails only when out of memory: hosts that do
    if not ok then                           -- not resolve yet are tried again, as kazoo
      errors.raise(errors.KazooException, "cannot start the session: " .. tostring(why))
    end
    self._stopped = false
    self.client_state = "CONNECTING"
  end
  local client = self
  local deadline = core.monotonic() + timeout
  local connected = self.handler.wait(function()
    return client.state == "CONNECTED" or client.client_state == "AUTH_FAILED"
           or client._stopped -- the connection retry policy gave up
  end, timeout)
  if self._stopped and self._session and self._session:gave_up_connecting() then
    local r = self._connection_retry
    errors.raise(errors.TimeoutError, "could not connect to " .. self._hosts ..
                 " within the connection retry policy (max_tries " ..
                 tostring(r and r.max_tries) ..
                 (r and r.deadline and ", deadline " .. r.deadline .. " s" or "") .. ")")
  elseif self._stopped then
    errors.raise(errors.ConnectionClosedError, "the client was stopped while starting")
  end
  if connected and self._has_auth and self.client_state ~= "AUTH_FAILED" then
    -- the server answers requests in order: once this one is back, so is the auth
    local probe = self:exists_async("/")
    probe:wait(math.max(deadline - core.monotonic(), 0))
    connected = probe:successful()
    if probe:ready() and not connected then
      -- a refused auth closes the connection: the probe fails first, AUTH_FAILED follows
      self.handler.wait(function() return client.client_state == "AUTH_FAILED" end,
                        math.max(deadline - core.monotonic(), 0))
    end
  end
  if self.client_state == "AUTH_FAILED" then
    local reason = self._sasl and self._session and self._session:last_sasl_failure()
    self:stop()
    errors.raise(errors.AuthFailedError, reason and "the client's " .. self._sasl ..
                 " failed: " .. reason or self._sasl and "the server refused the client's " ..
                 self._sasl .. " (" .. self._sasl_causes .. ")" or
                 "the server refused the client's auth_data")
  end
  if not connected then
    local tls_failure = self._session and self._session:last_tls_failure()
    -- SASL GSSAPI gets its tickets before it connects (src/core/kerberos_tickets.h)
    local kdc_silent = self._session and self._session:awaits_kdc()
    self:stop()
    errors.raise(errors.TimeoutError, "could not connect to " .. self._hosts .. " within " ..
                 timeout .. " s" .. (tls_failure and " (the last TLS handshake failed: " ..
                 tls_failure .. ")" or "") .. (kdc_silent and " (the Kerberos KDC has not " ..
                 "answered the client's SASL GSSAPI ticket requests)" or ""))
  end
  -- as kazoo: a chroot that does not exist is warned about (zk:ensure_path("/") creates it)
  if self.chroot ~= "" then
    local ok, stat = pcall(self.exists, self, "/")
    if ok and stat == nil then
      self:_log("WARN", "the chroot " .. self.chroot .. " does not exist: create it before " ..
                "normal use (zk:ensure_path(\"/\") does)")
    end
  end
end

--- Ends the session (its ephemeral nodes vanish).  Every op still in flight fails with
-- ConnectionClosedError before this returns; listeners hear LOST.
function Client:stop()
  if self._stopped or not self._session then return end
  self._stopped = true
  self._session:stop()
  self:dispatch(0)
  self._watchers = {}
  if self.handler.poke then self.handler.poke() end -- wake the coroutines that waited
end

--- Stops, then frees the client's resources; it cannot be started again.
function Client:close()
  if not self._session then return end
  self:stop()
  if not self._session then return end -- a callback run by stop() closed it already
  self.handler.detach(self) -- before the fd closes: a host loop may be polling it
  self._session:close()
  self._session = nil
end

--- Restarts: stop() then start(timeout) (default 15 s, as start's).
function Client:restart(timeout)
  self:stop()
  self:start(timeout)
end

--- kazoo's client_id: the session id and its 16-byte password, or nil without a session.
-- The id is the same value as the stat.ephemeralOwner (and owner_session_id) of the
-- session's ephemeral nodes: an integer (under LuaJIT a number, or an exact int64 cdata
-- beyond 2^53).  zklua.client{client_id = {id, password}} resumes the session.
function Client:client_id()
  if not self._session then return nil end
  return self._session:client_id()
end

--- kazoo's unchroot: path with the client's chroot stripped ("/" for the chroot itself).
function Client:unchroot(path)
  if type(path) ~= "string" then
    check.fail("unchroot", "path", "path must be a string (got " .. type(path) .. ")")
  end
  local chroot = self.chroot
  if not chroot or chroot == "" then return path end
  if path == chroot then return "/" end
  if path:sub(1, #chroot) == chroot then return path:sub(#chroot + 1) end
  return path
end

--- kazoo's set_hosts: the servers to use from now on (a hosts string or list as the
-- constructor's).  The library may move the connection in use to a server of the new list
-- (its rebalancing; it does when that server's address is not in the new list): the client
-- is then SUSPENDED at once, CONNECTED again when a server of the new list takes the session
-- up, LOST a session timeout later if none does.  The next connection is made within the new
-- list.  The chroot cannot change (ConfigurationError).  randomize_hosts, when given, replaces
-- the client's.  Every check comes first: a malformed hosts argument (BadArgumentsError), a
-- chroot change, a closed client, a list the library refuses (none of it resolves:
-- ConfigurationError) leave the client as it was.
function Client:set_hosts(hosts, randomize_hosts)
  local pairs_list, chroot
  pairs_list, chroot, hosts = parse_hosts("set_hosts", hosts)
  local randomize = self.randomize_hosts
  if randomize_hosts ~= nil then
    randomize = check.flag("set_hosts", randomize_hosts, "randomize_hosts")
  end
  if chroot ~= self.chroot then
    errors.raise(errors.ConfigurationError, "set_hosts: changing the chroot at runtime is " ..
                 "not supported (" .. tostring(self.chroot) .. " -> " .. tostring(chroot) .. ")")
  end
  if not self._session then errors.raise(errors.ConnectionClosedError, "set_hosts: the client is closed") end
  local ok, why = self._session:set_hosts(connect_order(hosts, randomize))
  if not ok then
    errors.raise(errors.ConfigurationError, "set_hosts: cannot use hosts " ..
                 hosts_mod._shown(hosts) .. ": " .. tostring(why))
  end
  self.hosts, self._hosts, self.randomize_hosts = pairs_list, hosts, randomize
end

--- kazoo's command: sends a four-letter word ("ruok", "envi", "srvr", ...) to the server the
-- client is connected to, on a connection of its own; returns the answer.  Raises
-- ConnectionLoss when the client is not connected, stopped, closed or AUTH_FAILED included
-- (kazoo's), or when the server does not answer within the session timeout.
function Client:command(cmd)
  cmd = cmd or "ruok"
  if type(cmd) ~= "string" or not cmd:match("^%l%l%l%l$") then
    check.fail("command", "cmd", "cmd must be a four-letter word such as \"ruok\" (got " ..
               (type(cmd) == "string" and string.format("%q", cmd) or type(cmd)) .. ")")
  end
  -- as kazoo's, whatever the reason (stopped, closed, AUTH_FAILED, SUSPENDED): without a
  -- connection there is no server to ask, ConnectionLoss (test_client.py's
  -- test_version_no_connection)
  local server = self.connected and self._session and self._session:current_server()
  if not server then errors.raise(errors.ConnectionLoss, "command: no connection to a server") end
  local host, port = server:match("^%[?(.-)%]?:(%d+)$")
  local answer = host and core.four_letter(host, tonumber(port), cmd,
                                           math.max(self:session_timeout(), 1))
  if not answer then
    errors.raise(errors.ConnectionLoss, "command: " .. server .. " did not answer " .. cmd)
  end
  return answer
end

--- kazoo's server_version: the connected server's version as a list of numbers, e.g.
-- {3, 8, 0}, read from its "envi" answer; asked again up to retries times (default 3) while
-- the answer is not a usable version.  Raises KazooException when none came, ConnectionLoss
-- when not connected.
function Client:server_version(retries)
  retries = retries == nil and 3 or retries
  if type(retries) ~= "number" or retries < 0 or retries ~= math.floor(retries) then
    check.fail("server_version", "retries", "retries must be an integer >= 0")
  end
  local function fetch()
    local data = self:command("envi")
    for line in tostring(data):gmatch("[^\r\n]+") do
      local key, value = line:match("^%s*([^=]-)%s*=%s*(.-)%s*$")
      if key == "zookeeper.version" then
        local digits = value:match("^([%d%.]+)")
        if not digits then return nil end
        local version = {}
        for part in digits:gmatch("[^%.]+") do version[#version + 1] = tonumber(part) end
        if #version > 1 and not digits:find("%.%.") and digits:sub(-1) ~= "." then
          return version
        end
        return nil
      end
    end
    return nil
  end
  for _ = 0, retries do
    local version = fetch()
    if version then return version end
  end
  errors.raise(errors.KazooException, "server_version: no usable version from the server " ..
               "after " .. (retries + 1) .. " tries")
end

local function server_list(fname, argument, value)
  if value == nil then return nil end
  if type(value) == "table" then
    for i = 1, #value do -- not ipairs: a hole ({nil, "x"}) must not end the check early
      if type(value[i]) ~= "string" then
        check.fail(fname, argument, argument .. "[" .. i .. "] must be a string")
      end
    end
    value = table.concat(value, ",")
  end
  if type(value) ~= "string" then
    check.fail(fname, argument, argument .. " must be a string, a list of strings or nil " ..
               "(got " .. type(value) .. ")")
  end
  return value
end

--- kazoo's reconfig_async(joining, leaving, new_members, from_config) -> future of the new
-- config's data and stat.  joining / leaving / new_members: a comma-separated string or a
-- list of server lines ("server.4=host:port:port:participant;port") or ids; from_config: the
-- config version it applies to (nil or -1: any).  Needs an ensemble with reconfigEnabled and
-- a client allowed to reconfigure it (NoAuthError otherwise).
function Client:reconfig_async(joining, leaving, new_members, from_config)
  joining = server_list("reconfig", "joining", joining)
  leaving = server_list("reconfig", "leaving", leaving)
  new_members = server_list("reconfig", "new_members", new_members)
  if from_config ~= nil and not compat.is_id(from_config) then
    check.fail("reconfig", "from_config", "from_config must be an integer (got " ..
               type(from_config) .. ")")
  end
  local config = from_config
  if config ~= nil and type(config) ~= "number" then config = compat.id_string(config) end
  local session = self:_usable_session("reconfig")
  return self:_track(session:reconfig(joining, leaving, new_members, config))
end

function Client:reconfig(joining, leaving, new_members, from_config)
  self:_check_wait()
  return self:_result(self:reconfig_async(joining, leaving, new_members, from_config))
end

--- The ACL a create uses when it is given none: default_acl (settable, as kazoo's), or
-- nil (ZooKeeper's open ACL) when that is nil or an empty list.
function Client:_acl()
  local acl = self.default_acl
  if acl == nil or acl == self._acl_checked then return acl end
  if type(acl) == "table" and next(acl) == nil then return nil end
  check.acls("create", acl, "default_acl")
  self._acl_checked = acl
  return acl
end

--- The session timeout the server granted, in seconds (0 before connecting).
function Client:session_timeout()
  return self._session and self._session:negotiated_timeout() / 1000 or 0
end

--- Calls fn(state) on every change of zk.state ("CONNECTED", "SUSPENDED", "LOST"); fn may
-- be a function or a callable table.  Anything else is a ConfigurationError, as in kazoo.
-- As kazoo's, fn runs at once, also while a callback waits, and should not wait itself: hand
-- work that waits to the script's own loop (a listener that waits delays the listeners of
-- the state changes that come meanwhile).  The listeners are a set, as kazoo's: adding one
-- twice keeps one, and they are called in the order they were added (one removed and added
-- again comes last).  Adding and
-- removing cost O(1) amortized, so N recipes that each keep a listener start and stop in O(N).
function Client:add_listener(fn)
  if not callable(fn) then
    errors.raise(errors.ConfigurationError, "add_listener: listener must be callable (got " ..
                 type(fn) .. ")")
  end
  if not self._listener_slot[fn] then
    local list = self._listeners
    list[#list + 1] = fn
    self._listener_slot[fn] = #list
  end
  return fn
end

function Client:remove_listener(fn)
  local i = fn ~= nil and self._listener_slot[fn]
  if not i then return end
  local list = self._listeners
  list[i] = false
  self._listener_slot[fn] = nil
  self._listener_holes = self._listener_holes + 1
  if self._listener_holes * 2 > #list then -- compact: each entry moves once per halving
    local kept = {}
    for _, f in ipairs(list) do
      if f then
        kept[#kept + 1] = f
        self._listener_slot[f] = #kept
      end
    end
    self._listeners, self._listener_holes = kept, 0
  end
end

--- Calls fn(...) under the client's command_retry policy (kazoo's zk.retry).
function Client:retry(fn, ...)
  return self.retry_policy(fn, ...)
end

-- ---------------------------------------------------------------- submitting ops

--- What a synchronous call returns: future's result once it is in.  When this client waits
-- alone under the blocking handler, it handles its own events until the future is resolved,
-- sleeping on its session in between (the handler's loop, without its generality); otherwise
-- the handler waits, running every client's events.  Either way the queue is left empty.
function Client:_result(future)
  local session = self._session
  if future.done or not session or not self._waits_alone then
    return future:get()
  end
  local kind, a, b, c, d, e
  repeat
    kind, a, b, c, d, e = session:next()
    if kind then
      self:_handle(kind, a, b, c, d, e)
      session = self._session
      if not session then break end -- closed by a callback: stop() resolved the future
    elseif not future.done then
      session:wait()
    end
  until kind == nil and future.done
  return future:get()
end

--- What a synchronous call returns: the results of op id, just submitted, or its error
-- raised.  When this client waits alone under the blocking handler the C core waits for that
-- op itself (session:await): no future and no trip round the event loop, the common case.  As
-- soon as another event must be handled first (a watch, a state change, a signal's wake-up)
-- the op becomes a tracked future like any other and _result waits for it.
function Client:_sync(session, id, path, watch)
  if self._waits_alone then
    local kind, _, rc, watch_dropped, r1, r2 = session:await(id)
    if kind then
      if rc ~= 0 then error(errors.from_code(rc, path), 0) end
      if watch and not watch_dropped then self._watchers[id] = watch end
      if r2 == nil then return r1 end -- as Future:get: no trailing nil (create without stat)
      return r1, r2
    end
  end
  return self:_result(self:_track(id, path, watch))
end

--- Runs a synchronous op and returns its results (or raises its error).  When this client
-- waits alone under the blocking handler the op runs directly in the C core when it can
-- (now = a session:X_now method, see zkl_op_get_now: the library's own synchronous call, one
-- thread hop fewer than an async op); otherwise it is submitted (submit = session:X) and
-- waited for.  now and submit take the same arguments (a to e: fixed, not
-- varargs, as this runs for every sync op).
function Client:_call(session, now, submit, path, watch, a, b, c, d, e)
  if self._waits_alone then
    local kind, id, rc, watch_dropped, r1, r2 = now(session, a, b, c, d, e)
    if kind then
      if rc ~= 0 then error(errors.from_code(rc, path), 0) end
      if watch and not watch_dropped then self._watchers[id] = watch end
      if r2 == nil then return r1 end -- as Future:get: no trailing nil (create without stat)
      return r1, r2
    end
  end
  self:_check_wait()
  return self:_sync(session, submit(session, a, b, c, d, e), path, watch)
end

--- Raises WouldBlockError when the client's handler (a coroutine handler) cannot wait where
-- this code runs: a blocking call checks it before it sends anything.
function Client:_check_wait()
  local check_wait = self.handler.check_wait
  if check_wait then check_wait() end
end

--- The session, or raises ConnectionClosedError naming fname when the client is not started
-- or closed (recipes call it too).
function Client:_usable_session(fname)
  local client_state = self.client_state
  if client_state == "AUTH_FAILED" and self._session then -- as kazoo, the state first: no
    errors.raise(errors.AuthFailedError, fname .. ": the server refused the client's auth " ..
                 "(stop() and start() with other credentials)") -- call waits for a session
  end
  if not self._session or self._stopped then
    errors.raise(errors.ConnectionClosedError, fname .. ": the client is " ..
                 (self._session and "not started" or "closed"))
  end
  if client_state == "EXPIRED_SESSION" then -- as kazoo, until the new session is there
    errors.raise(errors.SessionExpiredError, fname .. ": the session expired")
  end
  return self._session
end

--- Registers a submitted op's future (and watch).
function Client:_track(id, path, watch)
  local future = Future.new(self.handler, path)
  self._pending[id] = future
  if watch then self._watchers[id] = watch end
  return future
end

local parent_of = paths.parent
local known_paths = check.known_paths
local S = core.session_methods -- held here: looked up through a session per call costs more
local get_now, create_now = S.get_now, S.create_now
local path_problem = core.path_problem
-- Room for a value and its path in one request (check.value's limit): a string within it
-- needs no check.value call.
local VALUE_ROOM = core.max_packet - 128

--- Resolves target as source resolved.
local function settle_from(source, target)
  if source.exception then
    target:set_exception(source.exception)
  else
    target:set(source.value, source._second)
  end
end

function Client:_submit_create(path, value, acl, flags, include_data, ttl)
  local session = self:_usable_session("create")
  return self:_track(S.create(session, path, value, acl, flags, include_data, ttl), path)
end

local CREATE_OPTIONS = { acl = "table", ephemeral = "boolean", sequence = "boolean",
                         makepath = "boolean", include_data = "boolean", container = "boolean",
                         ttl = "number" }

-- ZooKeeper's create modes beyond ephemeral/sequence (zookeeper.h: ZOO_CONTAINER,
-- ZOO_PERSISTENT_WITH_TTL, ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL) and the longest TTL a server
-- takes (EphemeralType.TTL: 40 bits of milliseconds).
local MODE_CONTAINER, MODE_TTL, MODE_SEQUENTIAL_TTL = 4, 5, 6
local TTL_MAX = 0xFFFFFFFFFF

-- The create mode of opts (checked), and the TTL (ms) or nil.
local function create_mode(opts)
  if opts.container then
    if opts.ephemeral or opts.sequence or opts.ttl ~= nil then
      check.fail("create", "container", "a container node cannot be ephemeral, sequential or have a ttl")
    end
    return MODE_CONTAINER, nil
  end
  local ttl = opts.ttl
  if ttl ~= nil then
    if ttl ~= ttl or ttl < 1 or ttl > TTL_MAX or ttl % 1 ~= 0 then
      check.fail("create", "ttl", "option 'ttl' must be a whole number of milliseconds from 1 to " ..
                 string.format("%d", TTL_MAX) .. " (got " .. tostring(ttl) .. ")")
    end
    if opts.ephemeral then
      check.fail("create", "ttl", "an ephemeral node cannot have a ttl (it ends with its session)")
    end
    return opts.sequence and MODE_SEQUENTIAL_TTL or MODE_TTL, math.floor(ttl)
  end
  return (opts.ephemeral and FLAG_EPHEMERAL or 0) + (opts.sequence and FLAG_SEQUENCE or 0), nil
end

--- create_async(path, value, {acl, ephemeral, sequence, makepath, include_data, container, ttl})
-- -> future of the created path (and its stat with include_data).  container = true: a
-- container node, which the server deletes some time after its last child went; ttl = ms: a
-- persistent (or, with sequence, persistent sequential) node the server deletes once it has
-- had no child and no change for ttl ms.  Both need ZooKeeper 3.5+; ttl needs the server's
-- extendedTypesEnabled (else UnimplementedError).
function Client:create_async(path, ...)
  local value, opts = ...
  if select("#", ...) == 0 then value = "" end -- kazoo's value=b"": only an explicit nil is null
  opts = check.options("create", opts, CREATE_OPTIONS)
  local flags, ttl = create_mode(opts)
  path = check.kazoo_path("create", path, "path", opts.sequence)
  value = check.data("create", value, path)
  local acl = opts.acl and next(opts.acl) ~= nil and check.acls("create", opts.acl) or self:_acl()
  self:_usable_session("create")
  local first = self:_submit_create(path, value, acl, flags, opts.include_data, ttl)
  if not opts.makepath then return first end
  local client, result = self, Future.new(self.handler)
  return result:_chain(first, function(attempt)
    local parent = parent_of(path)
    if not (errors.is(attempt.exception, errors.NoNodeError) and parent ~= "") then
      return settle_from(attempt, result)
    end
    result:_chain(client:ensure_path_async(parent, opts.acl), function(made)
      if made.exception then return result:set_exception(made.exception) end
      result:_chain(client:_submit_create(path, value, acl, flags, opts.include_data, ttl),
                   settle_from)
    end)
  end)
end

function Client:create(path, ...)
  local value, opts = ...
  if select("#", ...) == 0 then value = "" end -- kazoo's value=b"": only an explicit nil is null
  local acl, flags, include_data = self:_acl(), 0, nil
  if opts ~= nil then -- without options (the common case) there is nothing more to check
    if type(opts) ~= "table" or opts.makepath or opts.container or opts.ttl ~= nil then
      self:_check_wait()
      return self:_result(self:create_async(path, value, opts))
    end
    check.options("create", opts, CREATE_OPTIONS)
    flags = (opts.ephemeral and FLAG_EPHEMERAL or 0) + (opts.sequence and FLAG_SEQUENCE or 0)
    include_data = opts.include_data
  end
  -- a create's path is new every time: ask the C check directly, check.path explains
  local sequential = flags >= FLAG_SEQUENCE
  if type(path) ~= "string" or path_problem(path, sequential) then
    path = check.kazoo_path("create", path, "path", sequential)
  end
  if value ~= nil and (type(value) ~= "string" or #value + #path > VALUE_ROOM) then
    value = check.data("create", value, path)
  end
  if opts ~= nil and opts.acl then -- as create_async: an empty list means the default
    acl = next(opts.acl) ~= nil and check.acls("create", opts.acl) or acl
  end
  local session = self._session
  if not session or self._stopped or self.client_state ~= "CONNECTED" then
    session = self:_usable_session("create")
  end
  if self._waits_alone then -- _call inlined, as in get: the two hottest sync ops
    local kind, _, rc, _, created, stat = create_now(session, path, value, acl, flags,
                                                     include_data)
    if kind then
      if rc ~= 0 then error(errors.from_code(rc, path), 0) end
      if stat == nil then return created end -- as _call: the path alone without include_data
      return created, stat
    end
  end
  self:_check_wait()
  return self:_sync(session, S.create(session, path, value, acl, flags, include_data), path)
end

--- ensure_path_async(path, acl) -> future of true once path and its parents exist
function Client:ensure_path_async(path, acl)
  path = check.kazoo_path("ensure_path", path)
  if acl ~= nil and (type(acl) ~= "table" or next(acl) ~= nil) then
    check.acls("ensure_path", acl)
  end
  local result = Future.new(self.handler)
  if path == "/" and self.chroot == "" then
    result:set(true)
    return result
  end
  local client = self
  return result:_chain(self:exists_async(path), function(exists)
    if exists.exception then return result:set_exception(exists.exception) end
    if exists.value then return result:set(true) end
    -- "/" under a chroot that does not exist: the chroot itself is made (as kazoo: its parent
    -- must exist, the client cannot see outside its chroot)
    result:_chain(client:create_async(path, "", { acl = acl, makepath = path ~= "/" }), function(made)
      if made.exception and not errors.is(made.exception, errors.NodeExistsError) then
        return result:set_exception(made.exception)
      end
      result:set(true)
    end)
  end)
end

function Client:ensure_path(path, acl)
  self:_check_wait()
  return self:_result(self:ensure_path_async(path, acl))
end

--- exists_async(path, watch) -> future of the stat, or nil when there is no node
function Client:exists_async(path, watch)
  path = check.kazoo_path("exists", path)
  check.watch("exists", watch)
  local session = self:_usable_session("exists")
  return self:_track(S.exists(session, path, watch ~= nil), path, watch)
end

function Client:exists(path, watch)
  if not known_paths[path] then path = check.kazoo_path("exists", path) end
  if watch ~= nil then check.watch("exists", watch) end
  local session = self._session
  if not session or self._stopped or self.client_state ~= "CONNECTED" then
    session = self:_usable_session("exists")
  end
  return (self:_call(session, S.exists_now, S.exists, path, watch, path,
                     watch ~= nil))
end

--- Submits a get with no future: its completion calls sink:_complete(rc, data, stat) as
-- an event is handled (not as a user callback: it must not wait).  sink is any table whose
-- `done` field is not a boolean (session:drain then leaves its completion to Lua).  What a
-- DataWatch re-arms with: a burst of N change events holds N small sinks, not N futures
-- with a rawlink each.  Raises as get_async does when the client cannot take an op.
function Client:_get_into(sink, path, watch)
  local session = self._session
  if not session or self._stopped then session = self:_usable_session("get") end
  local id = S.get(session, path, watch ~= nil)
  self._pending[id] = sink
  if watch then self._watchers[id] = watch end
end

--- get_async(path, watch) -> future of data, stat
function Client:get_async(path, watch)
  if not known_paths[path] then path = check.kazoo_path("get", path) end
  if watch ~= nil then check.watch("get", watch) end
  local session = self._session
  -- (no client_state check: as kazoo's, a future fails with AuthFailedError, C says so)
  if not session or self._stopped then session = self:_usable_session("get") end
  return self:_track(S.get(session, path, watch ~= nil), path, watch)
end

function Client:get(path, watch)
  if not known_paths[path] then path = check.kazoo_path("get", path) end
  if watch ~= nil then check.watch("get", watch) end
  local session = self._session
  if not session or self._stopped or self.client_state ~= "CONNECTED" then
    session = self:_usable_session("get")
  end
  if self._waits_alone then -- _call inlined (one Lua call fewer: ~4 % of a direct get's CPU)
    local kind, id, rc, watch_dropped, data, stat = get_now(session, path, watch ~= nil)
    if kind then
      if rc ~= 0 then error(errors.from_code(rc, path), 0) end
      if watch and not watch_dropped then self._watchers[id] = watch end
      return data, stat
    end
  end
  self:_check_wait()
  return self:_sync(session, S.get(session, path, watch ~= nil), path, watch)
end

--- get_children_async(path, watch, include_data) -> future of the children (and the stat)
function Client:get_children_async(path, watch, include_data)
  path = check.kazoo_path("get_children", path)
  check.watch("get_children", watch)
  include_data = check.flag("get_children", include_data, "include_data")
  local session = self:_usable_session("get_children")
  local future = self:_track(S.children(session, path, watch ~= nil), path, watch)
  if not include_data then
    future._complete = function(f, rc, children)
      if rc == 0 then f:set(children) else f:set_exception(errors.from_code(rc, path)) end
    end
  end
  return future
end

function Client:get_children(path, watch, include_data)
  if not known_paths[path] then path = check.kazoo_path("get_children", path) end
  if watch ~= nil then check.watch("get_children", watch) end
  if include_data ~= nil then
    include_data = check.flag("get_children", include_data, "include_data")
  end
  local session = self._session
  if not session or self._stopped or self.client_state ~= "CONNECTED" then
    session = self:_usable_session("get_children")
  end
  local children, stat = self:_call(session, S.children_now, S.children, path,
                                    watch, path, watch ~= nil)
  if include_data then return children, stat end
  return children
end

--- set_async(path, value, version) -> future of the new stat
function Client:set_async(path, value, version)
  path = check.kazoo_path("set", path)
  value = check.data("set", value, path)
  version = check.version("set", version)
  local session = self:_usable_session("set")
  return self:_track(S.set(session, path, value, version), path)
end

function Client:set(path, value, version)
  if not known_paths[path] then path = check.kazoo_path("set", path) end
  if value ~= nil and (type(value) ~= "string" or #value + #path > VALUE_ROOM) then
    value = check.data("set", value, path)
  end
  if version ~= nil then version = check.version("set", version) else version = -1 end
  local session = self._session
  if not session or self._stopped or self.client_state ~= "CONNECTED" then
    session = self:_usable_session("set")
  end
  return (self:_call(session, S.set_now, S.set, path, nil, path, value, version))
end

--- delete_async(path, version) -> future of true
function Client:delete_async(path, version)
  path = check.kazoo_path("delete", path)
  version = check.version("delete", version)
  local session = self:_usable_session("delete")
  return self:_track(S.delete(session, path, version), path)
end

local join = paths.join

--- Deletes path's subtree, children first; nodes that vanish meanwhile are fine.
function Client:_delete_tree(path)
  -- depth first, children before their parent, with a stack of the nodes under way (no
  -- recursion: a tree may be as deep as a path may be long)
  local stack = { { path = path } }
  while #stack > 0 do
    local top = stack[#stack]
    if not top.children then
      local ok, children = pcall(self.get_children, self, top.path)
      if ok then
        top.children, top.next = children, 1
      elseif errors.is(children, errors.NoNodeError) then
        top.children, top.next, top.gone = {}, 1, true
      else
        error(children, 0)
      end
    end
    local child = top.children[top.next]
    if child then
      top.next = top.next + 1
      local child_path = join(top.path, child)
      -- the server's own /zookeeper is not ours to delete (inside a chroot it is a user node)
      if child_path ~= "/zookeeper" or self.chroot ~= "" then
        stack[#stack + 1] = { path = child_path }
      end
    else
      stack[#stack] = nil
      if top.path ~= "/" and not top.gone then
        local deleted, err = pcall(self.delete, self, top.path)
        if not deleted and not errors.is(err, errors.NoNodeError) then error(err, 0) end
      end
    end
  end
end

--- delete(path, version, recursive) -> true.  recursive deletes the whole subtree.
function Client:delete(path, version, recursive)
  recursive = check.flag("delete", recursive, "recursive")
  if not recursive then
    path = check.kazoo_path("delete", path)
    version = check.version("delete", version)
    local session = self:_usable_session("delete")
    return (self:_call(session, S.delete_now, S.delete, path, nil, path, version))
  end
  path = check.kazoo_path("delete", path)
  check.version("delete", version)
  if version ~= nil and version ~= -1 then
    check.fail("delete", "version", "a recursive delete cannot check a version")
  end
  self:_usable_session("delete")
  self:_check_wait()
  self:_delete_tree(path)
  return true
end

--- get_acls_async(path) -> future of acls, stat
function Client:get_acls_async(path)
  path = check.kazoo_path("get_acls", path)
  local session = self:_usable_session("get_acls")
  return self:_track(session:get_acl(path), path)
end

function Client:get_acls(path)
  return self:_result(self:get_acls_async(path))
end

--- set_acls_async(path, acls, version) -> future of the node's stat after the change
function Client:set_acls_async(path, acls, version)
  path = check.kazoo_path("set_acls", path)
  if type(acls) ~= "table" or next(acls) ~= nil then -- an empty list: the server refuses it
    check.acls("set_acls", acls, "acls")
  end
  version = check.version("set_acls", version)
  local session = self:_usable_session("set_acls")
  local changed = self:_track(session:set_acl(path, acls, version), path)
  local client, result = self, Future.new(self.handler)
  return result:_chain(changed, function(f)
    if f.exception then return result:set_exception(f.exception) end
    result:_chain(client:exists_async(path), settle_from) -- the C library returns no stat
  end)
end

function Client:set_acls(path, acls, version)
  self:_check_wait()
  return self:_result(self:set_acls_async(path, acls, version))
end

--- sync_async(path) -> future of the path, once the server caught up with the leader
function Client:sync_async(path)
  path = check.kazoo_path("sync", path)
  local session = self:_usable_session("sync")
  return self:_track(session:sync(path), path)
end

function Client:sync(path)
  return self:_result(self:sync_async(path))
end

--- add_auth_async(scheme, credential) -> future of true; re-applied after every expiry
function Client:add_auth_async(scheme, credential)
  if type(scheme) ~= "string" or scheme == "" then
    check.fail("add_auth", "scheme", "scheme must be a non-empty string")
  end
  if type(credential) ~= "string" then
    check.fail("add_auth", "credential", "credential must be a string")
  end
  if #scheme + #credential + 64 > core.max_packet then -- sent again with every new connection
    check.fail("add_auth", "credential", string.format("scheme and credential are %d bytes, " ..
               "over the server's limit of %d (1 MiB per request)", #scheme + #credential,
               core.max_packet - 64))
  end
  local session = self:_usable_session("add_auth")
  self._has_auth = true -- sent again with every new session: start() waits for its answer
  local known = false
  for _, pair in ipairs(self.auth_data) do
    known = known or (pair[1] == scheme and pair[2] == credential)
  end
  if not known then self.auth_data[#self.auth_data + 1] = { scheme, credential } end
  return self:_track(session:add_auth(scheme, credential))
end

function Client:add_auth(scheme, credential)
  self:_check_wait()
  local future = self:add_auth_async(scheme, credential)
  local ok, err = pcall(self._result, self, future)
  local refused = not ok and errors.is(err, errors.AuthFailedError)
  if not ok and self._session and (refused or errors.is(err, errors.ConnectionLoss)) then
    -- the library reports the refusal to the op before the state, or (the server closing the
    -- connection right after its answer) reports a lost connection: once this raises, the
    -- client reads LOST / AUTH_FAILED, as kazoo's (the state event follows within a session
    -- timeout); a connection really lost ends the wait when it is back
    local client = self
    self.handler.wait(function()
      return client.client_state == "AUTH_FAILED" or (not refused and client.state == "CONNECTED")
    end, math.max(self:session_timeout(), self._timeout))
    if not refused and client.client_state == "AUTH_FAILED" then
      err = errors.AuthFailedError("add_auth: the server refused the " .. scheme ..
                                   " credentials")
    end
  end
  if not ok then error(err, 0) end
  return err
end

--- A transaction (zklua.transaction): ops committed atomically.
function Client:transaction()
  return require("zklua.transaction").new(self)
end

--- Submits a list of transaction ops; the future resolves with raw per-op results.
function Client:_submit_multi(ops)
  local session = self:_usable_session("commit")
  return self:_track(session:multi(ops))
end

function Client:DataWatch(path, fn, opts)
  return require("zklua.watchers").DataWatch(self, path, fn, opts)
end

function Client:ChildrenWatch(path, fn, opts)
  return require("zklua.watchers").ChildrenWatch(self, path, fn, opts)
end

--- Routes a C recipe's notify events (id) to its Lua object's :_notified(code), while
-- the object lives (the table holds it weakly).
function Client:_add_notify_target(id, object)
  self._notify_targets[id] = object
end

--- A kazoo Lock (zklua.recipes.lock): exclusive.  The third argument: kazoo's
-- extra_lock_patterns, or {layout = "kazoo" | "curator", container = bool,
-- extra_lock_patterns = {...}} (Curator's InterProcessMutex layout; container parents).
function Client:Lock(path, identifier, extra_lock_patterns)
  return require("zklua.recipes.lock").Lock(self, path, identifier, extra_lock_patterns)
end

--- A kazoo ReadLock: shared with other readers, excluded by writers queued before it.
function Client:ReadLock(path, identifier, extra_lock_patterns)
  return require("zklua.recipes.lock").ReadLock(self, path, identifier, extra_lock_patterns)
end

--- A kazoo WriteLock: exclusive (the same nodes as Lock).
function Client:WriteLock(path, identifier, extra_lock_patterns)
  return require("zklua.recipes.lock").WriteLock(self, path, identifier, extra_lock_patterns)
end

--- A kazoo Election (zklua.recipes.election): a Lock on path; run(fn), or the latch form
-- start()/await()/on_leader()/stop().  opts: {layout = "kazoo" | "curator", container = bool}
-- (layout = "curator": a member of Curator's LeaderLatch on path).
function Client:Election(path, identifier, opts)
  return require("zklua.recipes.election").Election(self, path, identifier, opts)
end

--- Curator's PersistentNode (zklua.recipes.persistent_node): a node this client keeps present,
-- re-created with its current data.  opts: {ephemeral = true, container = true, ttl, acl}.
function Client:PersistentNode(path, data, opts)
  return require("zklua.recipes.persistent_node").PersistentNode(self, path, data, opts)
end

--- A kazoo Counter (zklua.recipes.counter): default 0 (int) or a float; opts.support_curator.
--- Curator's PersistentTtlNode (zklua.recipes.persistent_ttl_node): a container node kept
--- alive by a TTL child touched every ttl / 2 ms, deleted by the server once nobody touches it.
function Client:PersistentTtlNode(path, ttl, data, opts)
  return require("zklua.recipes.persistent_ttl_node").PersistentTtlNode(self, path, ttl, data, opts)
end

function Client:Counter(path, default, opts)
  return require("zklua.recipes.counter").Counter(self, path, default, opts)
end

--- Curator's DistributedAtomicLong (zklua.recipes.atomic_long): its API, its optimistic and
--- promoted-to-lock modes, on its 8-byte node.  opts: {retries, retry_sleep, timeout,
--- promoted_to_lock = {path, timeout, retries, retry_sleep}}.
function Client:AtomicLong(path, opts)
  return require("zklua.recipes.atomic_long").AtomicLong(self, path, opts)
end

--- A kazoo Party (zklua.recipes.party): members' identifiers in node data.
function Client:Party(path, identifier)
  return require("zklua.recipes.party").Party(self, path, identifier)
end

--- A kazoo ShallowParty: members' identifiers in node names.
function Client:ShallowParty(path, identifier)
  return require("zklua.recipes.party").ShallowParty(self, path, identifier)
end

--- A kazoo Barrier (zklua.recipes.barrier): up while path exists.
function Client:Barrier(path)
  return require("zklua.recipes.barrier").Barrier(self, path)
end

--- A kazoo DoubleBarrier: enter and leave together with num_clients members.  opts (4th or 3rd
-- argument): {layout = "kazoo" | "curator"} (Curator's DistributedDoubleBarrier).
function Client:DoubleBarrier(path, num_clients, identifier, opts)
  return require("zklua.recipes.barrier").DoubleBarrier(self, path, num_clients, identifier, opts)
end

--- A kazoo Queue (zklua.recipes.queue): put/put_all with priorities, get() -> value or nil.
function Client:Queue(path)
  return require("zklua.recipes.queue").Queue(self, path)
end

--- A kazoo LockingQueue: get(timeout) claims an item, consume() / release() end the claim.
function Client:LockingQueue(path)
  return require("zklua.recipes.queue").LockingQueue(self, path)
end

--- A kazoo PatientChildrenWatch (zklua.recipes.patient_children): start() -> a future of the
-- children once unchanged for time_boundary seconds (default 30), and a next-change future.
function Client:PatientChildrenWatch(path, time_boundary)
  return require("zklua.recipes.patient_children").PatientChildrenWatch(self, path, time_boundary)
end

--- A kazoo TreeCache (zklua.recipes.tree_cache): an in-memory copy of path's subtree.
function Client:TreeCache(path)
  return require("zklua.recipes.tree_cache").TreeCache(self, path)
end

--- A kazoo Semaphore (zklua.recipes.semaphore): at most max_leases (default 1) holders;
--- opts {layout = "curator"}: Curator's InterProcessSemaphoreV2 nodes instead.
function Client:Semaphore(path, identifier, max_leases, opts)
  return require("zklua.recipes.semaphore").Semaphore(self, path, identifier, max_leases, opts)
end

--- A kazoo NonBlockingLease (zklua.recipes.lease): lease.obtained; time-based (seconds).
function Client:NonBlockingLease(path, duration, identifier, utcnow, timeout)
  return require("zklua.recipes.lease").NonBlockingLease(self, path, duration, identifier, utcnow,
                                                         timeout)
end

--- A kazoo MultiNonBlockingLease: one of count leases under path.
function Client:MultiNonBlockingLease(count, path, duration, identifier, utcnow, timeout)
  return require("zklua.recipes.lease").MultiNonBlockingLease(self, count, path, duration,
                                                              identifier, utcnow, timeout)
end

--- A PartitionAllocator (zklua.recipes.partitioning.allocator): divides a shared set of items among the
-- live members of a group, never two owners at once; opts = {path, identifier, strategy, ...}.
function Client:PartitionAllocator(opts)
  return require("zklua.recipes.partitioning.allocator").PartitionAllocator(self, opts)
end

--- A kazoo SetPartitioner (zklua.recipes.partitioning.partitioner): zk:SetPartitioner{path = , set = ,
-- partition_func, identifier, time_boundary = 30, max_reaction_time = 1, state_change_event,
-- conflict_timeout}, or kazoo's positional arguments.
function Client:SetPartitioner(...)
  return require("zklua.recipes.partitioning.partitioner").SetPartitioner(self, ...)
end

--- Curator's ServiceDiscovery (zklua.recipes.service_discovery): register and find service
-- instances under base_path in Curator x-discovery's layout; opts = {with_enabled}.
function Client:ServiceDiscovery(base_path, opts)
  return require("zklua.recipes.service_discovery").ServiceDiscovery(self, base_path, opts)
end

Client.__name = "zklua.Client"

function Client.__tostring(client)
  return string.format("zklua.Client(%s, %s)", client._hosts, client.state)
end

return Client
