-- PartitionAllocator sets larger than one znode (src/recipes/partitioning/allocator_chunks.c): a set (and
-- its assignment) over 1 MiB of JSON is stored as a header and numbered chunk nodes, written
-- chunks first and header last (compare-and-set), so no reader ever assembles a torn set;
-- older readers and newer formats fail clearly instead of misreading.  Against a real server;
-- sizes are the make-test ones (50k items of long names, 1.7 MB: past one znode at a
-- fraction of make bench-scale's 1M items), with no time bounds beyond generous waits
-- (speed is measured by bench/allocator_bench.lua and make bench-scale, not here).
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local raises = helpers.raises

local LONG = 600 -- an upper bound for each wait on 50k items, never a speed claim
local ROOT = "/allocator-large"

local function items(n, prefix)
  local list = {}
  for i = 1, n do list[i] = string.format("%s%07d", prefix or "item-", i) end
  return list
end

local function count(list)
  local n = 0
  for _ in pairs(list) do n = n + 1 end
  return n
end

describe("PartitionAllocator, a set over one znode", function()
  local server, admin, path, running, clients
  local counter = 0

  setup(function()
    server = testing.server()
    admin = helpers.client(server.hosts)
  end)
  teardown(function()
    admin:close()
    server:stop()
  end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    running, clients = {}, {}
  end)

  after_each(function()
    for _, m in ipairs(running) do pcall(m.stop, m, LONG) end
    for _, zk in ipairs(clients) do zk:close() end
    helpers.delete_trees(server.hosts, path)
  end)

  local function client(timeout)
    local zk = zklua.client{ hosts = server.hosts, timeout = timeout or 10 }
    zk:start()
    clients[#clients + 1] = zk
    return zk
  end

  local function member(zk, id, opts)
    local spec = { path = path, identifier = id, strategy = "sticky" }
    for k, v in pairs(opts or {}) do spec[k] = v end
    local m = zk:PartitionAllocator(spec)
    running[#running + 1] = m
    return m
  end

  local function header()
    return (admin:get(path .. "/partitions"))
  end

  it("1.7 MB of items: members divide a chunked set and a chunked assignment, each item once",
     function()
    local set = items(50000, "a-rather-long-item-name-") -- 1.7 MB of JSON
    local zka, zkb = client(), client()
    local states = {}
    for _, zk in ipairs({ zka, zkb }) do
      zk:add_listener(function(state) states[#states + 1] = state end)
    end
    local ma, mb = member(zka, "A"), member(zkb, "B")
    ma:start(set, LONG)
    mb:start({}, LONG)
    assert.is_true(ma:wait_settled(LONG) and mb:wait_settled(LONG))
    local kind, _, chunks = core.allocator_chunk_header(header())
    assert.are.equal("chunked", kind)
    assert.is_true(chunks >= 2)
    assert.are.equal("chunked", (core.allocator_chunk_header(admin:get(path .. "/assignment"))))
    local owner = {}
    for _, m in ipairs({ ma, mb }) do
      for _, item in ipairs(m.allocation) do
        assert.is_nil(owner[item], item .. " owned twice")
        owner[item] = m.identifier
      end
    end
    assert.are.equal(#set, count(owner))
    assert.is_true(#ma.allocation > 0 and #mb.allocation > 0)
    assert.are.equal(#set, #mb:partitions())
    -- the claim window: 25k owner nodes each, never more than a window of them in flight (the
    -- group's reads and writes add a few: members, set and assignment chunks, a publish)
    for _, zk in ipairs({ zka, zkb }) do
      local _, most = zk._session:window_use()
      assert.is_true(most <= core.allocator_claim_window + 64,
                     most .. " ops in flight at once")
    end
    -- a change of a chunked set: written anew, the old chunks removed
    assert.is_true(mb:add_partitions({ "extra" }))
    assert.is_true(ma:wait_settled(LONG) and mb:wait_settled(LONG))
    assert.are.equal(#set + 1, #ma:partitions())
    assert.is_true(ma:owns("extra") or mb:owns("extra"))
    local _, tag = core.allocator_chunk_header(header())
    for _, name in ipairs(admin:get_children(path .. "/partitions-chunks")) do
      assert.are.equal(tag, name:sub(1, #tag), name .. " is no chunk of the current set")
    end
    assert.are.same({}, states) -- no SUSPENDED, no LOST on the way
  end)

  it("mixed versions: one-node sets stay one node; an older live member blocks chunking",
     function()
    -- a set as an older zklua writes it (one JSON array) is read and divided
    admin:create(path .. "/partitions", '["a","b","c"]', { makepath = true })
    local zka = client()
    local ma = member(zka, "A")
    ma:start({}, LONG)
    assert.is_true(ma:wait_settled(LONG))
    assert.are.same({ "a", "b", "c" }, ma.allocation)
    -- a small change stays one node: what older readers read
    assert.is_true(ma:add_partitions({ "d" }))
    assert.are.same({ "a", "b", "c", "d" }, core.allocator_decode_items(header()))
    -- a live member of an older zklua (its member node has no "chunked":2) blocks a set over
    -- one node, with an error naming it, before anything is written
    admin:create(path .. "/members/old-one", '{"weight":1}', { ephemeral = true })
    local big = items(40000, "a-rather-long-item-name-") -- 1.4 MB of JSON
    local err = raises(errors.KazooException, ma.add_partitions, ma, big)
    assert.truthy(tostring(err):find("old-one", 1, true), tostring(err))
    assert.truthy(tostring(err):find("upgrade", 1, true), tostring(err))
    assert.are.same({ "a", "b", "c", "d" }, core.allocator_decode_items(header()))
    admin:delete(path .. "/members/old-one")
    -- all read chunks now: the set grows past one node; an older reader fails clearly
    assert.is_true(ma:add_partitions(big))
    local list, why = core.allocator_decode_items(header())
    assert.is_nil(list)
    assert.are.equal("not a JSON array", why)
    assert.is_true(ma:wait_settled(LONG))
    assert.are.equal(#big + 4, #ma.allocation)
    -- shrinking back under one node writes one node again (older readers read it again)
    assert.is_true(ma:remove_partitions(big))
    assert.are.same({ "a", "b", "c", "d" }, core.allocator_decode_items(header()))
    assert.is_true(ma:wait_settled(LONG))
    assert.are.same({ "a", "b", "c", "d" }, ma.allocation)
    assert.are.same({}, admin:get_children(path .. "/partitions-chunks"))
  end)

  it("a newer chunked format stops a member with a clear error; reads raise it too", function()
    local zka = client()
    local ma = member(zka, "A")
    ma:start({ "x" }, LONG)
    assert.is_true(ma:wait_settled(LONG))
    admin:set(path .. "/partitions", '{"zklua_chunked":3,"tag":"t","chunks":1}')
    helpers.wait_until(function() return ma.state == "idle" end, LONG, "the member to stop")
    assert.truthy(tostring(ma.error):find("newer than this zklua reads", 1, true),
                  tostring(ma.error))
    assert.are.same({}, ma.allocation)
    local err = raises(errors.KazooException, ma.partitions, ma)
    assert.truthy(tostring(err):find("chunked format 3", 1, true), tostring(err))
  end)

  it("an assignment chunk not of its shape stops a member with a clear error, never misread",
     function()
    local zka = client()
    local ma = member(zka, "A")
    ma:start({ "x" }, LONG)
    assert.is_true(ma:wait_settled(LONG))
    -- chunks are joined as text, not parsed: an array where {member: [items]} belongs, and
    -- an object cut short, must both be refused
    for i, chunk in ipairs({ '["x"]', '{"A":["x"]' }) do
      local tag = "0000000099-" .. i
      admin:create(path .. "/assignment-chunks/" .. tag .. "-00000", chunk, { makepath = true })
      local head = string.format('{"zklua_chunked":2,"tag":"%s","chunks":1,"generation":%d,' ..
                                   '"leader":"A","members":["A"]}', tag, 90 + i)
      if i == 1 then
        admin:set(path .. "/assignment", head)
        helpers.wait_until(function() return ma.state == "idle" end, LONG, "the member to stop")
        assert.truthy(tostring(ma.error):find("cannot be read", 1, true), tostring(ma.error))
        assert.are.same({}, ma.allocation)
      else
        local zkb = client()
        local mb = member(zkb, "B")
        admin:set(path .. "/assignment", head)
        local ok, err = pcall(mb.start, mb, {}, LONG) -- it must read the assignment to start
        assert.is_false(ok)
        assert.truthy(tostring(err):find("cannot be read", 1, true), tostring(err))
        assert.are.equal("idle", mb.state)
        assert.are.same({}, mb.allocation)
      end
    end
  end)

  it("a connection lost while start writes a chunked seed: start retries, the set is whole",
     function()
    local set = items(40000, "a-rather-long-item-name-") -- 1.4 MB of JSON
    local p = testing.proxy(server:node(1))
    local zk = zklua.client{ hosts = p.hosts, timeout = 3 } -- SUSPENDED 2 s after the cut
    zk:start()
    clients[#clients + 1] = zk
    local suspended = 0
    zk:add_listener(function(state)
      if state == "SUSPENDED" then
        suspended = suspended + 1
        p:resume() -- the reconnection finds the link up again
      end
    end)
    -- the first create of the seed write (its path or a chunk) reaches the server, and from
    -- then on nothing comes back on that connection
    p:cut_reply("create")
    local m = member(zk, "A")
    local ok, err = pcall(function()
      local started, why = pcall(m.start, m, set, LONG)
      assert.is_true(started, tostring(why))
      assert.is_true(p:status().cut, "no create went through the proxy")
      assert.is_true(suspended >= 1, "the connection was never lost")
      assert.is_true(m:wait_settled(LONG))
      assert.are.equal(#set, #m:partitions())
      assert.are.equal(#set, #m.allocation)
      local kind, tag = core.allocator_chunk_header(header())
      assert.are.equal("chunked", kind)
      for _, name in ipairs(admin:get_children(path .. "/partitions-chunks")) do
        assert.are.equal(tag, name:sub(1, #tag), name .. " is no chunk of the set")
      end
    end)
    pcall(m.stop, m, LONG) -- through the proxy, before it goes
    p:stop()
    assert(ok, err)
  end)

  it("a chunked seed that cannot be written within start's timeout: TimeoutError", function()
    local set = items(40000, "a-rather-long-item-name-")
    local p = testing.proxy(server:node(1))
    local zk = zklua.client{ hosts = p.hosts, timeout = 3 }
    zk:start()
    clients[#clients + 1] = zk
    p:cut_reply("create") -- and the link never comes back
    local m = member(zk, "A")
    local started = core.monotonic()
    local ok, err = pcall(m.start, m, set, 4)
    local took = core.monotonic() - started
    p:stop()
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.TimeoutError), tostring(err))
    assert.matches("the set was not written within 4 s", tostring(err), 1, true)
    assert.is_true(took < LONG)
    assert.are.equal("idle", m.state)
    assert.is_nil(admin:exists(path .. "/partitions"))
  end)

  it("a writer whose session dies mid-update leaves the set whole; the next write cleans up",
     function()
    local set = items(40000, "a-rather-long-item-name-") -- 1.4 MB of JSON
    local zka = client()
    local ma = member(zka, "A")
    ma:start(set, LONG)
    assert.is_true(ma:wait_settled(LONG))
    local before = header()
    -- the writer: its session is killed once its chunks are written, before its header, and
    -- it goes no further (as a process killed there)
    local zkw = client()
    local writer = zkw:PartitionAllocator{ path = path, identifier = "W" }
    zkw.set = function(zk, node)
      assert(node == path .. "/partitions")
      testing.expire_session(zk, 30)
      error("the writer died", 0)
    end
    local ok, why = pcall(writer.add_partitions, writer, { "new-item" })
    assert.is_false(ok)
    assert.are.equal("the writer died", why)
    zkw.set = nil
    -- readers see the old set, whole: its header and every chunk it names
    assert.are.equal(before, header())
    assert.are.equal(#set, #ma:partitions())
    assert.is_true(ma:wait_settled(LONG))
    assert.are.equal(#set, #ma.allocation)
    local _, tag = core.allocator_chunk_header(before)
    local orphans = 0
    for _, name in ipairs(admin:get_children(path .. "/partitions-chunks")) do
      if name:sub(1, #tag) ~= tag then orphans = orphans + 1 end
    end
    assert.is_true(orphans > 0, "the dead writer's chunks are there")
    -- the next write commits and removes them
    assert.is_true(ma:add_partitions({ "new-item" }))
    local _, now = core.allocator_chunk_header(header())
    for _, name in ipairs(admin:get_children(path .. "/partitions-chunks")) do
      assert.are.equal(now, name:sub(1, #now), name .. " left behind")
    end
    assert.is_true(ma:wait_settled(LONG))
    assert.are.equal(#set + 1, #ma.allocation)
  end)
end)
