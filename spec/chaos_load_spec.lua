-- A steady mixed load on a 3-node ensemble while its nodes are stopped, frozen (SIGSTOP),
-- killed (SIGKILL) and restarted one at a time, the leader included.  Worker processes
-- (spec/fixtures/chaos_worker.lua, one session each) create, set, get, cycle two shared
-- locks and share six items through a SetPartitioner, writing every acknowledged write to a
-- ledger and every lock hold and item ownership (fencing token, interval on CLOCK_MONOTONIC)
-- to a shared fence ledger.  Afterwards the server is read back: no acknowledged write is
-- lost, every session survived (SUSPENDED then CONNECTED, never LOST), ops in flight at a
-- fault failed with ConnectionLoss and completed when retried, and no two holders of a lock
-- (or owners of an item) overlapped while fencing tokens only grew.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local child = require "fixtures.child"

local ROOT = "/chaos"
local WORKERS = 3
local SESSION_TIMEOUT = 12 -- s; a frozen node is noticed after 2/3 of it (8 s)
local FREEZE = 9.5         -- s a node stays frozen: longer than that notice
local DOWN = 2             -- s a node stays stopped or killed

local function lines(text)
  local list = {}
  for line in text:gmatch("[^\n]+") do list[#list + 1] = line end
  return list
end

local function words(line)
  local list = {}
  for w in line:gmatch("%S+") do list[#list + 1] = w end
  return list
end

-- A worker's lock_timeout lines: the lock, its session, the contenders and their sessions.
local function timeout_lines(w)
  local found = {}
  for _, line in ipairs(lines(w.kid:stdout())) do
    if line:match("^lock_timeout ") then found[#found + 1] = line end
  end
  return found
end

describe("a mixed load on a 3-node ensemble whose nodes fail one at a time", function()
  local ens, kids, dir
  local workers = {}   -- name -> { kid, ledger, out = parsed stdout }
  local fence_file
  local faults = {}    -- what was done, in order, for messages

  local function serving_all()
    helpers.wait_until(function()
      for i = 1, 3 do
        local mode = ens:node(i):mode()
        if mode ~= "leader" and mode ~= "follower" then return false end
      end
      return true
    end, 90, "every node to serve again")
  end

  local function leader()
    local found
    helpers.wait_until(function()
      found = ens:leader()
      return found ~= nil
    end, 90, "a leader")
    return found
  end

  local function a_follower(except)
    local lead = leader()
    for i = 1, 3 do
      local n = ens:node(i)
      if n ~= lead and not except[n.id] then return n end
    end
    for i = 1, 3 do
      if ens:node(i) ~= lead then return ens:node(i) end
    end
  end

  -- Does one fault to node and heals it; the ensemble serves fully again afterwards.
  local function fault(kind, node, role)
    faults[#faults + 1] = kind .. " node " .. node.id .. " (" .. role .. ")"
    if kind == "stop" then
      node:stop(); testing.sleep(DOWN); node:start(90)
    elseif kind == "kill" then
      node:kill(); testing.sleep(DOWN); node:start(90)
    else
      node:pause(); testing.sleep(FREEZE); node:resume()
    end
    serving_all()
    testing.sleep(1) -- the load runs on the healed ensemble for a moment
  end

  local function parse_stdout(text)
    local out = { states = {}, counts = {} }
    for _, line in ipairs(lines(text)) do
      local w = words(line)
      if w[1] == "start" then out.start_id = w[2]
      elseif w[1] == "end" then out.end_id = w[2]
      elseif w[1] == "state" then out.states[#out.states + 1] = w[2]
      elseif w[1] == "counts" then
        for i = 2, #w do
          local k, v = w[i]:match("^([%w_]+)=(%d+)$")
          out.counts[k] = tonumber(v)
        end
      end
    end
    return out
  end

  setup(function()
    ens = testing.ensemble(3)
    kids = helpers.kids()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. child.quote(dir)))
    fence_file = dir .. "/fences"
    local stop_file = dir .. "/stop"
    for i = 1, WORKERS do
      local name = "w" .. i
      local ledger = dir .. "/" .. name .. ".ledger"
      local argv = { "./zklua", "spec/fixtures/chaos_worker.lua", "hosts=" .. ens.hosts,
                     "root=" .. ROOT, "name=" .. name, "ledger=" .. ledger,
                     "fences=" .. fence_file, "stop=" .. stop_file,
                     "timeout=" .. SESSION_TIMEOUT }
      if i == 1 then argv[#argv + 1] = "churn=150" end -- leaves and rejoins the partitioner
      workers[name] = { ledger = ledger, kid = kids:spawn(argv) }
    end
    for _, w in pairs(workers) do w.kid:wait_line("^start ", 60) end
    testing.sleep(2) -- the load runs on the whole ensemble first

    local hit = {}
    local l = leader(); fault("stop", l, "leader"); hit[l.id] = true
    local f = a_follower(hit); fault("pause", f, "follower"); hit[f.id] = true
    l = leader(); fault("pause", l, "leader"); hit[l.id] = true
    f = a_follower(hit); fault("kill", f, "follower"); hit[f.id] = true
    l = leader(); fault("kill", l, "leader")

    local stop = assert(io.open(stop_file, "w"))
    stop:close()
    for name, w in pairs(workers) do
      assert(w.kid:wait_exit(120), name .. " did not finish: " .. w.kid:stderr())
      w.out = parse_stdout(w.kid:stdout())
      w.status, w.stderr = w.kid.status, w.kid:stderr()
      if os.getenv("ZKLUA_CHAOS_REPORT") then io.stderr:write(name, ": ", w.kid:stdout()) end
    end
    if os.getenv("ZKLUA_CHAOS_REPORT") then
      io.stderr:write(table.concat(faults, "; "), "\n")
    end
  end)

  teardown(function()
    if kids then kids:cleanup() end
    if ens then ens:stop() end
    if dir then os.execute("rm -rf " .. child.quote(dir)) end
  end)

  it("covered every node with a fault while every worker ran to the end", function()
    local hit = {}
    for _, what in ipairs(faults) do hit[what:match("node (%d)")] = true end
    assert.are.same({ ["1"] = true, ["2"] = true, ["3"] = true }, hit, table.concat(faults, ", "))
    for name, w in pairs(workers) do
      assert.are.equal(0, w.status, name .. " failed: " .. w.stderr)
      assert.is_string(w.out.end_id, name .. " printed no end line")
    end
  end)

  it("keeps every session: SUSPENDED then CONNECTED reported, never LOST, the same id", function()
    for name, w in pairs(workers) do
      local states = table.concat(w.out.states, " ")
      assert.are.equal(w.out.start_id, w.out.end_id, name .. " changed session: " .. states)
      for _, s in ipairs(w.out.states) do
        assert.are_not.equal("LOST", s, name .. " lost its session: " .. states)
      end
      assert.is_true(helpers.in_order(w.out.states, { "SUSPENDED", "CONNECTED" }),
                     name .. " saw " .. states)
      assert.are.equal("CONNECTED", w.out.states[#w.out.states], name .. ": " .. states)
    end
  end)

  it("ends ops in flight at a fault in ConnectionLoss; retried, every one completes", function()
    local interrupted, lost_connection, retried = 0, 0, 0
    for name, w in pairs(workers) do
      local c = w.out.counts
      assert.are.equal(0, c.retry_failed, name .. ": a retried op never completed")
      assert.are.equal(0, c.failed, name .. ": an op of the load failed")
      assert.are.equal(0, c.lock_timeouts, name .. ": a lock was out of reach for 90 s (" ..
                       table.concat(timeout_lines(w), "; ") .. "); faults: " ..
                       table.concat(faults, ", "))
      assert.are.equal(0, c.lost, name .. ": a lock's on_lost ran")
      assert.are.equal(0, c.partition_failures, name .. ": its partitioner failed")
      assert.are.equal(0, c.violations, name .. ": stale reads of its own writes")
      assert.are.equal(c.ConnectionLoss + c.OperationTimeoutError, c.retried, name)
      assert.is_true(c.ops > 100, name .. " ran only " .. c.ops .. " ops")
      interrupted = interrupted + c.ConnectionLoss + c.OperationTimeoutError
      lost_connection = lost_connection + c.ConnectionLoss
      retried = retried + c.retried
    end
    assert.is_true(lost_connection > 0, "no op was ever in flight at a fault")
    assert.are.equal(interrupted, retried)
  end)

  it("loses no acknowledged write: creates hold their value and czxid, sets their last value",
     function()
    local zk = helpers.client(ens.hosts)
    local patient = zklua.retry{ max_tries = -1, delay = 0.1, deadline = 60 }
    local creates, keys = {}, {}
    for name, w in pairs(workers) do
      for _, line in ipairs(lines(child.read_file(w.ledger) or "")) do
        local f = words(line)
        if f[1] == "C" then
          creates[#creates + 1] = { path = f[2], value = f[3], czxid = f[4] }
        elseif f[1] == "T" or f[1] == "S" then
          local key = keys[f[2]] or { tried_after = {} }
          keys[f[2]] = key
          if f[1] == "T" then
            key.tried_after[#key.tried_after + 1] = f[3]
          else -- acknowledged: only this value, or a later try, may be on the server
            key.value, key.version, key.mzxid, key.tried_after = f[3], tonumber(f[4]), f[5], {}
          end
        else
          error(name .. "'s ledger: " .. line)
        end
      end
    end
    assert.is_true(#creates > 300, "only " .. #creates .. " creates were acknowledged")

    local futures = {}
    for i, c in ipairs(creates) do futures[i] = zk:get_async(c.path) end
    for i, c in ipairs(creates) do
      local ok, data, stat = pcall(futures[i].get, futures[i])
      if not ok then data, stat = patient(zk.get, zk, c.path) end
      assert.are.equal(c.value, data, c.path)
      assert.are.equal(c.czxid, string.format("%.0f", stat.czxid), c.path .. " re-created")
    end

    local checked = 0
    for path, key in pairs(keys) do
      if key.version then
        checked = checked + 1
        local data, stat = patient(zk.get, zk, path)
        assert.is_true(stat.version >= key.version, path .. " went back to version " ..
                       stat.version .. " from " .. key.version)
        assert.is_true(stat.mzxid >= tonumber(key.mzxid), path)
        if data ~= key.value then
          local later = false
          for _, v in ipairs(key.tried_after) do later = later or v == data end
          assert.is_true(later, path .. " holds " .. data .. ", acknowledged " .. key.value)
          assert.is_true(stat.version > key.version, path)
        end
      end
    end
    assert.are.equal(WORKERS * 4, checked)
    zk:close()
  end)

  it("never lets two holders of a lock or owners of an item overlap; fencing tokens only grow",
     function()
    local by_lock = {}
    for _, line in ipairs(lines(child.read_file(fence_file) or "")) do
      local f = words(line)
      assert.are.equal("H", f[1], line)
      local list = by_lock[f[2]] or {}
      by_lock[f[2]] = list
      list[#list + 1] = { token = tonumber(f[3]), start = tonumber(f[4]), finish = tonumber(f[5]),
                          who = f[6], held = f[7] == "true", line = line }
    end
    assert.is_true(#(by_lock.a or {}) >= 10 and #(by_lock.b or {}) >= 10, "too few lock holds")
    local owned = 0
    for _, item in ipairs({ "i1", "i2", "i3", "i4", "i5", "i6" }) do
      owned = owned + #(by_lock["part-" .. item] or {})
    end
    assert.is_true(owned >= 6, "the partitioner's items were owned only " .. owned .. " times")
    for name, holds in pairs(by_lock) do
      table.sort(holds, function(x, y) return x.start < y.start end)
      for i, h in ipairs(holds) do
        assert.is_true(h.held, "a holder lost lock " .. name .. " while holding: " .. h.line)
        assert.is_true(h.finish >= h.start, h.line)
        if i > 1 then
          local before = holds[i - 1]
          assert.is_true(h.start > before.finish,
                         "overlap on lock " .. name .. ": " .. before.line .. " / " .. h.line)
          assert.is_true(h.token > before.token,
                         "token went back on lock " .. name .. ": " .. before.line .. " / " ..
                         h.line)
        end
      end
    end
  end)
end)
