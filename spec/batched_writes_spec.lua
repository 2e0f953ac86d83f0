-- Batched writes and listings (src/core/ops.c, ops.h) as their user, the SetPartitioner,
-- makes them: a share's item lock creates and deletes go out as multi transactions of up to
-- 50, the locks' listings as multiReads of up to 50, each op still getting its own result.
-- Against a real server:
-- - a share acquires and releases through multis, one node per item, each item's fencing
--   token the czxid the server gave its node (a multi's creates share its zxid);
-- - a multi takes a place in the session's window per op, and goes out full;
-- - a multi failed by one op (lock paths not made yet: NONODE; a lock path no one may create
--   under: NOAUTH) runs nothing, and its other ops are sent again alone: they get their own
--   results, the failing item its own error (never RUNTIMEINCONSISTENCY);
-- - a server that does not know multiRead (the proxy turns it into an opcode the server does
--   not know, as a 3.5 server does not know it): its refusal fails only the first multiRead,
--   whose listings, and every later one, go alone;
-- - a multi whose reply is lost with its connection: every lock finds its node by name on
--   the next connection, none is made twice.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local helpers = require "support.helpers"

local ROOT = "/batched-writes"
local ITEMS = 2000 -- 40 multis a pass; spec/scale_spec.lua and make bench-scale go further

local function items(n, tag)
  local set = {}
  for i = 1, n do set[i] = string.format("%s-%05d", tag or "item", i) end
  return set
end

-- Runs the event loop until done() holds; raises after timeout seconds.
local function pump(qp, done, timeout, what)
  local ok = child.poll_until(function()
    if qp.release then qp:release_set() end
    return done()
  end, timeout or 30)
  if not ok then error("timed out waiting for " .. what, 2) end
end

local function batch_use(zk)
  local batches, ops, resent, read_batches, read_ops = zk._session:batch_use()
  return { batches = batches, ops = ops, resent = resent, read_batches = read_batches,
           read_ops = read_ops }
end

describe("batched writes (a SetPartitioner's item locks)", function()
  local server, admin

  setup(function()
    server = testing.server()
    admin = helpers.client(server.hosts, ROOT)
  end)
  teardown(function()
    helpers.drop(admin, ROOT)
    admin:close()
    server:stop()
  end)

  -- Every item's lock path holds exactly one node, and returns the nodes by item.
  local function one_node_each(path, set)
    local nodes = {}
    for _, item in ipairs(set) do
      local kids = admin:get_children(path .. "/locks/" .. item)
      assert.are.equal(1, #kids, item .. " has " .. #kids .. " nodes")
      nodes[item] = kids[1]
    end
    return nodes
  end

  it("acquires and releases a share through multis: one node per item, tokens the " ..
     "nodes' czxids", function()
    local zk = helpers.client(server.hosts)
    local path = ROOT .. "/share"
    local set = items(ITEMS)
    local before = batch_use(zk)
    local qp = zk:SetPartitioner{ path = path, set = set, identifier = "m1", time_boundary = 0.05 }
    pump(qp, function() return qp.acquired end, 60, "the first acquire")
    local first = batch_use(zk)
    -- no lock path existed: the first creates failed NONODE, their neighbours went alone
    assert.is_true(first.batches > before.batches, "no multi was sent")
    assert.is_true(first.resent > before.resent, "no op was sent again")
    assert.are.equal(ITEMS, #qp:list())
    local nodes = one_node_each(path, set)
    for _, item in ipairs({ set[1], set[777], set[ITEMS] }) do
      local _, stat = admin:get(path .. "/locks/" .. item .. "/" .. nodes[item])
      assert.are.equal(stat.czxid, qp:fencing_token(item))
    end
    qp:finish()
    for _, item in ipairs(set) do
      assert.are.same({}, admin:get_children(path .. "/locks/" .. item))
    end
    local released = batch_use(zk)
    assert.is_true(released.ops - first.ops >= ITEMS, "the deletes were not batched")

    -- again over the paths now made: every create and delete goes in a multi, none again
    local again = zk:SetPartitioner{ path = path, set = set, identifier = "m1",
                                     time_boundary = 0.05 }
    pump(again, function() return again.acquired end, 60, "the second acquire")
    local second = batch_use(zk)
    assert.are.equal(released.resent, second.resent)
    assert.is_true(second.ops - released.ops >= ITEMS, "the creates were not batched")
    assert.is_true(second.batches - released.batches <= 2 * ITEMS / 50 + 2,
                   "the creates went in small multis")
    -- each lock lists its contenders once its node is made: those listings go in multiReads
    assert.is_true(second.read_ops - released.read_ops >= ITEMS, "the listings were not batched")
    assert.is_true(second.read_batches - released.read_batches <= 2 * ITEMS / 50 + 2,
                   "the listings went in small multiReads")
    nodes = one_node_each(path, set)
    local _, stat = admin:get(path .. "/locks/" .. set[5] .. "/" .. nodes[set[5]])
    assert.are.equal(stat.czxid, again:fencing_token(set[5]))
    again:finish()
    zk:close()
  end)

  it("a multi takes a place in the window per op: never more than the window at the server",
     function()
    local zk = zklua.client{ hosts = server.hosts, max_in_flight = 120 }
    zk:start()
    local path = ROOT .. "/window"
    local set = items(1000)
    for _, item in ipairs(set) do admin:ensure_path(path .. "/locks/" .. item) end
    local qp = zk:SetPartitioner{ path = path, set = set, identifier = "m1", time_boundary = 0.05 }
    pump(qp, function() return qp.acquired end, 60, "the acquire")
    qp:finish()
    local use = batch_use(zk)
    local _, most = zk._session:window_use()
    assert.is_true(use.ops >= 2 * #set, "the creates and deletes were not batched")
    assert.is_true(use.batches <= 2 * #set / 40, "the multis were small: " .. use.batches)
    assert.is_true(use.read_ops >= #set, "the listings were not batched")
    assert.is_true(use.read_batches <= #set / 25, "the multiReads were small: " .. use.read_batches)
    -- the window was the bound: two full multis at once, never more than 120 ops
    assert.is_true(most >= 100 and most <= 120, "at most " .. most .. " ops at once")
    zk:close()
  end)

  it("a multi failed by one item's create: that item fails with its own error, the others " ..
     "are made alone", function()
    local zk = helpers.client(server.hosts)
    local path = ROOT .. "/denied"
    local set = items(200)
    for _, item in ipairs(set) do admin:ensure_path(path .. "/locks/" .. item) end
    -- item 120's lock path takes no create: its multi fails NOAUTH, all else in it rolls back
    local denied = path .. "/locks/" .. set[120]
    admin:delete(denied)
    admin:create(denied, "", { acl = zklua.security.READ_ACL_UNSAFE })
    local before = batch_use(zk)
    local qp = zk:SetPartitioner{ path = path, set = set, identifier = "m1", time_boundary = 0.05 }
    pump(qp, function() return qp.failed end, 60, "the failure")
    local after = batch_use(zk)
    assert.is_true(errors.is(qp.error, errors.NoAuthError), tostring(qp.error))
    assert.is_true(after.resent > before.resent, "no op was sent again")
    -- the failure let go of every item: the ones made alone were deleted again
    child.poll_until(function()
      for _, item in ipairs(set) do
        if #admin:get_children(path .. "/locks/" .. item) > 0 then return false end
      end
      return true
    end, 30)
    for _, item in ipairs(set) do
      assert.are.same({}, admin:get_children(path .. "/locks/" .. item), item)
    end
    zk:close()
  end)

  it("a server that does not know multiRead (older than 3.6): its refusal's listings and " ..
     "the later ones go alone", function()
    local path = ROOT .. "/old-server"
    local set = items(300)
    for _, item in ipairs(set) do admin:ensure_path(path .. "/locks/" .. item) end
    local proxy = testing.proxy(server:node(1))
    -- every multiRead reaches the server as a request it does not know, as a 3.5 server does
    -- not know multiRead: it answers ZUNIMPLEMENTED and closes the connection
    proxy:rewrite(22, 99)
    local zk = zklua.client{ hosts = proxy.hosts, timeout = 4 }
    zk:start()
    local states = {}
    zk:add_listener(function(state) states[#states + 1] = state end)
    local qp = zk:SetPartitioner{ path = path, set = set, identifier = "m1", time_boundary = 0.05 }
    pump(qp, function() return qp.acquired end, 60, "the acquire")
    local first = batch_use(zk)
    -- the connection's first multiRead went alone at the server, and none after its refusal
    assert.are.equal(1, first.read_batches)
    assert.is_true(first.resent >= 2, "the refused listings were not sent again")
    assert.are.equal("SUSPENDED", states[1]) -- the refusal closed the connection
    assert.are.equal(#set, #qp:list())
    one_node_each(path, set)
    qp:finish()
    local again = zk:SetPartitioner{ path = path, set = set, identifier = "m1",
                                     time_boundary = 0.05 }
    pump(again, function() return again.acquired end, 60, "the second acquire")
    assert.are.equal(first.read_batches, batch_use(zk).read_batches)
    assert.are.equal(#set, #again:list())
    again:finish()
    zk:close()
    proxy:stop()
  end)

  it("a multi whose reply is lost with its connection: every lock finds its node, none is " ..
     "made twice", function()
    local path = ROOT .. "/lost-reply"
    local set = items(300)
    for _, item in ipairs(set) do admin:ensure_path(path .. "/locks/" .. item) end
    local zk, proxy, states = helpers.client_losing_reply(server:node(1))
    proxy:cut_reply("multi") -- the first multi runs; its reply never comes
    local qp = zk:SetPartitioner{ path = path, set = set, identifier = "m1", time_boundary = 0.05 }
    pump(qp, function() return qp.acquired end, 60, "the acquire")
    assert.is_true(proxy:status().cut, "no multi was sent")
    assert.are.equal("SUSPENDED", states[1])
    assert.are.equal(#set, #qp:list())
    one_node_each(path, set)
    qp:finish()
    zk:close()
    proxy:stop()
  end)
end)
