--- spec/kazoo/support.lua — what the translated kazoo tests (spec/kazoo/*_spec.lua) share:
-- kazoo's test harness (kazoo.testing.harness) in Lua.
--
--   local support = require "kazoo.support"
--   local h
--   before_each(function() h = support.harness() end)   -- kazoo's setUp
--   after_each(function() h:teardown() end)              -- kazoo's tearDown
--   it("test_x", function() h.client:create("/a") end)   -- self.client, chrooted
--
-- * support.server() is one standalone server shared by every kazoo spec file of a busted
--   run (kazoo's global cluster): started on first use, stopped when the run's Lua state
--   closes or, failing that, by its watchdog when the run's process is gone.  A test that
--   stops, pauses or partitions a server starts its own (zklua.testing), never this one.
-- * Each harness has its own namespace ("/kazootests" .. 32 hex digits, as kazoo's uuid4):
--   h.client is chrooted to it, so tests never see each other's nodes; teardown deletes it.
-- * Every client made through a harness is closed by its teardown, even when the test fails.
-- * support.threads(fn) runs kazoo's threads as coroutines of one cqueues controller: they
--   may share one zklua object, as kazoo's threads share one Python object.
--
-- Helpers that spec/support/helpers.lua or zklua.testing already give (raises, eventually,
-- expire, wait_for...) are used from there, not repeated here.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local support = {}

local unpack = table.unpack or unpack

-- The shared server lives in the registry: busted reloads modules for each spec file
-- (insulation), and a module-level upvalue would start one server per file.
local REGISTRY_KEY = "zklua.spec.kazoo.server"

--- The standalone server the kazoo specs share (started on first use, or again if a test
--- stopped it).
function support.server()
  local registry = debug.getregistry()
  local server = registry[REGISTRY_KEY]
  local node = server and server:node(1)
  if not (node and node:is_running() and not node.paused) then
    if server then server:stop() end
    server = testing.server()
    registry[REGISTRY_KEY] = server
  end
  return server
end

--- 32 random hex digits (kazoo's uuid.uuid4().hex).
function support.uuid()
  local f = assert(io.open("/dev/urandom", "rb"))
  local bytes = f:read(16)
  f:close()
  return (bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

--- A fresh absolute path no other test uses: "/" .. prefix .. 32 hex digits.
function support.unique_path(prefix)
  return "/" .. (prefix or "") .. support.uuid()
end

local Harness = {}
Harness.__index = Harness

--- kazoo's KazooTestHarness.setup_zookeeper: a harness on the shared server (or opts.server;
--- with use_ssl, a server started with zklua.testing's tls option: every client of the harness
--- then connects to its secure ports with the TLS options given)
--- with h.servers (the hosts, no chroot), h.hosts (with the harness's namespace as chroot),
--- h.namespace, and h.client: started, chrooted, its root created.  opts (all optional):
--- the client options for h.client (timeout defaults to 10 s, not kazoo's 0.8 s: a loaded
--- machine must not expire sessions a test does not mean to expire), and server.
function support.harness(opts)
  opts = opts or {}
  local server = opts.server or support.server()
  local h = setmetatable({ server = server, servers = server.hosts, clients = {},
                           plain_servers = server.hosts,
                           namespace = support.unique_path("kazootests") }, Harness)
  local options = {}
  for k, v in pairs(opts) do
    if k ~= "server" then options[k] = v end
  end
  if opts.use_ssl then
    -- kazoo's harness connects a use_ssl client to the cluster's secure ports; every client
    -- of this harness then speaks TLS with the same files
    h.servers = server.secure_hosts
    h.tls = {}
    for _, k in ipairs({ "use_ssl", "certfile", "keyfile", "keyfile_password", "ca" }) do
      h.tls[k] = opts[k]
    end
  end
  h.hosts = h.servers .. h.namespace
  -- the namespace is made through a client without chroot: kazoo's h.client.ensure_path("/")
  -- under a chroot that does not exist is a behaviour under test (test_client.py), not setup
  local admin = h:get_nonchroot_client()
  admin:start()
  admin:ensure_path(h.namespace)
  admin:close()
  h.client = h:get_client(options)
  h.client:start()
  return h
end

-- Remembers zk for teardown; returns it.
function Harness:_tracked(zk)
  self.clients[#self.clients + 1] = zk
  return zk
end

--- kazoo's _get_client(**kwargs): a client (not started) on h.hosts (the chroot), with the
--- client options given (a table, as zklua.client's; hosts may be overridden); closed by
--- teardown.
function Harness:get_client(opts)
  local options = { timeout = 10 }
  for k, v in pairs(opts or {}) do options[k] = v end
  options.hosts = options.hosts or self.hosts
  return self:_tracked(zklua.client(options))
end

--- kazoo's _get_nonchroot_client(): a client (not started) on the servers, no chroot; closed
--- by teardown.
function Harness:get_nonchroot_client(opts)
  local options = { timeout = 10 }
  for k, v in pairs(self.tls or {}) do options[k] = v end
  for k, v in pairs(opts or {}) do options[k] = v end
  options.hosts = self.servers
  return self:_tracked(zklua.client(options))
end

--- kazoo's expire_session(): the server expires zk's session (default h.client); returns
--- once zk is CONNECTED again on a new session.
function Harness:expire_session(zk)
  zk = zk or self.client
  helpers.expire(zk)
  testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "the new session")
end

--- kazoo's teardown_zookeeper: deletes the namespace and closes every client of the harness.
function Harness:teardown()
  for _, zk in ipairs(self.clients) do pcall(zk.close, zk) end
  self.clients = {}
  helpers.delete_trees(self.plain_servers, self.namespace)
end

--- Runs body(env) as the main coroutine of a new cqueues controller and returns once every
--- coroutine it spawned has ended (raising the first error any of them raised), or fails the
--- test after opts.guard seconds (default 120) instead of hanging.  env:
---   env.handler          the cqueues handler (zklua.handlers.cqueues)
---   env.client(opts)     a started client on this controller (opts as zklua.client's; hosts
---                        is required); closed when body's coroutines ended
---   env.spawn(fn, ...)   a "thread": fn(...) in a coroutine; returns t with t:join(timeout)
---                        (raises on timeout), t.done, t.ok and t.result (fn's first result
---                        or error)
---   env.sleep(s)         sleeps this coroutine (the others run)
---   env.eventually(pred, timeout, what)  polls pred every 20 ms; raises after timeout
function support.threads(body, opts)
  local cqueues = require "cqueues"
  local cq_handler = require "zklua.handlers.cqueues"
  local guard = opts and opts.guard or 120
  local cq = cqueues.new()
  local handler = cq_handler.new(cq)
  local env, clients, failures, spawned = { handler = handler }, {}, {}, {}

  function env.client(options)
    options = options or {}
    local o = { timeout = 10 }
    for k, v in pairs(options) do o[k] = v end
    o.handler = handler
    local zk = zklua.client(o)
    clients[#clients + 1] = zk
    zk:start()
    return zk
  end

  function env.sleep(seconds) handler.sleep(seconds) end

  function env.eventually(pred, timeout, what)
    local deadline = cqueues.monotime() + (timeout or 20)
    while not pred() do
      if cqueues.monotime() > deadline then
        error("timed out waiting for " .. (what or "a condition"), 2)
      end
      handler.sleep(0.02)
    end
  end

  local Thread = {}
  Thread.__index = Thread
  function Thread:join(timeout)
    env.eventually(function() return self.done end, timeout or 60, "a thread to end")
    return self.result
  end

  function env.spawn(fn, ...)
    local args, n = { ... }, select("#", ...)
    local t = setmetatable({ done = false }, Thread)
    spawned[#spawned + 1] = t
    cq:wrap(function()
      local ok, result = pcall(fn, unpack(args, 1, n))
      t.ok, t.result, t.done = ok, result, true
      if not ok then failures[#failures + 1] = tostring(result) end
    end)
    return t
  end

  local main = env.spawn(body, env)
  local deadline = cqueues.monotime() + guard
  local ok, err = true, nil
  local function all_done()
    for _, t in ipairs(spawned) do
      if not t.done then return false end
    end
    return true
  end
  while ok and #failures == 0 and not all_done() and cqueues.monotime() < deadline do
    ok, err = cq:step(0.5)
  end
  for _, zk in ipairs(clients) do pcall(zk.close, zk) end
  if not ok then error(err, 0) end
  if #failures > 0 then error(failures[1], 0) end
  if not main.done then error("the test's threads did not end within " .. guard .. " s", 0) end
  if not all_done() then error("a thread did not end within " .. guard .. " s", 0) end
  return main.result
end


--- kazoo's threading.Event for support.threads' coroutines: ev.set(), ev.clear(),
--- ev.is_set(), ev.wait(timeout) -> ev.is_set() (yields; without a timeout it waits at most
--- 60 s and then raises, where kazoo would hang).
function support.event(env)
  local ev = { flag = false }
  function ev.set()
    ev.flag = true
    env.handler.poke() -- wakes the waiters now, not at the poller's next round
  end
  function ev.clear() ev.flag = false end
  function ev.is_set() return ev.flag end
  function ev.wait(timeout)
    local set = env.handler.wait(function() return ev.flag end, timeout or 60)
    if not set and not timeout then error("an event was not set within 60 s", 2) end
    return ev.flag
  end
  return ev
end

return support
