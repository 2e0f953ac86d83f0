-- A 3-node TLS ensemble under load and faults, with the acknowledged-write ledger
-- (spec/support/ledger.lua): writer clients, connected over TLS only, keep creates and sets
-- in flight without pause and a Counter is added to, while (1) the TLS server a writer is
-- connected to is stopped and started again, and (2) the current leader (asked of the
-- servers) is killed with SIGKILL, the two left elect another and it comes back.  Then every
-- acknowledged write is read back through each server on its own TLS port: none lost.  The
-- writers saw only what the faults explain (ConnectionLoss of the writes in flight), kept
-- their sessions (no LOST), and every write ended within its bound (never a hang).  Prints
-- the figures: writes acknowledged, lost, and the time from each fault to the first write
-- acknowledged after it.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local blocking = require "zklua.handlers.blocking"
local ledger = require "support.ledger"

local WRITERS = 3
local DEPTH = 8 -- the writes each writer keeps in flight
local BOUND = 60 -- the longest any wait may take (an upper bound, never a speed claim)
local ROOT = "/tlsledger"
-- what a fault explains: a write in flight when its connection dropped
local EXPLAINED = { ConnectionLoss = true }

if not core.zookeeper.tls then
  describe("TLS faults on this build", function()
    it("needs the C client with TLS (make, ZK_CLIENT=source)", function()
      error("this build's C client has no TLS: build with make (ZK_CLIENT=source)")
    end)
  end)
  return
end

