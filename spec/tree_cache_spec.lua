-- TreeCache (src/recipes/tree_cache.c, lua/zklua/recipes/tree_cache.lua) against real servers:
-- a standalone server for the tree's life (loads, changes, deletes, binary data, 2000+ nodes,
-- close, bad input, faults, a client stop()/start() and a session expiry) and a 3-node
-- ensemble for real absences (the cache client's only server stopped while another session
-- changes the tree: once short of the session timeout, once until the session expired).
--
-- Every test keeps a "mirror": a listener that applies each node event to a table of its
-- own and records any event that could not apply (added twice, updated or removed while
-- absent, added before its parent, removed before its children).  The mirror, get_data and
-- get_children are then compared with the server's tree read by another client.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local eventually = helpers.eventually
local raises = helpers.raises
local LONG = 90 -- seconds: generous, the machine is shared

local function parent_of(path)
  return path:match("^(.*)/[^/]+$")
end

-- ---------------------------------------------------------------- the mirror

local function mirror(cache, root)
  local m = { nodes = {}, problems = {}, events = {}, versions = {} }
  local function problem(text) m.problems[#m.problems + 1] = text end
  cache:listen(function(e)
    m.events[#m.events + 1] = { type = e.type, path = e.data and e.data.path }
    local d = e.data
    if not d then return end
    local p = d.path
    if e.type == "NODE_ADDED" then
      if m.nodes[p] then problem("added twice: " .. p) end
      if p ~= root and not m.nodes[parent_of(p)] then problem("added before its parent: " .. p) end
      m.versions[p] = nil -- a new node: its versions start again
    elseif not m.nodes[p] then
      problem(e.type .. " of a node not there: " .. p)
    end
    if e.type == "NODE_REMOVED" then
      for q in pairs(m.nodes) do
        if parent_of(q) == p then problem("removed before its child " .. q) end
      end
      m.nodes[p] = nil
    else
      local last = m.versions[p]
      if last and d.stat.version <= last then
        problem(string.format("%s: version %d after %d", p, d.stat.version, last))
      end
      m.versions[p] = d.stat.version
      m.nodes[p] = { data = d.data, mzxid = d.stat.mzxid, czxid = d.stat.czxid }
    end
  end)
  return m
end

local function count_events(m, type, path)
  local n = 0
  for _, e in ipairs(m.events) do
    if e.type == type and (path == nil or e.path == path) then n = n + 1 end
  end
  return n
end

local function index_of(m, type, path, from)
  for i = from or 1, #m.events do
    local e = m.events[i]
    if e.type == type and (path == nil or e.path == path) then return i end
  end
  return nil
end

-- ---------------------------------------------------------------- the server's tree

-- path -> {data, mzxid, czxid, children (sorted)}, read level by level with pipelined reads.
local function server_tree(zk, root)
  local tree, level = {}, { root }
  while #level > 0 do
    local gets, lists = {}, {}
    for i, p in ipairs(level) do
      gets[i] = zk:get_async(p)
      lists[i] = zk:get_children_async(p)
    end
    local next_level = {}
    for i, p in ipairs(level) do
      local ok, data, stat = pcall(gets[i].get, gets[i])
      local listed, children = pcall(lists[i].get, lists[i])
      if ok and listed then
        table.sort(children)
        tree[p] = { data = data, mzxid = stat.mzxid, czxid = stat.czxid, children = children }
        for _, c in ipairs(children) do next_level[#next_level + 1] = p .. "/" .. c end
      elseif not errors.is(ok and children or data, errors.NoNodeError) then
        error(ok and children or data, 0)
      end
    end
    level = next_level
  end
  return tree
end

-- What differs between the server's tree and the mirror, get_data and get_children.
local function differences(tree, m, cache)
  local out = {}
  local function say(...) out[#out + 1] = string.format(...) end
  for p, node in pairs(tree) do
    local mine = m.nodes[p]
    if not mine then
      say("mirror lacks %s", p)
    elseif mine.data ~= node.data or mine.mzxid ~= node.mzxid or mine.czxid ~= node.czxid then
      say("mirror has another %s", p)
    end
    local cached = cache:get_data(p)
    if not cached then
      say("get_data lacks %s", p)
    elseif cached.data ~= node.data or cached.stat.mzxid ~= node.mzxid or
           cached.stat.czxid ~= node.czxid or cached.path ~= p then
      say("get_data has another %s", p)
    end
    local children = cache:get_children(p)
    if not children or table.concat(children, "\0") ~= table.concat(node.children, "\0") then
      say("get_children(%s) is %s, not %s", p, children and table.concat(children, ",") or "nil",
          table.concat(node.children, ","))
    end
  end
  for p in pairs(m.nodes) do
    if not tree[p] then say("mirror has a stale %s", p) end
    if not tree[p] and cache:get_data(p) then say("get_data has a stale %s", p) end
  end
  table.sort(out)
  return out
end

-- Waits until the cache and its mirror hold the server's tree (read once: the caller has
-- finished changing it), then checks that no event ever failed to apply.
local function assert_caught_up(reader, root, m, cache)
  local tree = server_tree(reader, root)
  local ok = pcall(eventually, function() return #differences(tree, m, cache) == 0 end, LONG)
  assert.are.same({}, ok and {} or differences(tree, m, cache))
  assert.are.same({}, m.problems)
  return tree
end

local function size_of(tree)
  local n = 0
  for _ in pairs(tree) do n = n + 1 end
  return n
end

-- Creates every path (parents listed before children) with pipelined creates.
local function create_all(zk, list)
  zk:ensure_path(parent_of(list[1][1]))
  local futures = {}
  for i, item in ipairs(list) do futures[i] = zk:create_async(item[1], item[2]) end
  for _, f in ipairs(futures) do f:get() end
end

-- The changes made while a cache is away: an update, a deleted subtree, a new subtree, a node
-- re-created with other children, one re-created exactly as it was, and binary data.
local function build_base(zk, root)
  create_all(zk, {
    { root }, { root .. "/a", "a0" }, { root .. "/a/x", "x0" }, { root .. "/b" },
    { root .. "/b/1", "one" }, { root .. "/b/2", "two" }, { root .. "/c", "c0" },
    { root .. "/c/old", "old" }, { root .. "/d", "same" }, { root .. "/d/keep", "k" },
  })
end

local function change_while_away(zk, root)
  zk:set(root .. "/a/x", "x1")
  zk:delete(root .. "/b", nil, true)
  zk:create(root .. "/n/n1/n2", "new", { makepath = true })
  zk:delete(root .. "/c", nil, true)
  zk:create(root .. "/c", "c1")
  zk:create(root .. "/c/fresh", "fresh")
  zk:delete(root .. "/d", nil, true)
  zk:create(root .. "/d", "same")
  zk:create(root .. "/d/keep", "k")
  zk:create(root .. "/bin", "\0\1\2\255zk\0")
end

-- ---------------------------------------------------------------- standalone server

describe("TreeCache", function()
  local server, zk, admin, root
  local counter = 0

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    root = "/tree-cache/t" .. counter
    zk = helpers.client(server.hosts)
    admin = helpers.client(server.hosts)
  end)

  after_each(function()
    zk:close()
    helpers.drop(admin, root)
  end)

  local function started(path)
    local cache = zk:TreeCache(path or root)
    local m = mirror(cache, path or root)
    cache:start()
    eventually(function() return cache.initialized end, LONG, "INITIALIZED")
    return cache, m
  end

  describe("loading", function()
    it("adds every node, parents first, then INITIALIZED once; answers from memory", function()
      build_base(admin, root)
      local cache, m = started()
      assert.are.equal(10, count_events(m, "NODE_ADDED"))
      assert.are.equal(1, count_events(m, "INITIALIZED"))
      assert.are.equal(#m.events, index_of(m, "INITIALIZED")) -- after every NODE_ADDED
      assert.are.equal(root, m.events[1].path)
      assert_caught_up(admin, root, m, cache)
      local node = cache:get_data(root .. "/a/x")
      assert.are.equal(root .. "/a/x", node.path)
      assert.are.equal("x0", node.data)
      assert.are.equal(0, node.stat.version)
      assert.are.same({ "a", "b", "c", "d" }, cache:get_children(root))
      assert.are.same({}, cache:get_children(root .. "/b/1"))
      assert.is_nil(cache:get_data(root .. "/nope"))
      assert.is_nil(cache:get_children(root .. "/nope"))
      assert.are.equal("dflt", cache:get_data(root .. "/nope", "dflt"))
      assert.are.equal("dflt", cache:get_children(root .. "/nope", "dflt"))
      assert.are.equal(0, #m.problems)
      admin:set(root .. "/a", "a1") -- INITIALIZED is never sent again
      eventually(function() return count_events(m, "NODE_UPDATED", root .. "/a") == 1 end, LONG)
      assert.are.equal(1, count_events(m, "INITIALIZED"))
    end)

    it("creates a missing root (as kazoo) and starts only once", function()
      local cache, m = started(root .. "/new/deep")
      assert.is_truthy(admin:exists(root .. "/new/deep"))
      assert.are.same({ root .. "/new/deep" }, { m.events[1].path })
      assert.are.same({}, cache:get_children(root .. "/new/deep"))
      local err = raises(errors.KazooException, cache.start, cache)
      assert.truthy(tostring(err):find("already started", 1, true))
      cache:close()
      err = raises(errors.KazooException, cache.start, cache)
      assert.truthy(tostring(err):find("already closed", 1, true))
    end)

    it("keeps binary data exact, empty data empty", function()
      local bytes = {}
      for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
      local all = table.concat(bytes)
      create_all(admin, { { root }, { root .. "/bin", all }, { root .. "/empty", "" } })
      local cache, m = started()
      assert.are.equal(all, cache:get_data(root .. "/bin").data)
      assert.are.equal("", cache:get_data(root .. "/empty").data)
      local changed = all:reverse() .. "\0"
      admin:set(root .. "/bin", changed)
      eventually(function() return m.nodes[root .. "/bin"].data == changed end, LONG)
      assert.are.equal(changed, cache:get_data(root .. "/bin").data)
      assert.are.equal(257, cache:get_data(root .. "/bin").stat.data_length)
    end)

    it("caches under a chroot with chroot-relative paths", function()
      admin:create(root .. "/inside/x", "X", { makepath = true })
      local chrooted = helpers.client(server.hosts .. root)
      local cache = chrooted:TreeCache("/inside")
      local m = mirror(cache, "/inside")
      cache:start()
      eventually(function() return cache.initialized end, LONG)
      assert.are.equal("X", cache:get_data("/inside/x").data)
      assert.is_truthy(m.nodes["/inside/x"])
      chrooted:close()
    end)

    it("loads 2500 nodes, follows 700 changes to them, and matches the server", function()
      local list = { { root } }
      for i = 1, 50 do
        local dir = string.format("%s/d%02d", root, i)
        list[#list + 1] = { dir, "dir" .. i }
        for j = 1, 49 do list[#list + 1] = { string.format("%s/n%02d", dir, j), dir .. j } end
      end
      create_all(admin, list)
      local cache, m = started()
      assert.are.equal(2501, count_events(m, "NODE_ADDED"))
      assert.are.equal(2501, size_of(assert_caught_up(admin, root, m, cache)))
      local futures = {}
      for i = 1, 40 do -- 200 updates, 10 subtrees (500 nodes) deleted, 50 added
        local dir = string.format("%s/d%02d", root, i)
        if i <= 10 then
          for j = 1, 49 do futures[#futures + 1] = admin:delete_async(string.format("%s/n%02d", dir, j)) end
          futures[#futures + 1] = admin:delete_async(dir)
        else
          for j = 1, 5 do
            futures[#futures + 1] = admin:set_async(string.format("%s/n%02d", dir, j), "v2")
            futures[#futures + 1] = admin:set_async(string.format("%s/n%02d", dir, j + 5), "v2")
          end
          futures[#futures + 1] = admin:create_async(dir .. "/extra", "e")
          futures[#futures + 1] = admin:create_async(dir .. "/extra2", "e")
          futures[#futures + 1] = admin:create_async(dir .. "/extra3", "e")
          futures[#futures + 1] = admin:create_async(dir .. "/extra4", "e")
          futures[#futures + 1] = admin:create_async(dir .. "/extra5", "e")
        end
      end
      for i = 41, 45 do futures[#futures + 1] = admin:set_async(string.format("%s/d%02d", root, i), "x") end
      for _, f in ipairs(futures) do f:get() end
      local tree = assert_caught_up(admin, root, m, cache)
      assert.are.equal(2501 - 500 + 150, size_of(tree))
      assert.are.equal(500, count_events(m, "NODE_REMOVED"))
    end)
  end)

  describe("following changes", function()
    it("reports updates in order, each node's versions rising", function()
      create_all(admin, { { root }, { root .. "/p", "0" }, { root .. "/q", "0" } })
      local cache, m = started()
      local futures = {}
      for i = 1, 50 do
        futures[#futures + 1] = admin:set_async(root .. "/p", tostring(i))
        futures[#futures + 1] = admin:set_async(root .. "/q", tostring(i))
      end
      for _, f in ipairs(futures) do f:get() end
      eventually(function() return m.nodes[root .. "/p"].data == "50" and
                                   m.nodes[root .. "/q"].data == "50" end, LONG)
      assert.are.same({}, m.problems) -- versions only ever rose
      assert.is_true(count_events(m, "NODE_UPDATED", root .. "/p") >= 1)
      assert.are.equal(50, cache:get_data(root .. "/p").stat.version)
      assert_caught_up(admin, root, m, cache)
    end)

    it("removes a deleted subtree children first, and adds a new one parents first", function()
      build_base(admin, root)
      local cache, m = started()
      local before = #m.events
      admin:delete(root .. "/b", nil, true)
      admin:create(root .. "/b/1/2/3", "deep", { makepath = true })
      assert_caught_up(admin, root, m, cache)
      local removed_1 = index_of(m, "NODE_REMOVED", root .. "/b/1", before)
      local removed_b = index_of(m, "NODE_REMOVED", root .. "/b", before)
      local added_b = index_of(m, "NODE_ADDED", root .. "/b", before)
      local added_3 = index_of(m, "NODE_ADDED", root .. "/b/1/2/3", before)
      assert.is_true(removed_1 < removed_b and removed_b < added_b and added_b < added_3)
    end)

    it("reports a node deleted and created again quickly as removed, then added", function()
      build_base(admin, root)
      local cache, m = started()
      local futures = {}
      for i = 1, 20 do -- pipelined: the cache cannot read between most of them
        futures[#futures + 1] = admin:delete_async(root .. "/d/keep")
        futures[#futures + 1] = admin:create_async(root .. "/d/keep", "k" .. i)
      end
      for _, f in ipairs(futures) do f:get() end
      local t = admin:transaction()
      t:delete(root .. "/c/old")
      t:delete(root .. "/c")
      t:create(root .. "/c", "c2")
      t:create(root .. "/c/new", "n")
      t:commit()
      local tree = assert_caught_up(admin, root, m, cache)
      assert.are.equal("k20", tree[root .. "/d/keep"].data)
      assert.is_true(count_events(m, "NODE_REMOVED", root .. "/d/keep") >= 1)
      assert.are.equal(count_events(m, "NODE_REMOVED", root .. "/d/keep") + 1,
                       count_events(m, "NODE_ADDED", root .. "/d/keep"))
      assert.are.equal(1, count_events(m, "NODE_REMOVED", root .. "/c/old"))
      assert.are.equal(1, count_events(m, "NODE_REMOVED", root .. "/c"))
      assert.are.equal(2, count_events(m, "NODE_ADDED", root .. "/c"))
      assert.are.same({ "new" }, cache:get_children(root .. "/c"))
    end)

    it("follows a deep tree, and removes it leaves first", function()
      local list, path = { { root } }, root
      for depth = 1, 60 do
        path = path .. "/l" .. depth
        list[#list + 1] = { path, "depth " .. depth }
        list[#list + 1] = { root .. "/side" .. depth, "s" } -- a wide level beside it
      end
      create_all(admin, list)
      local cache, m = started()
      assert.are.equal("depth 60", cache:get_data(path).data)
      assert_caught_up(admin, root, m, cache)
      local before = #m.events
      admin:delete(root .. "/l1", nil, true)
      eventually(function() return cache:get_data(root .. "/l1") == nil end, LONG)
      assert.are.equal(60, count_events(m, "NODE_REMOVED"))
      assert.are.equal(path, m.events[before + 1].path) -- the deepest first
      assert.are.equal(root .. "/l1", m.events[#m.events].path)
      assert_caught_up(admin, root, m, cache)
    end)

    it("reports the root deleted (its subtree first) and created again", function()
      build_base(admin, root)
      local cache, m = started()
      admin:delete(root, nil, true)
      eventually(function() return count_events(m, "NODE_REMOVED", root) == 1 end, LONG)
      assert.are.equal(10, count_events(m, "NODE_REMOVED"))
      assert.are.equal(root, m.events[#m.events].path)
      assert.is_nil(cache:get_data(root))
      assert.is_nil(cache:get_children(root))
      assert.are.same({}, m.nodes)
      admin:create(root .. "/again/x", "back", { makepath = true })
      assert_caught_up(admin, root, m, cache)
      assert.are.equal(2, count_events(m, "NODE_ADDED", root))
      assert.are.same({ "again" }, cache:get_children(root))
    end)

    it("delivers events in order to every listener, even one that waits in a call", function()
      create_all(admin, { { root }, { root .. "/p", "0" } })
      local cache = zk:TreeCache(root)
      local seen_by_waiter, seen = {}, {}
      cache:listen(function(e)
        zk:exists(root) -- a blocking call: the client dispatches meanwhile
        seen_by_waiter[#seen_by_waiter + 1] = e.type .. (e.data and e.data.path or "")
      end)
      cache:listen(function(e) seen[#seen + 1] = e.type .. (e.data and e.data.path or "") end)
      local m = mirror(cache, root)
      cache:start()
      for i = 1, 10 do
        admin:set(root .. "/p", tostring(i))
        admin:create(root .. "/c" .. i, "")
      end
      assert_caught_up(admin, root, m, cache)
      assert.are.same(seen, seen_by_waiter)
      assert.are.equal(#m.events, #seen)
      cache:close() -- before the client closes under the waiting listener
    end)
  end)

  describe("close()", function()
    it("stops every event at once and empties the cache", function()
      build_base(admin, root)
      local cache, m = started()
      local witness = zk:TreeCache(root)
      local witness_m = mirror(witness, root)
      witness:start()
      eventually(function() return witness.initialized end, LONG)
      cache:close()
      local count = #m.events
      assert.is_nil(cache:get_data(root))
      assert.is_nil(cache:get_children(root))
      assert.are.equal("closed", cache.state)
      admin:set(root .. "/a", "changed")
      admin:create(root .. "/z", "")
      eventually(function() return witness_m.nodes[root .. "/z"] ~= nil and
                                   witness_m.nodes[root .. "/a"].data == "changed" end, LONG)
      assert.are.equal(count, #m.events) -- the same session saw it: the closed one did not
      cache:close() -- idempotent
    end)

    it("called from a listener, no later event reaches any listener", function()
      build_base(admin, root)
      local cache = zk:TreeCache(root)
      local calls = 0
      cache:listen(function() calls = calls + 1; if calls == 3 then cache:close() end end)
      local after = 0
      cache:listen(function() after = after + 1 end)
      cache:start()
      local witness = zk:TreeCache(root)
      witness:start()
      eventually(function() return witness.initialized end, LONG)
      assert.are.equal(3, calls)
      assert.are.equal(2, after) -- the second listener never heard the third event
    end)
  end)

  describe("bad input and faults", function()
    it("raises BadArgumentsError naming the argument, before anything is sent", function()
      local err = raises(errors.BadArgumentsError, zk.TreeCache, zk, 42)
      assert.are.equal("path", err.argument)
      raises(errors.BadArgumentsError, zk.TreeCache, zk, "/a/../b")
      raises(errors.BadArgumentsError, zk.TreeCache, zk, "/x/\0y")
      local cache = zk:TreeCache(root)
      err = raises(errors.BadArgumentsError, cache.listen, cache, "not a function")
      assert.are.equal("listener", err.argument)
      raises(errors.BadArgumentsError, cache.listen_fault, cache, nil)
      err = raises(errors.BadArgumentsError, cache.get_data, cache, 7)
      assert.are.equal("path", err.argument)
      err = raises(errors.BadArgumentsError, cache.get_data, cache, "/elsewhere")
      assert.truthy(err.message:find("inside the cache's tree", 1, true))
      raises(errors.BadArgumentsError, cache.get_data, cache, root .. "x") -- a prefix only
      raises(errors.BadArgumentsError, cache.get_children, cache, root .. "/../x")
      assert.is_nil(admin:exists(root)) -- nothing was sent: the root was not even created
      local stopped = zklua.client(server.hosts)
      raises(errors.ConnectionClosedError, stopped.TreeCache, stopped, root)
      stopped:close()
    end)

    it("start() waits out a connection lost under its root's create", function()
      -- the root's create reaches the server and its reply is held back: the client gives
      -- up on the connection (SUSPENDED, the session lives) and the proxy resumes then
      local cut, proxy, states = helpers.client_losing_reply(server:node(1))
      local ok, err = pcall(function()
        local cache = cut:TreeCache(root)
        proxy:cut_reply("create")
        cache:start(60)
        assert.is_true(proxy:status().cut, "start sent no create")
        assert.are.equal("SUSPENDED", states[1])
        eventually(function() return cache.initialized end, LONG, "INITIALIZED")
        assert.is_truthy(admin:exists(root))
        cache:close()
      end)
      cut:close()
      proxy:stop()
      if not ok then error(err, 0) end
    end)

    it("reports a node it may not read to listen_fault, and a listener's error too", function()
      local security = require "zklua.security"
      create_all(admin, { { root }, { root .. "/open", "o" } })
      admin:create(root .. "/secret", "s",
                   { acl = { security.make_digest_acl("someone", "pw", { all = true }) } })
      local cache = zk:TreeCache(root)
      local faults = {}
      cache:listen_fault(function(err) faults[#faults + 1] = err end)
      cache:listen(function(e)
        if e.type == "NODE_ADDED" and e.data.path == root .. "/open" then error("boom") end
      end)
      cache:start()
      eventually(function() return cache.initialized end, LONG)
      local no_auth, boom
      for _, f in ipairs(faults) do
        if errors.is(f, errors.NoAuthError) then no_auth = f end
        if type(f) == "string" and f:find("boom", 1, true) then boom = f end
      end
      assert.is_truthy(no_auth)
      assert.are.equal(root .. "/secret", no_auth.path)
      assert.is_truthy(boom)
      assert.is_nil(cache:get_data(root .. "/secret"))
      assert.are.same({ "open" }, cache:get_children(root))
    end)
  end)

  describe("losing the session", function()
    it("after the client's stop() and start(): LOST, RECONNECTED, then the differences", function()
      build_base(admin, root)
      local cache, m = started()
      zk:stop()
      assert.are.equal(1, count_events(m, "CONNECTION_LOST"))
      change_while_away(admin, root)
      local mark = #m.events
      zk:start()
      assert_caught_up(admin, root, m, cache)
      assert.are.equal("CONNECTION_RECONNECTED", m.events[mark + 1].type)
      -- exactly the differences: a, root, untouched nodes are not reported again
      assert.are.equal(0, count_events(m, "NODE_UPDATED", root .. "/a"))
      assert.are.equal(1, count_events(m, "NODE_ADDED", root))
      assert.are.equal(1, count_events(m, "NODE_UPDATED", root .. "/a/x"))
      assert.are.equal(1, count_events(m, "NODE_REMOVED", root .. "/b/1"))
      assert.are.equal(2, count_events(m, "NODE_ADDED", root .. "/d/keep")) -- a new node
      assert.are.equal(1, count_events(m, "INITIALIZED"))
      admin:set(root .. "/n/n1/n2", "watched again")
      eventually(function() return m.nodes[root .. "/n/n1/n2"].data == "watched again" end, LONG)
    end)

    it("after a session expiry: LOST, RECONNECTED, re-read, watched again", function()
      build_base(admin, root)
      local cache, m = started()
      helpers.expire(zk)
      change_while_away(admin, root)
      assert_caught_up(admin, root, m, cache)
      local lost = index_of(m, "CONNECTION_LOST")
      assert.is_truthy(lost)
      assert.is_truthy(index_of(m, "CONNECTION_RECONNECTED", nil, lost))
      admin:set(root .. "/a", "after")
      eventually(function() return m.nodes[root .. "/a"].data == "after" end, LONG)
      assert_caught_up(admin, root, m, cache)
    end)
  end)
end)

-- ---------------------------------------------------------------- ensemble: real absences

describe("TreeCache across an absence (3-node ensemble)", function()
  local ens, writer, zk
  local counter = 0
  local root

  setup(function() ens = testing.ensemble(3) end)
  teardown(function() ens:stop() end)

  after_each(function()
    if zk then zk:close() end
    helpers.drop(writer, root)
    zk, writer = nil, nil
  end)

  -- The cache's client talks to one follower only; the writer to the two others.
  local function clients(timeout)
    counter = counter + 1
    root = "/tree-cache-ens/t" .. counter
    local follower, others
    helpers.wait_until(function()
      follower, others = nil, {}
      for i = 1, 3 do
        local node = ens:node(i)
        if not node:is_running() then node:start() end
        if not follower and node:mode() == "follower" then
          follower = node
        else
          others[#others + 1] = node.hosts
        end
      end
      return follower ~= nil and #others == 2
    end, LONG, "a follower")
    writer = zklua.client{ hosts = table.concat(others, ","), timeout = 30 }
    writer:start(LONG)
    zk = zklua.client{ hosts = follower.hosts, timeout = timeout }
    zk:start(LONG)
    return follower
  end

  local function cache_on(zk_)
    local cache = zk_:TreeCache(root)
    local m = mirror(cache, root)
    cache:start()
    eventually(function() return cache.initialized end, LONG, "INITIALIZED")
    return cache, m
  end

  it("its server down and back within the session: SUSPENDED, RECONNECTED, the changes", function()
    local follower = clients(40)
    writer:retry(build_base, writer, root)
    local cache, m = cache_on(zk)
    follower:stop()
    eventually(function() return index_of(m, "CONNECTION_SUSPENDED") ~= nil end, LONG)
    writer:retry(change_while_away, writer, root)
    local mark = #m.events
    assert.are.equal("CONNECTION_SUSPENDED", m.events[mark].type) -- nothing seen while away
    follower:start()
    assert_caught_up(writer, root, m, cache)
    assert.are.equal("CONNECTION_RECONNECTED", m.events[mark + 1].type)
    assert.is_nil(index_of(m, "CONNECTION_LOST"))
    assert.are.equal(1, count_events(m, "NODE_UPDATED", root .. "/a/x"))
    assert.are.equal(0, count_events(m, "NODE_UPDATED", root .. "/a"))
    assert.are.equal(2, count_events(m, "NODE_ADDED", root .. "/d/keep"))
    writer:set(root .. "/a", "after")
    eventually(function() return m.nodes[root .. "/a"].data == "after" end, LONG)
  end)

  it("its server down until the session expired: LOST, a new session, the differences", function()
    local follower = clients(2)
    writer:retry(build_base, writer, root)
    local marker = root .. "-session"
    zk:create(marker, "", { ephemeral = true })
    local cache, m = cache_on(zk)
    follower:stop()
    eventually(function() return index_of(m, "CONNECTION_SUSPENDED") ~= nil end, LONG)
    writer:retry(change_while_away, writer, root)
    helpers.wait_until(function() return writer:exists(marker) == nil end, LONG, "the expiry")
    local suspended = index_of(m, "CONNECTION_SUSPENDED")
    follower:start()
    assert_caught_up(writer, root, m, cache)
    -- LOST may come before the server is back: the client declares it once the connection
    -- stayed down a whole session timeout
    local lost = index_of(m, "CONNECTION_LOST", nil, suspended + 1)
    assert.is_truthy(lost)
    assert.are.equal("CONNECTION_RECONNECTED", m.events[lost + 1].type)
    assert.are.equal(1, count_events(m, "NODE_REMOVED", root .. "/b"))
    assert.are.equal(2, count_events(m, "NODE_ADDED", root .. "/c"))
    assert.are.equal(2, count_events(m, "NODE_ADDED", root .. "/d/keep"))
    writer:set(root .. "/n/n1/n2", "after")
    eventually(function() return m.nodes[root .. "/n/n1/n2"].data == "after" end, LONG)
  end)
end)
