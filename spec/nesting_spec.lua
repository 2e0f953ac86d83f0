-- No work nests to a depth the input decides (issues 20 and 23): a burst of watch events, a
-- path 2000 levels deep whose create fails at the top, slow callbacks queued before a
-- caller's answer, and clients closed and made inside callbacks, against a real server.
--
-- User callbacks never nest one inside another's wait (zklua.handlers.blocking, and the
-- coroutine handlers' callback coroutine), and a chain of futures settles in a loop
-- (zklua.future), so the C stack a callback runs on is as deep for 100k queued events as
-- for 10, and a failure 2000 levels up comes back as the server's error.
--
-- The burst's size: ZKLUA_BURST_EVENTS, 10k by default (make test); `make test-scale` runs
-- it at 100k, ten times that (several minutes per handler and interpreter).
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local blocking = require "zklua.handlers.blocking"
local child = require "fixtures.child"

local ROOT = "/nesting"
local BURST = tonumber(os.getenv("ZKLUA_BURST_EVENTS") or "10000")
assert(BURST and BURST >= 1000 and BURST % 1 == 0,
       "ZKLUA_BURST_EVENTS: a whole number of events, 1000 or more")

describe("nesting", function()
  local server, zk

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)
  before_each(function() zk = helpers.client(server.hosts, ROOT) end)
  after_each(function() helpers.drop(zk, ROOT) end)

  describe("a burst of watch events (spec/fixtures/watch_burst.lua)", function()
    local runs = 0

    -- Runs the fixture; returns delivered, n, depth.
    local function burst(n, handler, writer)
      runs = runs + 1
      local argv = helpers.lua_argv("spec/fixtures/watch_burst.lua", server.hosts,
                                    ROOT .. "/burst" .. runs, tostring(n), handler, writer)
      for i, word in ipairs(argv) do argv[i] = child.quote(word) end
      local out, err = helpers.run(table.concat(argv, " "), 600)
      local delivered, total, depth = out:match("delivered (%d+) of (%d+) depth (%d+)")
      assert(delivered, "the burst printed no result: " .. out .. err)
      return tonumber(delivered), tonumber(total), tonumber(depth)
    end

    for _, handler in ipairs({ "blocking", "cqueues" }) do
      it(handler .. ": " .. BURST .. " events queued at once, every one delivered, " ..
         "no deeper than 10", function()
        local _, _, shallow = burst(10, handler, "process")
        local delivered, total, depth = burst(BURST, handler, "process")
        assert.are.equal(BURST, total)
        assert.are.equal(BURST, delivered)
        -- a constant allowance for the paths a callback is reached by (a wait's loop or a
        -- sync op's); nested callbacks added several frames per queued event
        assert.is_true(depth <= shallow + 10, "depth " .. depth .. " at " .. BURST .. ", " ..
                       shallow .. " at 10")
      end)

      it(handler .. ": 10k changes by a second client of the same process", function()
        local delivered, total = burst(10000, handler, "same")
        assert.are.equal(10000, total)
        assert.are.equal(10000, delivered)
      end)
    end
  end)

  describe("a path 2000 levels deep", function()
    local function deep(top)
      local parts = { top }
      for i = 1, 2000 do parts[#parts + 1] = "d" .. (i % 10) end
      return table.concat(parts, "/")
    end

    it("under a read-only parent: create(makepath) and ensure_path raise NoAuthError",
       function()
      local top = ROOT .. "/ro"
      zk:create(top, "", { acl = { zklua.security.make_acl("world", "anyone", { read = true }) } })
      local path = deep(top)
      helpers.raises(errors.NoAuthError, zk.create, zk, path, "v", { makepath = true })
      helpers.raises(errors.NoAuthError, zk.ensure_path, zk, path)
      assert.are.same({}, zk:get_children(top)) -- nothing made
      -- and the client goes on
      assert.is_table(zk:exists(top))
    end)

    it("under an ephemeral parent: NoChildrenForEphemeralsError", function()
      local top = ROOT .. "/eph"
      zk:create(top, "", { ephemeral = true })
      helpers.raises(errors.NoChildrenForEphemeralsError, zk.ensure_path, zk, deep(top))
      helpers.raises(errors.NoChildrenForEphemeralsError, zk.create, zk, deep(top), "v",
                     { makepath = true })
    end)

    it("with every parent missing: made, 2000 levels", function()
      local path = deep(ROOT .. "/made")
      assert.are.equal(path, zk:create(path, "v", { makepath = true }))
      assert.are.equal("v", (zk:get(path)))
      assert.is_true(zk:ensure_path(path .. "/x/y"))
      -- a TreeCache sees every level, and a recursive delete takes the whole tree
      local cache = zk:TreeCache(ROOT .. "/made")
      cache:start()
      assert.is_true(blocking.wait(function() return cache:get_data(path .. "/x/y") ~= nil end,
                                   60))
      assert.are.equal("v", cache:get_data(path).data)
      cache:close()
      zk:delete(ROOT .. "/made", nil, true)
      assert.is_nil(zk:exists(ROOT .. "/made"))
    end)
  end)

  describe("slow callbacks and a waiting caller (blocking handler)", function()
    it("a call returns once answered, not after every queued callback; they all run later, " ..
       "in order", function()
      local N = 20
      local base = ROOT .. "/slow"
      local ran = {}
      -- a second client attached: a sync op inside a callback then waits through the
      -- handler's loop, where the next events queue behind it (alone, it waits in C)
      local second = helpers.client(server.hosts)
      zk:create(base, "")
      for i = 1, N do
        local path = base .. "/n" .. i
        zk:create(path, "0")
        zk:get(path, function()
          zk:get(path) -- each callback waits for an answer of its own
          ran[#ran + 1] = i
        end)
      end
      -- another process sets the N nodes while this one runs no event loop: the N events
      -- reach zk before the answer of the call below (a session sees the server's order)
      local argv = helpers.lua_argv("spec/fixtures/watch_burst.lua", "write", server.hosts,
                                    base, tostring(N))
      for i, word in ipairs(argv) do argv[i] = child.quote(word) end
      helpers.run(table.concat(argv, " "), 60)
      zk:get(ROOT)
      assert.is_true(#ran < N, "the call waited for all " .. #ran .. " callbacks")
      helpers.wait_until(function() return #ran == N end, 30)
      for i = 1, N do assert.are.equal(i, ran[i]) end
      second:close()
    end)
  end)

  describe("client churn inside callbacks (blocking handler)", function()
    it("a watch callback closes its own client and makes a new one; the waiter returns",
       function()
      local path = ROOT .. "/churn"
      zk:create(path, "0")
      local doomed = helpers.client(server.hosts)
      local replacement
      doomed:get(path, function()
        doomed:close()
        replacement = zklua.client(server.hosts)
        replacement:start()
      end)
      -- several clients are attached: the waits below walk them all
      zk:set(path, "1")
      assert.is_true(blocking.wait(function() return replacement ~= nil end, 30))
      assert.are.equal("1", (replacement:get(path)))
      assert.are.equal("1", (zk:get(path)))
      replacement:close()
    end)

    it("a listener closes its client and another callback makes clients; no raw error",
       function()
      local path = ROOT .. "/churn2"
      zk:create(path, "0")
      local a = helpers.client(server.hosts)
      local made = {}
      a:add_listener(function(state)
        if state == "LOST" then return true end
      end)
      for i = 1, 5 do
        zk:exists(path, function()
          local c = zklua.client(server.hosts)
          c:start()
          made[i] = c
          if i == 3 then a:close() end
        end)
      end
      zk:set(path, "1")
      assert.is_true(blocking.wait(function() return #made == 5 end, 60))
      for _, c in ipairs(made) do
        assert.are.equal("1", (c:get(path)))
        c:close()
      end
    end)
  end)
end)