describe("a 3-node TLS ensemble under load", function()
  local ens
  local clients = {}

  local function client(hosts)
    local o = ens:tls_options()
    o.hosts, o.timeout = hosts, 20 -- a session outlives a loaded machine's election
    local zk = zklua.client(o)
    clients[#clients + 1] = zk
    zk:start(BOUND)
    return zk
  end

  setup(function() ens = testing.ensemble(3, { tls = true }) end)
  teardown(function()
    for _, zk in ipairs(clients) do pcall(zk.close, zk) end
    if ens then ens:stop() end
  end)

  -- the node whose TLS port is host ("127.0.0.1:port")
  local function node_at(host)
    for _, node in ipairs(ens.nodes) do
      if node.secure_hosts == host then return node end
    end
    error("no node serves " .. tostring(host))
  end

  local function all_serving()
    for _, node in ipairs(ens.nodes) do
      local mode = node.pid and node:mode()
      if mode ~= "leader" and mode ~= "follower" then return false end
    end
    return ens:leader() ~= nil
  end

  it("loses no acknowledged write when a server restarts and the leader is killed", function()
    local writers = {}
    local setup_zk = client(ens.secure_hosts)
    for i = 1, WRITERS do
      local w = { name = "writer-" .. i, dir = ROOT .. "/w" .. i, n = 0, states = {} }
      setup_zk:ensure_path(w.dir)
      w.zk = client(ens.secure_hosts)
      w.zk:add_listener(function(state) w.states[#w.states + 1] = state end)
      w.L = ledger.new(w.name)
      writers[i] = w
    end
    local counter_zk = client(ens.secure_hosts)
    local counter_states = {}
    counter_zk:add_listener(function(state) counter_states[#counter_states + 1] = state end)
    local counter = counter_zk:Counter(ROOT .. "/counter")
    local adds = { acked = 0, failed = {}, tries = 0 }

    -- one write more for w: three creates, then a set of w's own node to its count
    local function write(w)
      w.n = w.n + 1
      if w.n % 4 == 0 then
        w.L:set(w.zk, w.dir, w.n)
      else
        w.L:create(w.zk, string.format("%s/e%06d", w.dir, w.n), w.name .. " " .. w.n)
      end
    end

    -- The load: every writer's finished writes entered and refilled to DEPTH, a Counter add
    -- every fourth round when its client is connected, until done() holds (checked between rounds).
    local rounds = 0
    local function load(done, what)
      local deadline = core.monotonic() + BOUND
      while true do
        for _, w in ipairs(writers) do
          w.L:collect()
          while w.L:outstanding() < DEPTH do write(w) end
        end
        rounds = rounds + 1
        if rounds % 4 == 0 and counter_zk.state == "CONNECTED" then
          adds.tries = adds.tries + 1
          local ok, err = pcall(counter.add, counter, 1, BOUND)
          if ok then
            adds.acked = adds.acked + 1
          else
            local name = type(err) == "table" and err.name or tostring(err)
            adds.failed[name] = (adds.failed[name] or 0) + 1
          end
        end
        if done() then return end
        assert(core.monotonic() < deadline, "timed out after " .. BOUND .. " s of load waiting for " .. what)
        blocking.wait(function()
          for _, w in ipairs(writers) do
            if w.L.pending[1] and w.L.pending[1].future:ready() then return true end
          end
          return false
        end, 0.05)
      end
    end

    -- every writer has a write acknowledged that it issued at or after t
    local function all_acked_since(t)
      return function()
        for _, w in ipairs(writers) do
          if not w.L:first_ack_since(t) then return false end
        end
        return true
      end
    end

    local function first_ack(t) -- the first and the last writer's first write after t
      local first, last
      for _, w in ipairs(writers) do
        local at = w.L:first_ack_since(t) - t
        first = first and math.min(first, at) or at
        last = last and math.max(last, at) or at
      end
      return first, last
    end

    load(function()
      for _, w in ipairs(writers) do
        if w.L.acked < 50 then return false end
      end
      return adds.acked >= 5
    end, "the first writes")

    -- (1) the TLS server writer 1 is connected to: stopped (SIGTERM), the load goes on through
    -- the two others, then it comes back
    local w1 = writers[1]
    local restarted = node_at(w1.zk._session:current_server())
    local suspended_before = #w1.states
    local t1 = core.monotonic()
    restarted:stop()
    load(all_acked_since(t1), "a write after the server stopped")
    local first1, last1 = first_ack(t1)
    local seen = {}
    for i = suspended_before + 1, #w1.states do seen[w1.states[i]] = true end
    assert.is_true(seen.SUSPENDED, "writer 1 never lost its connection to the stopped server")
    restarted:start(BOUND)
    local t1b = core.monotonic()
    load(function() return all_acked_since(t1b)() and all_serving() end, "the server back")

    -- (2) the leader, as the servers say: killed (SIGKILL); the two left elect another; it
    -- comes back as a follower
    local leader = assert(ens:leader(), "no leader")
    local t2 = core.monotonic()
    leader:kill()
    local acked_since = all_acked_since(t2)
    load(function()
      if not acked_since() then return false end
      local l = ens:leader()
      return l ~= nil and l ~= leader
    end, "a new leader and a write after it")
    local first2, last2 = first_ack(t2)
    leader:start(BOUND)
    local t2b = core.monotonic()
    load(function() return all_acked_since(t2b)() and all_serving() end, "the old leader back")

    -- the load stops: every write ends within its bound
    local acked, issued, failures = 0, 0, {}
    for _, w in ipairs(writers) do
      assert.are.equal(0, w.L:settle(BOUND), w.name .. "'s writes that never ended")
      acked, issued = acked + w.L.acked, issued + w.L.issued
      for name, n in pairs(w.L.failed) do
        assert.is_true(EXPLAINED[name], w.name .. " got " .. name .. " (" .. w.L:failures() .. ")")
        failures[name] = (failures[name] or 0) + n
      end
      for _, state in ipairs(w.states) do
        assert.are_not.equal("LOST", state, w.name .. " lost its session")
      end
    end
    for name in pairs(adds.failed) do
      assert.is_true(EXPLAINED[name], "a Counter add got " .. name)
    end
    for _, state in ipairs(counter_states) do
      assert.are_not.equal("LOST", state, "the Counter's client lost its session")
    end

    -- every acknowledged write, read back through each server's own TLS port
    local adds_failed = 0
    for _, n in pairs(adds.failed) do adds_failed = adds_failed + n end
    local lost = {}
    for i, node in ipairs(ens.nodes) do
      local reader = client(node.secure_hosts)
      for _, w in ipairs(writers) do
        for _, miss in ipairs(w.L:check(reader, "node " .. i, BOUND)) do lost[#lost + 1] = miss end
      end
      local value = tonumber((reader:retry(reader.get, reader, ROOT .. "/counter")))
      -- an add that failed may have been applied; an acknowledged one must be there
      assert.is_true(value >= adds.acked and value <= adds.acked + adds_failed,
                     string.format("node %d: counter %s, %d adds acknowledged, %d failed",
                                   i, tostring(value), adds.acked, adds_failed))
      reader:close()
    end
    assert.are.same({}, lost)
    local failed = {}
    for name, n in pairs(failures) do failed[#failed + 1] = name .. " " .. n end
    io.stdout:write(string.format(
      "\nTLS faults under load: %d writes issued, %d acknowledged, %d lost, failed: %s; " ..
      "Counter adds %d acknowledged, %d failed; first write acknowledged after the server " ..
      "stopped %.2f s (every writer %.2f s), after the leader was killed %.2f s (every " ..
      "writer %.2f s)\n", issued, acked, #lost, #failed > 0 and table.concat(failed, ", ") or "none",
      adds.acked, adds_failed, first1, last1, first2, last2))
  end)
end)
