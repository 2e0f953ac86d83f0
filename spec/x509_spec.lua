-- Identities in ACLs via x509: a server with a secureClientPort, ssl.clientAuth=need and its
-- X509AuthenticationProvider (zklua.testing's tls = {x509 = true}) names each TLS client by its
-- certificate's subject; security.make_x509_acl gives a node to one subject.  Against real
-- servers: the holder of that certificate reads and writes, another certificate gets
-- NoAuthError and changes nothing, no certificate or one from an unknown CA is refused at
-- connect within the timeout; and kazoo (python3-kazoo, use_ssl) holding the same certificate
-- reads the node zklua made, with another one it is refused.  On a 3-node ensemble the same
-- holds through every member, and again after the leader is killed.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local errors = zklua.errors
local security = zklua.security

local raises = helpers.raises

describe("make_x509_acl", function()
  it("is an x509 ACL whose id is the subject, as given", function()
    local acl = security.make_x509_acl("CN=client-a,OU=ops,O=example", { read = true, write = true })
    assert.are.equal("x509", acl.id.scheme)
    assert.are.equal("CN=client-a,OU=ops,O=example", acl.id.id)
    assert.are.equal(security.Permissions.READ + security.Permissions.WRITE, acl.perms)
    assert.are.equal(security.Permissions.ALL,
                     security.make_x509_acl("CN=a\\, b,O=x", { all = true }).perms)
  end)

  it("refuses bad input, naming the argument, before anything is sent", function()
    local function refused(words, ...)
      local err = raises(errors.BadArgumentsError, security.make_x509_acl, ...)
      assert.are.equal("subject_dn", err.argument, tostring(err))
      assert.is_truthy(tostring(err):find(words, 1, true), tostring(err))
    end
    refused("subject_dn must be a string", nil, { read = true })
    refused("subject_dn must be a string", 42, { read = true })
    refused("subject_dn must not be empty", "", { read = true })
    refused("subject_dn must be a certificate subject", "client-a", { read = true })
    -- openssl's default form: the server's id has no blanks, so this could never match
    refused("blanks around a separator", "CN=client-a, OU=ops, O=example", { read = true })
    local err = raises(errors.BadArgumentsError, security.make_x509_acl, "CN=a", { bogus = true })
    assert.is_truthy(tostring(err):find("unknown permission", 1, true), tostring(err))
  end)
end)

if not core.zookeeper.tls then
  describe("x509 ACLs on this build", function()
    pending("needs a ZooKeeper C client with TLS (make: ZK_CLIENT=source)")
  end)
  return
end

describe("x509 ACLs on a server with clientAuth=need", function()
  local server, a, b, stranger
  local clients = {}

  local function client(cert, extra)
    local o = server:tls_options(cert)
    o.hosts, o.timeout = server.secure_hosts, 10
    for k, v in pairs(extra or {}) do o[k] = v end
    local c = zklua.client(o)
    clients[#clients + 1] = c
    return c
  end

  local function started(cert)
    local c = client(cert)
    c:start()
    return c
  end

  -- kazoo_x509.py with cert (or none): its one line of output
  local function kazoo(cert, timeout, ...)
    local args = { helpers.PYTHON, "spec/fixtures/kazoo_x509.py", server.secure_hosts,
                   server.tls.files.ca, cert and cert.certfile or "-", cert and cert.keyfile or "-",
                   tostring(timeout), ... }
    for i, arg in ipairs(args) do args[i] = "'" .. arg:gsub("'", "'\\''") .. "'" end
    local out, err, code = helpers.run(table.concat(args, " "), timeout + 30)
    assert.are.equal(0, code, "kazoo_x509.py failed: " .. out .. err)
    return (out:gsub("%s+$", ""))
  end

  -- start(timeout) fails with TimeoutError within the timeout and a little: never a hang
  local function fails_to_start(zk, timeout)
    local t0 = core.monotonic()
    local err = raises(errors.TimeoutError, zk.start, zk, timeout)
    local took = core.monotonic() - t0
    assert.is_true(took < timeout + 3, "start took " .. took .. " s")
    assert.are.equal("LOST", zk.state)
    return err
  end

  setup(function()
    server = testing.server({ tls = { x509 = true } })
    a = server:client_certificate("client-a")
    b = server:client_certificate("client-b")
    stranger = server:client_certificate("stranger", { unknown_ca = true })
  end)
  teardown(function() if server then server:stop() end end)
  before_each(function() clients = {} end)
  after_each(function()
    for _, c in ipairs(clients) do pcall(c.close, c) end
    helpers.delete_trees(server.hosts, "/x509")
  end)

  it("names each client by its certificate's subject", function()
    assert.are.equal("CN=client-a,OU=zklua-test,O=zklua", a.subject)
    assert.are.equal("CN=client-b,OU=zklua-test,O=zklua", b.subject)
    -- CREATOR_ALL_ACL: the server writes the creator's own ids into the ACL, which shows
    -- what it authenticated the connection as (3.8's C client has no whoami)
    local zk = started(a)
    zk:create("/x509/mine", "", { makepath = true, acl = security.CREATOR_ALL_ACL })
    local acls = zk:get_acls("/x509/mine")
    assert.are.equal(1, #acls)
    assert.are.equal("x509", acls[1].id.scheme)
    assert.are.equal(a.subject, acls[1].id.id)
    assert.are.equal(security.Permissions.ALL, acls[1].perms)
  end)

  it("lets the subject in the ACL read and write; another gets NoAuthError, nothing changed", function()
    local za, zb = started(a), started(b)
    za:ensure_path("/x509")
    local acl = { security.make_x509_acl(a.subject, { all = true }) }
    za:create("/x509/node", "v1", { acl = acl })
    local got = za:get_acls("/x509/node")
    assert.are.equal(1, #got)
    assert.are.equal("x509", got[1].id.scheme)
    assert.are.equal(a.subject, got[1].id.id)
    local _, stat = za:get("/x509/node")
    za:set("/x509/node", "v2", stat.version)
    assert.are.equal("v2", (za:get("/x509/node")))
    za:create("/x509/node/child", "c")
    za:delete("/x509/node/child")
    -- client-b: refused every operation the ACL guards
    raises(errors.NoAuthError, zb.get, zb, "/x509/node")
    raises(errors.NoAuthError, zb.set, zb, "/x509/node", "b")
    raises(errors.NoAuthError, zb.create, zb, "/x509/node/b", "b")
    raises(errors.NoAuthError, zb.get_children, zb, "/x509/node")
    raises(errors.NoAuthError, zb.set_acls, zb, "/x509/node", security.OPEN_ACL_UNSAFE)
    local data, after = za:get("/x509/node")
    assert.are.equal("v2", data)
    assert.are.equal(stat.version + 1, after.version)
    assert.are.same({}, za:get_children("/x509/node"))
    assert.are.equal(a.subject, za:get_acls("/x509/node")[1].id.id)
  end)

  it("an id with blanks after the commas matches no one (why make_x509_acl refuses it)", function()
    local za = started(a)
    local spaced = a.subject:gsub(",", ", ")
    za:create("/x509/spaced", "s", { makepath = true,
                                      acl = { security.make_acl("x509", spaced, { all = true }) } })
    raises(errors.NoAuthError, za.get, za, "/x509/spaced")
  end)

  it("a client without a certificate: zklua refuses before connecting, kazoo is refused", function()
    local o = server:tls_options(a)
    o.hosts, o.certfile, o.keyfile = server.secure_hosts, nil, nil
    local err = raises(errors.ConfigurationError, zklua.client, o)
    assert.is_truthy(tostring(err):find("needs certfile and keyfile", 1, true), tostring(err))
    -- kazoo connects without one when asked: the server (clientAuth=need) ends the handshake
    local t0 = core.monotonic()
    assert.is_truthy(kazoo(nil, 3, "get", "/"):find("^not connected"))
    assert.is_true(core.monotonic() - t0 < 3 + 10, "kazoo took " .. core.monotonic() - t0 .. " s")
  end)

  it("a certificate from an unknown CA is refused at connect: TimeoutError naming it", function()
    -- 10 s: under load the server's first handshake can take seconds, and a start that
    -- times out before any handshake has failed has no reason to name
    local err = fails_to_start(client(stranger, { timeout = 10 }), 10)
    assert.is_truthy(tostring(err):find("TLS handshake failed", 1, true), tostring(err))
    assert.is_truthy(kazoo(stranger, 3, "get", "/"):find("^not connected"))
  end)

  it("kazoo with the same certificate reads the node; with another, NoAuthError", function()
    local za = started(a)
    za:create("/x509/shared", "from zklua", { makepath = true,
                                              acl = { security.make_x509_acl(a.subject, { all = true }) } })
    -- one kazoo process per certificate, each line one action's outcome
    assert.are.equal("NoAuthError\nNoAuthError",
                     kazoo(b, 20, "get", "/x509/shared", "set", "/x509/shared", "b"))
    assert.are.equal("data from zklua\nset 1",
                     kazoo(a, 20, "get", "/x509/shared", "set", "/x509/shared", "from kazoo"))
    local data, stat = za:get("/x509/shared")
    assert.are.equal("from kazoo", data)
    assert.are.equal(1, stat.version)
  end)
end)

describe("x509 ACLs on a 3-node TLS ensemble with clientAuth=need", function()
  local ens, a, b
  local clients = {}

  -- a client with cert, to hosts (one member's TLS port, or all of them)
  local function started(cert, hosts)
    local o = ens:tls_options(cert)
    o.hosts, o.timeout = hosts, 20
    local c = zklua.client(o)
    clients[#clients + 1] = c
    c:start(30)
    return c
  end

  -- through each member still running: cert a reads and writes the node, cert b is refused
  -- everything and changes nothing
  local function check_members(path, version)
    for i = 1, 3 do
      local node = ens:node(i)
      if node.pid then
        local za, zb = started(a, node.secure_hosts), started(b, node.secure_hosts)
        za:sync(path) -- this member has seen every write acknowledged before
        local data, stat = za:get(path)
        assert.are.equal("v" .. version, data, "through node " .. i)
        assert.are.equal(version, stat.version)
        za:set(path, "v" .. version + 1, version)
        version = version + 1
        zb:sync(path)
        raises(errors.NoAuthError, zb.get, zb, path)
        raises(errors.NoAuthError, zb.set, zb, path, "b")
        raises(errors.NoAuthError, zb.create, zb, path .. "/b", "b")
        raises(errors.NoAuthError, zb.set_acls, zb, path, security.OPEN_ACL_UNSAFE)
        local after, astat = za:get(path)
        assert.are.equal("v" .. version, after)
        assert.are.equal(version, astat.version)
        assert.are.equal(0, astat.numChildren)
        assert.are.equal(a.subject, za:get_acls(path)[1].id.id)
        za:close()
        zb:close()
      end
    end
    return version
  end

  setup(function()
    ens = testing.ensemble(3, { tls = { x509 = true } })
    a = ens:client_certificate("client-a")
    b = ens:client_certificate("client-b")
  end)
  teardown(function() if ens then ens:stop() end end)
  after_each(function()
    for _, c in ipairs(clients) do pcall(c.close, c) end
    clients = {}
  end)

  it("a node of one certificate: read through every member, refused to another, after a leader dies", function()
    local za = started(a, ens.secure_hosts)
    za:create("/x509e/node", "v0", { makepath = true,
                                     acl = { security.make_x509_acl(a.subject, { all = true }) } })
    local version = check_members("/x509e/node", 0)
    -- kill the leader (SIGKILL, as a crash): the two left elect another and serve the same
    local leader = ens:leader()
    assert.is_not_nil(leader)
    leader:kill()
    testing.wait_for(function()
      local l = ens:leader()
      return l ~= nil and l ~= leader
    end, 60, "a new leader")
    -- the client connected across the ensemble goes on with its session, same identity
    testing.wait_for(function() return za.state == "CONNECTED" end, 60, "za connected again")
    assert.are.equal("v" .. version, (za:retry(za.get, za, "/x509e/node")))
    version = check_members("/x509e/node", version)
    assert.are.equal("v" .. version, (za:retry(za.get, za, "/x509e/node")))
  end)
end)
