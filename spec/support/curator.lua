--- spec/support/curator.lua — the scaffold the Curator interop specs share: a ZooKeeper server
-- per spec file, a fresh path per test under a plain root, the Java programs and clients a
-- test starts stopped and closed after it, the path's children listed and watched, and a body
-- run in coroutines of a cqueues controller.
--
--   local interop = require "support.curator"
--   describe("...", function()
--     local server, zk, path
--     local s = interop.scaffold("/selector", function(t) server, zk, path = t.server, t.zk, t.path end)
--     setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)
--     local p = s:start("CuratorSelector", server.hosts, path, ...)  -- stopped after the test
--     local c = s:closing(helpers.client(server.hosts))  -- closed (or stopped) after the test
--     s:children(); s:wait_children(2, "Curator's node"); s:on_change(observer, fn)
--     interop.in_cqueues(function(cq) ... end, 180)  -- body's error fails the test
--
-- busted's setup/teardown/before_each/after_each are globals only inside spec files, so the
-- spec files register the scaffold's hooks themselves; sync(t) is called whenever t.server,
-- t.zk or t.path change, for the spec's own locals.
-- The root is a plain node made once per file: a container parent shared by the tests would be
-- deleted by the server between two of them, under a Curator create (whose LeaderLatch does not
-- retry a create that found its parent gone).  Each test's path is <root>/t<n> (or
-- <root>/t<n><suffix>: opts.suffix), dropped after the test with everything under it.
local assert = require "luassert"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local java = require "support.java"

local curator = {}

local Scaffold = {}
Scaffold.__index = Scaffold

--- A scaffold for tests under root; opts.suffix goes after each test's own node.
function curator.scaffold(root, sync, opts)
  local s = setmetatable({ root = root, suffix = opts and opts.suffix or "", counter = 0,
                           programs = {}, closers = {} }, Scaffold)
  sync = sync or function() end
  function s.setup()
    s.server = testing.server()
    helpers.client(s.server.hosts, root):close()
    sync(s)
  end
  function s.teardown() s.server:stop() end
  function s.before_each()
    s.counter = s.counter + 1
    s.test_root = root .. "/t" .. s.counter
    s.path = s.test_root .. s.suffix
    s.zk = helpers.client(s.server.hosts)
    sync(s)
  end
  function s.after_each()
    for i = #s.programs, 1, -1 do s.programs[i]:stop(); s.programs[i] = nil end
    for i = #s.closers, 1, -1 do
      local c = s.closers[i]
      if c.close then c:close() else c:stop() end
      s.closers[i] = nil
    end
    helpers.drop(s.zk, s.test_root)
  end
  return s
end

local function kept(list, x)
  list[#list + 1] = x
  return x
end

--- Starts the Java program name (spec/support/java.lua) with args; stopped after the test.
function Scaffold:start(name, ...) return kept(self.programs, java.start(name, ...)) end

--- Keeps x (a client: closed, or a proxy: stopped) for after the test; returns x.
function Scaffold:closing(x) return kept(self.closers, x) end

--- The children of of (default: the test's path), sorted; {} while it does not exist.
function Scaffold:children(of)
  local ok, list = pcall(self.zk.get_children, self.zk, of or self.path)
  if not ok then return {} end
  table.sort(list)
  return list
end

--- Waits (running the event loops) until of (default: the test's path) has n children.
function Scaffold:wait_children(n, what, of)
  testing.wait_for(function() return #self:children(of) == n end, 30, what)
end

--- Runs fn once, from inside whatever wait is under way, when the children of of (default: the
--- test's path) change, watched through observer (a second client).
function Scaffold:on_change(observer, fn, of)
  observer:get_children(of or self.path, function() fn() end)
end

--- Runs body(cq) in a coroutine of a fresh cqueues controller cq (body may wrap more), stepping
--- cq until body returns, within timeout seconds (default 120); fails the test with body's
--- error, or when it has not returned by then.
function curator.in_cqueues(body, timeout)
  local cqueues = require "cqueues"
  local cq = cqueues.new()
  local finished, failure = false, nil
  cq:wrap(function()
    local ok, err = pcall(body, cq)
    if not ok then failure = tostring(err) end
    finished = true
  end)
  local deadline = cqueues.monotime() + (timeout or 120)
  while not finished and cqueues.monotime() < deadline do assert(cq:step(0.5)) end
  assert.is_nil(failure)
  assert.is_true(finished)
end

return curator
