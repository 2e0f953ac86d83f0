-- Curator's TestServiceDiscovery (Curator 5.4, curator-x-discovery's details package) in Lua:
-- every test and assertion, against real servers, with zklua's ServiceDiscovery (Curator's
-- layout and bytes).  Curator's ServiceDiscoveryBuilder.thisInstance(i) registers i at
-- start(); here sd:register(i) right after making it.  Where Curator counts registrations by
-- overriding internalRegisterService, the test waits until every instance's znode belongs to
-- the client's current session (re-registered on it).
local errors = require "zklua.errors"
local support = require "curator.support"

local function by_id(a, b) return a.id < b.id end

local function sorted(list)
  table.sort(list, by_id)
  return list
end

local function sorted_names(list)
  table.sort(list)
  return list
end

-- The instances of service name whose znodes the client's current session owns: count.
local function on_this_session(client, sd, name)
  local session = client:client_id()
  local n = 0
  for _, inst in ipairs(sd:query_for_instances(name)) do
    local stat = client:exists("/test/" .. name .. "/" .. inst.id)
    if stat and stat.owner_session_id == session then n = n + 1 end
  end
  return n
end

describe("TestServiceDiscovery", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  local function crashed_server(count)
    local server = h:own_server()
    local client = h:client({ hosts = server.hosts })
    local sd = client:ServiceDiscovery("/test")
    for i = 1, count do
      sd:register{ payload = "thing", name = "test", port = 10063 + i }
    end
    assert.are.equal(count, on_this_session(client, sd, "test"))
    assert.are.equal(count, #sd:query_for_instances("test"))
    h:expire_session(client)
    server:node(1):stop()
    server:node(1):start()
    assert.is_true(client.handler.wait(function()
      return client.state == "CONNECTED" and on_this_session(client, sd, "test") == count
    end, 30))
    assert.are.equal(count, #sd:query_for_instances("test"))
    sd:close()
  end

  it("testCrashedServerMultiInstances", function() crashed_server(2) end)

  it("testCrashedServer", function() crashed_server(1) end)

  it("testCrashedInstance", function()
    local client = h:client({ timeout = 2 })
    local sd = client:ServiceDiscovery("/test")
    sd:register{ payload = "thing", name = "test", port = 10064 }
    assert.are.equal(1, #sd:query_for_instances("test"))
    h:expire_session(client)
    assert.is_true(client.handler.wait(function()
      return on_this_session(client, sd, "test") == 1
    end, 10))
    -- Curator sleeps 1.5 session timeouts: whatever the old session leaves, one instance
    client.handler.wait(function() return #sd:query_for_instances("test") ~= 1 end,
                        1.5 * client:session_timeout())
    assert.are.equal(1, #sd:query_for_instances("test"))
    sd:close()
  end)

  it("testMultipleInstances", function()
    local SERVICE_ONE, SERVICE_TWO = "one", "two"
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    local s1_i1 = sd:register{ name = SERVICE_ONE }
    local s1_i2 = sd:register{ name = SERVICE_ONE }
    local s2_i1 = sd:register{ name = SERVICE_TWO }
    local s2_i2 = sd:register{ name = SERVICE_TWO }
    assert.are.same({ SERVICE_ONE, SERVICE_TWO }, sorted_names(sd:query_for_names()))
    local list = sorted({ s1_i1, s1_i2 })
    local queried_instances = sorted(sd:query_for_instances(SERVICE_ONE))
    assert.are.same(list, queried_instances)
    list = sorted({ s2_i1, s2_i2 })
    queried_instances = sorted(sd:query_for_instances(SERVICE_TWO))
    assert.are.same(list, queried_instances)
    sd:close()
  end)

  it("testBasic", function()
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    local instance = sd:register{ payload = "thing", name = "test", port = 10064 }
    assert.are.same({ "test" }, sd:query_for_names())
    assert.are.same({ instance }, sd:query_for_instances("test"))
    sd:close()
  end)

  it("testNoServerOnStart [difference: register-while-disconnected]", function()
    local server = h:own_server()
    local node = server:node(1)
    node:stop()
    support.threads(function(env)
      local client = h:client({ hosts = server.hosts, handler = env.handler, start = false })
      -- Curator's client.start() returns at once; zklua's waits until connected: in a thread
      local starting = env.spawn(function() client:start(60) end)
      env.eventually(function() return client.client_state == "CONNECTING" end, 10, "CONNECTING")
      local sd = client:ServiceDiscovery("/test")
      -- Curator's discovery.start() logs that it could not register and registers once
      -- connected.  zklua's register raises ConnectionLoss and keeps the instance: it is
      -- written once connected
      local instance = { payload = "thing", name = "test", port = 10064, id = support.uuid(),
                         registration_time_utc = 1234, service_type = "DYNAMIC", enabled = true }
      local ok, err = pcall(sd.register, sd, instance)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.ConnectionLoss), tostring(err))
      node:start()
      starting:join(60)
      env.eventually(function() return #sd:query_for_instances("test") == 1 end, 10,
                     "the registration")
      assert.are.same({ "test" }, sd:query_for_names())
      assert.are.same({ instance }, sd:query_for_instances("test"))
      sd:close()
      client:close()
    end)
  end)

  it("testUnregisterService", function()
    local name = "name"
    -- Curator's serializer holds the re-registration after the restart until unregister was
    -- called; here unregister comes while the recipe is re-checking its node after the restart
    local server = h:own_server()
    local client = h:client({ hosts = server.hosts, timeout = 30 })
    local sd = client:ServiceDiscovery("/test")
    local instance = sd:register{ payload = "thing", name = name, port = 10064 }
    assert.is_false(#sd:query_for_instances(name) == 0, "Service should start registered.")
    server:node(1):stop()
    server:node(1):start()
    sd:unregister(instance)
    -- Wait for the rest of registration to finish (Curator's sleepABit, kept as a window in
    -- which a re-registration that outlived unregister would show)
    client.handler.wait(function() return #sd:query_for_instances(name) > 0 end, 1)
    assert.is_true(#sd:query_for_instances(name) == 0, "Service should have unregistered.")
    sd:close()
  end)

  it("testCleaning", function()
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    local instance = sd:register{ payload = "thing", name = "test", port = 10064 }
    sd:unregister(instance)
    -- debugServicesQty(): the instances the discovery keeps
    assert.is_nil(next(sd._entries))
    sd:close()
  end)
end)
