--- spec/curator/support.lua — what the translated Curator test classes (spec/curator/Test*.lua)
-- share: Curator's BaseClassForTests in Lua.
--
--   local support = require "curator.support"
--   local h
--   before_each(function() h = support.harness() end)   -- BaseClassForTests.setup
--   after_each(function() h:teardown() end)              -- BaseClassForTests.teardown
--   it("testX", function() local client = h:client() ... end)
--
-- * Curator starts a TestingServer for each test; here the tests of a busted run share one
--   standalone server (kazoo.support.server: the kazoo specs' shared server) and each test has
--   its own namespace ("/curatortests" .. 32 hex digits) as the chroot of every client it
--   makes, so Curator's absolute paths ("/locks/our-lock") are used as they are and tests never
--   see each other's nodes.  A test that stops, restarts or expires the server makes its own
--   (h:own_server()), stopped by teardown.
-- * Every client made through a harness is closed by its teardown, even when the test fails.
-- * Curator's threads are coroutines of one cqueues controller (support.threads, kazoo's);
--   its CountDownLatch and Semaphore are support.latch and support.semaphore on them.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local ksupport = require "kazoo.support"

local support = {
  uuid = ksupport.uuid,
  threads = ksupport.threads,
  event = ksupport.event,
}

local Harness = {}
Harness.__index = Harness

--- A harness on the shared server (or opts.server): h.servers (the hosts, no chroot),
--- h.namespace and h.hosts (the servers with the namespace as chroot); the namespace exists.
function support.harness(opts)
  opts = opts or {}
  local server = opts.server or ksupport.server()
  local h = setmetatable({ server = server, servers = server.hosts, clients = {}, owned = {},
                           namespace = "/curatortests" .. support.uuid() }, Harness)
  h.hosts = h.servers .. h.namespace
  local admin = zklua.client({ hosts = h.servers, timeout = 10 })
  admin:start()
  admin:ensure_path(h.namespace)
  admin:close()
  return h
end

