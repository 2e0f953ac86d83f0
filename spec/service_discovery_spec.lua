-- Service discovery (Curator x-discovery's layout and bytes): ServiceDiscovery, ServiceCache and
-- ServiceProvider (lua/zklua/recipes/service_*.lua over src/recipes/service_instance.c and the
-- C TreeCache) against a real standalone server.  Interop with real Curator programs is in
-- spec/curator_discovery_spec.lua; the nginx balancer in spec/nginx_balancer_spec.lua.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local eventually = helpers.eventually
local raises = helpers.raises
local LONG = 60 -- s: an upper bound only (the machine is shared)

-- A standalone server and two started clients on it (a describe block's setup).
local function start_server()
  local server = testing.server()
  return server, helpers.clients(server.hosts, 2)
end

-- Closes the clients and stops the server start_server gave (any may be nil: setup failed).
local function stop_server(server, zk, other)
  if zk then zk:close() end
  if other then other:close() end
  if server then server:stop() end
end

-- What Curator 5.4's JsonInstanceSerializer(String.class) writes for
-- new ServiceInstance<>("name", "id", "address", 10, 20, "payload", 0, DYNAMIC,
--                       new UriSpec("{a}/b/{ c }\n\u0001"), true)
-- (captured from the Debian jars; spec/curator_discovery_spec.lua compares live).
local CURATOR_BYTES = '{"name":"name","id":"id","address":"address","port":10,"sslPort":20,' ..
  '"payload":"payload","registrationTimeUTC":0,"serviceType":"DYNAMIC","uriSpec":{"parts":[' ..
  '{"value":"a","variable":true},{"value":"/b/","variable":false},{"value":"c","variable":true},' ..
  '{"value":"\\n\\u0001","variable":false}]}}'

describe("service instance bytes", function()
  local instance = { name = "name", id = "id", address = "address", port = 10, ssl_port = 20,
                     payload = "payload", registration_time_utc = 0, service_type = "DYNAMIC",
                     uri_spec = "{a}/b/{ c }\n\1" }

  it("are Curator's, member for member", function()
    assert.are.equal(CURATOR_BYTES, core.service_instance_encode(instance))
    local with_enabled = core.service_instance_encode(instance, true)
    assert.are.equal(CURATOR_BYTES:sub(1, -2) .. ',"enabled":true}', with_enabled)
  end)

  it("read back to the same instance", function()
    local back = assert(core.service_instance_decode(CURATOR_BYTES))
    assert.are.equal("name", back.name)
    assert.are.equal("id", back.id)
    assert.are.equal(10, back.port)
    assert.are.equal(20, back.ssl_port)
    assert.are.equal("payload", back.payload)
    assert.is_nil(back.payload_json) -- a string payload is payload, other JSON payload_json
    assert.are.equal("{a}/b/{c}\n\1", back.uri_spec) -- variable names trimmed, as Curator
    assert.is_true(back.enabled)
    local disabled = assert(core.service_instance_decode(
      core.service_instance_encode({ name = "n", enabled = false }, true)))
    assert.is_false(disabled.enabled)
  end)

  it("take Jackson's defaults for missing members and keep object payloads", function()
    local empty = assert(core.service_instance_decode("{}"))
    assert.is_true(empty.enabled) -- Curator: "no 'enabled' should be assumed enabled"
    assert.is_nil(empty.name)
    assert.is_nil(empty.port)
    local java = assert(core.service_instance_decode(
      '{"name":"x","payload":{"@class":"com.example.Details","weight":3},"unknown":1}'))
    assert.are.equal('{"@class":"com.example.Details","weight":3}', java.payload_json)
    assert.is_nil(java.payload)
  end)

  it("refuse what Curator refuses", function()
    assert.is_nil(core.service_instance_decode("[1]"))
    assert.is_nil(core.service_instance_decode('{"port":"80"}'))
    assert.is_nil(core.service_instance_decode('{"serviceType":"ODD"}'))
    for _, spec in ipairs({ "{a", "a}", "{a{b}}" }) do
      local bytes, field = core.service_instance_encode({ uri_spec = spec })
      assert.is_nil(bytes)
      assert.are.equal("uri_spec", field)
    end
  end)

  it("hold the uriSpec parts build_uri and uri_spec_parts read (Curator's UriSpec)", function()
    local sdm = require "zklua.recipes.service_discovery"
    for _, spec in ipairs({ "{scheme}://{address}:{port}", "{one}two-three-{[}four{]}-five{six}",
                            "{ a }b{c}", "plain", "" }) do
      local bytes = assert(core.service_instance_encode({ uri_spec = spec }))
      local json = {}
      for value, variable in bytes:gmatch('{"value":"(.-)","variable":(%a+)}') do
        json[#json + 1] = { value = value, variable = variable == "true" }
      end
      assert.are.same(json, sdm.uri_spec_parts(spec), spec)
    end
    for _, spec in ipairs({ "{a", "a}", "{a{b}}" }) do
      raises(errors.BadArgumentsError, sdm.uri_spec_parts, spec)
    end
    local peer = { name = "api", id = "x", address = "10.0.0.7", port = 8080,
                   uri_spec = "{scheme}://{address}:{port}/{missing}" }
    assert.are.equal("http://10.0.0.7:8080/", sdm.build_uri(nil, peer))
    assert.are.equal("https://10.0.0.7:8080/m", sdm.build_uri(nil, peer, { scheme = "https", missing = "m" }))
  end)
end)

describe("ServiceDiscovery", function()
  local server, zk, other

  setup(function() server, zk, other = start_server() end)
  teardown(function() stop_server(server, zk, other) end)

  it("registers in Curator's layout and finds instances", function()
    local sd = zk:ServiceDiscovery("/sd1/services")
    local a = sd:register{ name = "api", address = "10.0.0.1", port = 8080 }
    local b = sd:register{ name = "api", id = "b", address = "10.0.0.2", port = 8081,
                           payload = "blue", uri_spec = "{scheme}://{address}:{port}" }
    sd:register{ name = "db", id = "d1", address = "10.0.0.3", port = 5432 }
    assert.truthy(a.id:match("^%x+%-%x+%-%x+%-%x+%-%x+$"))
    local data, stat = other:get("/sd1/services/api/" .. a.id)
    assert.are_not.equal(0, stat.ephemeralOwner) -- DYNAMIC: an ephemeral znode
    assert.are.equal(core.service_instance_encode(a), data)
    local reader = other:ServiceDiscovery("/sd1/services")
    assert.are.same({ "api", "db" }, reader:query_for_names())
    local found = reader:query_for_instances("api")
    assert.are.equal(2, #found)
    local by_id = {}
    for _, inst in ipairs(found) do by_id[inst.id] = inst end
    assert.are.equal("blue", by_id.b.payload)
    assert.are.equal(8081, by_id.b.port)
    assert.are.equal("{scheme}://{address}:{port}", by_id.b.uri_spec)
    assert.are.equal("10.0.0.1", reader:query_for_instance("api", a.id).address)
    assert.is_nil(reader:query_for_instance("api", "nope"))
    assert.are.same({}, reader:query_for_instances("none"))
    b.payload = "green"
    sd:update(b)
    assert.are.equal("green", reader:query_for_instance("api", "b").payload)
    sd:unregister(b)
    assert.is_nil(reader:query_for_instance("api", "b"))
    sd:register{ name = "api", id = a.id, address = "10.0.0.9", port = 1 } -- replaces
    assert.are.equal("10.0.0.9", reader:query_for_instance("api", a.id).address)
    local static = sd:register{ name = "db", id = "s", service_type = "STATIC" }
    local _, sstat = other:get("/sd1/services/db/" .. static.id)
    assert.are.equal(0, sstat.ephemeralOwner)
    sd:close() -- unregisters every instance it registered
    assert.are.same({}, reader:query_for_instances("api"))
    assert.are.same({}, reader:query_for_instances("db"))
  end)

  it("checks its arguments before anything is sent", function()
    local sd = zk:ServiceDiscovery("/sd2")
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a/b" })
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a", port = 70000 })
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a", port = "80" })
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a", colour = "red" })
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a", uri_spec = "{x" })
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a", payload = "\255" })
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a", payload_json = "{" })
    raises(errors.BadArgumentsError, sd.register, sd, { name = "a", service_type = "X" })
    raises(errors.BadArgumentsError, zk.ServiceDiscovery, zk, "/a/../b")
    raises(errors.KazooException, sd.update, sd, { name = "a", id = "never" })
    assert.is_nil(other:exists("/sd2"))
    sd:close()
  end)

  it("ends its calls with ConnectionClosedError once the client stopped", function()
    local gone = helpers.client(server.hosts)
    local sd = gone:ServiceDiscovery("/sd4")
    local cache = sd:ServiceCache("api")
    gone:stop()
    raises(errors.ConnectionClosedError, sd.register, sd, { name = "api", address = "h", port = 1 })
    raises(errors.ConnectionClosedError, sd.query_for_names, sd)
    raises(errors.ConnectionClosedError, sd.query_for_instances, sd, "api")
    raises(errors.ConnectionClosedError, cache.start, cache, 5)
    gone:close()
  end)

  it("ends every call while the connection is cut (SUSPENDED)", function()
    local proxy = testing.proxy(server:node(1))
    local cut = zklua.client{ hosts = proxy.hosts, timeout = 4 }
    cut:start()
    local sd = cut:ServiceDiscovery("/sd5")
    local cache = sd:ServiceCache("api")
    proxy:silence("both")
    testing.wait_for(function() return cut.state == "SUSPENDED" end, LONG, "SUSPENDED")
    local allowed = { ConnectionLoss = true, OperationTimeoutError = true,
                      SessionExpiredError = true, TimeoutError = true }
    local calls = {
      function() return sd:register{ name = "api", id = "me", address = "h", port = 1 } end,
      function() return sd:query_for_instances("api") end,
      function() return cache:start(1) end,
    }
    for i, call in ipairs(calls) do
      local ok, err = pcall(call)
      assert.is_false(ok, "call " .. i .. " returned while cut off")
      assert(errors.is_error(err) and allowed[err.name], "call " .. i .. ": " .. tostring(err))
    end
    proxy:resume()
    cut:close()
    proxy:stop()
  end)

  it("registers its instances again after a session expiry", function()
    local owner = helpers.client(server.hosts)
    local sd = owner:ServiceDiscovery("/sd3")
    local inst = sd:register{ name = "api", id = "x", address = "10.1.1.1", port = 80 }
    inst.port = 81
    sd:update(inst)
    local _, before = other:get("/sd3/api/x")
    local reconnected = 0
    owner:add_listener(function(state) if state == "CONNECTED" then reconnected = reconnected + 1 end end)
    helpers.expire(owner)
    testing.wait_for(function() return reconnected > 0 end, LONG, "the new session")
    local reader = other:ServiceDiscovery("/sd3")
    eventually(function()
      local stat = other:exists("/sd3/api/x")
      return stat ~= nil and stat.ephemeralOwner ~= before.ephemeralOwner
    end, LONG, "the instance registered on the new session")
    assert.are.equal(81, reader:query_for_instance("api", "x").port) -- its latest data
    sd:close()
    owner:close()
  end)

  -- Issue 21: the registrar's connection is down past its session timeout (it counts the
  -- session LOST and opens a new one) while the server still holds the old session (a second
  -- client resumed it, so it lives through the test).  As Curator 5.4's ServiceDiscovery, the
  -- registration replaces the old session's znode at once (deleted, with its version, and
  -- created again: a cache sees it go and come back, as with Curator; the nginx balancer
  -- bridges that, spec/nginx_balancer_spec.lua).
  it("after LOST, replaces at once the instance its old session still owns", function()
    for _, service_type in ipairs({ "DYNAMIC", "DYNAMIC_SEQUENTIAL" }) do
      local proxy = testing.proxy(server:node(1))
      local owner = zklua.client{ hosts = proxy.hosts, timeout = 4 }
      local states = {}
      owner:add_listener(function(state) states[#states + 1] = state end)
      owner:start()
      local base = "/sd9" .. service_type:lower()
      local sd = owner:ServiceDiscovery(base)
      local cache = other:ServiceDiscovery(base):ServiceCache("api")
      sd:register{ name = "api", id = "r", address = "10.4.4.4", port = 80,
                   service_type = service_type }
      cache:start()
      eventually(function() return #cache:get_instances() == 1 end, LONG, "the cache to load")
      local child = other:get_children(base .. "/api")[1]
      local old_id, old_password = owner:client_id()
      proxy:refuse(true)
      proxy:drop()
      local holder = zklua.client{ hosts = server.hosts, timeout = 4,
                                   client_id = { old_id, old_password } }
      holder:start()
      testing.wait_for(function() return states[#states] == "LOST" end, LONG,
                       "the registrar to count its session LOST")
      proxy:resume()
      eventually(function()
        local stat = other:exists(base .. "/api/" .. child)
        return stat ~= nil and stat.ephemeralOwner == owner:client_id()
      end, LONG, "the instance on the new session, under the same name")
      assert.are.equal(old_id, (holder:client_id())) -- the old session still lives
      assert.are.same({ child }, other:get_children(base .. "/api"))
      holder:close() -- the old session ends: the instance stays
      eventually(function()
        local list = cache:get_instances()
        return #list == 1 and list[1].id == "r"
      end, LONG, "the cache to hold the instance after the old session ended")
      assert.are.equal(owner:client_id(), other:exists(base .. "/api/" .. child).ephemeralOwner)
      cache:close()
      sd:close()
      owner:close()
      proxy:stop()
    end
  end)

  it("registers DYNAMIC_SEQUENTIAL as Curator: <id><sequence>, ephemeral; update, expiry " ..
     "and unregister act on that node", function()
    local owner = helpers.client(server.hosts)
    local sd = owner:ServiceDiscovery("/sd7")
    local inst = sd:register{ name = "api", id = "q", address = "10.3.3.3", port = 80,
                              service_type = "DYNAMIC_SEQUENTIAL" }
    assert.are.equal("DYNAMIC_SEQUENTIAL", inst.service_type)
    local children = other:get_children("/sd7/api")
    assert.are.equal(1, #children)
    assert.truthy(children[1]:match("^q%d%d%d%d%d%d%d%d%d%d$"), children[1])
    local path = "/sd7/api/" .. children[1]
    local data, stat = other:get(path)
    assert.are.equal(owner:client_id(), stat.ephemeralOwner)
    assert.are.equal(core.service_instance_encode(inst), data)
    assert.are.equal("q", core.service_instance_decode(data).id) -- the JSON's id is the id
    assert.is_nil(other:exists("/sd7/api/q"))
    local reader = other:ServiceDiscovery("/sd7")
    assert.are.equal("10.3.3.3", reader:query_for_instance("api", "q").address)
    assert.is_nil(reader:query_for_instance("api", "q0"))
    local all = reader:query_for_instances("api")
    assert.are.equal(1, #all)
    assert.are.equal("q", all[1].id)
    inst.port = 81
    sd:update(inst) -- the sequential node itself, not <base>/<name>/<id>
    assert.are.equal(81, core.service_instance_decode((other:get(path))).port)
    assert.is_nil(other:exists("/sd7/api/q"))
    helpers.expire(owner)
    eventually(function()
      local now = other:exists(path)
      return now ~= nil and now.ephemeralOwner == owner:client_id()
    end, LONG, "the instance registered under the same name on the new session")
    assert.are.same({ children[1] }, other:get_children("/sd7/api"))
    assert.are.equal(81, reader:query_for_instance("api", "q").port) -- its latest data
    sd:unregister(inst)
    assert.are.same({}, other:get_children("/sd7/api"))
    sd:close()
    owner:close()
  end)

  it("keeps a registration someone deleted, and across stop() and start()", function()
    local owner = helpers.client(server.hosts)
    local sd = owner:ServiceDiscovery("/sd6")
    sd:register{ name = "api", id = "k", address = "10.2.2.2", port = 80 }
    local _, first = other:get("/sd6/api/k")
    other:delete("/sd6/api/k")
    eventually(function()
      local stat = other:exists("/sd6/api/k")
      return stat ~= nil and stat.czxid ~= first.czxid
    end, LONG, "the instance created again")
    owner:stop()
    eventually(function() return other:exists("/sd6/api/k") == nil end, LONG,
               "the znode gone with the session")
    owner:start()
    eventually(function() return other:exists("/sd6/api/k") ~= nil end, LONG,
               "the instance registered again after start()")
    assert.are.equal(80, other:ServiceDiscovery("/sd6"):query_for_instance("api", "k").port)
    sd:close()
    assert.is_nil(other:exists("/sd6/api/k"))
    owner:close()
  end)
end)

describe("ServiceCache and ServiceProvider", function()
  local server, zk, peer

  setup(function() server, zk, peer = start_server() end)
  teardown(function() stop_server(server, zk, peer) end)

  local function ids(list)
    local out = {}
    for i, inst in ipairs(list) do out[i] = inst.id end
    return out
  end

  -- Registers an "api" instance (127.0.0.1, port 1) with each of the ids.
  local function register_ids(reg, list)
    for _, id in ipairs(list) do
      reg:register{ name = "api", id = id, address = "127.0.0.1", port = 1 }
    end
  end

  it("follows registrations, updates and session ends with listeners", function()
    local reg = peer:ServiceDiscovery("/sc1")
    reg:register{ name = "api", id = "a", address = "127.0.0.1", port = 1 }
    local cache = zk:ServiceDiscovery("/sc1"):ServiceCache("api")
    local changes = 0
    cache:listen(function(event) if event.type == "CACHE_CHANGED" then changes = changes + 1 end end)
    cache:start(LONG)
    assert.are.same({ "a" }, ids(cache:get_instances())) -- loaded when start returns
    raises(errors.KazooException, cache.start, cache, LONG) -- once
    local seen = changes
    local b = reg:register{ name = "api", id = "b", address = "127.0.0.1", port = 2 }
    eventually(function() return #cache:get_instances() == 2 end, LONG, "b in the cache")
    assert.is_true(changes > seen)
    b.port = 3
    reg:update(b)
    eventually(function() return cache:get_instances()[2].port == 3 end, LONG, "the update")
    -- a znode that is not an instance is left out
    peer:create("/sc1/api/junk", "not json")
    reg:unregister("a")
    eventually(function() return #cache:get_instances() == 1 end, LONG, "a gone")
    -- the registering session ends: its ephemeral instances leave the cache
    local owner = helpers.client(server.hosts)
    owner:ServiceDiscovery("/sc1"):register{ name = "api", id = "c", address = "127.0.0.1", port = 4 }
    eventually(function() return #cache:get_instances() == 2 end, LONG, "c in the cache")
    owner:close()
    eventually(function() return #cache:get_instances() == 1 end, LONG, "c gone with its session")
    cache:close()
    assert.are.same({}, cache:get_instances())
    reg:close()
  end)

  it("keeps its instances through its own session's expiry and catches up", function()
    local reg = peer:ServiceDiscovery("/sc2")
    reg:register{ name = "api", id = "a", address = "127.0.0.1", port = 1 }
    local watcher = helpers.client(server.hosts)
    local cache = watcher:ServiceDiscovery("/sc2"):ServiceCache("api")
    local events = {}
    cache:listen(function(event) events[#events + 1] = event.type end)
    cache:start(LONG)
    helpers.expire(watcher)
    assert.are.same({ "a" }, ids(cache:get_instances())) -- kept meanwhile
    reg:register{ name = "api", id = "b", address = "127.0.0.1", port = 2 }
    eventually(function() return #cache:get_instances() == 2 end, LONG, "b after the expiry")
    assert.truthy(helpers.in_order(events, { "CONNECTION_LOST", "CACHE_CHANGED" }))
    cache:close()
    watcher:close()
    reg:close()
  end)

  it("provides instances by round robin, random and sticky", function()
    local reg = peer:ServiceDiscovery("/sp1")
    register_ids(reg, { "a", "b", "c" })
    reg:register{ name = "api", id = "off", address = "127.0.0.1", port = 1, enabled = false }
    local sd = zk:ServiceDiscovery("/sp1", { with_enabled = true })
    local rr = sd:ServiceProvider("api")
    rr:start(LONG)
    -- "off" was written without "enabled" (reg's default): enabled, as Curator reads it
    assert.are.equal(4, #rr:get_all_instances())
    reg:close()
    local reg2 = peer:ServiceDiscovery("/sp1", { with_enabled = true })
    register_ids(reg2, { "a", "b", "c" })
    reg2:register{ name = "api", id = "off", address = "127.0.0.1", port = 1, enabled = false }
    eventually(function()
      return #rr.cache:get_instances() == 4 and table.concat(ids(rr:get_all_instances()), ",") == "a,b,c"
    end, LONG, "every instance registered again, off disabled and filtered out")
    local got = {}
    for i = 1, 6 do got[i] = rr:get_instance().id end
    assert.are.same({ "a", "b", "c", "a", "b", "c" }, got)
    local random = sd:ServiceProvider("api", { strategy = "random", cache = rr.cache })
    local seen = {}
    for _ = 1, 200 do seen[random:get_instance().id] = true end
    assert.are.same({ a = true, b = true, c = true }, seen)
    local sticky = sd:ServiceProvider("api", { strategy = "sticky", cache = rr.cache })
    local first = sticky:get_instance().id
    for _ = 1, 5 do assert.are.equal(first, sticky:get_instance().id) end
    reg2:unregister(first)
    eventually(function() return #rr:get_all_instances() == 2 end, LONG, "the sticky one gone")
    local second = sticky:get_instance().id
    assert.are_not.equal(first, second)
    assert.are.equal(second, sticky:get_instance().id)
    assert.are.equal(1, sticky.instance_number)
    rr:close()
    reg2:close()
  end)

  it("skips instances reported failing (DownInstancePolicy)", function()
    local reg = peer:ServiceDiscovery("/sp2")
    register_ids(reg, { "a", "b" })
    local p = zk:ServiceDiscovery("/sp2"):ServiceProvider("api", { down_threshold = 2,
                                                                   down_timeout = 2 })
    p:start(LONG)
    p:note_error("a")
    assert.are.equal(2, #p:get_all_instances()) -- one error: under the threshold
    p:note_error("a")
    assert.are.same({ "b" }, ids(p:get_all_instances()))
    for _ = 1, 4 do assert.are.equal("b", p:get_instance().id) end
    -- down for down_timeout after its first error, then usable again
    eventually(function() return #p:get_all_instances() == 2 end, LONG, "a back")
    p:close()
    reg:close()
  end)

  it("keeps the last instances for keep_last when the list goes empty, marked stale", function()
    local reg = peer:ServiceDiscovery("/sp5")
    register_ids(reg, { "a", "b" })
    local p = zk:ServiceDiscovery("/sp5"):ServiceProvider("api", { keep_last = 3600 })
    local off = zk:ServiceDiscovery("/sp5"):ServiceProvider("api") -- keep_last 0: off
    p:start(LONG)
    off:start(LONG)
    assert.is_false(p.stale)
    assert.is_nil(p:stale_for())
    reg:close() -- both instances go
    eventually(function() return #off:get_all_instances() == 0 end, LONG, "the list to empty")
    eventually(function() return #p.cache:get_instances() == 0 end, LONG, "p's cache to empty")
    assert.are.same({ "a", "b" }, ids(p:get_all_instances()))
    assert.is_true(p.stale)
    assert.is_true(p:stale_for() >= 0)
    assert.is_not_nil(p:get_instance())
    assert.is_nil(off:get_instance())
    -- a registration ends it
    local again = peer:ServiceDiscovery("/sp5")
    register_ids(again, { "c" })
    eventually(function() return #p.cache:get_instances() == 1 end, LONG, "c in the cache")
    assert.are.same({ "c" }, ids(p:get_all_instances()))
    assert.is_false(p.stale)
    p:close()
    off:close()
    again:close()
  end)

  it("maps keys to instances with the C partition strategies", function()
    local reg = peer:ServiceDiscovery("/sp3")
    local names = {}
    for i = 1, 5 do
      names[i] = "i" .. i
      reg:register{ name = "api", id = names[i], address = "127.0.0.1", port = i }
    end
    for _, strategy in ipairs({ "consistent_hash", "rendezvous" }) do
      -- two providers on two sessions agree on every key
      local p1 = zk:ServiceDiscovery("/sp3"):ServiceProvider("api", { strategy = strategy })
      local p2 = peer:ServiceDiscovery("/sp3"):ServiceProvider("api", { strategy = strategy })
      p1:start(LONG)
      p2:start(LONG)
      local owner, used = {}, {}
      for k = 1, 200 do
        local key = "user-" .. k
        owner[key] = p1:get_instance(key).id
        assert.are.equal(owner[key], p2:get_instance(key).id)
        assert.are.equal(owner[key], p1:get_instance(key).id)
        used[owner[key]] = true
      end
      local n = 0
      for _ in pairs(used) do n = n + 1 end
      assert.is_true(n >= 3, strategy .. " spreads the keys")
      -- an instance reported down: only its keys move
      local victim = owner["user-1"]
      p1:note_error(victim)
      p1:note_error(victim)
      for key, id in pairs(owner) do
        local now = p1:get_instance(key).id
        if id == victim then
          assert.are_not.equal(victim, now)
        else
          assert.are.equal(id, now)
        end
      end
      -- matches the strategy itself
      local direct = core.strategy(strategy, names, { "user-2" })
      assert.are.same({ "user-2" }, direct[owner["user-2"]])
      p1:close()
      p2:close()
    end
    reg:close()
  end)

  it("checks its options", function()
    local sd = zk:ServiceDiscovery("/sp4")
    raises(errors.BadArgumentsError, sd.ServiceProvider, sd, "api", { strategy = "fastest" })
    raises(errors.BadArgumentsError, sd.ServiceProvider, sd, "api", { down_timeout = -1 })
    raises(errors.BadArgumentsError, sd.ServiceProvider, sd, "api", { vnodes = 0.5 })
    raises(errors.BadArgumentsError, sd.ServiceProvider, sd, "api", { cache = {} })
    raises(errors.BadArgumentsError, sd.ServiceProvider, sd, "api", { keep_last = -1 })
    raises(errors.BadArgumentsError, sd.ServiceProvider, sd, "api", { keep_last = math.huge })
    raises(errors.BadArgumentsError, sd.ServiceCache, sd, "a/b")
    local p = sd:ServiceProvider("api")
    assert.is_nil(p:get_instance()) -- not started, nothing known: nil, never a wait
    raises(errors.BadArgumentsError, p.note_error, p, 5)
  end)
end)
