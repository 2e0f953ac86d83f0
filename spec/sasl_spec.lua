-- SASL DIGEST-MD5 (kazoo's sasl_options) against a real server with a JAAS DigestLoginModule
-- (zklua.testing's sasl option): the right password connects with the sasl: identity of its
-- user; a wrong one is AuthFailedError within the start timeout and ends every wait; a
-- sasl: ACL refuses every other client (NoAuthError, nothing changed); kazoo with the same
-- sasl_options reads what zklua wrote under such an ACL.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local errors = zklua.errors

local raises = helpers.raises

local USERS = { bob = "bob-secret", alice = "alice-secret" }

local function sasl(user, password)
  return { mechanism = "DIGEST-MD5", username = user, password = password or USERS[user] }
end

describe("SASL options", function()
  it("bad sasl_options are refused before anything is sent", function()
    local function refused(class, opts, text)
      opts.hosts = "127.0.0.1:1"
      local err = raises(class, zklua.client, opts)
      assert.is_truthy(tostring(err):find(text, 1, true), tostring(err))
    end
    refused(errors.BadArgumentsError, { sasl_options = "bob" }, "sasl_options")
    refused(errors.BadArgumentsError, { sasl_options = { mechanism = "DIGEST-MD5", user = "x" } },
            "unknown field user")
    refused(errors.BadArgumentsError, { sasl_options = { mechanism = "DIGEST-MD5", username = 1 } },
            "username must be a string")
    refused(errors.ConfigurationError, { sasl_options = { mechanism = "DIGEST-MD5" } },
            "needs username and password")
    refused(errors.ConfigurationError, { sasl_options = { mechanism = "PLAIN", username = "a",
            password = "b" } }, "PLAIN is not supported; DIGEST-MD5 and GSSAPI are")
    refused(errors.ConfigurationError, { sasl_options = { username = "a", password = "b" } },
            "mechanism is required")
  end)

  it("a build without SASL refuses sasl_options, saying how to get one", function()
    local saved = core.zookeeper.sasl
    core.zookeeper.sasl = false
    local ok, err = pcall(zklua.client, { hosts = "127.0.0.1:1", sasl_options = sasl("bob") })
    core.zookeeper.sasl = saved
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.ConfigurationError), tostring(err))
    assert.is_truthy(tostring(err):find("ZK_CLIENT=source", 1, true), tostring(err))
  end)
end)

if not core.zookeeper.sasl then
  describe("SASL on this build", function()
    pending("needs a ZooKeeper C client with SASL (make: ZK_CLIENT=source)")
  end)
  return
end

