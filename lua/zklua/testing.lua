--- zklua.testing — real ZooKeeper servers for tests, as kazoo's testing harness gives them.
--
--   local testing = require "zklua.testing"
--   local server = testing.server()            -- standalone, on a free loopback port
--   local zk = zklua.client(server.hosts); zk:start()
--   testing.expire_session(zk)                 -- the server expires zk's session
--   server:stop()
--
--   local ens = testing.ensemble(3)            -- three nodes on loopback
--   ens:node(2):stop(); ens:node(2):start(); ens:leader():pause(); ...
--
--   local ens = testing.ensemble(3, { reconfig = true }) -- reconfigEnabled, and a superuser
--                                              -- "super" (password "test") who may reconfig
--   local ens = testing.ensemble(3, { partitionable = true }) -- peers talk through proxies:
--   ens:isolate(2); ...; ens:heal()            -- node 2 cut off from the others, and back
--   ens:cut(2, 1, { silent = true })           -- only the links between nodes 2 and 1
--
--   local tls = testing.server({ tls = true })  -- also a TLS port (secureClientPort, Netty)
--   local zk = zklua.client(merge({ hosts = tls.secure_hosts }, tls:tls_options()))
--                                              -- tls = {client_auth = "want", server_certificate
--                                              -- = "expired"}: see make_tls
--   local x = testing.server({ tls = { x509 = true } }) -- clientAuth need, and the server's
--                                              -- X509AuthenticationProvider names each client
--   local a = x:client_certificate("client-a") -- {certfile, keyfile, subject = "CN=client-a,
--                                              -- OU=zklua-test,O=zklua"}, signed by x's CA
--   local zk = zklua.client(merge({ hosts = x.secure_hosts }, x:tls_options(a)))
--   x:client_certificate("stranger", { unknown_ca = true }) -- signed by a CA x does not trust
--
--   local s = testing.server({ sasl = { users = { bob = "secret" } } }) -- SASL DIGEST-MD5
--   local zk = zklua.client{ hosts = s.hosts, sasl_options = { mechanism = "DIGEST-MD5",
--                            username = "bob", password = "secret" } }
--
--   local kdc = testing.kdc()                  -- a throwaway MIT KDC (zklua.testing.kdc)
--   local k = testing.server({ sasl = { kerberos = kdc } }) -- SASL GSSAPI: Krb5LoginModule,
--                                              -- zookeeper/127.0.0.1@ZKLUA.TEST from kdc;
--                                              -- remove_realm = true, remove_host = true: the
--                                              -- server's kerberos.remove*FromPrincipal
--
--   local p = testing.proxy(server:node(1))    -- network faults on command, no timing race:
--   local zk = zklua.client(p.hosts)           -- p:silence("down"), p:cut_reply("delete"),
--                                              -- p:drop(), p:resume() (zklua.testing.proxy)
--
-- Servers run Debian's `zookeeper` package under java, each in a temp dir with free ports and
-- a short tickTime (200 ms: sessions may be as short as 0.4 s, so expiry tests are fast),
-- TTL nodes enabled (extendedTypesEnabled) and empty containers and expired TTL nodes
-- deleted within a second (znode.container.checkIntervalMs = 500).
-- A node is ready when `srvr` reports its mode.  Every process is stopped by its PID, never by
-- name; a cluster left running is stopped when it is garbage collected or the Lua state closes.
-- A process killed outright (SIGKILL: no finalizer runs) leaves nothing either: a watchdog
-- shell per server checks every second that the process that started it lives, and once it
-- is gone kills the server by its PID and removes its temp dir.
local core = require "zklua.core"
local blocking = require "zklua.handlers.blocking"

local testing = {}

-- netty-codec: the Netty connection factory (the tls option) needs it; Debian's zookeeper.jar
-- does not name it in its class path.
local CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar"
-- znode.container.checkIntervalMs: the server looks for empty containers and expired TTL
-- nodes every half second (not every minute), so a test waits for their deletion briefly.
local JAVA_OPTS = "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto " ..
  "-Dznode.container.checkIntervalMs=500"
-- ZKLUA_SERVER_LOG=1: each server logs (INFO) to its server.log, for a failure's post-mortem
-- (with ZKLUA_KEEP_SERVER_DIRS=1 to keep it); by default the servers log nothing.
if os.getenv("ZKLUA_SERVER_LOG") then
  CLASSPATH = CLASSPATH .. ":/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar"
  JAVA_OPTS = JAVA_OPTS .. " -Dorg.slf4j.simpleLogger.showDateTime=true" ..
    " -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"
end
local MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function run(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local function read_command(cmd)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("*a")
  pipe:close()
  return out
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function make_temp_dir()
  local dir = read_command("mktemp -d /tmp/zklua-zk.XXXXXX"):gsub("%s+$", "")
  assert(dir ~= "", "mktemp failed")
  return dir
end

local function pid_alive(pid)
  return run("kill -0 " .. pid .. " 2>/dev/null")
end

-- This process: the servers it starts must not outlive it.
local OWNER_PID = assert(io.open("/proc/self/stat", "r"):read("*l"):match("^%d+"))

-- Shell code that starts `command` in the background, prints its PID and leaves a watchdog
-- behind: once this process is gone (and the server still runs) it kills the server by its PID
-- and removes dir (unless ZKLUA_KEEP_SERVER_DIRS is set).  The watchdog gets the dir through
-- its environment: no process but the server names the server's files on its command line.
local WATCHDOG = -- a zombie (killed, not yet reaped by its parent) counts as gone
  'alive() { s=$(cut -d")" -f2 "/proc/$1/stat" 2>/dev/null | cut -c2); ' ..
  '[ -n "$s" ] && [ "$s" != Z ]; }; ' ..
  'while alive "$0" && alive "$1"; do sleep 1; done; ' ..
  'if ! alive "$0" && alive "$1"; then ' ..
  'kill -9 "$1"; sleep 1; [ -n "$ZKLUA_WATCHDOG_DIR" ] && rm -rf "$ZKLUA_WATCHDOG_DIR"; fi'

local function start_watched(command, dir)
  local cleanup = os.getenv("ZKLUA_KEEP_SERVER_DIRS") and "" or dir
  return command .. " & pid=$!; echo $pid; ZKLUA_WATCHDOG_DIR=" .. shell_quote(cleanup) ..
    " sh -c " .. shell_quote(WATCHDOG) .. " " .. OWNER_PID .. " $pid </dev/null >/dev/null 2>&1 &"
end

--- Sleeps while running every client's event loop.
local function sleep(seconds)
  blocking.sleep(seconds)
end

--- Waits (running event loops) until pred() is true; raises after timeout seconds.
-- pred is checked after every event and at least every 50 ms, so it may ask a server.
function testing.wait_for(pred, timeout, what)
  timeout = timeout or 10
  local deadline = core.monotonic() + timeout
  while not blocking.wait(pred, math.min(0.05, math.max(deadline - core.monotonic(), 0))) do
    if core.monotonic() >= deadline then
      error("timed out after " .. timeout .. " s waiting for " .. (what or "a condition"), 2)
    end
  end
end

-- ---------------------------------------------------------------- one server process

local Node = {}
Node.__index = Node

function Node:_config()
  local c = self.cluster
  local lines = {
    "tickTime=" .. c.tick_time,
    -- a restarted follower has 10 s to sync (initLimit 10 ticks, 2 s, was too short on a
    -- loaded machine: it failed to rejoin again and again); syncLimit stays 1 s: the
    -- partition specs rely on a follower without a leader dropping its clients that soon
    "initLimit=" .. math.ceil(10000 / c.tick_time),
    "syncLimit=5",
    "minSessionTimeout=" .. 2 * c.tick_time,
    "maxSessionTimeout=60000",
    "dataDir=" .. self.dir .. "/data",
    "clientPort=" .. self.port,
    "clientPortAddress=127.0.0.1",
    "admin.enableServer=false",
    "4lw.commands.whitelist=*",
    "forceSync=no",
    "preAllocSize=1024",
    "snapCount=100000",
    "extendedTypesEnabled=true", -- TTL nodes (create's ttl option)
  }
  if c.reconfig then lines[#lines + 1] = "reconfigEnabled=true" end
  if c.tls then -- a TLS port beside the plain one (Netty serves both)
    local t = c.tls
    for _, line in ipairs({
      "secureClientPort=" .. self.secure_port,
      "secureClientPortAddress=127.0.0.1",
      "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
      "ssl.keyStore.location=" .. t.keystore, "ssl.keyStore.type=PEM",
      "ssl.trustStore.location=" .. t.files.ca, "ssl.trustStore.type=PEM",
      "ssl.clientAuth=" .. t.client_auth,
    }) do lines[#lines + 1] = line end
    if t.x509 then -- as ZooKeeper 3.8's admin guide sets up x509 client authentication
      lines[#lines + 1] = "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"
      lines[#lines + 1] = "ssl.authProvider=x509"
    end
  end
  if c.sasl then -- SASL: a client that authenticates has the sasl: identity of its user
    lines[#lines + 1] = "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
  end
  for _, line in ipairs(c.config or {}) do lines[#lines + 1] = line end
  if c.read_only then
    lines[#lines + 1] = "localSessionsEnabled=true"
    lines[#lines + 1] = "localSessionsUpgradingEnabled=true"
  end
  if #c.nodes > 1 or c.epoch then
    if #c.nodes == 1 then lines[#lines + 1] = "standaloneEnabled=false" end
    for _, n in ipairs(c.nodes) do
      local view = self.views and self.views[n.id] -- the other node, behind proxies
      lines[#lines + 1] = string.format("server.%d=127.0.0.1:%d:%d", n.id,
                                        view and view.peer.port or n.peer_port,
                                        view and view.election.port or n.election_port)
      if c.reconfig then -- the dynamic config's form: role and client address too
        lines[#lines] = lines[#lines] .. ":participant;127.0.0.1:" .. n.port
      end
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

--- Starts the process (if not running) and waits until it serves.
function Node:start(timeout)
  if self.pid and pid_alive(self.pid) then return self end
  run("mkdir -p " .. shell_quote(self.dir .. "/data/version-2"))
  write_file(self.dir .. "/data/myid", self.id .. "\n")
  local epoch = self.cluster.epoch
  if epoch and not self.started_once then
    -- the leader's epoch is the zxid's high 32 bits: start it past the one saved here
    write_file(self.dir .. "/data/version-2/acceptedEpoch", string.format("%d", epoch))
    write_file(self.dir .. "/data/version-2/currentEpoch", string.format("%d", epoch))
  end
  self.started_once = true
  write_file(self.dir .. "/zoo.cfg", self:_config())
  local props = self.cluster.read_only and "-Dreadonlymode.enabled=true " or ""
  if self.cluster.reconfig then -- the superuser reconfig needs: "super", password "test"
    props = props .. "-Dzookeeper.DigestAuthenticationProvider.superDigest=" ..
            core.digest_credential("super", "test") .. " "
  end
  -- A node looking for a leader re-sends its votes after a pause that doubles up to this
  -- bound (ZooKeeper's default: 60 s).  With the default, a node cut off for half a minute
  -- waited up to 51 s after the partition healed before it asked again, and rejoined up to
  -- a minute late; 5 ticks keep a healed or restarted node's return within about a second.
  props = props .. string.format("-Dzookeeper.fastleader.maxNotificationInterval=%d ",
                                 5 * self.cluster.tick_time)
  if self.cluster.sasl then
    props = props .. "-Djava.security.auth.login.config=" .. shell_quote(self.cluster.sasl.jaas) .. " "
    local kdc = self.cluster.sasl.kerberos
    if kdc then -- the KDC's krb5.conf (its realm), never the machine's
      props = props .. "-Djava.security.krb5.conf=" .. shell_quote(kdc.krb5_conf) .. " "
      for option, property in pairs({ remove_realm = "removeRealmFromPrincipal",
                                      remove_host = "removeHostFromPrincipal" }) do
        if self.cluster.sasl[option] then
          props = props .. "-Dzookeeper.kerberos." .. property .. "=true "
        end
      end
    end
  end
  local java_opts = JAVA_OPTS
  if self.cluster.heap then java_opts = java_opts:gsub("%-Xmx%S+", "-Xmx" .. self.cluster.heap) end
  local cmd = string.format("java %s %s-Dzookeeper.extendedTypesEnabled=true " ..
    "-Dzookeeper.jmx.log4j.disable=true -cp %s %s %s", java_opts, props, CLASSPATH, MAIN,
    shell_quote(self.dir .. "/zoo.cfg"))
  local out = read_command("sh -c " .. shell_quote(start_watched("exec " .. cmd .. " >> " ..
    shell_quote(self.dir .. "/server.log") .. " 2>&1 </dev/null", self.cluster.dir)))
  self.pid = tonumber(out:match("%d+"))
  assert(self.pid, "could not start java: " .. out)
  self.paused = false
  if self.cluster.wait_each ~= false then self:wait_ready(timeout) end
  return self
end

--- The server's mode ("standalone", "leader", "follower", "read-only") or nil.
function Node:mode()
  local answer = core.four_letter("127.0.0.1", self.port, "srvr", 1)
  return answer and answer:match("Mode: ([%w%-]+)")
end

-- A TLS node's secure port completes a handshake (openssl s_client with the cluster's client
-- certificate), or true at once without the tls option.  The server sets up TLS on its first
-- handshake: seconds on a cold JVM, which a test's connect timeout should not pay.
function Node:_tls_ready(deadline)
  local t = self.cluster.tls
  if not t then return true end
  local wait = math.max(1, math.ceil(deadline - core.monotonic()))
  return run(string.format("timeout %d openssl s_client -connect %s -CAfile %s -cert %s " ..
    "-key %s -brief </dev/null >/dev/null 2>&1", wait, self.secure_hosts,
    shell_quote(t.files.ca), shell_quote(t.files.certfile), shell_quote(t.files.keyfile)))
end

function Node:wait_ready(timeout)
  timeout = timeout or 60
  local deadline = core.monotonic() + timeout
  while core.monotonic() < deadline do
    local mode = self:mode()
    if mode and mode ~= "read-only" and self:_tls_ready(deadline) then return mode end
    if not pid_alive(self.pid) then
      error("ZooKeeper node " .. self.id .. " exited; see " .. self.dir .. "/server.log")
    end
    sleep(0.05)
  end
  error("ZooKeeper node " .. self.id .. " not ready after " .. timeout .. " s; see " ..
        self.dir .. "/server.log")
end

-- Stops node's process by its PID (SIGTERM, then SIGKILL after 10 s) and waits for it to exit;
-- nap(seconds) waits between looks (see stop_cluster for the finalizer's).
local function stop_node(node, nap)
  local pid = node.pid
  if not pid then return end
  if node.paused then run("kill -CONT " .. pid .. " 2>/dev/null") end
  run("kill -TERM " .. pid .. " 2>/dev/null")
  local deadline = core.monotonic() + 10
  while pid_alive(pid) and core.monotonic() < deadline do nap(0.02) end
  if pid_alive(pid) then
    run("kill -KILL " .. pid .. " 2>/dev/null")
    while pid_alive(pid) do core.sleep(0.02) end
  end
  node.pid, node.paused = nil, false
end

--- Stops the process by its PID (SIGTERM, then SIGKILL after 10 s) and waits for it to exit,
-- running the clients' event loops meanwhile.
function Node:stop()
  stop_node(self, sleep)
end

--- Kills the process at once (SIGKILL), as a crash would.
function Node:kill()
  local pid = self.pid
  if not pid then return end
  run("kill -KILL " .. pid .. " 2>/dev/null")
  while pid_alive(pid) do core.sleep(0.02) end
  self.pid, self.paused = nil, false
end

-- Whether every thread of pid is stopped (a SIGSTOP reaches a busy JVM's threads one by one).
local function all_threads_stopped(pid)
  local out = read_command("cat /proc/" .. pid .. "/task/*/stat 2>/dev/null")
  if out == "" then return true end -- gone
  for state in out:gmatch("%) (%a)") do
    if state ~= "T" and state ~= "t" then return false end
  end
  return true
end

--- Freezes the process (SIGSTOP): its sockets stay open but nothing answers.  Returns once
-- every thread has stopped, so nothing is answered after pause() returns.
function Node:pause()
  if self.pid then
    run("kill -STOP " .. self.pid)
    self.paused = true
    local deadline = core.monotonic() + 10
    while not all_threads_stopped(self.pid) and core.monotonic() < deadline do
      core.sleep(0.005)
    end
  end
end

function Node:resume()
  if self.pid then
    run("kill -CONT " .. self.pid)
    self.paused = false
  end
end

function Node:is_running()
  return self.pid ~= nil and pid_alive(self.pid)
end

-- ---------------------------------------------------------------- clusters

local Cluster = {}
Cluster.__index = Cluster

local function free_ports(count, taken)
  local ports = {}
  while #ports < count do
    local p = core.free_port()
    if not taken[p] then
      taken[p] = true
      ports[#ports + 1] = p
    end
  end
  return ports
end

-- Stops every node and proxy of cluster by PID and removes its temp dir; nap(seconds) waits
-- between looks at a process.  Cluster:stop naps with testing's sleep (the clients' event
-- loops run, so they see their server go); the guard, a finalizer, with core.sleep and
-- nothing else: a finalizer must not run the clients' event loops, whose sessions may have
-- been finalized already (the Lua state closing finalizes everything, in no order one can
-- rely on), and under LuaJIT it must not run a pairs() loop either: the Lua state closing
-- turns the JIT compiler off and finalizers run with trace recording disabled, and Debian's
-- LuaJIT (2.1-20230119) then spins for ever in a pairs() loop whose compiled trace exits at
-- its first instruction (it makes no progress without recording a side trace, a bug fixed
-- in later LuaJIT).  Hence the numeric loops here.
local function stop_cluster(cluster, nap)
  local nodes = cluster.nodes
  for i = 1, #nodes do stop_node(nodes[i], nap) end
  for i = 1, #nodes do
    local views = nodes[i].views -- partitionable: the proxies to node j, by j
    for j = 1, views and #nodes or 0 do
      local view = views[j]
      if view then
        view.peer:stop()
        view.election:stop()
      end
    end
  end
  if cluster.dir and not os.getenv("ZKLUA_KEEP_SERVER_DIRS") then
    run("rm -rf " .. shell_quote(cluster.dir))
  end
  cluster.dir = nil
end

-- The TLS files of a cluster started with the tls option (tls = true or {client_auth =
-- "need" (ZooKeeper's default) | "want" | "none", server_certificate = "expired" |
-- "self_signed"}: a server certificate a verifying client must refuse; x509 = true: client
-- certificates required and X509AuthenticationProvider named in the configuration, each
-- client's id its certificate's subject): a CA, the servers' PEM keystore, a client
-- certificate (zklua.testing.tls), in dir/tls.
local function make_tls(dir, opts)
  local tls_files = require "zklua.testing.tls"
  opts = type(opts) == "table" and opts or {}
  local files = tls_files.make(dir .. "/tls")
  local keystore = files.server
  if opts.server_certificate then
    local bad = assert(({ expired = { days = -1 }, self_signed = { self_signed = true } })
                       [opts.server_certificate], "tls.server_certificate: expired or self_signed")
    bad.hosts = "IP:127.0.0.1,DNS:localhost"
    local cert, key = tls_files.certificate(files, "server-" .. opts.server_certificate, bad)
    keystore = files.dir .. "/server-" .. opts.server_certificate .. "-keystore.pem"
    local out = assert(io.open(keystore, "w"))
    for _, path in ipairs({ key, cert }) do
      local f = assert(io.open(path, "r"))
      out:write(f:read("*a"))
      f:close()
    end
    out:close()
  end
  if opts.x509 and (opts.client_auth or "need") ~= "need" then
    error("tls.x509 needs client_auth \"need\" (got " .. tostring(opts.client_auth) .. ")", 3)
  end
  return { files = files, keystore = keystore, client_auth = opts.client_auth or "need",
           x509 = opts.x509 == true }
end

-- The JAAS file of a cluster started with the sasl option (sasl = {users = {name =
-- password, ...}}): ZooKeeper's DigestLoginModule, the server side of SASL DIGEST-MD5, with
-- those users.
local function write_jaas(path, users)
  local lines, names = { "Server {", "  org.apache.zookeeper.server.auth.DigestLoginModule required" },
                       {}
  for name in pairs(users) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    assert(tostring(name):match("^[%w_%-]+$") and not tostring(users[name]):find('["\\\n]'),
           "sasl users: names of letters, digits, _ and -; passwords without quotes")
    lines[#lines + 1] = string.format('  user_%s="%s"', name, users[name])
  end
  lines[#lines] = lines[#lines] .. ";"
  lines[#lines + 1] = "};"
  write_file(path, table.concat(lines, "\n") .. "\n")
end

-- The JAAS file of a cluster started with sasl = {kerberos = kdc}: Java's Krb5LoginModule, the
-- server side of SASL GSSAPI, with the service principal zookeeper/127.0.0.1 (the name a
-- client that connects to 127.0.0.1 asks its KDC for: the C client gives Cyrus SASL the
-- server's address as its host, kazoo the host of its hosts string) from a keytab that
-- kdc:add_principal exported.  The server never asks the KDC: it only decrypts tickets.
local function write_kerberos_jaas(path, kdc)
  local principal = kdc:principal("zookeeper/127.0.0.1")
  local keytab = kdc:add_principal("zookeeper/127.0.0.1")
  write_file(path, table.concat({
    "Server {",
    "  com.sun.security.auth.module.Krb5LoginModule required",
    "  isInitiator=false",
    "  useKeyTab=true",
    '  keyTab="' .. keytab .. '"',
    "  storeKey=true",
    "  useTicketCache=false",
    '  principal="' .. principal .. '";',
    "};",
    "",
  }, "\n"))
end

local function make_sasl(dir, opts)
  assert(type(opts) == "table" and (opts.users or opts.kerberos),
         "sasl = {users = {name = password}} or {kerberos = testing.kdc()}")
  local sasl = { jaas = dir .. "/jaas.conf", users = opts.users, kerberos = opts.kerberos,
                 remove_realm = opts.remove_realm, remove_host = opts.remove_host }
  if opts.kerberos then
    write_kerberos_jaas(sasl.jaas, opts.kerberos)
  else
    write_jaas(sasl.jaas, opts.users)
  end
  return sasl
end

local function new_cluster(size, opts)
  opts = opts or {}
  local dir = make_temp_dir()
  local cluster = setmetatable({ dir = dir, nodes = {}, tick_time = opts.tick_time or 200,
                                 read_only = opts.read_only == true, epoch = opts.epoch,
                                 reconfig = opts.reconfig == true, heap = opts.heap,
                                 config = opts.config },
                               Cluster)
  if opts.tls then cluster.tls = make_tls(dir, opts.tls) end
  if opts.sasl then cluster.sasl = make_sasl(dir, opts.sasl) end
  local taken = {}
  for i = 1, size do
    local ports = free_ports(cluster.tls and 4 or 3, taken)
    cluster.nodes[i] = setmetatable({ cluster = cluster, id = i, port = ports[1],
                                      peer_port = ports[2], election_port = ports[3],
                                      secure_port = ports[4],
                                      dir = dir .. "/node" .. i }, Node)
    cluster.nodes[i].hosts = "127.0.0.1:" .. ports[1]
    cluster.nodes[i].secure_hosts = ports[4] and "127.0.0.1:" .. ports[4]
  end
  if opts.partitionable and size > 1 then
    -- node i reaches node j (quorum and election ports) through proxies of its own, so that
    -- cutting the proxies between a node and the others partitions it (Cluster:isolate)
    local proxy = require "zklua.testing.proxy"
    for _, from in ipairs(cluster.nodes) do
      from.views = {}
      for _, to in ipairs(cluster.nodes) do
        if to ~= from then
          from.views[to.id] = { peer = proxy.new(to.peer_port, nil, taken),
                                election = proxy.new(to.election_port, nil, taken) }
        end
      end
    end
  end
  local hosts, secure = {}, {}
  for i, n in ipairs(cluster.nodes) do hosts[i], secure[i] = n.hosts, n.secure_hosts end
  cluster.hosts = table.concat(hosts, ",")
  if cluster.tls then cluster.secure_hosts = table.concat(secure, ",") end
  -- stop the processes if the test forgets to (or fails before it can); see stop_cluster
  local function finalize() stop_cluster(cluster, core.sleep) end
  cluster._guard = setmetatable({}, { __gc = finalize })
  if _VERSION == "Lua 5.1" and newproxy then -- LuaJIT: tables have no __gc
    cluster._guard = newproxy(true)
    getmetatable(cluster._guard).__gc = finalize
  end
  return cluster
end

--- Starts every node and waits until all of them serve.
function Cluster:start(timeout)
  if #self.nodes == 1 then
    self.nodes[1]:start(timeout)
    return self
  end
  -- a quorum forms only once enough nodes run: start all, then wait for each
  self.wait_each = false
  for _, n in ipairs(self.nodes) do n:start() end
  self.wait_each = nil
  for _, n in ipairs(self.nodes) do n:wait_ready(timeout) end
  return self
end

function Cluster:node(i)
  local node = assert(self.nodes[i], "no node " .. tostring(i))
  return node
end

--- The node that currently leads (an ensemble) or the single node.
function Cluster:leader()
  for _, n in ipairs(self.nodes) do
    local mode = n.pid and not n.paused and n:mode()
    if mode == "leader" or mode == "standalone" then return n end
  end
  return nil
end

--- A TLS cluster's client options (kazoo's names), to merge into zklua.client's:
-- {use_ssl = true, ca, certfile, keyfile} for the cluster's CA and its client certificate, or
-- the certificate cert ({certfile, keyfile}: Cluster:client_certificate's) when given.
function Cluster:tls_options(cert)
  local t = assert(self.tls, "this cluster was started without the tls option")
  cert = cert or t.files
  return { use_ssl = true, ca = t.files.ca, certfile = cert.certfile, keyfile = cert.keyfile }
end

--- Another client certificate for a TLS cluster, subject "/O=zklua/OU=zklua-test/CN=" .. name
-- (name: letters, digits, "-", "_", "."), signed by the cluster's CA, or with unknown_ca by a
-- CA of its own that the servers do not trust (made once per cluster).  Returns {certfile,
-- keyfile, subject}: subject as the server's X509AuthenticationProvider names the client
-- ("CN=name,OU=zklua-test,O=zklua"), the id of an x509 ACL for it.
function Cluster:client_certificate(name, opts)
  local t = assert(self.tls, "this cluster was started without the tls option")
  assert(type(name) == "string" and name:match("^[%w%-_%.]+$"),
         "client_certificate: name must be letters, digits, '-', '_', '.'")
  opts = opts or {}
  local tls_files = require "zklua.testing.tls"
  local files = t.files
  if opts.unknown_ca then
    t.unknown_ca = t.unknown_ca or tls_files.ca(t.files.dir .. "/unknown-ca")
    files = t.unknown_ca
  end
  -- in a directory of their own: a name never overwrites the CA's, the server's or the
  -- cluster's client files
  local into = { dir = files.dir .. "/clients", ca = files.ca, ca_key = files.ca_key }
  run("mkdir -p " .. shell_quote(into.dir))
  local certfile, keyfile = tls_files.certificate(into, name,
                                                  { subject = "/O=zklua/OU=zklua-test/CN=" .. name })
  return { certfile = certfile, keyfile = keyfile, subject = tls_files.subject(certfile) }
end

--- kazoo's cluster.get_ssl_client_configuration(): the PEM texts of a TLS cluster's client
-- key and certificate and of its CA: {client_key, client_cert, ca_cert}.
function Cluster:ssl_client_configuration()
  local files = assert(self.tls, "this cluster was started without the tls option").files
  local function text(path)
    local f = assert(io.open(path, "rb"))
    local t = f:read("*a")
    f:close()
    return t
  end
  return { client_key = text(files.keyfile), client_cert = text(files.certfile),
           ca_cert = text(files.ca) }
end

--- A SASL cluster's users and passwords from now on (sasl = {users = ...}): the JAAS file
-- anew, read by each node at its next start (node:stop(), node:start()).
function Cluster:set_sasl_users(users)
  local sasl = assert(self.sasl, "this cluster was started without the sasl option")
  write_jaas(sasl.jaas, users)
  sasl.users = users
end

--- Hosts string with a chroot appended, e.g. cluster:hosts_with("/app").
function Cluster:hosts_with(chroot)
  return self.hosts .. chroot
end

-- Each proxy carrying traffic between node id and node other (both directions); other nil:
-- any other node; id nil: every proxy.
local function proxies_of(cluster, id, other)
  local list = {}
  for _, n in ipairs(cluster.nodes) do
    for to, view in pairs(n.views or {}) do
      local a, b = n.id, to
      if id == nil or ((a == id or b == id) and (other == nil or a == other or b == other)) then
        list[#list + 1] = view.peer
        list[#list + 1] = view.election
      end
    end
  end
  return list
end

-- Closes (and refuses from now on) or silences the links of proxies.
local function cut_links(list, silent)
  for _, p in ipairs(list) do p:refuse(true) end
  for _, p in ipairs(list) do
    if silent then p:silence("both") else p:drop() end
  end
end

--- Cuts node i off from the other nodes (an ensemble started with {partitionable = true}):
-- every connection between them is closed and every new one refused, or with
-- {silent = true} nothing is closed and nothing passes any more (as a cable pulled: the
-- nodes notice only by their timeouts).  Its clients still reach it.  Returns once the cut
-- took effect.
function Cluster:isolate(i, opts)
  assert(self.nodes[i] and self.nodes[i].views, "isolate: the ensemble is not partitionable")
  cut_links(proxies_of(self, i), opts and opts.silent)
end

--- Cuts the links between node i and node j only (both ways), closed or silenced as
-- isolate(): e.g. a follower cut from the leader that still reaches the other follower.
function Cluster:cut(i, j, opts)
  assert(self.nodes[i] and self.nodes[i].views and self.nodes[j] and i ~= j,
         "cut: two nodes of a partitionable ensemble are needed")
  cut_links(proxies_of(self, i, j), opts and opts.silent)
end

--- Ends every partition: the nodes reach each other again.
function Cluster:heal()
  for _, p in ipairs(proxies_of(self, nil)) do p:resume() end
end

--- Stops every node by PID and removes the temp dir.
function Cluster:stop()
  stop_cluster(self, sleep)
end

--- A standalone server on a free port, started and ready.  opts: tick_time (ms, 200),
-- read_only, epoch, reconfig, heap (the JVM's -Xmx, e.g. "2g"; default 256m: bench/scale.lua
-- gives a million-node tree more), config (more zoo.cfg lines, e.g. {"maxClientCnxns=0"}).
function testing.server(opts)
  return new_cluster(1, opts):start()
end

--- An ensemble of n nodes (default 3) on loopback, started and ready.
function testing.ensemble(n, opts)
  return new_cluster(n or 3, opts):start()
end

-- Attaches a second handle to the session: "taken" when it got the session (it then closes
-- it, which makes the server end the session), "expired" when the server answered that the
-- session is gone already, nil when neither came within wait seconds.
local function take_over_and_close(hosts, timeout_s, id, passwd, wait)
  local other = core.session(hosts, math.floor(timeout_s * 1000), false,
                             require("zklua.client")._session_hex(id), passwd)
  assert(other:start())
  local deadline = core.monotonic() + wait
  local seen
  while not seen and core.monotonic() < deadline do
    other:wait(0.05)
    local kind, state = other:next()
    while kind and not seen do
      if kind == "state" and state == "CONNECTED" then seen = "taken" end
      if kind == "state" and state == "LOST" then seen = "expired" end
      kind, state = other:next()
    end
  end
  other:stop()
  other:close()
  return seen
end

--- Makes the server expire zk's session and waits until zk has seen LOST.  Returns the
-- expired session's id.  Another handle takes the session over (the server drops zk's
-- connection) and closes it.  zk would reconnect at once and, when its reconnection reached
-- the server before that close was processed (a loaded server), win the session back and
-- make the close fail: a race lost again and again under load.  So zk's reconnection is
-- held meanwhile (session:hold_reconnection: its I/O thread waits at the drop), and the
-- takeovers go on until one hears from the server that the session is gone; then zk
-- reconnects and hears the same: LOST.  timeout (default 10 s) bounds the takeovers; LOST
-- then comes from the server's verdict, at the latest a session timeout later (a connection
-- down that long counts as LOST).  hosts (default: the hosts zk connects to) is where the
-- other handle connects: the server's own address when zk goes through a proxy that
-- refuses connections (testing.proxy).
function testing.expire_session(zk, timeout, hosts)
  timeout = timeout or 10
  hosts = hosts or zk._hosts
  local id, passwd = zk:client_id()
  assert(id, "expire_session: the client has no session")
  local lost = false
  local function on_state(state)
    if state == "LOST" then lost = true; return true end
  end
  zk:add_listener(on_state)
  local session = zk._session
  local deadline = core.monotonic() + timeout
  session:hold_reconnection(true)
  local ok, closed = pcall(function()
    while core.monotonic() < deadline do
      if take_over_and_close(hosts, zk:session_timeout(), id, passwd, 2) == "expired" then
        return true
      end
    end
    return false
  end)
  session:hold_reconnection(false)
  if ok and closed then
    zk.handler.wait(function() return lost end, -- a coroutine handler yields here
                    math.max(deadline - core.monotonic(), 0) + zk:session_timeout())
  end
  if not lost then
    zk:remove_listener(on_state)
    if not ok then error(closed, 0) end
    error("expire_session: the client did not see LOST within " .. timeout .. " s" ..
          (closed and " and a session timeout" or ""), 2)
  end
  return id
end

--- A throwaway MIT Kerberos KDC on loopback, started and ready (zklua.testing.kdc): for
-- testing.server{sasl = {kerberos = kdc}} and clients with sasl_options GSSAPI.
function testing.kdc(opts)
  local util = { make_temp_dir = make_temp_dir, free_port = core.free_port, run = run,
                 read_command = read_command, pid_alive = pid_alive,
                 start_watched = start_watched,
                 port_open = function(port)
                   return run("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" .. port .. "' 2>/dev/null")
                 end }
  return require("zklua.testing.kdc").new(util, opts)
end

--- A fault-injection proxy in front of a node (or a port): see zklua.testing.proxy.
function testing.proxy(target, host)
  return require("zklua.testing.proxy").new(target, host)
end

testing.sleep = sleep

return testing
