-- Curator's TestSharedCount (Curator 5.4, curator-recipes' shared package) in Lua, against
-- real servers, with zklua's Counter on SharedCount's node (zk:Counter(path, seed,
-- {support_curator = true}): the value as 4 big-endian bytes, a missing node created holding
-- the seed).  zklua's Counter is kazoo's, not a SharedCount (the difference
-- sharedcount-is-counter): it adds (a versioned read-modify-write that retries until it
-- applies) where SharedCount sets (setCount, or trySetCount, which fails on a stale version),
-- and it has no listener: where Curator's countHasChanged listeners see each value, here each
-- client reads it (counter:get()), and where Curator's trySetCount fails on a stale version,
-- zklua's add applies on top of the newest value.  Every other assertion is Curator's.
local support = require "curator.support"
local testing = require "zklua.testing"

local function counter_of(client, path, seed)
  return client:Counter(path, seed, { support_curator = true })
end

-- Curator's SharedCount.toBytes(n): 4 big-endian bytes.
local function to_bytes(n)
  n = n % 4294967296
  local b = {}
  for i = 4, 1, -1 do
    b[i] = string.char(n % 256)
    n = (n - n % 256) / 256
  end
  return table.concat(b)
end

-- SharedCount.setCount(n) on a Counter: adds what makes it n.
local function set_count(counter, n)
  counter:add(n - counter:get())
end