describe("SASL DIGEST-MD5", function()
  local server, admin
  local n = 0
  local root

  setup(function()
    server = testing.server({ sasl = { users = USERS } })
    admin = zklua.client{ hosts = server.hosts, timeout = 10, sasl_options = sasl("bob") }
    admin:start()
  end)
  teardown(function()
    admin:close()
    server:stop()
  end)
  before_each(function()
    n = n + 1
    root = "/sasl/" .. n
    admin:ensure_path(root)
  end)

  local bob_only = function() return { zklua.security.make_acl("sasl", "bob", { all = true }) } end

  it("the right password connects, and the session has the user's sasl: identity", function()
    local zk = zklua.client{ hosts = server.hosts, timeout = 10, sasl_options = sasl("bob") }
    zk:start()
    zk:create(root .. "/mine", "v", { acl = bob_only() })
    assert.are.equal("v", (zk:get(root .. "/mine")))
    zk:set(root .. "/mine", "w")
    local acl = zk:get_acls(root .. "/mine")
    assert.are.equal("sasl", acl[1].id.scheme)
    assert.are.equal("bob", acl[1].id.id)
    zk:close()
  end)

  it("a wrong password: AuthFailedError within the start timeout, naming SASL", function()
    local zk = zklua.client{ hosts = server.hosts, timeout = 10,
                             sasl_options = sasl("bob", "not-bobs") }
    local t0 = core.monotonic()
    local err = raises(errors.AuthFailedError, zk.start, zk, 8)
    local took = core.monotonic() - t0
    assert.is_true(took < 8, "start took " .. took .. " s")
    assert.is_truthy(tostring(err):find("SASL DIGEST-MD5 as bob", 1, true), tostring(err))
    assert.are.equal("LOST", zk.state)
    zk:close()
    -- a user the server does not know: the same
    zk = zklua.client{ hosts = server.hosts, timeout = 10, sasl_options = sasl("carol", "x") }
    raises(errors.AuthFailedError, zk.start, zk, 8)
    zk:close()
  end)

  it("a password refused at a reconnect ends every wait: AUTH_FAILED, AuthFailedError", function()
    -- its own server: bob's password changes while the client is away
    local own = testing.server({ sasl = { users = { bob = "first" } } })
    local zk = zklua.client{ hosts = own.hosts, timeout = 30, sasl_options = sasl("bob", "first") }
    zk:start()
    zk:create("/guarded", "v", { acl = bob_only() })
    local states = {}
    zk:add_listener(function(state) states[#states + 1] = state end)
    own:node(1):stop()
    -- the server's exit does not mean the client saw the drop: a call made before it did
    -- goes to the library and fails with ConnectionLoss, not AuthFailedError
    testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    -- calls made while the server is away wait for the connection
    local futures = { zk:get_async("/guarded"), zk:exists_async("/guarded"),
                      zk:create_async("/other", "x"), zk:set_async("/guarded", "w") }
    own:set_sasl_users({ bob = "second" })
    own:node(1):start()
    local t0 = core.monotonic()
    for _, f in ipairs(futures) do raises(errors.AuthFailedError, f.get, f, 30) end
    local took = core.monotonic() - t0
    assert.is_true(took < 10, "the waits ended after " .. took .. " s")
    helpers.wait_until(function() return zk.client_state == "AUTH_FAILED" end, 10, "AUTH_FAILED")
    assert.are.equal("LOST", zk.state)
    assert.are.same("LOST", states[#states])
    raises(errors.AuthFailedError, zk.get, zk, "/guarded")
    raises(errors.AuthFailedError, zk.Lock, zk, "/lock")
    zk:close()
    -- nothing was written: bob with the new password sees the node as it was
    local bob = zklua.client{ hosts = own.hosts, timeout = 10, sasl_options = sasl("bob", "second") }
    bob:start()
    assert.are.equal("v", (bob:get("/guarded")))
    assert.is_nil(bob:exists("/other"))
    bob:close()
    own:stop()
  end)

  it("a sasl: ACL: clients not in it get NoAuthError and nothing changes", function()
    local path = root .. "/guarded"
    admin:create(path, "original", { acl = bob_only() })
    local plain = zklua.client{ hosts = server.hosts, timeout = 10 }
    plain:start()
    local alice = zklua.client{ hosts = server.hosts, timeout = 10, sasl_options = sasl("alice") }
    alice:start()
    local digest = zklua.client{ hosts = server.hosts, timeout = 10,
                                 auth_data = { { "digest", "bob:bob-secret" } } }
    digest:start()
    for _, zk in ipairs({ plain, alice, digest }) do
      raises(errors.NoAuthError, zk.get, zk, path)
      raises(errors.NoAuthError, zk.set, zk, path, "changed")
      raises(errors.NoAuthError, zk.create, zk, path .. "/child", "c")
      raises(errors.NoAuthError, zk.set_acls, zk, path, zklua.security.OPEN_ACL_UNSAFE)
      zk:close()
    end
    local value, stat = admin:get(path)
    assert.are.equal("original", value)
    assert.are.equal(0, stat.version)
    assert.are.equal(0, stat.numChildren)
    assert.are.equal(0, stat.aversion)
  end)

  it("kazoo with the same sasl_options reads a node zklua created with a sasl: ACL", function()
    local path = root .. "/shared"
    admin:create(path, "from zklua", { acl = bob_only() })
    local script = [[
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
hosts, path, user, password = sys.argv[1:5]
opts = {"mechanism": "DIGEST-MD5", "username": user, "password": password} if user else None
zk = KazooClient(hosts=hosts, sasl_options=opts, timeout=10)
zk.start(timeout=15)
try:
    print("read:" + zk.get(path)[0].decode())
except NoAuthError:
    print("NoAuthError")
zk.stop()
]]
    local function kazoo(user)
      local out, err, code = helpers.run(helpers.PYTHON .. " -c " .. require("fixtures.child").quote(script) ..
        " " .. server.hosts .. " " .. path .. " " .. (user or "''") .. " " ..
        (user and USERS[user] or "''"), 60)
      assert.are.equal(0, code, err)
      return out
    end
    assert.are.equal("read:from zklua\n", kazoo("bob"))
    assert.are.equal("NoAuthError\n", kazoo("alice"))
    assert.are.equal("NoAuthError\n", kazoo(nil))
  end)
end)
