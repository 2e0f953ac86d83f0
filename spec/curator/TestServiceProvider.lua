-- Curator's TestServiceProvider (Curator 5.4, curator-x-discovery's details package) in Lua:
-- every test and assertion, against a real server, with zklua's ServiceDiscovery and
-- ServiceProvider.  Curator's thisInstance is registered right after making the discovery.
local support = require "curator.support"

describe("TestServiceProvider", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testBasic", function()
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    local instance = sd:register{ payload = "thing", name = "test", port = 10064 }
    local provider = sd:ServiceProvider("test")
    provider:start()
    assert.are.same(instance, provider:get_instance())
    assert.are.same({ instance }, provider:get_all_instances())
    provider:close()
    sd:close()
  end)

  it("testDisabledInstance", function()
    local client = h:client()
    -- JsonInstanceSerializer(String.class, false): "enabled" written
    local sd = client:ServiceDiscovery("/test", { with_enabled = true })
    sd:register{ payload = "thing", name = "test", port = 10064, enabled = false }
    local provider = sd:ServiceProvider("test")
    provider:start()
    assert.is_nil(provider:get_instance())
    assert.is_true(#provider:get_all_instances() == 0,
                   "Disabled instance still appears available via service provider")
    provider:close()
    sd:close()
  end)
end)
