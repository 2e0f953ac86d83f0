--- spec/support/java.lua — Java test programs (Curator 5.4 from Debian) as child processes.
--
--   local java = require "support.java"
--   local p = java.start("CuratorMutex", server.hosts, "/locks/a", 4000)
--   p:expect("^ready$")                   -- waits (running the zklua event loops) for a line
--   p:send("acquire"); p:expect("^acquired$", 30)
--   p:kill()                               -- SIGKILL by PID (a fault)
--   p:stop()                               -- "quit", then SIGKILL by PID if it has not exited
--   java.start_with({ properties = { ["zookeeper.client.secure"] = "true" }, jars = java.NETTY },
--                   "CuratorSecureClient", ...) -- with JVM system properties and more jars
--
-- java.start compiles the named program, spec/fixtures/java/<Name>.java (with Fixture.java,
-- the line protocol every program shares), with javac against the Debian jars in
-- /usr/share/java, once per Lua process, then starts it as a child
-- (spec/fixtures/child.lua) stopped by PID, never by name.  Commands go in on its stdin, a
-- FIFO that this process keeps open for reading and writing (so a write never blocks on an
-- absent reader, nor raises SIGPIPE once the program has exited); events come out on its
-- stdout, read line by line in order: expect() consumes lines up to the one it waits for.
-- A program exits by itself within a second once this process is gone (Fixture.java).
-- Classes go to build/java/<name>-<hash of the sources>, compiled in a directory of their
-- own and renamed into place whole: suites running side by side (make test runs Lua 5.4 and
-- LuaJIT at once) never load a class file another javac is writing.
local child = require "fixtures.child"
local compat = require "zklua.compat"

local java = {}

--- The jars the programs compile and run against: Curator (framework, recipes, discovery) and
--- what they need (Debian's libcurator-*-java, libzookeeper-java, guava, slf4j, jackson).
java.JARS = { "curator-client", "curator-framework", "curator-recipes", "curator-x-discovery",
              "zookeeper", "zookeeper-jute", "guava", "slf4j-api", "slf4j-nop",
              "jackson-databind", "jackson-core", "jackson-annotations" }

--- Netty, which the ZooKeeper client's TLS socket (ClientCnxnSocketNetty) needs (Debian's
--- libnetty-java), for start_with's jars.
java.NETTY = { "netty-buffer", "netty-codec", "netty-common", "netty-handler", "netty-resolver",
               "netty-transport", "netty-transport-native-epoll",
               "netty-transport-native-unix-common" }

local SOURCES = "spec/fixtures/java"
local CLASSES = "build/java"
local JVM_OPTS = { "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto" }

local OWNER_PID = assert(io.open("/proc/self/stat", "r"):read("*l"):match("^%d+"))

