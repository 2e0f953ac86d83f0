-- Hosts and chroot as kazoo reads them (zklua.hosts, zklua.client): a missing port is 2181,
-- "h:2181/" has no chroot, a chroot is normalised, a list's last item may be the chroot, a
-- malformed hosts argument raises BadArgumentsError at construction (nothing is sent); against
-- a real server, a chroot that does not exist is warned about at start() and
-- ensure_path("/") creates it.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

describe("hosts and chroot", function()
  it("reads a missing port as 2181 and \"h:2181/\" as no chroot", function()
    local zk = zklua.client("zk01,zk02:2182/")
    assert.are.same({ { "zk01", 2181 }, { "zk02", 2182 } }, zk.hosts)
    assert.are.equal("", zk.chroot)
    zk:close()
  end)

  it("normalises the chroot and takes it from a list's last item", function()
    local zk = zklua.client("127.0.0.1/a//b/")
    assert.are.equal("/a/b", zk.chroot)
    zk:close()
    zk = zklua.client{ hosts = { "127.0.0.1:2181", " 127.0.0.2", "/app" } }
    assert.are.same({ { "127.0.0.1", 2181 }, { "127.0.0.2", 2181 } }, zk.hosts)
    assert.are.equal("/app", zk.chroot)
    zk:close()
  end)

  it("raises BadArgumentsError at construction for a malformed hosts argument", function()
    for _, bad in ipairs({ "h:x", "h:2181,,k", "::1:2181", "h:0", "h:65536", "", ":2181",
                           "[::1:2181", "h:2181/a/../b" }) do
      local err = helpers.raises(errors.BadArgumentsError, zklua.client, bad)
      assert.is_truthy(tostring(err):find("client", 1, true), tostring(err))
    end
    helpers.raises(errors.BadArgumentsError, zklua.client, { hosts = { "h:1", 7 } })
  end)

  describe("on a server", function()
    local server
    setup(function() server = testing.server() end)
    teardown(function() server:stop() end)

    it("warns of a chroot that does not exist; ensure_path(\"/\") creates it", function()
      local chroot = "/hosts_spec_chroot"
      local warnings = {}
      local zk = zklua.client{ hosts = server.hosts .. chroot, logger = function(level, message)
        if level == "WARN" then warnings[#warnings + 1] = message end
      end }
      local admin = helpers.client(server.hosts)
      finally(function()
        zk:close()
        pcall(admin.delete, admin, chroot, nil, true)
        admin:close()
      end)
      zk:start()
      assert.are.equal(1, #warnings)
      assert.is_truthy(warnings[1]:find(chroot, 1, true))
      assert.is_nil(admin:exists(chroot))
      assert.is_true(zk:ensure_path("/"))
      assert.is_not_nil(admin:exists(chroot))
      assert.is_true(zk:ensure_path("/")) -- there already
      assert.are.equal("/x", zk:create("/x", "v"))
      assert.are.equal("v", (admin:get(chroot .. "/x")))
      -- a chroot that exists is not warned about
      local again = zklua.client{ hosts = server.hosts .. chroot, logger = function(level, message)
        if level == "WARN" then warnings[#warnings + 1] = message end
      end }
      again:start()
      again:close()
      assert.are.equal(1, #warnings)
    end)

    it("connects with a list and a trailing \"/\" as without a chroot", function()
      local zk = zklua.client{ hosts = { server.hosts, "/" } }
      zk:start()
      assert.are.equal("", zk.chroot)
      assert.is_not_nil(zk:exists("/zookeeper"))
      zk:close()
      zk = zklua.client(server.hosts .. "/")
      zk:start()
      assert.is_not_nil(zk:exists("/zookeeper"))
      zk:close()
    end)
  end)
end)
