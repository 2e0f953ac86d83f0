--- zklua.testing.kdc — a throwaway MIT Kerberos KDC on loopback, for SASL GSSAPI tests.
--
--   local kdc = require("zklua.testing").kdc()   -- realm ZKLUA.TEST, started and ready
--   local keytab = kdc:add_principal("bob")      -- bob@ZKLUA.TEST, its keys in a keytab
--   kdc.krb5_conf, kdc.realm, kdc:principal("bob") -- "bob@ZKLUA.TEST"
--   kdc:env(keytab)    -- {KRB5_CONFIG = ..., KRB5_CLIENT_KTNAME = keytab, KRB5CCNAME = ...}
--   kdc:use(keytab)    -- the same set in this process's environment (its clients' credentials)
--   kdc:env_prefix(keytab) -- the same as "NAME='value' ..." for a shell command
--   kdc:stop(); kdc:start()                      -- "KDC down", and back
--   kdc:pause(); kdc:resume()  -- SIGSTOP/SIGCONT by its PID (kdc.pid): accepts, never answers
--   kdc:close()                                  -- stopped by PID, its temp dir removed
--
-- Debian's krb5-kdc (krb5kdc, kdb5_util) and krb5-admin-server (kadmin.local), each run with
-- KRB5_CONFIG and KRB5_KDC_PROFILE naming the files of its own temp dir: the machine's
-- /etc/krb5.conf and /etc/krb5kdc are never read nor written.  The KDC listens on a free
-- loopback port (UDP and TCP).  Its krb5.conf turns host name canonicalisation off
-- (dns_canonicalize_hostname, rdns): a client connecting to 127.0.0.1 asks for the service
-- principal zookeeper/127.0.0.1@ZKLUA.TEST, the one zklua.testing's servers hold.  Keys are
-- AES with SHA-1 (what Java's Krb5LoginModule and MIT share everywhere).  The process is
-- stopped by its PID; a watchdog kills it once the process that started it is gone.
local kdc = {}

local KDC = {}
KDC.__index = KDC

local REALM = "ZKLUA.TEST"
local ENCTYPES = "aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- Runs a shell command; raises with its output when it fails.
local function check_run(cmd, what)
  local pipe = assert(io.popen(cmd .. " 2>&1; echo \"rc=$?\"", "r"))
  local out = pipe:read("*a")
  pipe:close()
  if not out:match("rc=0%s*$") then error((what or cmd) .. " failed:\n" .. out, 3) end
  return (out:gsub("rc=0%s*$", ""))
end

-- The environment prefix that points MIT's tools at this KDC's files only.
function KDC:_prefix()
  return "KRB5_CONFIG=" .. shell_quote(self.krb5_conf) .. " KRB5_KDC_PROFILE=" ..
         shell_quote(self.kdc_conf) .. " "
end

--- The full name of a principal: "bob" -> "bob@ZKLUA.TEST".
function KDC:principal(name)
  return name:find("@", 1, true) and name or name .. "@" .. self.realm
end

-- kadmin.local, on this KDC's database; raises unless its output has expected (kadmin.local
-- exits with 0 whatever its query did).
function KDC:_kadmin(query, expected)
  local out = check_run(self:_prefix() .. "kadmin.local -r " .. self.realm .. " -q " ..
                        shell_quote(query), "kadmin.local " .. query)
  if not out:find(expected, 1, true) then
    error("kadmin.local " .. query .. " failed:\n" .. out, 2)
  end
  return out
end

--- Adds a principal with a random key (name: "bob", "zookeeper/127.0.0.1", or with its
-- realm) and exports its keys to a keytab of its own; returns the keytab's path.  A name
-- added before gets its keytab again (the keys are not changed).
function KDC:add_principal(name)
  assert(type(name) == "string" and name:match("^[%w%-_%./]+$"),
         "add_principal: a name of letters, digits, '-', '_', '.', '/'")
  local full = self:principal(name)
  local keytab = self.dir .. "/" .. name:gsub("/", "_") .. ".keytab"
  if not self.principals[full] then
    self:_kadmin("addprinc -randkey " .. full, "created")
    self.principals[full] = true
  end
  self:_kadmin("ktadd -norandkey -k " .. keytab .. " " .. full, "added to keytab")
  return keytab
