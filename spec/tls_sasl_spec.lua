-- SASL DIGEST-MD5 over TLS (use_ssl with sasl_options, kazoo's names) against a real server
-- with a secureClientPort and a JAAS DigestLoginModule (zklua.testing's tls and sasl options
-- together): the handshake, then the SASL exchange over it, at every connection
-- (zookeeper_init_ssl_sasl, zklua's patch to the C client).  The session has the user's sasl:
-- identity and keeps it across a server restart; a sasl: ACL refuses every other client
-- (NoAuthError, nothing changed); each fault is a named error within the start timeout: a
-- wrong password AuthFailedError, a TLS failure before SASL TimeoutError naming it.  Kerberos
-- (GSSAPI, against zklua.testing's throwaway KDC) goes over TLS the same way.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local tls_files = require "zklua.testing.tls"
local helpers = require "support.helpers"
local errors = zklua.errors
local security = zklua.security

local raises = helpers.raises

local USERS = { bob = "bob-secret", alice = "alice-secret" }

local function sasl(user, password)
  return { mechanism = "DIGEST-MD5", username = user, password = password or USERS[user] }
end

describe("SASL over TLS on this build", function()
  it("the build says whether it has SASL over TLS", function()
    assert.are.equal(core.zookeeper.tls_sasl, zklua.build.tls_sasl)
    if core.zookeeper.tls and core.zookeeper.sasl then
      assert.is_truthy(zklua.build.description:find((core.zookeeper.tls_sasl and "" or "no ") ..
                                                    "sasl over tls", 1, true),
                       zklua.build.description)
    end
  end)

  it("a build without it refuses use_ssl with sasl_options, saying how to get one", function()
    local saved = { core.zookeeper.tls, core.zookeeper.tls_sasl }
    core.zookeeper.tls, core.zookeeper.tls_sasl = true, false
    local ok, err = pcall(zklua.client, { hosts = "127.0.0.1:1", use_ssl = true, certfile = "/c",
                                          keyfile = "/k", sasl_options = sasl("bob") })
    core.zookeeper.tls, core.zookeeper.tls_sasl = saved[1], saved[2]
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.ConfigurationError), tostring(err))
    assert.is_truthy(tostring(err):find("SASL over TLS", 1, true), tostring(err))
    assert.is_truthy(tostring(err):find("ZK_CLIENT=source", 1, true), tostring(err))
  end)
end)

if not core.zookeeper.tls_sasl then
  describe("SASL over TLS", function()
    pending("needs a ZooKeeper C client with zookeeper_init_ssl_sasl (make: ZK_CLIENT=source)")
  end)
  return
end

describe("SASL DIGEST-MD5 over TLS", function()
  local server, admin, other
  local clients = {}
  local n, root = 0, nil

  -- a client of the server's TLS port with the cluster's certificate, and extra options
  local function client(extra)
    local o = server:tls_options()
    o.hosts, o.timeout = server.secure_hosts, 10
    for k, v in pairs(extra or {}) do o[k] = v end
    local c = zklua.client(o)
    clients[#clients + 1] = c
    return c
  end

  local function started(extra)
    local c = client(extra)
    c:start()
    return c
  end

  -- start(timeout) fails with class within the timeout and a little: never a hang
  local function fails_to_start(zk, timeout, class)
    local t0 = core.monotonic()
    local err = raises(class, zk.start, zk, timeout)
    local took = core.monotonic() - t0
    assert.is_true(took < timeout + 3, "start took " .. took .. " s")
    assert.are.equal("LOST", zk.state)
    return err, took
  end

  local bob_only = function() return { security.make_acl("sasl", "bob", { all = true }) } end

  setup(function()
    server = testing.server({ tls = true, sasl = { users = USERS } })
    other = tls_files.make(server.tls.files.dir .. "/other") -- a CA the server does not trust
  end)
  teardown(function() if server then server:stop() end end)
  before_each(function()
    clients = {}
    n = n + 1
    root = "/tls-sasl/" .. n
    admin = started({ sasl_options = sasl("bob") })
    admin:ensure_path(root)
  end)
  after_each(function()
    for _, c in ipairs(clients) do pcall(c.close, c) end
  end)

  it("connects over TLS as the SASL user: the session has its sasl: identity", function()
    assert.is_true(admin.use_ssl)
    -- CREATOR_ALL_ACL: the server writes the creator's own ids into the ACL
    admin:create(root .. "/mine", "v", { acl = security.CREATOR_ALL_ACL })
    -- (3.8 names a TLS connection by its certificate as well: x509:<subject>)
    local ids = {}
    for _, acl in ipairs(admin:get_acls(root .. "/mine")) do
      ids[#ids + 1] = acl.id.scheme .. ":" .. acl.id.id
    end
    table.sort(ids)
    assert.are.same({ "sasl:bob", "x509:" .. tls_files.subject(server.tls.files.certfile) }, ids)
    admin:set(root .. "/mine", "w")
    assert.are.equal("w", (admin:get(root .. "/mine")))
  end)

  it("a sasl: ACL: clients not in it get NoAuthError and nothing changes", function()
    local path = root .. "/guarded"
    admin:create(path, "original", { acl = bob_only() })
    -- the same certificate without SASL, another SASL user over TLS, bob by digest over TLS
    local refused = { started(), started({ sasl_options = sasl("alice") }),
                      started({ auth_data = { { "digest", "bob:bob-secret" } } }) }
    for _, zk in ipairs(refused) do
      raises(errors.NoAuthError, zk.get, zk, path)
      raises(errors.NoAuthError, zk.set, zk, path, "changed")
      raises(errors.NoAuthError, zk.create, zk, path .. "/child", "c")
      raises(errors.NoAuthError, zk.get_children, zk, path)
      raises(errors.NoAuthError, zk.set_acls, zk, path, security.OPEN_ACL_UNSAFE)
    end
    local value, stat = admin:get(path)
    assert.are.equal("original", value)
    assert.are.equal(0, stat.version)
    assert.are.equal(0, stat.numChildren)
    assert.are.equal(0, stat.aversion)
    -- bob in another client reads and writes it
    local bob = started({ sasl_options = sasl("bob") })
    assert.are.equal("original", (bob:get(path)))
    bob:set(path, "by bob")
    assert.are.equal("by bob", (admin:get(path)))
  end)

  it("keeps its identity across a server restart (SASL again over the new TLS connection)", function()
    local zk = started({ timeout = 60, sasl_options = sasl("bob") })
    local id = zk:client_id()
    zk:create(root .. "/before", "v", { acl = bob_only() })
    server:node(1):stop()
    testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    server:node(1):start()
    testing.wait_for(function() return zk.state == "CONNECTED" end, 60, "CONNECTED again")
    assert.are.equal(id, (zk:client_id()))
    assert.are.equal("v", (zk:retry(zk.get, zk, root .. "/before")))
    zk:create(root .. "/after", "w", { acl = bob_only() })
    assert.are.equal("w", (zk:get(root .. "/after")))
  end)

  it("a wrong password over TLS: AuthFailedError within the start timeout, naming SASL", function()
    for _, o in ipairs({ sasl("bob", "not-bobs"), sasl("carol", "x") }) do
      local err, took = fails_to_start(client({ sasl_options = o }), 8, errors.AuthFailedError)
      assert.is_true(took < 8, "start took " .. took .. " s")
      assert.is_truthy(tostring(err):find("SASL DIGEST-MD5 as " .. o.username, 1, true),
                       tostring(err))
    end
  end)

  it("a TLS failure before SASL: TimeoutError at the timeout, naming the handshake", function()
    -- a CA that did not sign the server's certificate
    local err = fails_to_start(client({ ca = other.ca, timeout = 6,
                                        sasl_options = sasl("bob") }), 6, errors.TimeoutError)
    assert.is_truthy(tostring(err):find("certificate verify failed", 1, true), tostring(err))
    -- a client certificate the server does not trust (clientAuth need)
    err = fails_to_start(client({ certfile = other.certfile, keyfile = other.keyfile, timeout = 6,
                                  sasl_options = sasl("bob") }), 6, errors.TimeoutError)
    assert.is_truthy(tostring(err):find("TLS handshake failed", 1, true), tostring(err))
    -- the plaintext port
    err = fails_to_start(client({ hosts = server.hosts, timeout = 6,
                                  sasl_options = sasl("bob") }), 6, errors.TimeoutError)
    assert.is_truthy(tostring(err):find("TLS handshake failed", 1, true), tostring(err))
  end)
end)

describe("Kerberos GSSAPI over TLS", function()
  local kdc, server
  local clients = {}

  local function started(sasl_options)
    local o = server:tls_options()
    o.hosts, o.timeout, o.sasl_options = server.secure_hosts, 10, sasl_options
    local c = zklua.client(o)
    clients[#clients + 1] = c
    c:start()
    return c
  end

  setup(function()
    kdc = testing.kdc()
    kdc:use(kdc:add_principal("bob")) -- this process's clients are bob@ZKLUA.TEST
    server = testing.server({ tls = true, sasl = { kerberos = kdc } })
  end)
  teardown(function()
    for _, c in ipairs(clients) do pcall(c.close, c) end
    if server then server:stop() end
    if kdc then kdc:close() end
  end)

  it("connects as the principal; a sasl: node of it is refused to a TLS client without it", function()
    local zk = started({ mechanism = "GSSAPI", principal = "bob@ZKLUA.TEST" })
    zk:create("/krb-tls", "v", { acl = security.CREATOR_ALL_ACL })
    local ids = {}
    for _, acl in ipairs(zk:get_acls("/krb-tls")) do ids[#ids + 1] = acl.id.scheme .. ":" .. acl.id.id end
    table.sort(ids)
    assert.are.same({ "sasl:bob@ZKLUA.TEST", "x509:" .. tls_files.subject(server.tls.files.certfile) }, ids)
    zk:create("/krb-tls/bobs", "b", { acl = { security.make_acl("sasl", "bob@ZKLUA.TEST", { all = true }) } })
    assert.are.equal("b", (zk:get("/krb-tls/bobs")))
    local plain = started(nil)
    raises(errors.NoAuthError, plain.get, plain, "/krb-tls/bobs")
    raises(errors.NoAuthError, plain.set, plain, "/krb-tls/bobs", "x")
    local data, stat = zk:get("/krb-tls/bobs")
    assert.are.equal("b", data)
    assert.are.equal(0, stat.version)
  end)
end)