describe("TestSharedCount", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testMultiClients [difference: sharedcount-is-counter]", function()
    local CLIENT_QTY = 5
    local counts = {}
    for i = 1, CLIENT_QTY do counts[i] = counter_of(h:client(), "/count", 10) end
    local readers = {}
    for i = 1, CLIENT_QTY do readers[i] = {} end
    local count = counter_of(h:client(), "/count", 10)
    local count_list = {}
    for _ = 1, 100 do
      local next = math.random(0, 99)
      count_list[#count_list + 1] = next
      set_count(count, next)
      -- Curator: every client's listener sees the new count; here every client reads it
      for i, c in ipairs(counts) do
        readers[i][#readers[i] + 1] = c:get()
      end
    end
    set_count(count, -1)
    for i = 1, CLIENT_QTY do
      assert.are.same(count_list, readers[i])
      assert.are.equal(-1, counts[i]:get())
    end
  end)

  it("testSimple [difference: sharedcount-is-counter]", function()
    local client = h:client()
    local count = counter_of(client, "/count", 0)
    -- trySetCount(1), (2), (10): here adds that make it so, each applied
    set_count(count, 1)
    assert.are.equal(1, count.value)
    set_count(count, 2)
    assert.are.equal(2, count.value)
    set_count(count, 10)
    assert.are.equal(10, count:get())
    assert.are.equal(to_bytes(10), (client:get("/count")))
  end)

  it("testSimpleVersioned [difference: sharedcount-is-counter]", function()
    local client = h:client()
    local count = counter_of(client, "/count", 0)
    count:get()
    local function version() return select(2, client:get("/count")).version end
    assert.are.equal(0, version())
    set_count(count, 1)
    assert.are.equal(1, version())
    assert.are.equal(1, count:get())
    set_count(count, 5)
    assert.are.equal(2, version())
    assert.are.equal(5, count:get())
    set_count(count, 10)
    assert.are.equal(3, version())
    assert.are.equal(10, count:get())
    -- Server changed: Curator's trySetCount on the stale version fails; zklua's add applies
    -- on top of the server's value
    client:set("/count", to_bytes(88))
    count:add(234 - 10)
    assert.are.equal(88 + 224, count:get())
  end)

  it("testMultiClientVersioned [difference: sharedcount-is-counter]", function()
    local count1 = counter_of(h:client(), "/count", 0)
    local count2 = counter_of(h:client(), "/count", 0)
    set_count(count1, 10)
    assert.are.equal(10, count2:get())
    set_count(count2, 20)
    assert.are.equal(20, count1:get())
    -- Curator: count2 sets 30 from its version, count1's set of 40 from the older one fails,
    -- then succeeds once read again.  zklua: count1's add (+20 from its stale 20) applies on
    -- top of count2's, and both read the sum
    count2:add(30 - 20)
    count1:add(40 - 20)
    assert.are.equal(50, count1:get())
    assert.are.equal(50, count2:get())
  end)

  it("testMultiClientDifferentSeed", function()
    local count1 = counter_of(h:client(), "/count", 10)
    local count2 = counter_of(h:client(), "/count", 20)
    assert.are.equal(10, count1:get())
    assert.are.equal(10, count2:get())
  end)

  it("testDisconnectEventOnWatcherDoesNotRetry", function()
    local server = h:own_server()
    local client = h:client({ hosts = server.hosts })
    local shared_count = counter_of(client, "/count", 10)
    assert.are.equal(10, shared_count:get())
    local got_suspend_event = false
    client:add_listener(function(state)
      if state == "SUSPENDED" then got_suspend_event = true end
    end)
    server:node(1):stop()
    -- if the counter went into a retry loop we would not get a timely notification
    assert.is_true(client.handler.wait(function() return got_suspend_event end, 5))
  end)

  it("testDisconnectReconnectEventDoesNotFireValueWatcher [difference: sharedcount-is-counter]",
    function()
      -- Curator restarts its server; the disconnection comes from the fault proxy here (a real
      -- server's restart may outlast the session on a busy machine)
      local server = h:own_server()
      local proxy = testing.proxy(server:node(1))
      local client = h:client({ hosts = proxy.hosts })
      local suspended, reconnected = false, false
      client:add_listener(function(state)
        if state == "SUSPENDED" then suspended = true
        elseif state == "CONNECTED" and suspended then reconnected = true end
      end)
      local shared_count = counter_of(client, "/count", 10)
      set_count(shared_count, 11)
      assert.are.equal(11, shared_count:get())
      local session = client:client_id()
      proxy:refuse(true)
      proxy:drop()
      assert.is_true(client.handler.wait(function() return suspended end, 10))
      proxy:refuse(false)
      assert.is_true(client.handler.wait(function() return reconnected end, 10))
      assert.are.equal(session, (client:client_id()), "the session")
      -- Curator counts its listener's calls (one before, more after: CURATOR-311 reads the
      -- value again on RECONNECTED); the Counter has no listener: it reads the value again
      shared_count:add(1)
      assert.are.equal(12, shared_count:get())
      proxy:stop()
    end)

  it("testDisconnectReconnectWithMultipleClients [difference: sharedcount-is-counter]", function()
    local server = h:own_server()
    local proxy = testing.proxy(server:node(1)) -- the disconnections (Curator: server restarts)
    local client1 = h:client({ hosts = server.hosts })
    local client2 = h:client({ hosts = proxy.hosts })
    local reconnects = 0
    local suspended = false
    client2:add_listener(function(state)
      if state == "SUSPENDED" then suspended = true
      elseif state == "CONNECTED" and suspended then
        suspended = false
        reconnects = reconnects + 1
      end
    end)
    local initial_count = 10
    local shared_count1 = counter_of(client1, "/count", initial_count)
    local shared_count2 = counter_of(client2, "/count", initial_count)
    set_count(shared_count1, 12)
    assert.are.equal(12, shared_count1:get())
    -- Curator's second count has a watcher that ignores every event; a Counter has none
    for i = 0, 9 do -- Curator: 10 restarts of its in-process server; 10 disconnections here
      set_count(shared_count1, 13 + i)
      assert.are.equal(13 + i, shared_count1:get())
      proxy:refuse(true)
      proxy:drop()
      assert.is_true(client2.handler.wait(function() return suspended end, 30))
      proxy:refuse(false)
      assert.is_true(client2.handler.wait(function() return reconnects == i + 1 end, 30))
      -- CURATOR-311: the value is read from the server again after RECONNECTED
      assert.are.equal(13 + i, shared_count2:get())
    end
    proxy:stop()
  end)
end)
