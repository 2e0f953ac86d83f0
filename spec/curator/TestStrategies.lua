-- Curator's TestStrategies (Curator 5.4, curator-x-discovery) in Lua: every test and assertion,
-- with zklua's ServiceProvider strategies (round_robin, random, sticky with sticky_base =
-- "random").  Curator hands its strategies a fixed list (an InstanceProvider); zklua's
-- strategies pick from a provider's ServiceCache, so the list is QTY instances registered
-- under one service, ids "0".."9" (Curator's TestInstanceProvider), and a new list replaces
-- them by unregistering those and registering others.
local support = require "curator.support"

describe("TestStrategies", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  -- Curator's TestInstanceProvider(qty, startingAt): the instances registered; returns them.
  local function register(sd, qty, starting_at)
    local list = {}
    for i = 0, qty - 1 do
      list[#list + 1] = sd:register{ id = tostring(i + starting_at), name = "foo" }
    end
    return list
  end

  local function provider_of(client, sd, strategy, qty, opts)
    local o = { strategy = strategy }
    for k, v in pairs(opts or {}) do o[k] = v end
    local provider = sd:ServiceProvider("foo", o)
    provider:start()
    client.handler.wait(function() return #provider:get_all_instances() == qty end, 10)
    assert.are.equal(qty, #provider:get_all_instances())
    return provider
  end

  it("testRandom", function()
    local QTY, ITERATIONS = 10, 1000
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    register(sd, QTY, 0)
    local strategy = provider_of(client, sd, "random", QTY)
    local counts = {}
    for i = 0, QTY - 1 do counts[i] = 0 end
    for _ = 1, ITERATIONS do
      local id = tonumber(strategy:get_instance().id)
      counts[id] = counts[id] + 1
    end
    -- SummaryStatistics.getStandardDeviation(): the sample standard deviation
    local mean = ITERATIONS / QTY
    local sum = 0
    for i = 0, QTY - 1 do sum = sum + (counts[i] - mean) ^ 2 end
    local deviation = math.sqrt(sum / (QTY - 1))
    assert.is_true(deviation <= QTY * 2, tostring(deviation)) -- meager check for even distribution
    strategy:close()
    sd:close()
  end)

  it("testRoundRobin", function()
    local QTY = 10
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    register(sd, QTY, 0)
    local strategy = provider_of(client, sd, "round_robin", QTY)
    for i = 0, QTY - 1 do
      assert.are.equal(tostring(i), strategy:get_instance().id)
    end
    for i = 0, 1234 * QTY - 1 do
      assert.are.equal(tostring(i % QTY), strategy:get_instance().id)
    end
    strategy:close()
    sd:close()
  end)

  it("testSticky", function()
    local QTY = 10
    local client = h:client()
    local sd = client:ServiceDiscovery("/test")
    local first = register(sd, QTY, 0)
    -- new StickyStrategy(new RandomStrategy())
    local strategy = provider_of(client, sd, "sticky", QTY, { sticky_base = "random" })
    local the_instance = strategy:get_instance()
    local instance_number = strategy.instance_number
    for _ = 1, 1000 do
      assert.are.same(the_instance, strategy:get_instance())
    end
    -- instanceProvider = new TestInstanceProvider(QTY, QTY): the other ten
    for _, inst in ipairs(first) do sd:unregister(inst) end
    register(sd, QTY, QTY)
    client.handler.wait(function()
      local list = strategy:get_all_instances()
      return #list == QTY and tonumber(list[1].id) >= QTY
    end, 10)
    assert.is_false(strategy:get_instance().id == the_instance.id)
    assert.is_false(instance_number == strategy.instance_number)
    the_instance = strategy:get_instance()
    for _ = 1, 1000 do
      assert.are.same(the_instance, strategy:get_instance())
    end
    strategy:close()
    sd:close()
  end)
end)
