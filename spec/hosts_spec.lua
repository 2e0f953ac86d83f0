-- Hosts and chroot as kazoo reads them (zklua.hosts, zklua.client): a missing port is 2181,
-- "h:2181/" has no chroot, a chroot is normalised, a list's last item may be the chroot, a
-- malformed hosts argument raises BadArgumentsError at construction (nothing is sent); against
-- a real server, a chroot that does not exist is warned about at start() and
-- ensure_path("/") creates it.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local hosts_mod = require "zklua.hosts"

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

  -- Every form here names no server libzookeeper can look up; kazoo's collect_hosts lets some
  -- through (urlsplit drops tabs and newlines, cuts a host at "?" or "#", drops "user@",
  -- reads port 0 as 2181), and a NUL byte cut the list the library got short ("\0\0" was an
  -- empty list: the library took it, dropped the connection without a word and never
  -- connected again).  Each is refused with what is wrong, whichever way it comes.
  local HOSTILE = {
    { "\0", "NUL" }, { "\0\0", "NUL" }, { "h\0:2181", "NUL" }, { "127.0.0.1:2181\0", "NUL" },
    { "h\1:2181", "control character" }, { "h\t1:2181", "control character" },
    { "h\n1:2181", "control character" }, { "h\127", "control character" },
    { "", "no server" }, { "   ", "no server" }, { ",", "empty" }, { "h:1,", "empty" },
    { "h:1,,k:2", "empty" }, { ":2181", "empty host" }, { " :2181", "empty host" },
    { "[]:2181", "empty host" }, { "h 1:2181", "letters, digits" },
    { "h:0", "1 to 65535" }, { "h:65536", "1 to 65535" }, { "h:-1", "1 to 65535" },
    { "h:x", "1 to 65535" }, { "h: 1", "1 to 65535" }, { "h:1e3", "1 to 65535" },
    { "h:99999999999999999999", "1 to 65535" }, { "h:1:2", "more than one ':'" },
    { "::1:2181", "IPv6" }, { "fe80::1", "IPv6" }, { "[::1:2181", "unclosed" },
    { "[zk01]:2181", "not an IPv6 address" }, { "[1.2.3.4]:2181", "not an IPv6 address" },
    { "[1::2::3]:2181", "not an IPv6 address" }, { "[::1]x", "1 to 65535" },
    { "user@h:2181", "letters, digits" }, { "h?x:2181", "letters, digits" },
    { "h#x", "letters, digits" }, { "a..b:2181", "empty label" }, { ".h", "empty label" },
    { string.rep("a", 64) .. ".b", "longer than 63" },
    { string.rep("a.", 127) .. "ab", "longer than 253" },
    { "999.1.1.1:2181", "not an IPv4 address" }, { "1.2.3.4.5", "not an IPv4 address" },
    { "h\195\169:2181", "over 127" },
    -- the chroot is the client's to check (zklua.check.path), not collect_hosts'
    { "h:2181/a\0b", "zero byte", chroot = true }, { "h:2181/a/../b", "\"..\"", chroot = true },
  }
  local HOSTILE_LISTS = {
    { {}, "no server" }, { { "/app" }, "no server" }, { { "h:1", 7 }, "must be a string" },
    { { "a:1,b:2" }, "one server per list item" }, { { "a:1/x", "/y" }, "one server per" },
    { { "\0" }, "NUL" }, { { "h:1", "" }, "empty" }, { { "h:1", "/a\0" }, "zero byte" },
  }

  local function refused(fname, fn, value, wanted)
    local err = helpers.raises(errors.BadArgumentsError, fn, value)
    local text = tostring(err)
    assert.is_truthy(text:find(fname, 1, true), text)
    assert.is_truthy(text:find(wanted, 1, true), "wanted \"" .. wanted .. "\" in " .. text)
  end

  it("refuses every hosts form that names no server the library can look up", function()
    for _, case in ipairs(HOSTILE) do
      refused("client", zklua.client, case[1], case[2])
      refused("client", zklua.client, { hosts = case[1] }, case[2])
      if not case.chroot then
        refused("collect_hosts", hosts_mod.collect_hosts, case[1], case[2])
      end
    end
    for _, case in ipairs(HOSTILE_LISTS) do
      refused("client", zklua.client, { hosts = case[1] }, case[2])
    end
    helpers.raises(errors.BadArgumentsError, zklua.client, { hosts = 42 })
  end)

  it("accepts what kazoo accepts, IPv6 in brackets, and hands the library what it reads", function()
    local cases = {
      { "127.0.0.1:2181, 192.168.1.2:2181, \n  132.254.111.10:2181",
        { { "127.0.0.1", 2181 }, { "192.168.1.2", 2181 }, { "132.254.111.10", 2181 } } },
      { "[fe80::200:5aee:feaa:20a2]:2181", { { "fe80::200:5aee:feaa:20a2", 2181 } } },
      { "[::1]", { { "::1", 2181 } } }, { "[::1]:", { { "::1", 2181 } } },
      { "[FE80::1%eth0]:2182", { { "fe80::1%eth0", 2182 } } },
      { "[::ffff:127.0.0.1]:7", { { "::ffff:127.0.0.1", 7 } } },
      { "ZK01:2181, zk_02 :2182,zk-03.example.com.", { { "zk01", 2181 }, { "zk_02", 2182 },
                                                      { "zk-03.example.com.", 2181 } } },
      { "h:", { { "h", 2181 } } }, { "127.1:65535", { { "127.1", 65535 } } },
    }
    for _, case in ipairs(cases) do
      local zk = zklua.client{ hosts = case[1], randomize_hosts = false }
      assert.are.same(case[2], zk.hosts)
      zk:close()
    end
    -- libzookeeper splits an entry at its last ':' and looks the host up as written: it
    -- finds no "[::1]", so an IPv6 address goes to it unbracketed
    assert.are.equal("::1:2181,h:2181/app", hosts_mod.address({ "::1", 2181 }) .. ",h:2181/app")
  end)

  it("set_hosts refuses a hostile hosts argument and leaves the client as it was", function()
    local zk = zklua.client{ hosts = "127.0.0.1:1,127.0.0.2:2", randomize_hosts = false }
    finally(function() zk:close() end)
    local before = { hosts = zk.hosts, _hosts = zk._hosts, chroot = zk.chroot,
                     randomize_hosts = zk.randomize_hosts, state = zk.state }
    local function unchanged()
      assert.are.same(before, { hosts = zk.hosts, _hosts = zk._hosts, chroot = zk.chroot,
                                randomize_hosts = zk.randomize_hosts, state = zk.state })
    end
    for _, case in ipairs(HOSTILE) do
      local err = helpers.raises(errors.BadArgumentsError, zk.set_hosts, zk, case[1], true)
      assert.is_truthy(tostring(err):find("set_hosts", 1, true), tostring(err))
      unchanged()
    end
    for _, case in ipairs(HOSTILE_LISTS) do
      helpers.raises(errors.BadArgumentsError, zk.set_hosts, zk, case[1], true)
      unchanged()
    end
    -- nor does a refused chroot change or a bad flag change anything
    helpers.raises(errors.ConfigurationError, zk.set_hosts, zk, "127.0.0.1:3/other", true)
    unchanged()
    helpers.raises(errors.BadArgumentsError, zk.set_hosts, zk, "127.0.0.1:3", "yes")
    unchanged()
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

    -- a client whose listener records every state it hears
    local function recorded(opts)
      local zk = zklua.client(opts)
      local states = {}
      zk:add_listener(function(state) states[#states + 1] = state end)
      return zk, states
    end

    it("set_hosts with a hostile string keeps the connection and the session", function()
      local zk, states = recorded{ hosts = server.hosts, timeout = 2 }
      finally(function() zk:close() end)
      zk:start()
      local id = zk:client_id()
      for _, case in ipairs(HOSTILE) do
        helpers.raises(errors.BadArgumentsError, zk.set_hosts, zk, case[1])
      end
      for _, case in ipairs(HOSTILE_LISTS) do
        helpers.raises(errors.BadArgumentsError, zk.set_hosts, zk, case[1])
      end
      -- a round trip after every refusal: the connection carries requests as before
      assert.is_not_nil(zk:exists("/zookeeper"))
      assert.are.same({ "CONNECTED" }, states)
      assert.are.equal(id, zk:client_id())
      assert.are.equal(server.hosts, zk._hosts)
    end)

    -- The library moves the connection off a server whose address is not in the new list:
    -- it closes it and marks the handle not connected without a session event, and the
    -- connection attempts that fail afterwards send none either.  The client stayed CONNECTED
    -- for ever (no SUSPENDED, no LOST) while nothing was carried, and requests hung.
    -- 127.0.0.2 is loopback too, but the server listens on 127.0.0.1 only: refused.
    it("set_hosts to servers that refuse: SUSPENDED at once, then LOST, then back", function()
      local port = server.hosts:match(":(%d+)$")
      local zk, states = recorded{ hosts = server.hosts, timeout = 2, randomize_hosts = false }
      finally(function() zk:close() end)
      zk:start()
      local id = zk:client_id()
      zk:set_hosts("127.0.0.2:" .. port)
      testing.wait_for(function() return zk.state == "SUSPENDED" end, 30, "SUSPENDED")
      -- a request made now waits for a connection, and ends when the session is lost
      local ok, err = pcall(zk.exists, zk, "/zookeeper")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SessionExpiredError), tostring(err))
      testing.wait_for(function() return zk.state == "LOST" end, 30, "LOST")
      assert.are.same({ "CONNECTED", "SUSPENDED", "LOST" }, states)
      -- the servers of the first list serve again: a new session
      zk:set_hosts(server.hosts)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "CONNECTED again")
      assert.are_not.equal(id, zk:client_id())
      assert.is_not_nil(zk:exists("/zookeeper"))
      assert.are.same({ "CONNECTED", "SUSPENDED", "LOST", "CONNECTED" }, states)
    end)

    it("a connection that carries nothing, to a name of several addresses: SUSPENDED, LOST",
       function()
      local p = testing.proxy(server:node(1))
      finally(function() p:stop() end)
      local zk, states = recorded{ hosts = "localhost:" .. p.hosts:match(":(%d+)$"),
                                   timeout = 2 }
      finally(function() zk:close() end)
      zk:start()
      assert.is_not_nil(zk:exists("/zookeeper"))
      p:silence("both")
      testing.wait_for(function() return zk.state == "LOST" end, 30, "LOST")
      assert.are.same({ "CONNECTED", "SUSPENDED", "LOST" }, states)
      p:resume()
      testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "CONNECTED again")
      assert.is_not_nil(zk:exists("/zookeeper"))
    end)
  end)

  -- A server on ::1 only: "[::1]:port" reaches it (libzookeeper is handed "::1:port", which
  -- it reads; it finds no "[::1]").  The harness's readiness probe speaks IPv4: this node's
  -- asks over IPv6 (luasocket).
  describe("on an IPv6 server", function()
    local server
    setup(function()
      local socket = require "socket"
      server = testing.server()
      local node = server:node(1)
      node:stop()
      local config = node._config
      node._config = function(self)
        return (config(self):gsub("clientPortAddress=127%.0%.0%.1", "clientPortAddress=::1"))
      end
      node.mode = function(self)
        local c = socket.tcp6()
        c:settimeout(1)
        local ok = c:connect("::1", self.port)
        local answer = ok and c:send("srvr") and c:receive("*a")
        c:close()
        return answer and answer:match("Mode: ([%w%-]+)")
      end
      node:start()
    end)
    teardown(function() server:stop() end)

    it("connects to [::1]:port, with a chroot, also after set_hosts", function()
      local port = server:node(1).port
      local zk = zklua.client{ hosts = "[::1]:" .. port .. "/v6", timeout = 2 }
      finally(function() zk:close() end)
      assert.are.same({ { "::1", port } }, zk.hosts)
      zk:start()
      assert.is_true(zk:ensure_path("/"))
      assert.are.equal("/x", zk:create("/x", "v6"))
      assert.are.equal("v6", (zk:get("/x")))
      -- set_hosts from a server that is not there to this one, as a list with the chroot
      local other, states = zklua.client{ hosts = "127.0.0.1:" .. port .. "/v6", timeout = 2 }, {}
      finally(function() other:close() end)
      other:add_listener(function(state) states[#states + 1] = state end)
      other:set_hosts({ " [::1]:" .. port .. " ", "/v6" })
      other:start()
      assert.are.equal("v6", (other:get("/x")))
      assert.are.same({ "CONNECTED" }, states)
    end)
  end)
end)
