-- ACLs (zklua.security), get_acls/set_acls and digest authentication.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local security = zklua.security
local errors = zklua.errors

local ROOT = "/acl_auth"

-- Computed once with python3:
--   "user:" + base64(hashlib.sha1(b"user:pw").digest())
local USER_PW_DIGEST = "user:2Om+GBbT2q/tS6pdvACZbbm7/1A="

local expire = helpers.expire
local raised = helpers.raised

describe("security", function()
  it("has kazoo's permission bits", function()
    assert.are.same({ READ = 1, WRITE = 2, CREATE = 4, DELETE = 8, ADMIN = 16, ALL = 31 },
                    security.Permissions)
  end)

  it("has kazoo's predefined ACL lists", function()
    assert.are.same({ { perms = 31, id = { scheme = "world", id = "anyone" } } },
                    security.OPEN_ACL_UNSAFE)
    assert.are.same({ { perms = 1, id = { scheme = "world", id = "anyone" } } },
                    security.READ_ACL_UNSAFE)
    assert.are.same({ { perms = 31, id = { scheme = "auth", id = "" } } },
                    security.CREATOR_ALL_ACL)
  end)

  it("make_acl builds an ACL from a perms table", function()
    assert.are.same({ perms = 3, id = { scheme = "world", id = "anyone" } },
                    security.make_acl("world", "anyone", { read = true, write = true }))
    assert.are.same({ perms = 4 + 8 + 16, id = { scheme = "ip", id = "127.0.0.1" } },
                    security.make_acl("ip", "127.0.0.1",
                                      { create = true, delete = true, admin = true }))
    assert.are.equal(31, security.make_acl("world", "anyone", { all = true }).perms)
    assert.are.equal(31, security.make_acl("world", "anyone", { all = true, read = true }).perms)
    assert.are.equal(1, security.make_acl("world", "anyone", { read = true, write = false }).perms)
    assert.are.equal(0, security.make_acl("world", "anyone", {}).perms)
    assert.are.equal(0, security.make_acl("world", "anyone").perms)
  end)

  it("make_digest_acl_credential is user:base64(sha1(user:password))", function()
    assert.are.equal(USER_PW_DIGEST, security.make_digest_acl_credential("user", "pw"))
    -- more values from python3, across SHA-1's padding boundaries (55, 56, 64, 102 bytes)
    assert.are.equal("alice:uLxpHc/uhT86OXPoSjJTp1M8CJY=",
                     security.make_digest_acl_credential("alice", "s3cret"))
    assert.are.equal(":BaefBs8/Z/cm2uaNGKIpD2yaUMk=", security.make_digest_acl_credential("", ""))
    assert.are.equal("u:9haYA/nqM3XxNMGh/CO/vVlsjwY=",
                     security.make_digest_acl_credential("u", string.rep("p", 53)))
    assert.are.equal("u:eKm7CCgUeLQmQ+V5LVuT4xJjoMU=",
                     security.make_digest_acl_credential("u", string.rep("p", 54)))
    assert.are.equal("u:7K8oxjW+CY7mhPaEGBOkb+TVrXk=",
                     security.make_digest_acl_credential("u", string.rep("p", 62)))
    assert.are.equal("u:NKP0EMIM6GEfKJ3fW4ypZ+Z8aAo=",
                     security.make_digest_acl_credential("u", string.rep("p", 100)))
  end)

  it("make_digest_acl builds a digest ACL for the user", function()
    assert.are.same({ perms = 31, id = { scheme = "digest", id = USER_PW_DIGEST } },
                    security.make_digest_acl("user", "pw", { all = true }))
    assert.are.same({ perms = 1 + 16, id = { scheme = "digest", id = USER_PW_DIGEST } },
                    security.make_digest_acl("user", "pw", { read = true, admin = true }))
  end)
end)

