--- spec/support/nginx.lua — a real nginx (Debian's, with ngx_lua) for specs and benches, the one
-- place that runs one.  What it guarantees:
-- * each nginx gets its own prefix under /tmp (logs/, its nginx.conf) and a free loopback port;
-- * it is stopped by its master's pid, never by name: Nginx:stop() sends SIGQUIT, waits, then
--   SIGKILLs by pid the master and every worker it saw; should the process that started it
--   die first (killed, interrupted), a watchdog shell left beside it sends the master SIGTERM
--   (SIGKILL 5 s later if it lingers) and ends by itself once nginx is gone;
-- * every wait has an upper bound and raises with the error log when it runs out or when the
--   master exited meanwhile;
-- * requests are plain HTTP/1.0 GETs on new connections, each with a timeout;
-- * Nginx:errors() lists the error log's lines at [error] or worse (but the alerts of workers
--   killed on purpose) and core files in the prefix.
--
--   local support = require "support.nginx"   -- benches: package.path = "spec/?.lua;" .. ...
--   local nginx = support.start("examples/nginx/nginx.conf", { ZKLUA_HOSTS = hosts }, kids)
--   local front = support.start_text(conf_text, env)      -- the text of a conf, not a file
--   nginx:every_worker("/status", function(status, body, headers) ... end, "what", 30)
--   local status, body, headers = support.request(nginx.port, "/get")
--   nginx:stop(); nginx:assert_clean("what"); nginx:remove()
--
-- A conf must have one `listen 127.0.0.1:8080` (replaced by the free port) and `daemon off`.
-- Used by spec/nginx_spec.lua, spec/nginx_balancer_spec.lua, bench/nginx_bench.lua and
-- bench/balancer_bench.lua.
local child = require "fixtures.child"
local core = require "zklua.core"
local socket = require "socket"
local testing = require "zklua.testing"
local compat = require "zklua.compat"

local M = {}

local NGINX = "/usr/sbin/nginx"

local read_file, write_file = child.read_file, child.write_file

--- The output of a shell command and whether it succeeded.
local function shell(cmd)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("*a")
  local ok = pipe:close()
  return out, ok
end

