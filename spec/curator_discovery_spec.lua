-- Service discovery interop with real Curator 5.4 (Debian's libcurator-discovery-java): a Java
-- program (spec/fixtures/java/CuratorDiscovery.java, run by spec/support/java.lua) and zklua
-- on one real ZooKeeper server, on the same base path.
-- * the bytes: what zklua writes for an instance is what Curator's serializer writes, and an
--   instance Curator registered reads back and writes again to the very same bytes;
-- * Curator registers, zklua's ServiceCache and ServiceDiscovery see it (and its unregister,
--   and its session's end when the JVM is killed -9);
-- * zklua registers, Curator's ServiceCache and queryForInstances see it (and its unregister).
-- * DYNAMIC_SEQUENTIAL both ways: <base>/<name>/<id><sequence> nodes, each side's cache and
--   queries see the other's; zklua's is registered again (same name) after an expiry.
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local java = require "support.java"

local LONG = 60 -- s: upper bounds only
local BASE = "/curator-sd"

describe("service discovery with Curator 5.4", function()
  local server, zk, curator

  setup(function()
    server = testing.server()
    zk = helpers.client(server.hosts)
  end)
  teardown(function()
    if curator then curator:stop() end
    if zk then zk:close() end
    if server then server:stop() end
  end)
  before_each(function()
    curator = java.start("CuratorDiscovery", server.hosts, BASE, 2000)
  end)
  after_each(function()
    curator:stop()
    curator = nil
    helpers.delete_trees(server.hosts, BASE)
  end)

  it("writes Curator's bytes, and rewrites Curator's own identically", function()
    local fields = { name = "api", id = "z-1", address = "10.0.0.5", port = 8080,
                     payload = "p\"q\\r", registration_time_utc = 1700000000123,
                     service_type = "DYNAMIC", uri_spec = "{scheme}://{address}:{port}" }
    curator:send("serialize api z-1 10.0.0.5 8080 p\"q\\r 1700000000123")
    local _, json = curator:expect("^json (.*)$", LONG)
    assert.are.equal(json, core.service_instance_encode(fields))
    -- an instance Curator registered: read, written again, the same bytes
    curator:send("register api j-1 127.0.0.1 9001 hello")
    curator:expect("^registered j%-1$", LONG)
    local data = zk:get(BASE .. "/api/j-1")
    local instance = assert(core.service_instance_decode(data))
    assert.are.equal(data, core.service_instance_encode(instance))
    assert.are.equal("hello", instance.payload)
    assert.are.equal("{scheme}://{address}:{port}", instance.uri_spec)
  end)

  it("sees the instances Curator registers, and their end", function()
    local sd = zk:ServiceDiscovery(BASE)
    local cache = sd:ServiceCache("api")
    cache:start(LONG)
    curator:send("register api j-1 127.0.0.1 9001 one")
    curator:send("register api j-2 127.0.0.1 9002 two")
    curator:expect("^registered j%-2$", LONG)
    helpers.eventually(function() return #cache:get_instances() == 2 end, LONG, "j-1, j-2 cached")
    local first = cache:get_instances()[1]
    assert.are.equal("j-1", first.id)
    assert.are.equal(9001, first.port)
    assert.are.equal("one", first.payload)
    assert.is_true(first.enabled)
    assert.are.equal("two", sd:query_for_instance("api", "j-2").payload)
    local provider = sd:ServiceProvider("api", { cache = cache })
    local seen = {}
    for _ = 1, 4 do seen[provider:get_instance().id] = true end
    assert.are.same({ ["j-1"] = true, ["j-2"] = true }, seen)
    curator:send("unregister api j-1")
    curator:expect("^unregistered j%-1$", LONG)
    helpers.eventually(function() return #cache:get_instances() == 1 end, LONG, "j-1 gone")
    -- the JVM killed outright: its instance goes with its session
    curator:kill()
    helpers.eventually(function() return #cache:get_instances() == 0 end, LONG,
                       "j-2 gone with Curator's session")
    cache:close()
  end)

  it("registers instances Curator's ServiceCache sees", function()
    curator:send("cache api")
    curator:expect("^cache api %-$", LONG)
    local sd = zk:ServiceDiscovery(BASE)
    sd:register{ name = "api", id = "z-1", address = "127.0.0.1", port = 7001, payload = "zk",
                 uri_spec = "{scheme}://{address}:{port}" }
    curator:expect("^cache api z%-1@127%.0%.0%.1:7001=zk$", LONG)
    sd:register{ name = "api", id = "z-2", address = "127.0.0.1", port = 7002 }
    curator:expect("^cache api z%-1@127%.0%.0%.1:7001=zk,z%-2@127%.0%.0%.1:7002=null$", LONG)
    curator:send("query api")
    curator:expect("^instances api z%-1@127%.0%.0%.1:7001=zk,z%-2@127%.0%.0%.1:7002=null$", LONG)
    sd:unregister("z-1")
    curator:expect("^cache api z%-2@127%.0%.0%.1:7002=null$", LONG)
    sd:close()
    curator:expect("^cache api %-$", LONG)
  end)

  it("registers DYNAMIC_SEQUENTIAL instances Curator sees, also after an expiry", function()
    curator:send("cache api")
    curator:expect("^cache api %-$", LONG)
    local sd = zk:ServiceDiscovery(BASE)
    local inst = sd:register{ name = "api", id = "s-1", address = "127.0.0.1", port = 7101,
                              payload = "seq", service_type = "DYNAMIC_SEQUENTIAL",
                              uri_spec = "{scheme}://{address}:{port}" }
    curator:expect("^cache api s%-1@127%.0%.0%.1:7101=seq$", LONG)
    local children = zk:get_children(BASE .. "/api")
    assert.are.equal(1, #children)
    assert.truthy(children[1]:match("^s%-1%d%d%d%d%d%d%d%d%d%d$"), children[1])
    helpers.expire(zk)
    helpers.eventually(function()
      local stat = zk:exists(BASE .. "/api/" .. children[1])
      return stat ~= nil and stat.ephemeralOwner == zk:client_id()
    end, LONG, "the instance registered under the same name on the new session")
    curator:send("query api")
    curator:expect("^instances api s%-1@127%.0%.0%.1:7101=seq$", LONG)
    inst.payload = "seq2"
    sd:update(inst) -- Curator's cache follows the node made on the new session
    curator:expect("^cache api s%-1@127%.0%.0%.1:7101=seq2$", LONG)
    sd:unregister(inst)
    curator:expect("^cache api %-$", LONG)
    -- the instance's node is gone.  Curator's ServiceCache made <base>/api a container, which
    -- the server deletes once emptied (the harness checks every 500 ms): so /api may be gone
    -- too by now, or left with no children
    assert.is_nil(zk:exists(BASE .. "/api/" .. children[1]))
    local listed, left = pcall(zk.get_children, zk, BASE .. "/api")
    assert(listed or errors.is(left, errors.NoNodeError), tostring(left))
    assert.are.same({}, listed and left or {})
    sd:close()
  end)

  it("sees the DYNAMIC_SEQUENTIAL instances Curator registers", function()
    local sd = zk:ServiceDiscovery(BASE)
    local cache = sd:ServiceCache("api")
    cache:start(LONG)
    curator:send("register_sequential api j-s 127.0.0.1 9101 jseq")
    curator:expect("^registered j%-s$", LONG)
    helpers.eventually(function() return #cache:get_instances() == 1 end, LONG, "j-s cached")
    local got = cache:get_instances()[1]
    assert.are.equal("j-s", got.id)
    assert.are.equal("DYNAMIC_SEQUENTIAL", got.service_type)
    assert.are.equal("jseq", got.payload)
    local children = zk:get_children(BASE .. "/api")
    assert.truthy(children[1]:match("^j%-s%d%d%d%d%d%d%d%d%d%d$"), children[1])
    assert.are.equal(9101, sd:query_for_instance("api", "j-s").port)
    curator:kill()
    helpers.eventually(function() return #cache:get_instances() == 0 end, LONG,
                       "j-s gone with Curator's session")
    cache:close()
  end)
end)
