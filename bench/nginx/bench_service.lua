--- bench/nginx/bench_service.lua — what each worker of bench/nginx/nginx.conf runs.
--
-- init_worker(): one ZooKeeper session per worker under zklua.handlers.ngx (wake-ups as
-- $ZKLUA_NGX_WAKEUP says: "socket", the default, or "timer", the poller), started from a timer.
-- The worker then holds a DataWatch on $ZKLUA_APP/config (the config /config answers with), a
-- Counter on $ZKLUA_APP/counter shared by its requests, and competes in an Election on
-- $ZKLUA_APP/leader with election:run(), which only yields the timer's coroutine.
-- get(): one zk:get of the config inside the request (the request yields, the worker does not
-- block).  counter(): one Counter:add(1); concurrent requests of the worker share the Counter.
--
-- SUSPENDED (connection lost): requests that call ZooKeeper wait for the reconnection (their
-- calls have the client's timeouts); /status and /config answer from what the worker knows.
-- LOST (session expired): the calls under way fail with SessionExpiredError (a 500), the
-- Election and the DataWatch re-arm on the new session; the Counter is a persistent node.
local zklua = require "zklua"
local ngx_handler = require "zklua.handlers.ngx"

local M = {}

local APP = os.getenv("ZKLUA_APP") or "/zklua-bench"
local CONFIG = APP .. "/config"
local WAKEUP = os.getenv("ZKLUA_NGX_WAKEUP") or "socket"

local zk, handler, election, counter
local config, config_version
local ready, leading = false, false

local function json_string(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c)
    return string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function json(fields)
  local parts = {}
  for _, kv in ipairs(fields) do
    local v = kv[2]
    local text = type(v) == "string" and json_string(v) or v == nil and "null" or tostring(v)
    parts[#parts + 1] = json_string(kv[1]) .. ":" .. text
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function lead()
  leading = true
  handler.wait(function() return ngx.worker.exiting() or not election.is_leader end)
  leading = false
end

local function main(premature)
  if premature then return end
  while not ngx.worker.exiting() do
    local ok, err = pcall(function()
      if zk.state ~= "CONNECTED" then zk:start(30) end
      counter = counter or zk:Counter(APP .. "/counter")
      if not config_version then
        zk:DataWatch(CONFIG, function(data, stat)
          config, config_version = data, stat and stat.version or -1
        end)
      end
      election = election or zk:Election(APP .. "/leader", tostring(ngx.worker.pid()))
      ready = true
      election:run(lead)
    end)
    if not ok and not ngx.worker.exiting() then
      ngx.log(ngx.ERR, "bench service: ", tostring(err), "; again in 1 s")
      handler.sleep(1)
    end
  end
end

function M.init_worker()
  handler = ngx_handler.new{ wakeup = WAKEUP }
  zk = zklua.client{
    hosts = os.getenv("ZKLUA_HOSTS"),
    timeout = tonumber(os.getenv("ZKLUA_SESSION_TIMEOUT") or "10"),
    handler = handler,
  }
  assert(ngx.timer.at(0, main))
end

function M.get()
  ngx.say(zk:get(CONFIG))
end

function M.counter()
  counter:add(1)
  ngx.say(counter.post_value)
end

function M.config()
  ngx.header.content_type = "application/json"
  ngx.say(json({ { "data", config }, { "version", config_version } }))
end

function M.status()
  ngx.header.content_type = "application/json"
  ngx.say(json({ { "pid", ngx.worker.pid() }, { "state", zk.state }, { "ready", ready },
                 { "leader", leading and election.is_leader or false }, { "wakeup", WAKEUP } }))
end

function M.exit_worker()
  if zk then zk:close() end
end

return M
