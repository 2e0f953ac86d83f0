--- spec/support/nginx.lua — a real nginx (Debian's, with ngx_lua) run by specs: its own prefix
-- under /tmp, a free loopback port, stopped by its master's pid (SIGQUIT, then SIGKILL), never
-- by name; plain HTTP/1.0 requests on new connections; its error log checked for [error] and
-- worse.  Used by spec/nginx_spec.lua and spec/nginx_balancer_spec.lua.
local child = require "fixtures.child"
local core = require "zklua.core"
local socket = require "socket"
local testing = require "zklua.testing"
local compat = require "zklua.compat"

local M = {}

local NGINX = "/usr/sbin/nginx"

local function read_file(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return text
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function free_port()
  local s = assert(socket.tcp())
  assert(s:bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

local function cwd()
  local pipe = assert(io.popen("pwd"))
  local dir = pipe:read("*l")
  pipe:close()
  return dir
end

-- A new directory under /tmp, readable by nginx's workers (they run as nobody under root).
local function temp_dir()
  local pipe = assert(io.popen("d=$(mktemp -d /tmp/zklua-nginx.XXXXXX) && chmod 755 \"$d\" && echo \"$d\""))
  local dir = pipe:read("*l")
  pipe:close()
  return assert(dir, "mktemp failed")
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

-- Reads the whole answer of a send_get socket: status, body, headers; or nil and why.
local function receive(s)
  local response, why, partial = s:receive("*a")
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

-- A running nginx: conf (a file) copied into a fresh prefix with its port replaced and, given
-- http_lines, those lines added at the top of its http block.
local Nginx = {}
Nginx.__index = Nginx

function M.start(conf, env, kids, http_lines)
  local prefix = temp_dir()
  assert(os.execute("mkdir -p " .. child.quote(prefix .. "/logs")))
  local port = free_port()
  local text = assert(read_file(conf), "cannot read " .. conf)
  local replaced
  text, replaced = text:gsub("listen 127%.0%.0%.1:8080", "listen 127.0.0.1:" .. port)
  assert(replaced == 1, conf .. " must have one `listen 127.0.0.1:8080`")
  if http_lines then
    text, replaced = text:gsub("\nhttp {\n", "\nhttp {\n" .. http_lines .. "\n")
    assert(replaced == 1, conf .. " must have one `http {` line")
  end
  write_file(prefix .. "/nginx.conf", text)
  local self = setmetatable({ prefix = prefix, port = port, seen = {}, killed = {} }, Nginx)
  self.kid = child.spawn({ NGINX, "-p", prefix, "-c", prefix .. "/nginx.conf",
                           "-e", prefix .. "/logs/error.log" }, env)
  kids[#kids + 1] = self.kid -- cleaned up (SIGKILL by pid) with the others
  self.master = self.kid:program_pid(10)
  assert(self.master, "nginx did not start: " .. self.kid:stderr())
  return self
end

--- The pids of the master's live worker processes.
function Nginx:workers()
  local list = {}
  local text = read_file("/proc/" .. self.master .. "/task/" .. self.master .. "/children") or ""
  for pid in text:gmatch("%d+") do
    if child.alive(pid) then
      list[#list + 1] = tonumber(pid)
      self.seen[tonumber(pid)] = true -- killed by pid at the end if still there
    end
  end
  return list
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
  local pipe = assert(io.popen("find " .. child.quote(self.prefix) .. " -name 'core*'"))
  for file in pipe:lines() do bad[#bad + 1] = "core file " .. file end
  pipe:close()
  return bad
end

function Nginx:assert_clean(what)
  local bad = self:errors()
  assert(#bad == 0, what .. ": error.log has:\n" .. table.concat(bad, "\n") .. "\nFULL\n" .. self:error_log())
end

--- Asks path on new connections until each worker in pids (a set; default the live ones)
-- answered and accept(status, body, headers) held for its latest answer; returns pid -> that
-- answer ({status, body, headers}).  Raises after timeout s (default 30), naming the workers
-- that did not get there.
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
    if core.monotonic() > deadline then
      local parts = {}
      for pid in pairs(wanted) do
        local a = latest[pid]
        parts[#parts + 1] = pid .. ": " .. (a and (a.status .. " " .. a.body) or "silent")
      end
      error("timed out waiting for " .. what .. " (" .. why .. ")\n" ..
            table.concat(parts, "\n") .. "\n" .. self:error_log(), 2)
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

function Nginx:remove()
  os.execute("rm -rf " .. child.quote(self.prefix))
end

M.Nginx = Nginx
M.NGINX = NGINX
M.read_file, M.write_file, M.free_port, M.cwd, M.temp_dir = read_file, write_file, free_port, cwd, temp_dir
M.parse_response, M.send_get, M.receive, M.request = parse_response, send_get, receive, request

return M
