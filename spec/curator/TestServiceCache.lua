-- Curator's TestServiceCache (Curator 5.4, curator-x-discovery) in Lua: every test and
-- assertion, against a real server, with zklua's ServiceDiscovery, ServiceCache
-- (sd:ServiceCache(name); Curator's ServiceCacheListener.cacheChanged is a CACHE_CHANGED event
-- of cache:listen) and ServiceProvider.  Curator's sleepABit before looking is a bounded wait
-- for what it looks for.
local support = require "curator.support"

-- A count of CACHE_CHANGED events of cache (Curator's latch or semaphore on cacheChanged).
local function changes_of(cache)
  local c = { n = 0 }
  cache:listen(function(event)
    if event.type == "CACHE_CHANGED" then c.n = c.n + 1 end
  end)
  return c
end

describe("TestServiceCache", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testInitialLoad", function()
    local client = h:client()
    local sd = client:ServiceDiscovery("/discovery")
    local cache = sd:ServiceCache("test")
    local latch = changes_of(cache)
    cache:start()
    sd:register{ payload = "test", name = "test", port = 10064 }
    sd:register{ payload = "test", name = "test", port = 10065 }
    sd:register{ payload = "test", name = "test", port = 10066 }
    assert.is_true(client.handler.wait(function() return latch.n >= 3 end, 10))
    local cache2 = sd:ServiceCache("test")
    cache2:start()
    assert.are.equal(3, #cache2:get_instances())
    cache2:close()
    cache:close()
    sd:close()
  end)

  it("testViaProvider", function()
    local client = h:client()
    local sd = client:ServiceDiscovery("/discovery")
    local service_provider = sd:ServiceProvider("test")
    service_provider:start()
    local instance = sd:register{ payload = "thing", name = "test", port = 10064 }
    -- Curator tries getInstance() up to 5 times, sleepABit apart
    local found_instance
    client.handler.wait(function()
      found_instance = service_provider:get_instance()
      return found_instance ~= nil
    end, 10)
    assert.are.same(instance, found_instance)
    sd:register{ address = "foo", payload = "thing", name = "test", port = 10064 }
    client.handler.wait(function() return #service_provider:get_all_instances() == 2 end, 10)
    assert.are.equal(2, #service_provider:get_all_instances())
    service_provider:close()
    sd:close()
  end)

  it("testUpdate", function()
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    local instance = sd:register{ payload = "thing", name = "test", port = 10064 }
    local cache = sd:ServiceCache("test")
    local latch = changes_of(cache)
    cache:start()
    instance = sd:update{ payload = "changed", name = "test", port = 10064, id = instance.id,
                          registration_time_utc = instance.registration_time_utc }
    assert.is_true(client.handler.wait(function() return latch.n >= 1 end, 10))
    assert.are.equal(1, #cache:get_instances())
    assert.are.equal(instance.payload, cache:get_instances()[1].payload)
    cache:close()
    sd:close()
  end)

  it("testCache", function()
    local client = h:client()
    local sd = client:ServiceDiscovery("/discovery")
    local cache = sd:ServiceCache("test")
    cache:start()
    local semaphore = changes_of(cache)
    local function try_acquire(timeout)
      if client.handler.wait(function() return semaphore.n > 0 end, timeout) then
        semaphore.n = semaphore.n - 1
        return true
      end
      return false
    end
    sd:register{ payload = "thing", name = "test", port = 10064 }
    assert.is_true(try_acquire(10))
    sd:register{ payload = "thing", name = "test", port = 10065 }
    assert.is_true(try_acquire(3))
    sd:register{ payload = "thing", name = "another", port = 10064 }
    assert.is_false(try_acquire(3)) -- should not get called for a different service
    cache:close()
    sd:close()
  end)
end)
