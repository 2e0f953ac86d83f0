-- kazoo's tests/test_hosts.py, translated: zklua.hosts.collect_hosts is kazoo.hosts'.
-- kazoo's (host, port) tuples are {host, port} lists; its None chroot is nil.
local collect_hosts = require("zklua.hosts").collect_hosts

describe("test_hosts.py", function()
  it("test_ipv4", function()
    local hosts, chroot = collect_hosts("127.0.0.1:2181, 192.168.1.2:2181, " ..
                                        "                                      132.254.111.10:2181")
    assert.are.same({ { "127.0.0.1", 2181 }, { "192.168.1.2", 2181 }, { "132.254.111.10", 2181 } },
                    hosts)
    assert.is_nil(chroot)

    hosts, chroot = collect_hosts({ "127.0.0.1:2181", "192.168.1.2:2181", "132.254.111.10:2181" })
    assert.are.same({ { "127.0.0.1", 2181 }, { "192.168.1.2", 2181 }, { "132.254.111.10", 2181 } },
                    hosts)
    assert.is_nil(chroot)
  end)

  it("test_ipv6", function()
    local hosts, chroot = collect_hosts("[fe80::200:5aee:feaa:20a2]:2181")
    assert.are.same({ { "fe80::200:5aee:feaa:20a2", 2181 } }, hosts)
    assert.is_nil(chroot)

    hosts, chroot = collect_hosts({ "[fe80::200:5aee:feaa:20a2]:2181" })
    assert.are.same({ { "fe80::200:5aee:feaa:20a2", 2181 } }, hosts)
    assert.is_nil(chroot)
  end)

  it("test_hosts_list", function()
    local hosts, chroot = collect_hosts("zk01:2181, zk02:2181, zk03:2181")
    local expected1 = { { "zk01", 2181 }, { "zk02", 2181 }, { "zk03", 2181 } }
    assert.are.same(expected1, hosts)
    assert.is_nil(chroot)

    hosts, chroot = collect_hosts({ "zk01:2181", "zk02:2181", "zk03:2181" })
    assert.are.same(expected1, hosts)
    assert.is_nil(chroot)

    local expected2 = "/test"
    hosts, chroot = collect_hosts("zk01:2181, zk02:2181, zk03:2181/test")
    assert.are.same(expected1, hosts)
    assert.are.equal(expected2, chroot)

    hosts, chroot = collect_hosts({ "zk01:2181", "zk02:2181", "zk03:2181", "/test" })
    assert.are.same(expected1, hosts)
    assert.are.equal(expected2, chroot)
  end)
end)
