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
local zklua = require "zklua"
local core = require "zklua.core"
local socket = require "socket"

local hosts = arg[1]
if not hosts then error("usage: balancer_bench.lua HOSTS [SECONDS] [ROUNDS] [UPDATES] [CONNS]") end
local SECONDS = tonumber(arg[2] or 2)
local ROUNDS = tonumber(arg[3] or 3)
local UPDATES = tonumber(arg[4] or 20)
local CONNS = tonumber(arg[5] or 50)
local WORKERS = 4
local NGINX = "/usr/sbin/nginx"

local function shell(cmd)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("a")
  pipe:close()
  return out
end

local function read_file(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

local function alive(pid)
  local stat = read_file("/proc/" .. pid .. "/stat")
  return stat ~= nil and stat:match("%) (%a)") ~= "Z"
end

local function children(pid)
  local list = {}
  for p in (read_file(string.format("/proc/%d/task/%d/children", pid, pid)) or ""):gmatch("%d+") do
    list[#list + 1] = tonumber(p)
  end
  return list
end

local cwd = shell("pwd"):gsub("%s+$", "")
local OWNER_PID = assert(read_file("/proc/self/stat"):match("^%d+"))
-- Left behind with each nginx: stops its master should this process die first.
local WATCHDOG =
  'alive() { s=$(cut -d")" -f2 "/proc/$1/stat" 2>/dev/null | cut -c2); ' ..
  '[ -n "$s" ] && [ "$s" != Z ]; }; ' ..
  'while alive "$0" && alive "$1"; do sleep 1; done; ' ..
  'if alive "$1"; then kill -TERM "$1"; sleep 5; alive "$1" && kill -KILL "$1"; fi'

local running = {} -- {master =, prefix =}

local COMMON = [[
daemon off;
pid logs/nginx.pid;
error_log logs/error.log warn;
events { worker_connections 4096; }
]]
local TEMPS = [[
    access_log off;
    client_body_temp_path tmp_body;
    proxy_temp_path tmp_proxy;
    fastcgi_temp_path tmp_fastcgi;
    uwsgi_temp_path tmp_uwsgi;
    scgi_temp_path tmp_scgi;
]]

local function start_nginx(conf, env)
  local prefix = shell("mktemp -d /tmp/zklua-balancer-bench.XXXXXX"):gsub("%s+$", "")
  assert(prefix ~= "", "mktemp failed")
  os.execute("mkdir -p " .. prefix .. "/logs")
  local f = assert(io.open(prefix .. "/nginx.conf", "w"))
  f:write(conf)
  f:close()
  local out = shell(string.format("%s %s -p %s -c %s/nginx.conf -e %s/logs/error.log " ..
    ">%s/logs/stdout 2>&1 & pid=$!; echo $pid; sh -c '%s' %s $pid </dev/null >/dev/null 2>&1 &",
    env or "", NGINX, prefix, prefix, prefix, prefix, WATCHDOG, OWNER_PID))
  local n = { master = assert(tonumber(out:match("%d+")), "could not start nginx"),
              prefix = prefix }
  running[#running + 1] = n
  return n
end

local function stop_all()
  for _, n in ipairs(running) do
    local pids = { n.master }
    for _, pid in ipairs(children(n.master)) do pids[#pids + 1] = pid end
    os.execute("kill -QUIT " .. n.master .. " 2>/dev/null")
    local deadline = core.monotonic() + 10
    local function any()
      for _, pid in ipairs(pids) do if alive(pid) then return true end end
      return false
    end
    while any() and core.monotonic() < deadline do core.sleep(0.05) end
    for _, pid in ipairs(pids) do
      if alive(pid) then os.execute("kill -KILL " .. pid .. " 2>/dev/null") end
    end
    os.execute("rm -rf " .. n.prefix)
  end
  running = {}
end

local function http_get(port, path)
  local s = assert(socket.tcp())
  s:settimeout(5)
  local ok, err = s:connect("127.0.0.1", port)
  if not ok then
    s:close()
    return nil, err
  end
  s:send("GET " .. path .. " HTTP/1.0\r\nHost: localhost\r\n\r\n")
  local response, _, partial = s:receive("*a")
  s:close()
  response = response or partial or ""
  return tonumber(response:match("^HTTP/1%.%d (%d+)")), response:match("\r\n\r\n(.*)$") or ""
end

local function wait_answer(port, timeout)
  local deadline = core.monotonic() + timeout
  while http_get(port, "/") ~= 200 do
    if core.monotonic() > deadline then error("nothing answers on port " .. port) end
    core.sleep(0.02)
  end
end

local zk, base
local function main()
  -- the backends
  local backends = {}
  for i = 1, 3 do
    local port = core.free_port()
    start_nginx("worker_processes 1;\n" .. COMMON .. "http {\n" .. TEMPS ..
      "    server { listen 127.0.0.1:" .. port .. "; location / { return 200 \"b" .. i ..
      "\\n\"; } }\n}\n")
    backends[i] = port
  end
  for _, port in ipairs(backends) do wait_answer(port, 30) end
  zk = zklua.client{ hosts = hosts, timeout = 10 }
  zk:start(15)
  base = string.format("/bench-balancer-%d-%d", os.time(), math.random(1e9))
  local sd = zk:ServiceDiscovery(base)
  for i, port in ipairs(backends) do
    sd:register{ name = "api", id = "b" .. i, address = "127.0.0.1", port = port }
  end
  -- the front
  local dynamic, static = core.free_port(), core.free_port()
  local servers = {}
  for _, port in ipairs(backends) do servers[#servers + 1] = "        server 127.0.0.1:" .. port .. ";" end
  local proxy = "proxy_http_version 1.1; proxy_set_header Connection \"\";"
  local front = start_nginx("worker_processes " .. WORKERS .. ";\nenv ZKLUA_HOSTS;\n" ..
    "load_module /usr/lib/nginx/modules/ndk_http_module.so;\n" ..
    "load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;\n" .. COMMON .. "http {\n" .. TEMPS ..
    '    lua_package_path "' .. cwd .. '/lua/?.lua;' .. cwd .. '/lua/?/init.lua;;";\n' ..
    '    lua_package_cpath "' .. cwd .. '/build/luajit/?.so;;";\n' ..
    '    init_worker_by_lua_block { require("zklua.ngx.balancer").init_worker{ base_path = "' ..
    base .. '", services = { "api" } } }\n' ..
    '    exit_worker_by_lua_block { require("zklua.ngx.balancer").exit_worker() }\n' ..
    "    upstream dynamic {\n        server 0.0.0.1;\n" ..
    '        balancer_by_lua_block { require("zklua.ngx.balancer").balance("api") }\n' ..
    "        keepalive 32;\n    }\n" ..
    "    upstream static {\n" .. table.concat(servers, "\n") .. "\n        keepalive 32;\n    }\n" ..
    "    server {\n        listen 127.0.0.1:" .. dynamic .. " reuseport;\n" ..
    "        location / { proxy_pass http://dynamic; " .. proxy .. " }\n" ..
    '        location = /upstreams { content_by_lua_block { require("zklua.ngx.balancer").status() } }\n' ..
    "    }\n" ..
    "    server {\n        listen 127.0.0.1:" .. static .. " reuseport;\n" ..
    "        location / { proxy_pass http://static; " .. proxy .. " }\n    }\n}\n",
    "ZKLUA_HOSTS='" .. hosts .. "'")

  -- every worker of the front sees instances that satisfy want(ids of its view)
  local function every_worker(want, timeout)
    local deadline = core.monotonic() + timeout
    local ok = {}
    while true do
      local pids = children(front.master)
      local status, body = http_get(dynamic, "/upstreams")
      if status == 200 then
        local pid = tonumber(body:match('"pid":(%d+)'))
        if pid then ok[pid] = want(body) or nil end
      end
      local all = #pids == WORKERS
      for _, pid in ipairs(pids) do all = all and ok[pid] end
      if all then return core.monotonic() end
      if core.monotonic() > deadline then
        error("the workers did not all see what was wanted: " ..
              (read_file(front.prefix .. "/logs/error.log") or ""))
      end
    end
  end
  every_worker(function(body) return body:find('"b3 ', 1, true) ~= nil end, 60)
  wait_answer(static, 30)

  local function wrk(port)
    local out = shell(string.format("wrk -t2 -c%d -d%ds http://127.0.0.1:%d/ 2>&1", CONNS,
                                    SECONDS, port))
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
    local t1 = every_worker(function(body) return body:find('"' .. id .. ' ', 1, true) ~= nil end, 60)
    times[#times + 1] = (t1 - t0) * 1000
    sd:unregister(id)
    every_worker(function(body) return body:find('"' .. id .. ' ', 1, true) == nil end, 60)
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