local function free_port()
  local s = assert(socket.tcp())
  assert(s:bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

local function cwd()
  return (shell("pwd"):gsub("%s+$", ""))
end

-- A new directory under /tmp, readable by nginx's workers (they run as nobody under root).
local function temp_dir()
  local dir = shell("d=$(mktemp -d /tmp/zklua-nginx.XXXXXX) && chmod 755 \"$d\" && echo \"$d\"")
  dir = dir:gsub("%s+$", "")
  assert(dir ~= "", "mktemp failed")
  return dir
end

--- The pids of a process's children.
local function children(pid)
  local list = {}
  for p in (read_file("/proc/" .. pid .. "/task/" .. pid .. "/children") or ""):gmatch("%d+") do
    list[#list + 1] = tonumber(p)
  end
  return list
end

-- Parses an HTTP/1.0 response: status (number), body, headers (lower-case names).
local function parse_response(response)
  local head, body = response:match("^(.-)\r\n\r\n(.*)$")
  if not head then return nil end
  local status = tonumber(head:match("^HTTP/1%.%d (%d+)"))
  local headers = {}
  for name, value in head:gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do
    headers[name:lower()] = value
  end
  return status, body, headers
end

-- Sends GET path on a new connection; returns the socket (the answer is read by receive()).
local function send_get(port, path, timeout)
  local s = assert(socket.tcp())
  s:settimeout(timeout or 10)
  local ok, err = s:connect("127.0.0.1", port)
  if not ok then
    s:close()
    return nil, err
  end
  s:send("GET " .. path .. " HTTP/1.0\r\nHost: localhost\r\n\r\n")
  return s
end

-- Reads the whole answer of a send_get socket: status, body, headers; or nil and why.  The
-- connection then ends with a reset (SO_LINGER 0): nginx closed its side after answering, and
-- the reset spares it the TIME_WAIT socket a closing handshake leaves for 60 s.  Polling
-- loops (every_worker) ask thousands of times: three rounds of bench/balancer_bench.lua left
-- 22k of them, 4.7k with the reset.
local function receive(s)
  local response, why, partial = s:receive("*a")
  s:setoption("linger", { on = true, timeout = 0 })
  s:close()
  response = response or partial
  if not response or response == "" then return nil, "no answer: " .. tostring(why) end
  local status, body, headers = parse_response(response)
  if not status then return nil, "not HTTP: " .. response end
  return status, body, headers
end

local function request(port, path, timeout)
  local s, err = send_get(port, path, timeout)
  if not s then return nil, err end
  return receive(s)
end

--- Asks path on port (new connections) until it answers 200; raises after timeout s.
local function wait_answer(port, path, timeout, what)
  local deadline = core.monotonic() + timeout
  while request(port, path, 5) ~= 200 do
    if core.monotonic() > deadline then
      error("timed out waiting for " .. (what or "an answer on port " .. port), 2)
    end
    testing.sleep(0.02)
  end
end

-- This process: the nginx it starts must not outlive it.
local OWNER_PID = assert(read_file("/proc/self/stat"):match("^%d+"))

-- Left beside each nginx ($0: this process, $1: nginx's master): once this process is gone
-- and nginx still runs, SIGTERM for the master (it ends its workers), SIGKILL if it lingers.
-- It ends by itself once nginx is gone.  A zombie counts as gone.
local WATCHDOG =
  'alive() { s=$(cut -d")" -f2 "/proc/$1/stat" 2>/dev/null | cut -c2); ' ..
  '[ -n "$s" ] && [ "$s" != Z ]; }; ' ..
  'while alive "$0" && alive "$1"; do sleep 1; done; ' ..
  'if alive "$1"; then kill -TERM "$1"; sleep 5; alive "$1" && kill -KILL "$1"; fi'

-- The lines of an http block that keep nginx's temp files and access log out of the way.
M.HTTP_TEMPS = [[
    access_log off;
    client_body_temp_path tmp_body;
    proxy_temp_path tmp_proxy;
    fastcgi_temp_path tmp_fastcgi;
    uwsgi_temp_path tmp_uwsgi;
    scgi_temp_path tmp_scgi;
]]

--- A backend: one worker answering every request 200 with `name` and a newline.
function M.backend_conf(name)
  return "worker_processes 1;\ndaemon off;\npid logs/nginx.pid;\nerror_log logs/error.log notice;\n" ..
    "events {\n    worker_connections 1024;\n}\nhttp {\n" .. M.HTTP_TEMPS ..
    "    server {\n        listen 127.0.0.1:8080;\n        location / { return 200 \"" .. name ..
    "\\n\"; }\n    }\n}\n"
end

-- A running nginx.
local Nginx = {}
Nginx.__index = Nginx

--- Starts nginx on the conf text (what): its `listen 127.0.0.1:8080` replaced by a free port
-- (nginx.port) and, given http_lines, those lines added at the top of its http block; env: a
-- table of environment variables; kids (optional): a list the child process is added to, for
-- its owner's cleanup.
function M.start_text(text, env, kids, http_lines, what)
  what = what or "the nginx.conf"
  local prefix = temp_dir()
  assert(os.execute("mkdir -p " .. child.quote(prefix .. "/logs")))
  local port = free_port()
  local replaced
  text, replaced = text:gsub("listen 127%.0%.0%.1:8080", "listen 127.0.0.1:" .. port)
  assert(replaced == 1, what .. " must have one `listen 127.0.0.1:8080`")
  if http_lines then
    text, replaced = text:gsub("\nhttp {\n", "\nhttp {\n" .. http_lines .. "\n")
    assert(replaced == 1, what .. " must have one `http {` line")
  end
  write_file(prefix .. "/nginx.conf", text)
  local self = setmetatable({ prefix = prefix, port = port, seen = {}, killed = {} }, Nginx)
  self.kid = child.spawn({ NGINX, "-p", prefix, "-c", prefix .. "/nginx.conf",
                           "-e", prefix .. "/logs/error.log" }, env)
  if kids then kids[#kids + 1] = self.kid end -- cleaned up (SIGKILL by pid) with the others
  self.master = self.kid:program_pid(10)
  assert(self.master, "nginx did not start: " .. self.kid:stderr())
  os.execute("sh -c " .. child.quote(WATCHDOG) .. " " .. OWNER_PID .. " " .. self.master ..
             " </dev/null >/dev/null 2>&1 &")
  return self
end

--- M.start_text on the text of the file conf.
function M.start(conf, env, kids, http_lines)
  return M.start_text(assert(read_file(conf), "cannot read " .. conf), env, kids, http_lines, conf)
end

--- The pids of the master's live worker processes.
function Nginx:workers()
  local list = {}
  for _, pid in ipairs(children(self.master)) do
    if child.alive(pid) then
      list[#list + 1] = pid
      self.seen[pid] = true -- killed by pid at the end if still there
    end
  end
  return list
end

--- Waits until the master has count live workers; returns them as a set (pid -> true).
function Nginx:wait_workers(count, timeout)
  local deadline = core.monotonic() + (timeout or 30)
  while true do
    local live = self:workers()
    if #live == count then
      local set = {}
      for _, pid in ipairs(live) do set[pid] = true end
      return set
    end
    if self.kid:exited() then error("nginx exited:\n" .. self:error_log(), 2) end
    if core.monotonic() > deadline then
      error(string.format("nginx has %d workers, not %d, after %g s:\n%s", #live, count,
                          timeout or 30, self:error_log()), 2)
    end
    testing.sleep(0.02)
  end
end

function Nginx:error_log()
  return read_file(self.prefix .. "/logs/error.log") or ""
end

--- Kills a worker by pid (SIGKILL); its "exited on signal 9" alert is then expected.
function Nginx:kill_worker(pid)
  self.killed[pid] = true
  assert(compat.execute("kill -KILL " .. pid))
end

--- Lines of the error log at level error or worse, but the alerts of workers the spec killed;
-- and core files in the prefix.
function Nginx:errors()
  local bad = {}
  for line in self:error_log():gmatch("[^\n]+") do
    if line:match("%[error%]") or line:match("%[crit%]") or line:match("%[alert%]") or
       line:match("%[emerg%]") then
      local pid = tonumber(line:match("worker process (%d+) exited on signal 9"))
      if not (pid and self.killed[pid]) then bad[#bad + 1] = line end
    end
  end
  for file in shell("find " .. child.quote(self.prefix) .. " -name 'core*'"):gmatch("[^\n]+") do
    bad[#bad + 1] = "core file " .. file
  end
  return bad
end

function Nginx:assert_clean(what)
  local bad = self:errors()
  assert(#bad == 0, what .. ": error.log has:\n" .. table.concat(bad, "\n") .. "\nFULL\n" .. self:error_log())
end

--- Asks path on new connections until each worker in pids (a set; default the live ones)
-- answered (its X-Worker-Pid header) and accept(status, body, headers) held for its latest
-- answer; returns pid -> that answer ({status, body, headers}).  Raises after timeout s
-- (default 30), naming the workers that did not get there, or once nginx exited.
function Nginx:every_worker(path, accept, what, timeout, pids)
  local deadline = core.monotonic() + (timeout or 30)
  local latest, why = {}, "no answer yet"
  while true do
    local wanted = pids
    if not wanted then
      wanted = {}
      for _, pid in ipairs(self:workers()) do wanted[pid] = true end
    end
    local done, count = true, 0
    for pid in pairs(wanted) do
      count = count + 1
      local a = latest[pid]
      if not (a and accept(a.status, a.body, a.headers)) then done = false end
    end
    if done and count > 0 then
      local result = {}
      for pid in pairs(wanted) do result[pid] = latest[pid] end
      return result
    end
    if self.kid:exited() or core.monotonic() > deadline then
      local parts = {}
      for pid in pairs(wanted) do
        local a = latest[pid]
        parts[#parts + 1] = pid .. ": " .. (a and (a.status .. " " .. a.body) or "silent")
      end
      error((self.kid:exited() and "nginx exited" or "timed out") .. " waiting for " .. what ..
            " (" .. why .. ")\n" .. table.concat(parts, "\n") .. "\n" .. self:error_log(), 2)
    end
    local status, body, headers = request(self.port, path)
    if status then
      local pid = tonumber(headers["x-worker-pid"])
      if pid then latest[pid] = { status = status, body = body, headers = headers } end
    else
      why = body
      testing.sleep(0.02) -- not serving yet (starting, reloading): ask again shortly
    end
  end
end

--- Graceful stop by the master's pid (SIGQUIT): true when nginx and every worker it had
-- exited; otherwise SIGKILL, by pid, for the master and every worker seen, and false.
function Nginx:stop()
  local clean = true
  if not self.kid:exited() then
    self:workers()
    os.execute("kill -QUIT " .. self.master .. " 2>/dev/null")
    clean = self.kid:wait_exit(30)
  end
  for pid in pairs(self.seen) do
    if child.alive(pid) then
      clean = false
      os.execute("kill -KILL " .. pid .. " 2>/dev/null")
    end
  end
  if not self.kid:exited() then
    os.execute("kill -KILL " .. self.master .. " 2>/dev/null")
    self.kid:wait_exit(10)
  end
  return clean
end

--- Removes the prefix and the child's temp files (after stop()).
function Nginx:remove()
  self.kid:cleanup()
  os.execute("rm -rf " .. child.quote(self.prefix))
end

M.Nginx = Nginx
M.NGINX = NGINX
M.read_file, M.write_file, M.free_port, M.cwd, M.temp_dir = read_file, write_file, free_port, cwd, temp_dir
M.shell, M.children, M.alive = shell, children, child.alive
M.parse_response, M.send_get, M.receive, M.request = parse_response, send_get, receive, request
M.wait_answer = wait_answer

return M
