-- zklua, kazoo and Curator on one server with SASL DIGEST-MD5 over TLS (zklua.testing's tls
-- and sasl options together): zklua with use_ssl and sasl_options, kazoo (Debian's
-- python3-kazoo, spec/fixtures/kazoo_tls_sasl.py) with the same, and a Curator 5.4 program
-- (spec/fixtures/java/CuratorSecureClient.java) whose JVM has the ZooKeeper client's TLS
-- settings (zookeeper.client.secure, its Netty socket, PEM trust and key stores) and a JAAS
-- Client section.  A node each one creates with a sasl: ACL is read by the other two holding
-- the same identity and refused (NoAuthError, nothing changed) to all three holding another;
-- and one lock under such a node is held in turn by the three, one at a time.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local java = require "support.java"
local child = require "fixtures.child"
local errors = zklua.errors
local security = zklua.security

local raises = helpers.raises

local USERS = { bob = "bob-secret", alice = "alice-secret" }

if not core.zookeeper.tls_sasl then
  describe("TLS + SASL interop", function()
    pending("needs a ZooKeeper C client with zookeeper_init_ssl_sasl (make: ZK_CLIENT=source)")
  end)
  return
end

describe("zklua, kazoo and Curator with SASL over TLS", function()
  local server, files
  local clients, programs = {}, {}
  local kids = helpers.kids()
  local LOCK = "/interop/bobs/lock"

  local write = child.write_file
  local function read(path) return assert(child.read_file(path), "cannot read " .. path) end

  -- zklua as user
  local function zk_as(user)
    local o = server:tls_options()
    o.hosts, o.timeout = server.secure_hosts, 10
    o.sasl_options = { mechanism = "DIGEST-MD5", username = user, password = USERS[user] }
    local zk = zklua.client(o)
    zk:start()
    clients[#clients + 1] = zk
    return zk
  end

  -- kazoo as user, running actions; its lines
  local function kazoo(user, ...)
    local args = { helpers.PYTHON, "spec/fixtures/kazoo_tls_sasl.py", server.secure_hosts,
                   files.ca, files.certfile, files.keyfile, user, USERS[user], ... }
    for i, arg in ipairs(args) do args[i] = "'" .. arg:gsub("'", "'\\''") .. "'" end
    local out, err, code = helpers.run(table.concat(args, " "), 90)
    assert.are.equal(0, code, "kazoo_tls_sasl.py failed: " .. out .. err)
    return (out:gsub("%s+$", ""))
  end

  -- the Curator program as user: TLS and SASL are its JVM's settings
  local function curator(user)
    local jaas = files.dir .. "/jaas-client-" .. user .. ".conf"
    write(jaas, string.format('Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule ' ..
                              'required\n  username="%s"\n  password="%s";\n};\n', user, USERS[user]))
    local p = java.start_with({ jars = java.NETTY, properties = {
      ["zookeeper.client.secure"] = "true",
      ["zookeeper.clientCnxnSocket"] = "org.apache.zookeeper.ClientCnxnSocketNetty",
      ["zookeeper.ssl.trustStore.location"] = files.ca,
      ["zookeeper.ssl.trustStore.type"] = "PEM",
      ["zookeeper.ssl.keyStore.location"] = files.dir .. "/client-keystore.pem",
      ["zookeeper.ssl.keyStore.type"] = "PEM",
      ["java.security.auth.login.config"] = jaas,
    } }, "CuratorSecureClient", server.secure_hosts, 30000, LOCK)
    programs[#programs + 1] = p
    return p
  end

  -- one command to the Curator program p, and the line it answers (its connection states,
  -- printed when they come, are not answers)
  local function ask(p, line)
    p:send(line)
    while true do
      local answer = p:expect("^%S", 60)
      if not answer:find("^state ") then return answer end
    end
  end

  setup(function()
    server = testing.server({ tls = true, sasl = { users = USERS } })
    files = server.tls.files
    -- Java's PEM key store: the client's key (PKCS#8) and certificate in one file
    write(files.dir .. "/client-keystore.pem", read(files.keyfile) .. read(files.certfile))
    local admin = zk_as("bob")
    admin:ensure_path("/interop")
    local bobs = { security.make_acl("sasl", "bob", { all = true }) }
    admin:create("/interop/bobs", "", { acl = bobs })
    admin:create(LOCK, "", { acl = bobs })
    admin:close()
  end)
  teardown(function() if server then server:stop() end end)
  after_each(function()
    for _, p in ipairs(programs) do p:stop() end
    for _, c in ipairs(clients) do pcall(c.close, c) end
    kids:cleanup()
    programs, clients = {}, {}
  end)

  it("a node one creates with a sasl: ACL: read by the others as the same user, refused to another", function()
    local bob, alice = zk_as("bob"), zk_as("alice")
    local cb, ca = curator("bob"), curator("alice")
    -- each creates a node only bob may use
    bob:create("/interop/by-zklua", "zklua's", { acl = { security.make_acl("sasl", "bob", { all = true }) } })
    assert.are.equal("created", kazoo("bob", "create", "/interop/by-kazoo", "kazoo's", "bob"))
    assert.are.equal("created", ask(cb, "create /interop/by-curator curator's bob"))
    for _, who in ipairs({ "zklua", "kazoo", "curator" }) do
      local path = "/interop/by-" .. who
      local value = who .. "'s"
      -- bob, through each client
      assert.are.equal(value, (bob:get(path)))
      assert.are.equal("data " .. value, kazoo("bob", "get", path))
      assert.are.equal("data " .. value, ask(cb, "get " .. path))
      -- alice, through each: refused to read and to write
      raises(errors.NoAuthError, alice.get, alice, path)
      raises(errors.NoAuthError, alice.set, alice, path, "alice's")
      assert.are.equal("NoAuthError\nNoAuthError", kazoo("alice", "get", path, "set", path, "alice's"))
      assert.are.equal("NoAuth", ask(ca, "get " .. path))
      assert.are.equal("NoAuth", ask(ca, "set " .. path .. " alice's"))
      -- nothing changed
      local data, stat = bob:get(path)
      assert.are.equal(value, data)
      assert.are.equal(0, stat.version)
      local acl = bob:get_acls(path)
      assert.are.equal(1, #acl)
      assert.are.equal("sasl", acl[1].id.scheme)
      assert.are.equal("bob", acl[1].id.id)
    end
  end)

  it("one lock under bob's node, held in turn by zklua, kazoo and Curator, one at a time", function()
    local bob = zk_as("bob")
    local cb = curator("bob")
    local GO = "/interop/bobs/kazoo-may-release"
    -- kazoo's layout; Curator's InterProcessMutex nodes count as contenders too
    local lock = bob:Lock(LOCK, "zklua", { extra_lock_patterns = { "-lock-" } })
    assert.is_true(lock:acquire())
    local function contenders() return #bob:get_children(LOCK) end
    -- kazoo, then Curator, queue behind zklua
    local kz = kids:kazoo("spec/fixtures/kazoo_tls_sasl.py", server.secure_hosts, files.ca,
                          files.certfile, files.keyfile, "bob", USERS.bob, "lock", LOCK, GO)
    testing.wait_for(function() return contenders() == 2 end, 60, "kazoo's contender")
    cb:send("acquire")
    testing.wait_for(function() return contenders() == 3 end, 60, "Curator's contender")
    -- in order: the holder first (Curator's node holds its host's address)
    local queue = lock:contenders()
    assert.are.same({ "zklua", "kazoo" }, { queue[1], queue[2] })
    assert.matches("^%d+%.%d+%.%d+%.%d+$", queue[3])
    -- one holder at a time, in the order they came
    lock:release()
    kz:wait_line("^acquired$", 60)
    assert.is_false(cb:printed("^acquired$"))
    assert.is_false(bob:Lock(LOCK, "probe", { extra_lock_patterns = { "-lock-" } }):acquire(false))
    bob:create(GO, "")
    kz:wait_line("^released$", 60)
    cb:expect("^acquired$", 60)
    assert.is_false(bob:Lock(LOCK, "probe", { extra_lock_patterns = { "-lock-" } }):acquire(false))
    assert.are.equal(1, contenders())
    assert.are.equal("released", ask(cb, "release"))
    assert.is_true(lock:acquire(true, 30))
    assert.are.equal(1, contenders())
    lock:release()
    assert.is_true(kz:wait_exit(30))
    -- alice may not even contend: the lock's node is bob's
    local alice = zk_as("alice")
    raises(errors.NoAuthError, function()
      alice:Lock(LOCK, "alice", { extra_lock_patterns = { "-lock-" } }):acquire(false)
    end)
  end)
end)