describe("ACLs and auth on a server", function()
  local server, zk

  local PROTECTED = ROOT .. "/protected"

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function() zk = helpers.client(server.hosts, ROOT) end)

  after_each(function()
    if zk then zk:close() end
    -- protected nodes can only be listed by their owner
    helpers.drop(helpers.client{ hosts = server.hosts, auth_data = { { "digest", "user:pw" } } },
                 ROOT)
  end)

  -- A node only user:pw may use.
  local function make_protected(client)
    client = client or zk
    client:create(PROTECTED, "secret", { acl = { security.make_digest_acl("user", "pw",
                                                                          { all = true }) } })
  end

  describe("get_acls and set_acls", function()
    it("a node created without an acl (and no default_acl) is open to the world", function()
      zk:create(ROOT .. "/sync", "")
      zk:create_async(ROOT .. "/async", ""):get(10)
      zk:create(ROOT .. "/deep/er", "", { makepath = true })
      local t = zk:transaction()
      t:create(ROOT .. "/txn", "")
      t:commit()
      for _, name in ipairs({ "sync", "async", "deep", "deep/er", "txn" }) do
        assert.are.same(security.OPEN_ACL_UNSAFE, (zk:get_acls(ROOT .. "/" .. name)), name)
      end
    end)

    it("get_acls returns the ACL list and the stat", function()
      local acl = { security.make_acl("world", "anyone", { read = true, create = true }),
                    security.make_digest_acl("user", "pw", { all = true }) }
      zk:create(ROOT .. "/n", "", { acl = acl })
      -- (the server redacts digest ids for readers without ADMIN: read as user:pw)
      zk:add_auth("digest", "user:pw")
      local acls, stat = zk:get_acls(ROOT .. "/n")
      assert.are.equal(2, #acls)
      local by_scheme = {}
      for _, a in ipairs(acls) do by_scheme[a.id.scheme] = a end
      assert.are.same({ perms = 5, id = { scheme = "world", id = "anyone" } }, by_scheme.world)
      assert.are.same({ perms = 31, id = { scheme = "digest", id = USER_PW_DIGEST } },
                      by_scheme.digest)
      assert.are.equal(0, stat.aversion)
      assert.are.equal(zk:exists(ROOT .. "/n").czxid, stat.czxid)
    end)

    it("set_acls replaces the ACL and returns the stat with aversion bumped", function()
      zk:create(ROOT .. "/n", "data")
      local stat = zk:set_acls(ROOT .. "/n", security.READ_ACL_UNSAFE)
      assert.is_table(stat)
      assert.are.equal(1, stat.aversion)
      assert.are.equal(0, stat.version)
      assert.are.same(security.READ_ACL_UNSAFE, (zk:get_acls(ROOT .. "/n")))
      -- read-only now: writes are refused
      local err = raised(zk.set, zk, ROOT .. "/n", "new")
      assert.is_true(errors.is(err, errors.NoAuthError))
      assert.are.equal("data", (zk:get(ROOT .. "/n")))
    end)

    it("set_acls checks the ACL version", function()
      zk:create(ROOT .. "/n", "")
      local read_admin = { security.make_acl("world", "anyone", { read = true, admin = true }) }
      local err = raised(zk.set_acls, zk, ROOT .. "/n", read_admin, 3)
      assert.is_true(errors.is(err, errors.BadVersionError))
      assert.are.equal(ROOT .. "/n", err.path)
      assert.are.same(security.OPEN_ACL_UNSAFE, (zk:get_acls(ROOT .. "/n")))
      assert.are.equal(1, zk:set_acls(ROOT .. "/n", read_admin, 0).aversion)
      assert.are.same(read_admin, (zk:get_acls(ROOT .. "/n")))
      assert.are.equal(2, zk:set_acls(ROOT .. "/n", security.OPEN_ACL_UNSAFE, 1).aversion)
    end)

    it("set_acls needs ADMIN on the node", function()
      zk:create(ROOT .. "/n", "", { acl = security.READ_ACL_UNSAFE })
      local err = raised(zk.set_acls, zk, ROOT .. "/n", security.OPEN_ACL_UNSAFE)
      assert.is_true(errors.is(err, errors.NoAuthError))
    end)

    it("raise NoNodeError for a missing node", function()
      assert.is_true(errors.is(raised(zk.get_acls, zk, ROOT .. "/nope"), errors.NoNodeError))
      assert.is_true(errors.is(raised(zk.set_acls, zk, ROOT .. "/nope", security.OPEN_ACL_UNSAFE),
                               errors.NoNodeError))
    end)

    it("accepts the flat {perms=, scheme=, id=} shape too", function()
      zk:create(ROOT .. "/n", "", { acl = { { perms = 1, scheme = "world", id = "anyone" } } })
      assert.are.same(security.READ_ACL_UNSAFE, (zk:get_acls(ROOT .. "/n")))
    end)

    it("accepts integral perms given as floats (e.g. computed with 2^n)", function()
      local perms = 2 ^ 0 + 2 ^ 1 -- 3.0, a float
      local acl = { { perms = perms, id = { scheme = "world", id = "anyone" } } }
      zk:create(ROOT .. "/f", "", { acl = acl })
      assert.are.equal(3, (zk:get_acls(ROOT .. "/f"))[1].perms)
      zk:create(ROOT .. "/g", "")
      zk:set_acls(ROOT .. "/g", { { perms = 31.0, id = { scheme = "world", id = "anyone" } } })
      assert.are.equal(31, (zk:get_acls(ROOT .. "/g"))[1].perms)
      local t = zk:transaction()
      t:create(ROOT .. "/h", "", { acl = acl })
      assert.are.same({ ROOT .. "/h" }, t:commit())
    end)

    it("the client's default_acl applies to nodes created without an acl", function()
      local client = zklua.client{ hosts = server.hosts,
                                   default_acl = { security.make_acl("world", "anyone",
                                                                     { read = true, delete = true,
                                                                       admin = true }) } }
      client:start()
      client:create(ROOT .. "/d", "")
      assert.are.equal(1 + 8 + 16, (client:get_acls(ROOT .. "/d"))[1].perms)
      client:close()
    end)
  end)

  describe("digest auth", function()
    it("a node with a digest ACL is readable with auth_data and refused without", function()
      make_protected()
      local authed = zklua.client{ hosts = server.hosts, auth_data = { { "digest", "user:pw" } } }
      authed:start()
      assert.are.equal("secret", (authed:get(PROTECTED)))
      authed:set(PROTECTED, "changed")

      local err = raised(zk.get, zk, PROTECTED)
      assert.is_true(errors.is(err, errors.NoAuthError))
      assert.are.equal(-102, err.code)
      assert.are.equal(PROTECTED, err.path)
      assert.is_true(errors.is(raised(zk.set, zk, PROTECTED, "x"), errors.NoAuthError))
      assert.is_true(errors.is(raised(zk.get_children, zk, PROTECTED), errors.NoAuthError))
      assert.are.equal("changed", (authed:get(PROTECTED)))
      authed:close()
    end)

    it("a wrong password gives no access", function()
      make_protected()
      local wrong = zklua.client{ hosts = server.hosts, auth_data = { { "digest", "user:nope" } } }
      wrong:start()
      assert.is_true(errors.is(raised(wrong.get, wrong, PROTECTED), errors.NoAuthError))
      wrong:close()
    end)

    it("add_auth on a live client grants access", function()
      make_protected()
      assert.is_true(errors.is(raised(zk.get, zk, PROTECTED), errors.NoAuthError))
      assert.is_true(zk:add_auth("digest", "user:pw"))
      assert.are.equal("secret", (zk:get(PROTECTED)))
    end)

    it("CREATOR_ALL_ACL gives the node to the creating identity", function()
      local err = raised(zk.create, zk, ROOT .. "/mine", "", { acl = security.CREATOR_ALL_ACL })
      assert.is_true(errors.is(err, errors.InvalidACLError))
      zk:add_auth("digest", "user:pw")
      zk:create(ROOT .. "/mine", "m", { acl = security.CREATOR_ALL_ACL })
      local acls = zk:get_acls(ROOT .. "/mine")
      assert.are.same({ { perms = 31, id = { scheme = "digest", id = USER_PW_DIGEST } } }, acls)
      local other = zklua.client(server.hosts)
      other:start()
      assert.is_true(errors.is(raised(other.get, other, ROOT .. "/mine"), errors.NoAuthError))
      other:close()
    end)

    it("auth_data and add_auth survive a stop and start", function()
      make_protected()
      zk:add_auth("digest", "user:pw")
      zk:stop()
      zk:start()
      assert.are.equal("secret", (zk:get(PROTECTED)))
    end)

    it("auth added with add_auth is re-applied after a session expiry", function()
      make_protected()
      zk:add_auth("digest", "user:pw")
      assert.are.equal("secret", (zk:get(PROTECTED)))
      local old = zk:client_id()
      expire(zk)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 10, "a new session")
      assert.are_not.equal(old, zk:client_id())
      assert.are.equal("secret", (zk:get(PROTECTED)))
    end)

    it("auth_data is re-applied after a session expiry", function()
      make_protected()
      local authed = zklua.client{ hosts = server.hosts, auth_data = { { "digest", "user:pw" } } }
      authed:start()
      expire(authed)
      testing.wait_for(function() return authed.state == "CONNECTED" end, 10, "a new session")
      assert.are.equal("secret", (authed:get(PROTECTED)))
      authed:close()
    end)

    it("start raises AuthFailedError when the server refuses the auth_data", function()
      local bad = zklua.client{ hosts = server.hosts, auth_data = { { "no-such-scheme", "x" } } }
      local ok, err = pcall(bad.start, bad, 5)
      local state = bad.state
      bad:close()
      assert.is_false(ok, "start returned normally; state is now " .. tostring(state))
      assert.is_true(errors.is(err, errors.AuthFailedError), tostring(err))
    end)
  end)
end)