end

--- Deletes a principal from the KDC (its keytabs stay: keys the KDC no longer knows).
function KDC:delete_principal(name)
  local full = self:principal(name)
  self:_kadmin("delprinc -force " .. full, "deleted")
  self.principals[full] = nil
end

--- The environment a client process needs to authenticate as the principal of keytab:
-- {KRB5_CONFIG, KRB5_CLIENT_KTNAME = keytab, KRB5CCNAME = a ticket cache of its own}.
-- MIT's GSSAPI gets the tickets from the keytab by itself, at the first connection.
function KDC:env(keytab)
  self.caches = self.caches + 1
  local env = { KRB5_CONFIG = self.krb5_conf,
                KRB5CCNAME = "FILE:" .. self.dir .. "/ccache." .. self.caches }
  if keytab then env.KRB5_CLIENT_KTNAME = keytab end
  return env
end

--- Sets env(keytab) in this process's environment (as `export` would in a shell), so the
-- clients it starts from now on authenticate as the keytab's principal.  Once per process:
-- MIT Kerberos reads these at every connection, also a client's reconnections.
function KDC:use(keytab)
  local core = require "zklua.core"
  local env = self:env(keytab)
  for name, value in pairs(env) do core.setenv(name, value) end
  return env
end

--- The same as a shell prefix: "KRB5_CONFIG='...' KRB5CCNAME='...' ... ".
function KDC:env_prefix(keytab)
  local env, names, parts = self:env(keytab), {}, {}
  for name in pairs(env) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do parts[#parts + 1] = name .. "=" .. shell_quote(env[name]) end
  return table.concat(parts, " ") .. " "
end

--- Starts krb5kdc (unless running) and waits until its port accepts connections.
function KDC:start(timeout)
  if self.pid and self.util.pid_alive(self.pid) then return self end
  local util = self.util
  local cmd = "exec env " .. self:_prefix() .. "krb5kdc -n -r " .. self.realm .. " >> " ..
              shell_quote(self.dir .. "/krb5kdc.out") .. " 2>&1 </dev/null"
  local out = util.read_command("sh -c " .. shell_quote(util.start_watched(cmd, self.dir)))
  self.pid = tonumber(out:match("%d+"))
  assert(self.pid, "could not start krb5kdc: " .. out)
  local core = require "zklua.core"
  local deadline = core.monotonic() + (timeout or 30)
  while not util.port_open(self.port) do
    if not util.pid_alive(self.pid) then
      error("krb5kdc exited; see " .. self.dir .. "/kdc.log and krb5kdc.out")
    end
    if core.monotonic() > deadline then error("krb5kdc not listening after " .. (timeout or 30) .. " s") end
    core.sleep(0.02)
  end
  return self
end

--- Stops krb5kdc by its PID and waits for it to exit (the database stays: start() again).
function KDC:stop()
  local pid = self.pid
  if not pid then return end
  local util = self.util
  util.run("kill -TERM " .. pid .. " 2>/dev/null; kill -CONT " .. pid .. " 2>/dev/null")
  local core = require "zklua.core"
  local deadline = core.monotonic() + 10
  while util.pid_alive(pid) and core.monotonic() < deadline do core.sleep(0.02) end
  if util.pid_alive(pid) then
    util.run("kill -KILL " .. pid .. " 2>/dev/null")
    while util.pid_alive(pid) do core.sleep(0.02) end
  end
  self.pid = nil
end

--- Freezes krb5kdc (SIGSTOP by its PID): the kernel still accepts its connections and
-- queues the requests, nothing answers them, until resume().
function KDC:pause()
  assert(self.pid, "the KDC is not running")
  self.util.run("kill -STOP " .. self.pid)
end

--- Lets a paused krb5kdc run again (SIGCONT): it answers the requests queued meanwhile.
function KDC:resume()
  assert(self.pid, "the KDC is not running")
  self.util.run("kill -CONT " .. self.pid)
end

--- The TCP connections to the KDC's port, as /proc/net/tcp shows them (the krb5.conf here
-- makes MIT use TCP): a list of { peer = the client's port, state = "01" (established) or
-- "08" (the client closed it, the KDC has not), unread = bytes the KDC has not read }.
function KDC:connections()
  local wanted = string.format("%04X", self.port)
  local list = {}
  local f = io.open("/proc/net/tcp")
  for line in (f and f:lines() or function() end) do
    local port, peer, st, rx = line:match(
      "^%s*%d+:%s+0100007F:(%x+)%s+%x+:(%x+)%s+(%x+)%s+%x+:(%x+)")
    if port == wanted and st ~= "0A" then -- not the listening socket
      list[#list + 1] = { peer = tonumber(peer, 16), state = st, unread = tonumber(rx, 16) }
    end
  end
  if f then f:close() end
  return list
end

--- Whether a request waits unanswered at the KDC (an established connection with bytes it
-- has not read): with the KDC paused, proof that a client asked it.
function KDC:request_waiting()
  for _, c in ipairs(self:connections()) do
    if c.state == "01" and c.unread > 0 then return true end
  end
  return false
end

--- Stops the KDC and removes its temp dir.
function KDC:close()
  self:stop()
  if self.dir and not os.getenv("ZKLUA_KEEP_SERVER_DIRS") then
    self.util.run("rm -rf " .. shell_quote(self.dir))
  end
  self.dir = nil
end

local function krb5_conf(realm, port)
  return table.concat({
    "[libdefaults]",
    "  default_realm = " .. realm,
    "  dns_lookup_kdc = false",
    "  dns_lookup_realm = false",
    "  dns_canonicalize_hostname = false",
    "  rdns = false",
    "  ignore_acceptor_hostname = true",
    "  udp_preference_limit = 1",
    "  default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96",
    "  default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96",
    "  permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96",
    "[realms]",
    "  " .. realm .. " = {",
    "    kdc = 127.0.0.1:" .. port,
    "  }",
    "[domain_realm]",
    "  127.0.0.1 = " .. realm,
    "  localhost = " .. realm,
    "",
  }, "\n")
end

local function kdc_conf(realm, dir, port)
  return table.concat({
    "[kdcdefaults]",
    "  kdc_listen = 127.0.0.1:" .. port,
    "  kdc_tcp_listen = 127.0.0.1:" .. port,
    "[realms]",
    "  " .. realm .. " = {",
    "    database_name = " .. dir .. "/principal",
    "    key_stash_file = " .. dir .. "/stash",
    "    acl_file = " .. dir .. "/kadm5.acl",
    "    supported_enctypes = " .. ENCTYPES,
    "    max_life = 1h",
    "    max_renewable_life = 1d",
    "  }",
    "[logging]",
    "  kdc = FILE:" .. dir .. "/kdc.log",
    "",
  }, "\n")
end

--- A KDC in a new temp dir, its database made, started and ready.  util: zklua.testing's
-- process helpers (make_temp_dir, free_port, start_watched, run, read_command, pid_alive,
-- port_open).
function kdc.new(util, opts)
  opts = opts or {}
  local self = setmetatable({ util = util, realm = opts.realm or REALM, principals = {},
                              caches = 0 }, KDC)
  self.dir = util.make_temp_dir()
  self.port = util.free_port()
  self.krb5_conf = self.dir .. "/krb5.conf"
  self.kdc_conf = self.dir .. "/kdc.conf"
  write_file(self.krb5_conf, krb5_conf(self.realm, self.port))
  write_file(self.kdc_conf, kdc_conf(self.realm, self.dir, self.port))
  write_file(self.dir .. "/kadm5.acl", "")
  check_run(self:_prefix() .. "kdb5_util create -s -r " .. self.realm ..
            " -P zklua-test-master-key", "kdb5_util create")
  local guard = function() self:close() end
  self._guard = setmetatable({}, { __gc = guard })
  if _VERSION == "Lua 5.1" and newproxy then -- LuaJIT: tables have no __gc
    self._guard = newproxy(true)
    getmetatable(self._guard).__gc = guard
  end
  return self:start()
end

return kdc
