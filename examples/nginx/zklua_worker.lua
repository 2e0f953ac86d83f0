--- examples/nginx/zklua_worker.lua — what each nginx worker of examples/nginx/nginx.conf runs:
-- a small service on one ZooKeeper session per worker, under zklua.handlers.ngx.
--
-- init_worker(): makes the worker's handler and client (after the fork: never share a session
-- between processes) with a logger writing into nginx's error.log, then starts the session
-- from a timer (init_worker cannot wait).  That timer sets up, once connected:
--   * a DataWatch on $ZKLUA_APP/config: every worker keeps the node's data and version (GET
--     /config answers from it, no ZooKeeper call);
--   * a Counter on $ZKLUA_APP/counter, one object shared by all the worker's requests;
--   * an Election latch on $ZKLUA_APP/leader (its identifier: the worker's pid): start()
--     joins and returns, leadership comes and goes through on_leader/on_lost callbacks run by
--     the handler's poller; no coroutine sits in a run() that never returns.
-- The requests (each in its own coroutine: a ZooKeeper call yields it, the worker serves
-- others meanwhile):
--   GET /get      one zk:get of the config node: body = its data
--   GET /static   no ZooKeeper call: body "ok" (the ceiling: what Lua in nginx costs alone)
--   GET /counter  one add(1, $ZKLUA_CALL_TIMEOUT) on the shared Counter: body = the value
--                 after that add (concurrent requests take turns on the object)
--   GET /config   the worker's config from its DataWatch: body = the data
--   GET /lock     takes $ZKLUA_APP/lock (waits at most ?timeout= s, default $ZKLUA_CALL_TIMEOUT),
--                 holds it ?hold= s (default 0), releases it: body "acquired" or "timeout"
--   GET /status   JSON: pid, session state, leader or not, config version, ...
-- Every answer carries X-Worker-Pid.  A ZooKeeper error answers 503 with the error's text.
-- How long a request may wait: a plain op (zk:get) made while the connection is down waits for
-- the reconnection, as kazoo's, and fails with SessionExpiredError once the session counts as
-- expired (at most the session timeout); one made while the session is LOST fails at once.  A
-- lock acquire and a counter add wait at most their timeout ($ZKLUA_CALL_TIMEOUT, default 2 s;
-- TimeoutError, a 503, for the add).
-- exit_worker(): zk:close().  The handler's poller already stopped the client when the worker
-- began exiting (ngx.worker.exiting(): every waiting request was woken with
-- ConnectionClosedError); close() also frees the session and joins libzookeeper's threads
-- before the process ends, and ends the session at the server at once, so the worker's
-- ephemeral nodes (its election node) go now rather than a session timeout later.  stop()
-- would end the session too but keep the client's resources for a start() that never comes.
--
-- SUSPENDED (connection lost): the leader stays leader (its node lives while the session
-- does); /config keeps the last data; /get and /lock fail with ConnectionLoss (503); /status
-- answers with state SUSPENDED.  LOST (session expired): the election node is gone, is_leader
-- turns false (on_lost) and the latch rejoins on the new session by itself; the DataWatch
-- re-reads on the new session, so /config catches up with what changed meanwhile.
local zklua = require "zklua"
local ngx_handler = require "zklua.handlers.ngx"

local ngx = ngx -- luacheck: ignore (the ngx_lua global)

local M = {}

local APP = os.getenv("ZKLUA_APP") or "/zklua-nginx"
local CONFIG = APP .. "/config"
local COUNTER = APP .. "/counter"
local LEADER = APP .. "/leader"
local LOCK = APP .. "/lock"
-- s: the longest a request waits for a lock (by default) or a counter add
local CALL_TIMEOUT = tonumber(os.getenv("ZKLUA_CALL_TIMEOUT") or "") or 2

local zk, handler, election, counter, core_path
local config = { data = nil, version = nil } -- the config node, as the DataWatch last saw it
local ready = false                          -- the watch, counter and election are set up

local function log(level, ...)
  ngx.log(level, "zklua worker ", ngx.worker.pid(), ": ", ...)
end

-- zklua's log lines into error.log.  libzookeeper reports every failed connection attempt as
-- an error; for the worker that is a connection loss zklua handles (SUSPENDED, a reconnection),
-- so those lines are warnings.  zklua's own errors (a callback that raised) stay errors.
local NGX_LEVELS = { ERROR = ngx.ERR, WARN = ngx.WARN, INFO = ngx.INFO, DEBUG = ngx.DEBUG }
local function logger(level, message)
  local ngx_level = NGX_LEVELS[level] or ngx.ERR
  if ngx_level == ngx.ERR and message:sub(1, 13) == "libzookeeper " then
    ngx_level = ngx.WARN
  end
  ngx.log(ngx_level, "zklua: ", message)
end

-- Sets up what the worker keeps on its session; each step once (a failed step is retried).
local function set_up()
  zk:start(30)
  if not counter then
    zk:DataWatch(CONFIG, function(data, stat)
      config = { data = data, version = stat and stat.version }
    end)
    counter = zk:Counter(COUNTER)
  end
  if not election then
    local e = zk:Election(LEADER, tostring(ngx.worker.pid()))
    e:on_leader(function() log(ngx.NOTICE, "leading") end)
    e:on_lost(function() log(ngx.WARN, "lost leadership with the session") end)
    e:start()
    election = e
  end
  ready = true
end

-- In a timer: sets up until it is done or the worker exits.
local function main(premature)
  if premature then return end
  while not ngx.worker.exiting() do
    local ok, err = pcall(set_up)
    if ok then return end
    if ngx.worker.exiting() then return end
    log(ngx.WARN, "setting up: ", tostring(err), "; again in 1 s")
    pcall(handler.sleep, 1)
  end
end

function M.init_worker()
  handler = ngx_handler.new{ wakeup = os.getenv("ZKLUA_NGX_WAKEUP") } -- nil: the default
  zk = zklua.client{
    hosts = os.getenv("ZKLUA_HOSTS"),
    timeout = tonumber(os.getenv("ZKLUA_SESSION_TIMEOUT") or "") or 10,
    handler = handler,
    logger = logger,
    log_level = "WARN",
  }
  core_path = package.searchpath("zklua.core", package.cpath)
  assert(ngx.timer.at(0, main))
end

function M.exit_worker()
  if zk then zk:close() end
end

-- ---------------------------------------------------------------- requests

local function answer(status, body)
  ngx.status = status
  ngx.header["X-Worker-Pid"] = ngx.worker.pid()
  ngx.print(body)
end

-- Runs fn(); answers 200 with what it returns, or 503 with the error it raised.
local function serve(fn)
  local ok, body = pcall(fn)
  if ok then return answer(200, body) end
  log(ngx.WARN, ngx.var.uri, ": ", tostring(body))
  answer(503, tostring(body) .. "\n")
end

function M.get()
  serve(function() return (zk:get(CONFIG)) end)
end

function M.static()
  answer(200, "ok")
end

function M.counter()
  serve(function()
    if not counter then error("not set up yet: the session is not connected", 0) end
    local _, _, post = counter:add(1, CALL_TIMEOUT) -- this call's own value (shared object)
    return tostring(post)
  end)
end

function M.config()
  ngx.header["X-Config-Version"] = tostring(config.version)
  answer(config.version and 200 or 404, config.data or "")
end

function M.lock()
  local args = ngx.req.get_uri_args()
  local timeout = tonumber(args.timeout) or CALL_TIMEOUT
  local hold = tonumber(args.hold) or 0
  serve(function()
    local lock = zk:Lock(LOCK, tostring(ngx.worker.pid()))
    if not lock:acquire(true, timeout) then return "timeout" end
    local ok, err = pcall(handler.sleep, hold)
    lock:release()
    if not ok then error(err, 0) end
    return "acquired"
  end)
end

-- A flat table as a JSON object (strings, numbers, booleans; nil fields are null).
local function json(fields, order)
  local parts = {}
  for _, key in ipairs(order) do
    local value = fields[key]
    local text
    if type(value) == "string" then
      text = '"' .. value:gsub('[%c"\\]', function(c)
        return string.format("\\u%04x", c:byte())
      end) .. '"'
    elseif value == nil then
      text = "null"
    else
      text = tostring(value)
    end
    parts[#parts + 1] = '"' .. key .. '":' .. text
  end
  return "{" .. table.concat(parts, ",") .. "}\n"
end

function M.status()
  ngx.header["Content-Type"] = "application/json"
  answer(200, json({
    pid = ngx.worker.pid(),
    state = zk.state,                 -- CONNECTED, SUSPENDED or LOST
    client_state = zk.client_state,   -- the library's view: CONNECTED, CONNECTING, CLOSED ...
    session = zk:client_id() and string.format("0x%x", (zk:client_id())), -- nil before connecting
    ready = ready,
    leader = election ~= nil and election.is_leader,
    config_version = config.version,
    waiting = handler.waiting(),      -- coroutines waiting on ZooKeeper now
    zklua_core = core_path,           -- where the module was loaded from
  }, { "pid", "state", "client_state", "session", "ready", "leader", "config_version", "waiting",
       "zklua_core" }))
end

return M
