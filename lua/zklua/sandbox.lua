--- zklua.sandbox — a throwaway local ZooKeeper for `zklua --sandbox script.lua`.
--
--   local sandbox = require("zklua.sandbox").start()
--   print(sandbox.hosts, sandbox.pid)     -- "127.0.0.1:<free port>", the java process
--   sandbox:stop()                         -- by PID; its temp dir is removed
--
-- Guarantees:
-- * start() runs one standalone server from Debian's `zookeeper` package (zklua.testing's
--   server(): a free loopback port, a temp dir, ready when it serves) or raises a readable
--   error naming the packages to install.
-- * stop() stops that process by its PID (SIGTERM, SIGKILL after 10 s) and waits for it;
--   calling it again does nothing.  The zklua runner calls it however the script ends
--   (normally, by an error, by SIGINT/SIGTERM); only a SIGKILL of the runner itself can leave
--   the server behind.
-- * The server lives and dies with the script: clients of the script see SUSPENDED only if
--   the script outlives it, which the runner never lets happen (it closes the script's Lua
--   state, and so its sessions, first).  Nothing survives: every session is LOST with it.
local testing = require "zklua.testing"

local sandbox = {}
sandbox.__index = sandbox

local JAR = "/usr/share/java/zookeeper.jar"

local function installed(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

--- Starts the server and waits until it serves; returns the sandbox.
function sandbox.start()
  if not installed(JAR) then
    error("zklua --sandbox needs Debian's zookeeper package and a Java runtime: " ..
          "apt-get install zookeeper default-jre-headless", 0)
  end
  local server = testing.server()
  return setmetatable({ server = server, hosts = server.hosts, pid = server:node(1).pid },
                      sandbox)
end

--- Stops the server by its PID and removes its files.
function sandbox:stop()
  if self.server then
    self.server:stop()
    self.server = nil
  end
end

return sandbox
