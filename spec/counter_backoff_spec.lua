-- Counter's BadVersion backoff (src/recipes/counter.c) against a real server: a set that meets
-- BadVersion reads again only after a jittered pause armed as a session timer, and the timer
-- is taken back when the operation ends otherwise (stop, expiry, the counter freed).
-- Drives the C counter through its binding (core.counter), several per session, so that many
-- adds run at once as they do in nginx (one Counter per request, one session per worker).
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/counter-backoff"
local ZCLOSING = -116
local LONG_MS = 600000 -- a pause of 300..600 s: still under way whenever the test looks

local function counter(zk, path)
  return core.counter(zk._session, path, "int", 0)
end

local function wait_for(pred, what)
  testing.wait_for(pred, 30, what)
end

local function idle(ud)
  return function() return ud:phase() == "idle" end
end

-- Starts add(1) on each of uds, in order.  Counters on one session have their requests handled
-- in order: all the reads are answered before any set, so every set after the first meets
-- BadVersion.
local function start_adds(uds)
  for _, ud in ipairs(uds) do assert(ud:start(true, 1)) end
end

describe("Counter backoff", function()
  local server, a, b, path
  local n = 0

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    n = n + 1
    path = ROOT .. "/c" .. n
    a, b = helpers.clients(server.hosts, 2)
    a:ensure_path(path)
  end)

  after_each(function()
    a:close(); b:close()
    helpers.delete_trees(server.hosts, ROOT)
  end)

  it("pauses before reading again after a BadVersion, and counts the retries", function()
    local first, second = counter(a, path), counter(a, path)
    start_adds({ first, second })
    wait_for(function() return first:phase() == "idle" and second:phase() == "idle" end, "the adds")
    assert.are.same({ "ok", 0 }, { first:outcome() })
    assert.are.same({ "ok", 0 }, { second:outcome() })
    assert.are.same({ retries = 0, backoffs = 0, backing_off = false }, first:stats())
    -- the second set met BadVersion once, waited out one pause, then read and set again
    assert.are.same({ retries = 1, backoffs = 1, backing_off = false }, second:stats())
    assert.are.equal(2, second:post())
    assert.are.equal("2", (b:get(path)))
    assert(second:start(true, 1)) -- the count restarts with every operation
    wait_for(idle(second), "the third add")
    assert.are.same({ retries = 0, backoffs = 1, backing_off = false }, second:stats())
  end)

  it("sums 8 sessions' concurrent adds exactly, every retry after a pause", function()
    local clients, uds, done = {}, {}, {}
    local ADDS = 25
    for i = 1, 8 do
      clients[i] = helpers.client(server.hosts)
      uds[i] = counter(clients[i], path)
      done[i] = 0
    end
    local retries = 0
    for _, ud in ipairs(uds) do assert(ud:start(true, 1)) end
    -- each session adds 25 times, the next add starting as soon as its last one ended
    wait_for(function()
      local all = true
      for i, ud in ipairs(uds) do
        if ud:phase() == "idle" and done[i] < ADDS then
          assert.are.same({ "ok", 0 }, { ud:outcome() })
          retries = retries + ud:stats().retries
          done[i] = done[i] + 1
          if done[i] < ADDS then assert(ud:start(true, 1)) end
        end
        all = all and done[i] == ADDS
      end
      return all
    end, "200 adds")
    local backoffs = 0
    for _, ud in ipairs(uds) do
      local stats = ud:stats()
      assert.is_false(stats.backing_off)
      backoffs = backoffs + stats.backoffs
    end
    assert.are.equal("200", (b:get(path)))
    assert.is_true(retries > 0, "8 sessions adding at once never collided")
    assert.are.equal(retries, backoffs) -- no retry went without its pause
    for _, zk in ipairs(clients) do zk:close() end
  end)

  it("stop() during a pause ends the add with ZCLOSING and takes the timer back", function()
    local first, second = counter(a, path), counter(a, path)
    second:set_backoff(LONG_MS, LONG_MS)
    start_adds({ first, second })
    wait_for(function() return second:stats().backing_off end, "the pause")
    assert.are.equal("busy", second:phase())
    a:stop()
    wait_for(idle(second), "the add to end")
    assert.are.same({ "failed", ZCLOSING }, { second:outcome() })
    assert.are.same({ retries = 1, backoffs = 0, backing_off = false }, second:stats())
    assert.are.equal("1", (b:get(path)))
  end)

  it("LOST during a pause: the add reads again on the new session without waiting", function()
    local first, second = counter(a, path), counter(a, path)
    second:set_backoff(LONG_MS, LONG_MS)
    start_adds({ first, second })
    wait_for(function() return second:stats().backing_off end, "the pause")
    helpers.expire(a)
    wait_for(idle(second), "the add, on the new session") -- long before the pause would end
    assert.are.same({ "ok", 0 }, { second:outcome() })
    assert.are.same({ retries = 1, backoffs = 0, backing_off = false }, second:stats())
    assert.are.equal("2", (b:get(path)))
  end)

  it("freeing a counter during a pause takes its timer back (none fires into it)", function()
    local first, freed, last = counter(a, path), counter(a, path), counter(a, path)
    freed:set_backoff(400, 400) -- a pause of 200..400 ms
    last:set_backoff(4000, 4000) -- 2..4 s: it ends after the freed one's would have
    start_adds({ first, freed, last })
    wait_for(function() return freed:stats().backing_off or freed:phase() == "idle" end,
             "the pause")
    -- caught in its pause unless this process stalled 200 ms between two events
    local abandoned = freed:stats().backing_off
    freed = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    -- a timer left armed would be delivered into freed memory before this one (make asan)
    wait_for(idle(last), "the last add")
    assert.are.same({ "ok", 0 }, { last:outcome() })
    assert.are.same({ retries = 1, backoffs = 1, backing_off = false }, last:stats())
    assert.are.equal(abandoned and "2" or "3", (b:get(path)))
  end)

  it("checks set_backoff's arguments", function()
    local ud = counter(a, path)
    local function fails(pattern, ...)
      local ok, err = pcall(ud.set_backoff, ud, ...)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
    end
    fails("base_ms must be 1..600000", 0, 10)
    fails("cap_ms must be base_ms..600000", 10, 5)
    fails("cap_ms must be base_ms..600000", 1, LONG_MS + 1)
    fails("number expected", "x", 5)
    assert.is_true(ud:set_backoff(1, 1))
  end)
end)
