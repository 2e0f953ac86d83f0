-- Every public call that can wait ends — it returns, or raises a named zklua error — in every
-- client state: CONNECTED, SUSPENDED (the connection silenced, or dropped and refused, through
-- zklua.testing.proxy), LOST (the server expired the session, and no new one can be made),
-- AUTH_FAILED, CLOSED (stop, close) and after the connection retry policy gave up.
--
-- Completeness is checked here too: the public methods of the client and of every recipe
-- class are read from the modules at run time (the objects' metatables), and each one must be
-- driven through the states below (CALLS, UNBOUNDED) or listed in NO_WAIT with the reason it
-- cannot wait.  Each class a factory method makes (a method named with a capital, e.g.
-- zk:Lock, discovery:ServiceCache) must be in CLASSES.  A public call added later without
-- coverage fails this spec.
--
-- Each call that takes a bound gets one (BOUND seconds); the others are bounded by the client
-- (each ZooKeeper request ends at the session timeout, with ConnectionLoss, or when the
-- client stops).  Election:run waits to be elected, without an end by design (kazoo's);
-- it is shown to end when its client stops.  Nothing here asserts how fast a call ends: a
-- call that does not end hangs the spec, and a call that ends with anything but a named zklua
-- error fails it.
local zklua = require "zklua"
local testing = require "zklua.testing"
local errors = zklua.errors

local BOUND = 1       -- seconds, given to every call that takes a timeout
local TIMEOUT = 2     -- the clients' session timeout (seconds)

local function nothing() end

-- ---------------------------------------------------------------- the calls

-- The calls, in an order that leaves the ones that end the client (start, restart, stop,
-- close) last.  Each is { "Class:method", fn(ctx) }; ctx holds a client (zk) through a proxy,
-- its root and the recipe objects of objects_of().  A name may be driven more than once.
local CALLS = {}
-- also: an error name the call may raise in every state besides the state's own
local function call(name, fn, also) CALLS[#CALLS + 1] = { name, fn, also } end

-- the client's reads and writes, and the futures of their _async forms
call("Client:get", function(c) return c.zk:get(c.root) end)
call("Client:exists", function(c) return c.zk:exists(c.root .. "/none") end)
call("Client:get_children", function(c) return c.zk:get_children(c.root) end)
call("Client:create", function(c) return c.zk:create(c.root .. "/n-", "", { sequence = true }) end)
call("Client:set", function(c) return c.zk:set(c.root, "v") end)
call("Client:delete", function(c) return c.zk:delete(c.root .. "/none") end)
call("Client:sync", function(c) return c.zk:sync(c.root) end)
call("Client:ensure_path", function(c) return c.zk:ensure_path(c.root .. "/made/here") end)
call("Client:get_acls", function(c) return c.zk:get_acls(c.root) end)
call("Client:set_acls", function(c)
  return c.zk:set_acls(c.root, zklua.security.OPEN_ACL_UNSAFE)
end)
call("Client:add_auth", function(c) return c.zk:add_auth("digest", "user:secret") end)
call("Client:reconfig", function(c) return c.zk:reconfig(nil, nil, nil) end)
call("Client:retry", function(c) return c.zk:retry(c.zk.exists, c.zk, c.root) end)
-- command and server_version ask the connected server directly: without a connection they
-- raise ConnectionLoss in every state, as kazoo's (test_client.py::test_version_no_connection)
call("Client:command", function(c) return c.zk:command("ruok") end, "ConnectionLoss")
call("Client:server_version", function(c) return c.zk:server_version(0) end, "ConnectionLoss")
call("Client:set_hosts", function(c) return c.zk:set_hosts(c.zk._hosts) end)
call("Client:dispatch", function(c) return c.zk:dispatch(BOUND) end)
call("Client:wait_for_events", function(c) return c.zk:wait_for_events(BOUND) end)
local ASYNC = {
  get_async = function(c) return c.zk:get_async(c.root) end,
  exists_async = function(c) return c.zk:exists_async(c.root) end,
  get_children_async = function(c) return c.zk:get_children_async(c.root) end,
  create_async = function(c) return c.zk:create_async(c.root .. "/a-", "", { sequence = true }) end,
  set_async = function(c) return c.zk:set_async(c.root, "w") end,
  delete_async = function(c) return c.zk:delete_async(c.root .. "/none") end,
  sync_async = function(c) return c.zk:sync_async(c.root) end,
  ensure_path_async = function(c) return c.zk:ensure_path_async(c.root .. "/made/async") end,
  get_acls_async = function(c) return c.zk:get_acls_async(c.root) end,
  set_acls_async = function(c)
    return c.zk:set_acls_async(c.root, zklua.security.OPEN_ACL_UNSAFE)
  end,
  add_auth_async = function(c) return c.zk:add_auth_async("digest", "user:secret") end,
  reconfig_async = function(c) return c.zk:reconfig_async(nil, nil, nil) end,
}
for _, name in ipairs({ "get_async", "exists_async", "get_children_async", "create_async",
                        "set_async", "delete_async", "sync_async", "ensure_path_async",
                        "get_acls_async", "set_acls_async", "add_auth_async",
                        "reconfig_async" }) do
  call("Client:" .. name, function(c) return ASYNC[name](c):get(BOUND) end)
end
call("Future:get", function(c) return c.zk:get_async(c.root):get(BOUND) end)
call("Future:wait", function(c) return c.zk:exists_async(c.root):wait(BOUND) end)
call("Transaction:commit", function(c)
  local t = c.zk:transaction()
  t:check(c.root, -1)
  return t:commit()
end)
call("Transaction:commit_async", function(c)
  local t = c.zk:transaction()
  t:check(c.root, -1)
  return t:commit_async():get(BOUND)
end)
call("Transaction:with", function(c)
  return c.zk:transaction():with(function(t) t:check(c.root, -1) end)
end)

-- the client's factories (some wait: the leases read and write, the watches read)
local FACTORIES = {
  { "Lock", function(c) return c.zk:Lock(c.root .. "/lock") end },
  { "ReadLock", function(c) return c.zk:ReadLock(c.root .. "/rwlock") end },
  { "WriteLock", function(c) return c.zk:WriteLock(c.root .. "/rwlock") end },
  { "Election", function(c) return c.zk:Election(c.root .. "/election") end },
  { "Counter", function(c) return c.zk:Counter(c.root .. "/counter") end },
  { "AtomicLong", function(c)
      return c.zk:AtomicLong(c.root .. "/atomic", { promoted_to_lock = { path = c.root .. "/al" } })
    end },
  { "Party", function(c) return c.zk:Party(c.root .. "/party") end },
  { "ShallowParty", function(c) return c.zk:ShallowParty(c.root .. "/sparty") end },
  { "Barrier", function(c) return c.zk:Barrier(c.root .. "/barrier") end },
  { "DoubleBarrier", function(c) return c.zk:DoubleBarrier(c.root .. "/dbarrier", 2) end },
  { "Queue", function(c) return c.zk:Queue(c.root .. "/queue") end },
  { "LockingQueue", function(c) return c.zk:LockingQueue(c.root .. "/lqueue") end },
  { "PatientChildrenWatch", function(c) return c.zk:PatientChildrenWatch(c.root, 0.1) end },
  { "TreeCache", function(c) return c.zk:TreeCache(c.root .. "/tree") end },
  { "Semaphore", function(c) return c.zk:Semaphore(c.root .. "/sem", nil, 1) end },
  { "NonBlockingLease", function(c)
      return c.zk:NonBlockingLease(c.root .. "/lease", 60, "me", nil, BOUND)
    end },
  { "MultiNonBlockingLease", function(c)
      return c.zk:MultiNonBlockingLease(1, c.root .. "/mlease", 60, "me", nil, BOUND)
    end },
  { "DataWatch", function(c) return c.zk:DataWatch(c.root, nothing) end },
  { "ChildrenWatch", function(c) return c.zk:ChildrenWatch(c.root, nothing) end },
  { "PartitionAllocator", function(c)
      return c.zk:PartitionAllocator{ path = c.root .. "/alloc" }
    end },
  { "SetPartitioner", function(c)
      return c.zk:SetPartitioner{ path = c.root .. "/sp", set = { "x" }, time_boundary = 0.1 }
    end },
  { "ServiceDiscovery", function(c) return c.zk:ServiceDiscovery(c.root .. "/services") end },
  { "PersistentNode", function(c) return c.zk:PersistentNode(c.root .. "/pn", "d") end },
  { "PersistentTtlNode", function(c)
      return c.zk:PersistentTtlNode(c.root .. "/ttl", 60000, "d")
    end },
}
for _, factory in ipairs(FACTORIES) do call("Client:" .. factory[1], factory[2]) end

-- the recipes
for _, kind in ipairs({ "Lock", "ReadLock", "WriteLock" }) do
  local key = kind:lower()
  call(kind .. ":acquire", function(c) return c[key]:acquire(true, BOUND) end)
  call(kind .. ":acquire", function(c) return c[key]:acquire(false, BOUND) end)
  call(kind .. ":contenders", function(c) return c[key]:contenders() end)
  call(kind .. ":with", function(c) return c[key]:with({ timeout = BOUND }, nothing) end)
  call(kind .. ":release", function(c) return c[key]:release() end)
  call(kind .. ":cancel", function(c) return c[key]:cancel() end)
  call(kind .. ":on_lost", function(c) return c[key]:on_lost(nothing) end)
end
-- Curator's layouts (InterProcessMutex, LeaderLatch): the same classes, other nodes
call("Lock:acquire", function(c) return c.curator_lock:acquire(true, BOUND) end)
call("Lock:with", function(c) return c.curator_lock:with({ timeout = BOUND }, nothing) end)
call("Lock:release", function(c) return c.curator_lock:release() end)
call("Election:run", function(c) return c.curator_latch:run({ timeout = BOUND }, nothing) end)
call("Election:start", function(c) return c.curator_latch:start(BOUND) end)
call("Election:await", function(c) return c.curator_latch:await(BOUND) end)
call("Election:stop", function(c) return c.curator_latch:stop(BOUND) end)
call("Semaphore:acquire", function(c) return c.sem:acquire(true, BOUND) end)
call("Semaphore:lease_holders", function(c) return c.sem:lease_holders() end)
call("Semaphore:with", function(c) return c.sem:with({ timeout = BOUND }, nothing) end)
call("Semaphore:release", function(c) return c.sem:release() end)
call("Semaphore:cancel", function(c) return c.sem:cancel() end)
call("Semaphore:on_lost", function(c) return c.sem:on_lost(nothing) end)
call("Counter:add", function(c) return c.counter:add(1, BOUND) end)
call("Counter:sub", function(c) return c.counter:sub(1, BOUND) end)
call("Counter:get", function(c) return c.counter:get(BOUND) end)
call("AtomicLong:get", function(c) return c.atomic:get(BOUND) end)
call("AtomicLong:increment", function(c) return c.atomic:increment(BOUND) end)
call("AtomicLong:decrement", function(c) return c.atomic:decrement(BOUND) end)
call("AtomicLong:add", function(c) return c.atomic:add(2, BOUND) end)
call("AtomicLong:subtract", function(c) return c.atomic:subtract(2, BOUND) end)
call("AtomicLong:try_set", function(c) return c.atomic:try_set(3, BOUND) end)
call("AtomicLong:compare_and_set", function(c) return c.atomic:compare_and_set(3, 4, BOUND) end)
call("AtomicLong:force_set", function(c) return c.atomic:force_set(5, BOUND) end)
call("AtomicLong:initialize", function(c) return c.atomic:initialize(6, BOUND) end)
call("Queue:put", function(c) return c.queue:put("item") end)
call("Queue:put_all", function(c) return c.queue:put_all({ "a", "b" }) end)
call("Queue:len", function(c) return c.queue:len() end)
call("Queue:get", function(c) return c.queue:get(BOUND) end)
call("LockingQueue:put", function(c) return c.lqueue:put("item") end)
call("LockingQueue:put_all", function(c) return c.lqueue:put_all({ "a", "b" }) end)
call("LockingQueue:len", function(c) return c.lqueue:len() end)
call("LockingQueue:get", function(c) return c.lqueue:get(BOUND) end)
call("LockingQueue:holds_lock", function(c) return c.lqueue:holds_lock() end)
call("LockingQueue:consume", function(c) return c.lqueue:consume(BOUND) end)
call("LockingQueue:release", function(c) return c.lqueue:release(BOUND) end)
call("LockingQueue:on_lost", function(c) return c.lqueue:on_lost(nothing) end)
call("Barrier:wait", function(c) return c.barrier:wait(BOUND) end)
call("Barrier:create", function(c) return c.barrier2:create() end)
call("Barrier:remove", function(c) return c.barrier2:remove() end)
call("DoubleBarrier:enter", function(c) return c.dbarrier:enter(BOUND) end)
call("DoubleBarrier:leave", function(c) return c.dbarrier:leave(BOUND) end)
call("DoubleBarrier:on_lost", function(c) return c.dbarrier:on_lost(nothing) end)
for _, kind in ipairs({ "Party", "ShallowParty" }) do
  local key = kind:lower()
  call(kind .. ":join", function(c) return c[key]:join(BOUND) end)
  call(kind .. ":join", function(c) return c[key .. "2"]:join() end) -- the client's timeout
  call(kind .. ":members", function(c) return c[key]:members() end)
  call(kind .. ":len", function(c) return c[key]:len() end)
  call(kind .. ":leave", function(c) return c["joined_" .. key]:leave(BOUND) end)
  call(kind .. ":on_lost", function(c) return c[key]:on_lost(nothing) end)
end
call("Election:run", function(c) return c.election:run({ timeout = BOUND }, nothing) end)
call("Election:start", function(c) return c.latch2:start(BOUND) end)
call("Election:await", function(c) return c.latch:await(BOUND) end) -- started, not leading
call("Election:contenders", function(c) return c.latch:contenders() end)
call("Election:on_leader", function(c) return c.latch:on_leader(nothing) end)
call("Election:on_lost", function(c) return c.latch:on_lost(nothing) end)
call("Election:stop", function(c) return c.latch:stop(BOUND) end)
call("Election:cancel", function(c) return c.latch:cancel() end)
call("PatientChildrenWatch:start", function(c) return c.patient:start():get(BOUND) end)
call("TreeCache:start", function(c) return c.tree:start(BOUND) end)
call("TreeCache:get_data", function(c) return c.tree:get_data(c.root .. "/tree") end)
call("TreeCache:get_children", function(c) return c.tree:get_children(c.root .. "/tree") end)
call("TreeCache:listen", function(c) return c.tree:listen(nothing) end)
call("TreeCache:listen_fault", function(c) return c.tree:listen_fault(nothing) end)
call("TreeCache:close", function(c) return c.tree:close() end)
call("SetPartitioner:wait_for_acquire", function(c) return c.sp:wait_for_acquire(BOUND) end)
call("SetPartitioner:list", function(c) return c.sp:list() end)
call("SetPartitioner:iter", function(c) return c.sp:iter() end)
call("SetPartitioner:len", function(c) return c.sp:len() end)
call("SetPartitioner:get_set", function(c) return c.sp:get_set() end)
call("SetPartitioner:fencing_token", function(c) return c.sp:fencing_token("x") end)
call("SetPartitioner:update_set", function(c) return c.sp:update_set({ "x", "y" }) end)
call("SetPartitioner:release_set", function(c) return c.sp:release_set(BOUND) end)
call("SetPartitioner:finish", function(c) return c.sp:finish(BOUND) end)
call("PartitionAllocator:start", function(c) return c.alloc:start({ "p" }, BOUND) end)
call("PartitionAllocator:wait_settled", function(c) return c.alloc:wait_settled(BOUND) end)
call("PartitionAllocator:members", function(c) return c.alloc:members() end)
call("PartitionAllocator:partitions", function(c) return c.alloc:partitions() end)
call("PartitionAllocator:add_partitions", function(c) return c.alloc:add_partitions({ "q" }) end)
call("PartitionAllocator:remove_partitions", function(c)
  return c.alloc:remove_partitions({ "q" })
end)
call("PartitionAllocator:set_strategy", function(c) return c.alloc:set_strategy("round_robin") end)
call("PartitionAllocator:owns", function(c) return c.alloc:owns("p") end)
call("PartitionAllocator:fencing_token", function(c) return c.alloc:fencing_token("p") end)
call("PartitionAllocator:stop", function(c) return c.alloc:stop(BOUND) end)
call("PersistentNode:on_created", function(c) return c.pnode:on_created(nothing) end)
call("PersistentNode:on_lost", function(c) return c.pnode:on_lost(nothing) end)
call("PersistentNode:start", function(c) return c.pnode2:start() end)
call("PersistentNode:wait_for_initial_create", function(c)
  return c.pnode:wait_for_initial_create(BOUND)
end)
call("PersistentNode:set_data", function(c) return c.pnode:set_data("e") end)
call("PersistentNode:stop", function(c) return c.pnode:stop(BOUND) end)
call("PersistentTtlNode:start", function(c) return c.tnode2:start() end)
call("PersistentTtlNode:wait_for_initial_create", function(c)
  return c.tnode:wait_for_initial_create(BOUND)
end)
call("PersistentTtlNode:set_data", function(c) return c.tnode:set_data("e") end)
call("PersistentTtlNode:stop", function(c) return c.tnode:stop() end)
local INSTANCE = { name = "api", id = "one", address = "127.0.0.1", port = 80 }
call("ServiceDiscovery:register", function(c) return c.sd:register(INSTANCE) end)
call("ServiceDiscovery:update", function(c) return c.sd:update(INSTANCE) end)
call("ServiceDiscovery:query_for_names", function(c) return c.sd:query_for_names() end)
call("ServiceDiscovery:query_for_instances", function(c) return c.sd:query_for_instances("api") end)
call("ServiceDiscovery:query_for_instance", function(c)
  return c.sd:query_for_instance("api", "one")
end)
call("ServiceDiscovery:ServiceCache", function(c) return c.sd:ServiceCache("api") end)
call("ServiceDiscovery:ServiceProvider", function(c) return c.sd:ServiceProvider("api") end)
call("ServiceCache:start", function(c) return c.cache:start(BOUND) end)
call("ServiceCache:get_instances", function(c) return c.cache:get_instances() end)
call("ServiceCache:listen", function(c) return c.cache:listen(nothing) end)
call("ServiceCache:close", function(c) return c.cache:close() end)
call("ServiceProvider:start", function(c) return c.provider:start(BOUND) end)
call("ServiceProvider:get_all_instances", function(c) return c.provider:get_all_instances() end)
call("ServiceProvider:get_instance", function(c) return c.provider:get_instance() end)
call("ServiceProvider:note_error", function(c) return c.provider:note_error(INSTANCE) end)
call("ServiceProvider:is_down", function(c) return c.provider:is_down("id-1") end)
call("ServiceProvider:stale_for", function(c) return c.provider:stale_for() end)
call("ServiceProvider:close", function(c) return c.provider:close() end)
call("ServiceDiscovery:unregister", function(c) return c.sd:unregister(INSTANCE) end)
call("ServiceDiscovery:close", function(c) return c.sd:close() end)

-- last, the calls that end the client
call("Client:start", function(c) return c.zk:start(BOUND) end)
call("Client:restart", function(c) return c.zk:restart(BOUND) end)
call("Client:stop", function(c) return c.zk:stop() end)
call("Client:close", function(c) return c.zk:close() end)

-- The calls without a bound (kazoo's form; run({timeout = t}, fn) is driven above): while not
-- elected they wait, and end when the client is stopped (ConnectionClosedError).
local UNBOUNDED = {
  { "Election:run", function(c) return c.election:run(function() return "led" end) end },
}

-- The public methods that cannot wait, and why.
local NO_WAIT = {
  ["Client:new"] = "the constructor: sends nothing (start() connects)",
  ["Client:transaction"] = "builds a transaction; its commit is driven (Transaction:*)",
  ["Client:add_listener"] = "registers a callback",
  ["Client:remove_listener"] = "unregisters a callback",
  ["Client:client_id"] = "a getter (the session id and password)",
  ["Client:fileno"] = "a getter (the event fd)",
  ["Client:session_timeout"] = "a getter (the negotiated timeout)",
  ["Client:unchroot"] = "pure: strips the chroot from a path",
  ["Future:new"] = "the constructor",
  ["Future:set"] = "resolves the future here",
  ["Future:set_exception"] = "resolves the future here",
  ["Future:ready"] = "a getter",
  ["Future:successful"] = "a getter",
  ["Future:get_nowait"] = "returns the result or raises at once (kazoo's)",
  ["Future:rawlink"] = "registers a callback",
  ["Future:unlink"] = "unregisters a callback",
  ["Transaction:new"] = "the constructor (zk:transaction())",
  ["Transaction:create"] = "records an op; commit sends it",
  ["Transaction:delete"] = "records an op; commit sends it",
  ["Transaction:set_data"] = "records an op; commit sends it",
  ["Transaction:check"] = "records an op; commit sends it",
}

-- The classes whose methods are checked, each made from a context (objects_of); every class
-- a factory method makes must be here (a factory's name is its class's).
local CLASSES = {
  Client = function(c) return c.zk end,
  Future = function(c) return c.zk:exists_async(c.root) end,
  Transaction = function(c) return c.zk:transaction() end,
  Lock = function(c) return c.lock end,
  ReadLock = function(c) return c.readlock end,
  WriteLock = function(c) return c.writelock end,
  Semaphore = function(c) return c.sem end,
  Counter = function(c) return c.counter end,
  AtomicLong = function(c) return c.atomic end,
  Queue = function(c) return c.queue end,
  LockingQueue = function(c) return c.lqueue end,
  Barrier = function(c) return c.barrier end,
  DoubleBarrier = function(c) return c.dbarrier end,
  Party = function(c) return c.party end,
  ShallowParty = function(c) return c.shallowparty end,
  Election = function(c) return c.latch end,
  PatientChildrenWatch = function(c) return c.patient end,
  TreeCache = function(c) return c.tree end,
  SetPartitioner = function(c) return c.sp end,
  PartitionAllocator = function(c) return c.alloc end,
  ServiceDiscovery = function(c) return c.sd end,
  PersistentNode = function(c) return c.pnode end,
  PersistentTtlNode = function(c) return c.tnode end,
  ServiceCache = function(c) return c.cache end,
  ServiceProvider = function(c) return c.provider end,
  NonBlockingLease = function(c) return c.zk:NonBlockingLease(c.root .. "/l", 60, "x") end,
  MultiNonBlockingLease = function(c)
    return c.zk:MultiNonBlockingLease(1, c.root .. "/ml", 60, "x")
  end,
  DataWatch = function(c) return c.zk:DataWatch(c.root, nothing) end,
  ChildrenWatch = function(c) return c.zk:ChildrenWatch(c.root, nothing) end,
}

-- The public methods of obj: the functions its metatable's __index chain (or, when __index is
-- a function, its metatable) holds, but for metamethods and names starting with "_".
local function public_methods(obj)
  local names, seen = {}, {}
  local mt = getmetatable(obj)
  local class = mt and (type(mt.__index) == "table" and mt.__index or mt)
  while type(class) == "table" and not seen[class] do
    seen[class] = true
    for key, value in pairs(class) do
      if type(key) == "string" and type(value) == "function" and not key:match("^_") then
        names[key] = true
      end
    end
    local up = getmetatable(class)
    class = up and type(up.__index) == "table" and up.__index or nil
  end
  local list = {}
  for name in pairs(names) do list[#list + 1] = name end
  table.sort(list)
  return list
end

-- ---------------------------------------------------------------- driving them

-- Asserts that each call ends with a return or one of the named errors (a set of names).
local function every_call_ends(ctx, names, state, with_unbounded)
  local calls = {}
  for _, c in ipairs(CALLS) do calls[#calls + 1] = c end
  if with_unbounded then -- they raise before they would wait
    for _, c in ipairs(UNBOUNDED) do table.insert(calls, #calls - 3, c) end
  end
  for _, c in ipairs(calls) do
    local name, fn, also = c[1], c[2], c[3]
    local ok, err = pcall(fn, ctx)
    if not ok then
      assert(errors.is_error(err), state .. ": " .. name .. " raised a bare error: " ..
             tostring(err))
      assert(names[err.name] or err.name == also, state .. ": " .. name .. " raised " ..
             tostring(err))
    end
  end
end

-- Runs each unbounded call on its own client (spares[i]); `other` stops that client from a
-- callback of a reply that arrives while the call waits (the call's wait runs other's event
-- loop too), so each call is shown to end when its client stops, if it waits at all.  The
-- spare is cut off too: when its session is already gone the call raises at once.
local function unbounded_calls_end(spares, other, root, state)
  for i, c in ipairs(UNBOUNDED) do
    local name, fn, spare = c[1], c[2], spares[i]
    local stopper = other:exists_async(root)
    stopper:rawlink(function() spare.zk:stop() end)
    local ok, err = pcall(fn, spare)
    assert(ok or errors.is(err, errors.ConnectionClosedError) or
           errors.is(err, errors.SessionExpiredError),
           state .. ": " .. name .. " raised " .. tostring(err))
    testing.wait_for(function() return stopper:ready() end, 10, "the stopper")
  end
end

-- The recipe objects the calls use, on client zk under root.
local function objects_of(zk, root, name)
  local sd = zk:ServiceDiscovery(root .. "/services")
  return {
    zk = zk, root = root,
    lock = zk:Lock(root .. "/lock"),
    readlock = zk:ReadLock(root .. "/rwlock", name),
    writelock = zk:WriteLock(root .. "/rwlock", name),
    sem = zk:Semaphore(root .. "/sem", nil, 1),
    counter = zk:Counter(root .. "/counter"),
    atomic = zk:AtomicLong(root .. "/atomic", { promoted_to_lock = { path = root .. "/al" } }),
    queue = zk:Queue(root .. "/queue"),
    lqueue = zk:LockingQueue(root .. "/lqueue"),
    barrier = zk:Barrier(root .. "/barrier"),
    barrier2 = zk:Barrier(root .. "/barrier2"),
    dbarrier = zk:DoubleBarrier(root .. "/dbarrier", 2),
    party = zk:Party(root .. "/party", name),
    party2 = zk:Party(root .. "/party2", name),
    joined_party = zk:Party(root .. "/joined", name),
    shallowparty = zk:ShallowParty(root .. "/sparty", name),
    shallowparty2 = zk:ShallowParty(root .. "/sparty2", name),
    joined_shallowparty = zk:ShallowParty(root .. "/sjoined", name),
    election = zk:Election(root .. "/election", name),
    latch = zk:Election(root .. "/latch", name),
    latch2 = zk:Election(root .. "/latch2", name),
    curator_lock = zk:Lock(root .. "/clock", name, { layout = "curator" }),
    curator_latch = zk:Election(root .. "/clatch", name, { layout = "curator" }),
    patient = zk:PatientChildrenWatch(root .. "/lqueue", 0.1),
    tree = zk:TreeCache(root .. "/tree"),
    sp = zk:SetPartitioner{ path = root .. "/sp", set = { "x" }, identifier = name,
                            time_boundary = 0.1 },
    alloc = zk:PartitionAllocator{ path = root .. "/alloc", identifier = name },
    pnode = zk:PersistentNode(root .. "/pnode", name),
    pnode2 = zk:PersistentNode(root .. "/pnode2", name),
    tnode = zk:PersistentTtlNode(root .. "/tnode", 60000, name),
    tnode2 = zk:PersistentTtlNode(root .. "/tnode2", 60000, name),
    sd = sd,
    cache = sd:ServiceCache("api"),
    provider = sd:ServiceProvider("api"),
  }
end

local function set(...)
  local s = {}
  for _, name in ipairs({ ... }) do s[name] = true end
  return s
end

describe("every call that can wait ends", function()
  local server, other, proxy, ctx, spares
  local n = 0

  setup(function()
    server = testing.server()
    other = zklua.client{ hosts = server.hosts, timeout = TIMEOUT }
    other:start()
  end)
  teardown(function()
    other:close()
    server:stop()
  end)

  it("covers every public method: driven, or listed as one that cannot wait", function()
    local root = "/every_wait/coverage"
    other:ensure_path(root)
    local ctx_ = objects_of(other, root, "coverage")
    local driven = {}
    for _, c in ipairs(CALLS) do driven[c[1]] = true end
    for _, c in ipairs(UNBOUNDED) do driven[c[1]] = true end
    local missing, classes = {}, 0
    for class, make in pairs(CLASSES) do
      classes = classes + 1
      for _, method in ipairs(public_methods(make(ctx_))) do
        local name = class .. ":" .. method
        if method:match("^%u") and not CLASSES[method] then
          missing[#missing + 1] = name .. " (a factory of a class not in CLASSES)"
        end
        if not driven[name] and not NO_WAIT[name] then missing[#missing + 1] = name end
      end
    end
    table.sort(missing)
    assert(#missing == 0, "public methods neither driven through the client states nor " ..
           "listed as ones that cannot wait:\n  " .. table.concat(missing, "\n  "))
    -- and nothing listed that does not exist (a renamed method would leave its row behind)
    for name in pairs(NO_WAIT) do driven[name] = true end
    for name in pairs(driven) do
      local class, method = name:match("^(%w+):(.+)$")
      local found = false
      for _, m in ipairs(public_methods(CLASSES[class](ctx_))) do found = found or m == method end
      assert(found, name .. " is listed but is not a public method of " .. class)
    end
    assert.is_true(classes > 20)
    ctx_.sd:close()
    ctx_.cache:close()
    ctx_.provider:close()
    ctx_.tree:close()
    ctx_.sp:finish()
  end)

  -- A fresh client through a fresh proxy, and what `other` holds so that the waits wait.
  before_each(function()
    n = n + 1
    local root = "/every_wait/" .. n
    other:ensure_path(root)
    proxy = testing.proxy(server:node(1))
    local zk = zklua.client{ hosts = proxy.hosts, timeout = TIMEOUT,
                             connection_retry = { max_tries = -1, delay = 0.05,
                                                  max_delay = 0.2 } }
    zk:start()
    assert.is_true(other:Lock(root .. "/lock"):acquire())
    assert.is_true(other:WriteLock(root .. "/rwlock"):acquire())
    assert.is_true(other:Lock(root .. "/clock", "holder", { layout = "curator" }):acquire())
    assert.is_true(other:Semaphore(root .. "/sem", nil, 1):acquire())
    other:Barrier(root .. "/barrier"):create()
    ctx = objects_of(zk, root, "me")
    local leader = other:Election(root .. "/latch", "leader")
    leader:start()
    assert.is_true(leader:await(10))
    local curator_leader = other:Election(root .. "/clatch", "leader", { layout = "curator" })
    curator_leader:start()
    assert.is_true(curator_leader:await(10))
    ctx.latch:start()
    ctx.pnode:start()
    ctx.tnode:start()
    ctx.joined_party:join()
    ctx.joined_shallowparty:join()
    spares = {}
    for i = 1, #UNBOUNDED do
      local spare = zklua.client{ hosts = proxy.hosts, timeout = TIMEOUT }
      spare:start()
      spares[i] = { zk = spare, election = spare:Election(root .. "/election", "spare" .. i) }
    end
  end)

  after_each(function()
    ctx.zk:close()
    for _, spare in ipairs(spares) do spare.zk:close() end
    proxy:stop()
  end)

  it("CONNECTED: returns, or times out within the bound given", function()
    assert.are.same({ true, "led" }, { ctx.election:run(function() return "led" end) })
    every_call_ends(ctx, set("LockTimeout", "TimeoutError", "NoNodeError", "NotEmptyError",
                             "ZookeeperError"), "CONNECTED") -- reconfig: a standalone server
                                                  -- has it disabled
    assert.are.equal("CLOSED", ctx.zk.client_state)
  end)

  local CUT_OFF = set("ConnectionLoss", "OperationTimeoutError", "SessionExpiredError",
                      "LockTimeout", "TimeoutError", "RetryFailedError")

  it("SUSPENDED, the connection silenced: every call ends", function()
    proxy:silence("both")
    testing.wait_for(function() return ctx.zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    unbounded_calls_end(spares, other, ctx.root, "SUSPENDED (silenced)")
    every_call_ends(ctx, CUT_OFF, "SUSPENDED (silenced)")
  end)

  it("SUSPENDED, the connection dropped and refused: every call ends", function()
    proxy:refuse(true)
    proxy:drop()
    testing.wait_for(function() return ctx.zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    unbounded_calls_end(spares, other, ctx.root, "SUSPENDED (refused)")
    every_call_ends(ctx, CUT_OFF, "SUSPENDED (refused)")
  end)

  it("LOST (the server expired the session, no new one can be made): every call ends",
     function()
    proxy:refuse(true)
    proxy:drop()
    testing.expire_session(ctx.zk, 20, server.hosts)
    assert.are.equal("LOST", ctx.zk.state)
    unbounded_calls_end(spares, other, ctx.root, "LOST")
    every_call_ends(ctx, CUT_OFF, "LOST")
  end)

  it("AUTH_FAILED: every call raises AuthFailedError", function()
    assert.has_error(function() ctx.zk:add_auth("bogus", ":") end)
    -- the refusal may reach add_auth as a lost connection (the server closes it right after
    -- its answer); the AUTH_FAILED state follows from the library
    testing.wait_for(function() return ctx.zk.client_state == "AUTH_FAILED" end, 20,
                     "the AUTH_FAILED state")
    every_call_ends(ctx, set("AuthFailedError"), "AUTH_FAILED", true)
  end)

  it("CLOSED by stop(): every call raises ConnectionClosedError", function()
    ctx.zk:stop()
    every_call_ends(ctx, set("ConnectionClosedError"), "stopped", true) -- start() returns
  end)

  it("CLOSED by close(): every call raises ConnectionClosedError", function()
    ctx.zk:close()
    every_call_ends(ctx, set("ConnectionClosedError"), "closed", true)
  end)

  it("the connection retry policy gave up: every call ends", function()
    local zk = zklua.client{ hosts = proxy.hosts, timeout = TIMEOUT,
                             connection_retry = { max_tries = 2, delay = 0.05 } }
    zk:start()
    local objects = objects_of(zk, ctx.root, "gave-up")
    proxy:refuse(true)
    proxy:drop()
    testing.wait_for(function() return zk._stopped end, 30, "the policy to give up")
    assert.are.equal("LOST", zk.state)
    -- start() tries again, and gives up again: TimeoutError
    every_call_ends(objects, set("ConnectionClosedError", "TimeoutError"), "gave up", true)
    zk:close()
  end)
end)