local function classpath(more)
  local parts = {}
  for _, list in ipairs({ java.JARS, more or {} }) do
    for _, jar in ipairs(list) do parts[#parts + 1] = "/usr/share/java/" .. jar .. ".jar" end
  end
  return table.concat(parts, ":")
end

local function check_name(name)
  if type(name) ~= "string" or not name:match("^%u%w*$") then
    error("java: a program name is a Java class name (got " .. tostring(name) .. ")", 3)
  end
end

local compiled = {} -- name -> its classes directory

local function command_output(cmd)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("a")
  pipe:close()
  return out
end

--- Compiles spec/fixtures/java/<name>.java (and what it uses) once per process; returns the
--- directory of its classes.  Raises with javac's messages when it fails.
function java.compile(name)
  check_name(name)
  if compiled[name] then return compiled[name] end
  local src = SOURCES .. "/" .. name .. ".java"
  assert(io.open(src, "r"), "java: no program " .. src):close()
  local hash = command_output("cat " .. SOURCES .. "/*.java | sha1sum"):match("^%x+")
  local dir = CLASSES .. "/" .. name .. "-" .. assert(hash, "java: sha1sum failed")
  if not compat.execute("test -d " .. child.quote(dir)) then
    local tmp = command_output("mkdir -p " .. CLASSES .. " && mktemp -d " .. CLASSES ..
                               "/tmp.XXXXXX"):gsub("%s+$", "")
    assert(tmp ~= "", "java: mktemp failed")
    local log = os.tmpname()
    local ok = compat.execute(string.format("javac -nowarn -d %s -cp %s -sourcepath %s %s > %s 2>&1",
      child.quote(tmp), child.quote(classpath()), SOURCES, child.quote(src), child.quote(log)))
    local out = child.read_file(log) or ""
    os.remove(log)
    if not ok then
      os.execute("rm -rf " .. child.quote(tmp))
      error("java: javac " .. src .. " failed:\n" .. out, 2)
    end
    -- mv -T renames the whole directory, or fails when another process put it there first
    if not compat.execute("mv -T " .. child.quote(tmp) .. " " .. child.quote(dir) .. " 2>/dev/null") then
      os.execute("rm -rf " .. child.quote(tmp))
    end
  end
  compiled[name] = dir
  return dir
end

local Program = {}
Program.__index = Program

--- Compiles (once) and starts program name with args (converted with tostring; the owner PID
--- goes first); returns it once it printed "ready" (its stdin is open).
function java.start(name, ...)
  return java.start_with({}, name, ...)
end

--- java.start with opts.properties ({name = value}: -Dname=value on the JVM's command line)
--- and opts.jars (more jars of /usr/share/java on its class path, e.g. java.NETTY).
function java.start_with(opts, name, ...)
  local classes = java.compile(name)
  local fifo = os.tmpname()
  os.remove(fifo)
  assert(compat.execute("mkfifo -m 600 " .. child.quote(fifo)), "java: mkfifo failed")
  -- read+write: opening a FIFO so never blocks, and a later write never meets "no reader"
  local input = assert(io.open(fifo, "r+"))
  local argv = { "sh", "-c", 'exec "$@" 0<>"$0"', fifo, "java" }
  for _, o in ipairs(JVM_OPTS) do argv[#argv + 1] = o end
  local properties = {}
  for key, value in pairs(opts.properties or {}) do
    properties[#properties + 1] = "-D" .. key .. "=" .. tostring(value)
  end
  table.sort(properties)
  for _, p in ipairs(properties) do argv[#argv + 1] = p end
  argv[#argv + 1] = "-cp"
  argv[#argv + 1] = classes .. ":" .. classpath(opts.jars)
  argv[#argv + 1] = name
  argv[#argv + 1] = OWNER_PID
  for i = 1, select("#", ...) do argv[#argv + 1] = tostring((select(i, ...))) end
  local self = setmetatable({ name = name, fifo = fifo, input = input, seen = 0,
                              kid = child.spawn(argv) }, Program)
  self:expect("^ready$", 60)
  return self
end

--- Sends one command line.
function Program:send(line)
  assert(not line:find("\n"), "java: a command is one line")
  self.input:write(line, "\n")
  self.input:flush()
end

-- The complete lines printed so far.
local function lines_of(self)
  local list = {}
  for line in self.kid:stdout():gmatch("([^\n]*)\n") do list[#list + 1] = line end
  return list
end

--- Waits (running the zklua event loops) for the next line matching pattern, consuming the
--- lines before it; returns the line and its captures.  Raises, with what the program printed,
--- when it exits or timeout seconds (default 30) pass first.
function Program:expect(pattern, timeout)
  local found
  child.poll_until(function()
    local list = lines_of(self)
    for i = self.seen + 1, #list do
      if list[i]:match(pattern) then
        found = i
        return true
      end
    end
    return self.kid:exited()
  end, timeout or 30)
  if not found then
    error(string.format("java %s: no line matching %q (%s); stdout:\n%s\nstderr:\n%s", self.name,
          pattern, self.kid:exited() and "it exited" or "timed out", self.kid:stdout(),
          self.kid:stderr()), 2)
  end
  self.seen = found
  local line = lines_of(self)[found]
  return line, line:match(pattern)
end

--- Whether a line matching pattern was printed after the last expected one (not consumed).
function Program:printed(pattern)
  local list = lines_of(self)
  for i = self.seen + 1, #list do
    if list[i]:match(pattern) then return true end
  end
  return false
end

--- Kills the program outright (SIGKILL, by PID): its session lives on until it expires.
function Program:kill()
  if not self.kid:exited() then
    local pid = self.kid:program_pid(0)
    if pid then os.execute("kill -KILL " .. pid .. " 2>/dev/null") end
    self.kid:wait_exit(10)
  end
end

--- Asks the program to quit, waits for it (10 s), else kills it; removes its files.  Safe to
--- call more than once.
function Program:stop()
  if self.input then
    if not self.kid:exited() then
      self:send("quit")
      self.kid:wait_exit(10)
    end
    self.input:close()
    self.input = nil
    os.remove(self.fifo)
  end
  self.kid:cleanup()
end

return java
