--- balancer_bench.lua — zklua.ngx.balancer against a static nginx upstream, same run, same
-- backends: 3 backend nginx servers (1 worker each, `return 200`), registered by this process
-- (zklua ServiceDiscovery, Curator's layout) under a fresh /bench-balancer-<...>, and one
-- 4-worker front nginx (zklua's LuaJIT module) with two servers on free ports: one proxies to
-- `upstream dynamic` (balancer_by_lua: zklua.ngx.balancer, round robin), the other to
-- `upstream static` (the same three backends listed).  Both keep connections alive (32).
--
--   1. wrk for SECONDS at CONNS connections, static and dynamic back to back (taking turns to
--      go first), ROUNDS times; the median requests/s of each, and the median of the rounds'
--      quotients (a pair ran in the same moment, so the machine's other load hits both):
--        RESULT balancer rps=<dynamic> static_rps=<static> ratio=<dynamic/static>
--   2. UPDATES times: an instance registered (pointing at a backend), then /upstreams asked on
--      new connections until every worker lists it; the time from before the register call to
--      the first answer of the last worker (the polling adds about a request's time), then the
--      instance unregistered:
--        RESULT balancer_update n=<n> p50_ms=<ms> p99_ms=<ms> max_ms=<ms>
-- A request that does not answer 200 fails the run.  Every nginx is stopped by its master's pid
-- (SIGQUIT, then SIGKILL by pid), whatever happened.
--   ./zklua bench/balancer_bench.lua HOSTS [SECONDS=2] [ROUNDS=3] [UPDATES=20] [CONNS=50]
package.path = "spec/?.lua;" .. package.path -- support.nginx: nginx run by pid
local zklua = require "zklua"
local core = require "zklua.core"
local support = require "support.nginx"

local hosts = arg[1]
if not hosts then error("usage: balancer_bench.lua HOSTS [SECONDS] [ROUNDS] [UPDATES] [CONNS]") end
local SECONDS = tonumber(arg[2] or 2)
local ROUNDS = tonumber(arg[3] or 3)
local UPDATES = tonumber(arg[4] or 20)
local CONNS = tonumber(arg[5] or 50)
local WORKERS = 4

local cwd = support.cwd()
local running = {} -- the nginx instances started, stopped at the end

local function start_nginx(conf, env)
  local n = support.start_text(conf, env or {})
  running[#running + 1] = n
  return n
end

local function stop_all()
  for _, n in ipairs(running) do
    n:stop()
    n:remove()
  end
  running = {}
end

local zk, base
local function main()
  -- the backends
  local backends = {}
  for i = 1, 3 do backends[i] = start_nginx(support.backend_conf("b" .. i)).port end
  for _, port in ipairs(backends) do support.wait_answer(port, "/", 30) end
  zk = zklua.client{ hosts = hosts, timeout = 10 }
  zk:start(15)
  base = string.format("/bench-balancer-%d-%d", os.time(), math.random(1e9))
  local sd = zk:ServiceDiscovery(base)
  for i, port in ipairs(backends) do
    sd:register{ name = "api", id = "b" .. i, address = "127.0.0.1", port = port }
  end
  -- the front
  local servers = {}
  for _, port in ipairs(backends) do servers[#servers + 1] = "        server 127.0.0.1:" .. port .. ";" end
  local proxy = "proxy_http_version 1.1; proxy_set_header Connection \"\";"
  local static = core.free_port()
  local front = start_nginx("worker_processes " .. WORKERS .. ";\nenv ZKLUA_HOSTS;\n" ..
    "load_module /usr/lib/nginx/modules/ndk_http_module.so;\n" ..
    "load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;\n" ..
    "daemon off;\npid logs/nginx.pid;\nerror_log logs/error.log warn;\n" ..
    "events { worker_connections 4096; }\nhttp {\n" .. support.HTTP_TEMPS ..
    '    lua_package_path "' .. cwd .. '/lua/?.lua;' .. cwd .. '/lua/?/init.lua;;";\n' ..
    '    lua_package_cpath "' .. cwd .. '/build/luajit/?.so;;";\n' ..
    '    init_worker_by_lua_block { require("zklua.ngx.balancer").init_worker{ base_path = "' ..
    base .. '", services = { "api" } } }\n' ..
    '    exit_worker_by_lua_block { require("zklua.ngx.balancer").exit_worker() }\n' ..
    "    upstream dynamic {\n        server 0.0.0.1;\n" ..
    '        balancer_by_lua_block { require("zklua.ngx.balancer").balance("api") }\n' ..
    "        keepalive 32;\n    }\n" ..
    "    upstream static {\n" .. table.concat(servers, "\n") .. "\n        keepalive 32;\n    }\n" ..
    "    server {\n        listen 127.0.0.1:8080 reuseport;\n" .. -- the dynamic one: front.port
    "        location / { proxy_pass http://dynamic; " .. proxy .. " }\n" ..
    '        location = /upstreams { content_by_lua_block { require("zklua.ngx.balancer").status() } }\n' ..
    "    }\n" ..
    "    server {\n        listen 127.0.0.1:" .. static .. " reuseport;\n" ..
    "        location / { proxy_pass http://static; " .. proxy .. " }\n    }\n}\n",
    { ZKLUA_HOSTS = hosts })
  local dynamic = front.port
  local front_workers = front:wait_workers(WORKERS, 60)

  -- every worker of the front sees instances that satisfy want(its /upstreams); returns the
  -- time of the last worker's answer
  local function every_worker(want, what)
    front:every_worker("/upstreams", function(status, body)
      return status == 200 and want(body)
    end, what, 60, front_workers)
    return core.monotonic()
  end
  every_worker(function(body) return body:find('"b3 ', 1, true) ~= nil end, "every worker to see b3")
  support.wait_answer(static, "/", 30)

  local function wrk(port)
    local out = support.shell(string.format("wrk -t2 -c%d -d%ds http://127.0.0.1:%d/ 2>&1",
                                            CONNS, SECONDS, port))
    if out:find("Non%-2xx") or out:find("Socket errors") then error("failed requests:\n" .. out) end
    return assert(tonumber(out:match("Requests/sec:%s*([%d%.]+)")), "wrk said:\n" .. out)
  end
  local rps, static_rps = {}, {}
  for r = 1, ROUNDS do
    if r % 2 == 1 then
      static_rps[r] = wrk(static)
      rps[r] = wrk(dynamic)
    else
      rps[r] = wrk(dynamic)
      static_rps[r] = wrk(static)
    end
  end
  local function median(list)
    table.sort(list)
    local n = #list
    return n % 2 == 1 and list[(n + 1) // 2] or (list[n // 2] + list[n // 2 + 1]) / 2
  end
  local ratios = {}
  for r = 1, ROUNDS do ratios[r] = rps[r] / static_rps[r] end
  print(string.format("RESULT balancer rps=%.0f static_rps=%.0f ratio=%.3f", median(rps),
                      median(static_rps), median(ratios)))

  local times = {}
  for i = 1, UPDATES do
    local id = "u" .. i
    local t0 = core.monotonic()
    sd:register{ name = "api", id = id, address = "127.0.0.1", port = backends[1] }
    local t1 = every_worker(function(body) return body:find('"' .. id .. ' ', 1, true) ~= nil end,
                            "every worker to see " .. id)
    times[#times + 1] = (t1 - t0) * 1000
    sd:unregister(id)
    every_worker(function(body) return body:find('"' .. id .. ' ', 1, true) == nil end,
                 id .. " to leave every worker")
  end
  table.sort(times)
  local function q(p) return times[math.max(1, math.ceil(p * #times))] end
  print(string.format("RESULT balancer_update n=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f", #times,
                      q(0.5), q(0.99), times[#times]))
end

local ok, err = pcall(main)
stop_all()
if zk then
  if base then pcall(zk.delete, zk, base, nil, true) end
  zk:close()
end
if not ok then error(err, 0) end
