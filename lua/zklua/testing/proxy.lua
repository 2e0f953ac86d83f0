--- zklua.testing.proxy — deterministic network faults between a client and a server.
--
--   local p = testing.proxy(server:node(1))     -- or testing.proxy(port [, host])
--   local zk = zklua.client{ hosts = p.hosts }   -- connections go through the proxy
--   p:silence("down")      -- nothing reaches the client any more; nothing is closed
--   p:cut_reply("delete")  -- the next delete reaches the server, its reply never the client
--   p:cut_request("create", 1) -- the 2nd create from now on never reaches the server
--   p:drop()               -- close both sides of every connection
--   p:refuse(true)         -- close each new connection at once (an unreachable server)
--   p:rewrite("multi", 99) -- every multi reaches the server as an unknown request (opcode 99)
--   p:delay(0.5)           -- forward every chunk half a second late
--   p:resume()             -- forward both ways again at once
--   p:stop()               -- stops the process by its PID
--
-- The proxy is a child process (lua5.4 with luasocket, zklua/testing/proxy_process.lua),
-- one per proxy object, one upstream connection per client connection.  The test drives it
-- without threads: each method sends one command on a control socket and returns once the
-- proxy answered, i.e. once the change took effect — so a fault is placed exactly between
-- two steps of the test, never raced against a reply.  The process exits when the test
-- process is gone; a proxy left running is stopped when it is garbage collected.
local core = require "zklua.core"

local proxy = {}

local Proxy = {}
Proxy.__index = Proxy

local OWNER_PID = assert(io.open("/proc/self/stat", "r"):read("*l"):match("^%d+"))

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function pid_alive(pid)
  local f = io.open("/proc/" .. pid .. "/stat", "r")
  if not f then return false end
  local stat = f:read("*l") or ""
  f:close()
  return stat:match("%) (%a)") ~= "Z"
end

local function script_path()
  local path = package.searchpath("zklua.testing.proxy_process", package.path)
  return assert(path, "zklua.testing.proxy_process not found on package.path")
end

local function command(self, line)
  if not self.control then error("proxy: stopped", 3) end
  assert(self.control:send(line .. "\n"))
  local answer, err = self.control:receive("*l")
  if not answer then error("proxy: no answer to '" .. line .. "': " .. tostring(err), 3) end
  if answer:sub(1, 2) ~= "ok" then error("proxy: " .. answer, 3) end
  return answer
end

-- A free loopback port not in taken (a set of ports other processes are about to bind).
local function free_port(taken)
  while true do
    local port = core.free_port()
    if not taken[port] then
      taken[port] = true
      return port
    end
  end
end

--- Starts a proxy in front of host:port (a testing node, or a port and a host).  taken: the
-- ports it must not listen on (those it takes are added).
function proxy.new(target, host, taken)
  local port = type(target) == "table" and target.port or target
  -- a node's host is loopback
  host = type(target) == "number" and host or "127.0.0.1"
  assert(type(port) == "number", "proxy: a node or a port is needed")
  local socket = require "socket" -- luasocket: only the tests need it
  taken = taken or {}
  local listen_port, control_port = free_port(taken), free_port(taken)
  local cmd = string.format("exec lua5.4 %s %s %d %d %s %d </dev/null >/dev/null 2>&1",
    shell_quote(script_path()), OWNER_PID, listen_port, control_port, shell_quote(host), port)
  local pipe = assert(io.popen("sh -c " .. shell_quote(cmd .. " & echo $!"), "r"))
  local pid = tonumber(pipe:read("*a"):match("%d+"))
  pipe:close()
  assert(pid, "proxy: could not start lua5.4")
  local self = setmetatable({ pid = pid, port = listen_port, control_port = control_port,
                              hosts = "127.0.0.1:" .. listen_port }, Proxy)
  self._guard = setmetatable({}, { __gc = function() self:stop() end })
  if _VERSION == "Lua 5.1" and newproxy then -- LuaJIT: tables have no __gc
    self._guard = newproxy(true)
    getmetatable(self._guard).__gc = function() self:stop() end
  end
  local deadline = core.monotonic() + 10
  while true do -- the process listens within milliseconds of starting
    local control = socket.tcp()
    control:settimeout(10)
    if control:connect("127.0.0.1", control_port) then
      self.control = control
      break
    end
    control:close()
    if not pid_alive(pid) then error("proxy: the process exited (port taken?)") end
    if core.monotonic() > deadline then
      self:stop()
      error("proxy: not listening after 10 s")
    end
    core.sleep(0.01)
  end
  command(self, "status")
  return self
end

--- Stops forwarding "up" (client -> server), "down" or "both"; no socket is closed.
function Proxy:silence(way)
  command(self, "silence " .. (way or "both"))
  return self
end

--- Forwards both ways again, at once; refusal and an armed cut end.
function Proxy:resume()
  command(self, "resume")
  return self
end

--- Forwards every chunk `seconds` late (0: at once).
function Proxy:delay(seconds)
  assert(type(seconds) == "number" and seconds >= 0, "proxy: delay needs seconds >= 0")
  command(self, "delay " .. seconds)
  return self
end

--- Closes both sides of every connection; new connections are accepted.
function Proxy:drop()
  command(self, "drop")
  return self
end

--- on: every new connection is closed at once (the server looks down); off: accepted.
function Proxy:refuse(on)
  command(self, "refuse " .. (on == false and "off" or "on"))
  return self
end

--- The next request of that opcode ("delete", "create", "get", ... or a number) reaches the
-- server, and from then on nothing goes down ("down" silenced) until resume().
function Proxy:cut_reply(opcode)
  command(self, "cut_reply " .. tostring(opcode))
  return self
end

--- Of the next requests of that opcode ("create", "delete", ... or a number), `skip` (0 by
-- default) reach the server; the one after them does not, nor anything its connection sends
-- after it (thrown away): a request lost on its way, and its connection stuck until the
-- client gives up on it.  Connections made afterwards forward as before.
function Proxy:cut_request(opcode, skip)
  skip = skip or 0
  assert(type(skip) == "number" and skip >= 0 and skip % 1 == 0, "proxy: skip must be >= 0")
  command(self, "cut_request " .. tostring(opcode) .. " " .. skip)
  return self
end

--- Every request of that opcode ("multi", ... or a number) a client sends from now on
-- reaches the server as opcode `to` (a number), until resume(): a request the server does
-- not know, as an older server does not know a newer one (ZooKeeper answers ZUNIMPLEMENTED
-- and closes the connection).
function Proxy:rewrite(opcode, to)
  assert(type(to) == "number" and to % 1 == 0, "proxy: rewrite needs an integral opcode to send")
  command(self, "rewrite " .. tostring(opcode) .. " " .. to)
  return self
end

--- Whether a cut_reply or a cut_request happened, and how many connections are open.
function Proxy:status()
  local answer = command(self, "status")
  return { cut = answer:match("cut=(%d)") == "1",
           connections = tonumber(answer:match("connections=(%d+)")),
           accepted = tonumber(answer:match("accepted=(%d+)")) }
end

--- Stops the process by its PID and waits for it to exit.
function Proxy:stop()
  local pid = self.pid
  if not pid then return end
  self.pid = nil
  if self.control then self.control:close(); self.control = nil end
  os.execute("kill -TERM " .. pid .. " 2>/dev/null")
  local deadline = core.monotonic() + 10
  while pid_alive(pid) and core.monotonic() < deadline do core.sleep(0.01) end
  if pid_alive(pid) then os.execute("kill -KILL " .. pid .. " 2>/dev/null") end
end

return proxy