-- Remembers zk for teardown; returns it.
function Harness:_tracked(zk)
  self.clients[#self.clients + 1] = zk
  return zk
end

--- CuratorFrameworkFactory.newClient(server.getConnectString(), ...): a client on the test's
--- namespace (opts as zklua.client's; timeout defaults to 10 s, Curator's Timing.session()),
--- started unless opts.start == false; closed by teardown.
function Harness:client(opts)
  local options = { timeout = 10 }
  local start = true
  for k, v in pairs(opts or {}) do
    if k == "start" then start = v else options[k] = v end
  end
  options.hosts = options.hosts or self.hosts
  local zk = self:_tracked(zklua.client(options))
  if start then zk:start() end
  return zk
end

--- A server of this test's own (it may stop, restart or expire it): started; stopped by
--- teardown.  The harness's hosts stay the shared server's: give hosts = server.hosts.
function Harness:own_server(opts)
  local server = testing.server(opts)
  self.owned[#self.owned + 1] = server
  return server
end

--- Curator's TestingCluster (createAndStartCluster(n)): an ensemble of n nodes of this test's
--- own, started; stopped by teardown.
function Harness:own_ensemble(n, opts)
  local cluster = testing.ensemble(n, opts)
  self.owned[#self.owned + 1] = cluster
  return cluster
end

--- Curator's injectSessionExpiration / KillSession: the server expires zk's session; returns
--- once zk is CONNECTED again on a new session.
function Harness.expire_session(_, zk)
  helpers.expire(zk)
end

--- Deletes the namespace, closes every client of the harness, stops its own servers.
function Harness:teardown()
  for _, zk in ipairs(self.clients) do pcall(zk.close, zk) end
  self.clients = {}
  for _, server in ipairs(self.owned) do pcall(server.stop, server) end
  self.owned = {}
  pcall(helpers.delete_trees, self.servers, self.namespace)
end

--- Java's CountDownLatch for support.threads' coroutines: l.count_down(), l.count(),
--- l.await(timeout) -> true once the count is 0, false after timeout seconds (without one it
--- waits at most 60 s and then raises, where Java would hang).
function support.latch(env, count)
  local l = { n = count }
  function l.count_down()
    if l.n > 0 then l.n = l.n - 1 end
    env.handler.poke()
  end
  function l.count() return l.n end
  function l.await(timeout)
    local done = env.handler.wait(function() return l.n == 0 end, timeout or 60)
    if not done and not timeout then error("a latch was not counted down within 60 s", 2) end
    return l.n == 0
  end
  return l
end

--- Java's BlockingQueue of events: q.add(v), q.poll(timeout) -> the first one, or nil when
--- none came within timeout seconds, running env's event loop meanwhile (env: a client, or
--- support.threads' env; an add wakes a coroutine handler's waiters).
function support.queue(env)
  local q = { items = {} }
  function q.add(v)
    q.items[#q.items + 1] = v
    if env.handler.poke then env.handler.poke() end
  end
  function q.poll(timeout)
    env.handler.wait(function() return #q.items > 0 end, timeout)
    return table.remove(q.items, 1)
  end
  return q
end

--- A client listener adding Curator's ConnectionState names to q ("RECONNECTED": a CONNECTED
--- after the first).
function support.states_into(client, q)
  local connected_once = false
  client:add_listener(function(state)
    if state == "CONNECTED" then
      q.add(connected_once and "RECONNECTED" or "CONNECTED")
      connected_once = true
    else
      q.add(state)
    end
  end)
end

--- Java's Semaphore for support.threads' coroutines: s.release(n), s.available(),
--- s.acquire(n, timeout) -> true once n permits were taken, false after timeout seconds
--- (without one: at most 60 s, then it raises).
function support.semaphore(env, permits)
  local s = { n = permits or 0 }
  function s.release(n)
    s.n = s.n + (n or 1)
    env.handler.poke()
  end
  function s.available() return s.n end
  function s.acquire(n, timeout)
    n = n or 1
    local ok = env.handler.wait(function() return s.n >= n end, timeout or 60)
    if not ok and not timeout then error("no permit within 60 s", 2) end
    if s.n >= n then
      s.n = s.n - n
      return true
    end
    return false
  end
  return s
end

--- The children of path, {} when path is gone: Curator's recipes make their parents container
--- nodes, which the server deletes once emptied (zklua.testing looks every 500 ms), so a
--- getChildren that Curator's test expects to be empty may find no node instead.  Both mean
--- nothing is left under path.
function support.children(client, path)
  local ok, children = pcall(client.get_children, client, path)
  if ok then return children end
  if not zklua.errors.is(children, zklua.errors.NoNodeError) then error(children, 0) end
  return {}
end

--- Curator's LeaderSelector(client, path, listener) on zklua's Election with the
--- "curator-selector" layout, for the TestLeaderSelector* classes: take(s) is takeLeadership
--- (s the selector: s.interrupted() is true once Curator would have interrupted it).
--- start() runs election:run(fn) in a thread of its own (support.threads' coroutines; with
--- autoRequeue, run({requeue = true}, fn)), requeue() runs it again unless a run is under way
--- (Curator's internalRequeue: false while queued), hasLeadership() is is_leader, getId() the
--- identifier (opts.id, Curator's setId), getParticipants() the contenders (the leader first),
--- close() leaves the queue and tells a leader's fn (Curator interrupts it), and returns once
--- its run ended.  opts.policy: the error_policy; opts.auto_requeue: autoRequeue().
function support.selector(env, client, path, take, opts)
  opts = opts or {}
  local s = { election = client:Election(path, opts.id, { layout = "curator-selector",
                                                          error_policy = opts.policy }),
              closed = false,
              auto_requeue = false, runs = 0 }
  -- Curator's interrupt is sticky: on_lost (SUSPENDED or LOST ended this term) is kept, also
  -- when is_leader is true again by the time fn looks (SUSPENDED then CONNECTED)
  s.election:on_lost(function()
    s.lost = true
    env.handler.poke()
  end)
  function s.interrupted()
    return s.closed or s.lost or not s.election.is_leader
  end
  -- Thread.currentThread().join(): returns once interrupted (true), false after 60 s
  function s.join()
    return env.handler.wait(s.interrupted, 60)
  end
  local function body()
    s.lost = false
    return take(s)
  end
  function s.start()
    s.runs = s.runs + 1
    s.thread = env.spawn(function()
      if s.auto_requeue then
        return s.election:run({ requeue = true }, body)
      end
      return s.election:run(body)
    end)
  end
  function s.autoRequeue() s.auto_requeue = true end
  function s.requeue()
    if s.closed or (s.thread and not s.thread.done) then return false end
    s.start()
    return true
  end
  function s.hasLeadership() return s.election.is_leader end
  function s.getId() return opts.id end
  function s.getParticipants() return s.election:contenders() end
  function s.close()
    s.closed = true
    env.handler.poke()
    s.election:cancel()
    if s.thread then s.thread:join(60) end
  end
  if opts.auto_requeue then s.autoRequeue() end
  return s
end

return support
