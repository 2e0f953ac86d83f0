-- zklua.strategies: the C built-in partition strategies, Lua strategy scripts loaded at runtime,
-- validate() and moves().  No server needed: strategies only map strings to strings.
-- round_robin is compared with kazoo's own partition function, run by Debian's python3-kazoo.
local strategies = require "zklua.strategies"
local errors = require "zklua.errors"
local helpers = require "support.helpers"

local BUILTINS = strategies.names

-- Asserts fn(...) raises a BadArgumentsError whose `argument` is argument; returns it.
local function rejected(argument, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected a BadArgumentsError for " .. argument .. ", got no error")
  assert(errors.is(err, errors.BadArgumentsError),
         "expected a BadArgumentsError for " .. argument .. ", got " .. tostring(err))
  assert.are.equal(argument, err.argument)
  assert(tostring(err.message):find(argument, 1, true),
         "the message does not name '" .. argument .. "': " .. tostring(err.message))
  return err
end

-- Asserts fn(...) raises a ConfigurationError whose message holds each of the texts.
local function script_error(fn, ...)
  local texts = { ... }
  return function(...)
    local ok, err = pcall(fn, ...)
    assert(not ok, "expected a ConfigurationError, got no error")
    assert(errors.is(err, errors.ConfigurationError),
           "expected a ConfigurationError, got " .. tostring(err))
    for _, text in ipairs(texts) do
      assert(tostring(err):find(text, 1, true),
             "the error does not say '" .. text .. "': " .. tostring(err))
    end
    return err
  end
end

local function names(prefix, n, width)
  local list = {}
  for i = 1, n do list[i] = string.format("%s%0" .. (width or 4) .. "d", prefix, i) end
  return list
end

local function members_of(n) return names("member-", n, 2) end

local ITEMS_1000 = names("item-", 1000)

-- A copy of list in a scrambled order (a fixed LCG, so the test is repeatable).
local function scrambled(list, seed)
  local copy, state = {}, seed or 12345
  for i, v in ipairs(list) do copy[i] = v end
  for i = #copy, 2, -1 do
    state = (state * 1103515245 + 12345) % 2147483648
    local j = state % i + 1
    copy[i], copy[j] = copy[j], copy[i]
  end
  return copy
end

-- A canonical text of an assignment, to compare two of them.
local function canonical(assignment)
  local lines = {}
  for member, owned in pairs(assignment) do
    lines[#lines + 1] = member .. "=" .. table.concat(owned, ",")
  end
  table.sort(lines)
  return table.concat(lines, "\n")
end

-- Member -> number of items.
local function loads(assignment)
  local count = {}
  for member, owned in pairs(assignment) do count[member] = #owned end
  return count
end

local function spread(assignment)
  local low, high = math.huge, 0
  for _, n in pairs(loads(assignment)) do
    if n < low then low = n end
    if n > high then high = n end
  end
  return low, high
end

local function without(list, value)
  local out = {}
  for _, v in ipairs(list) do if v ~= value then out[#out + 1] = v end end
  return out
end

local function count_keys(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

describe("built-in strategies", function()
  local SHAPES = {
    { members = 1, items = 0 }, { members = 1, items = 5 }, { members = 3, items = 10 },
    { members = 10, items = 1000 }, { members = 25, items = 7 }, { members = 100, items = 3000 },
  }

  for _, name in ipairs(BUILTINS) do
    describe(name, function()
      local strategy = strategies[name]

      it("gives every item exactly one member, and lists every member", function()
        for _, shape in ipairs(SHAPES) do
          local members, items = members_of(shape.members), names("item-", shape.items)
          local assignment = strategy(members, items)
          assert(strategies.validate(assignment, members, items))
          assert.are.equal(shape.members, count_keys(assignment))
          for _, m in ipairs(members) do assert.is_table(assignment[m]) end
        end
      end)

      it("gives nothing to nobody when there are no members", function()
        assert.are.same({}, strategy({}, ITEMS_1000))
        assert.are.same({}, strategy({}, {}))
      end)

      it("is deterministic and does not depend on the order of members or items", function()
        local members = members_of(10)
        local first = canonical(strategy(members, ITEMS_1000))
        assert.are.equal(first, canonical(strategy(members, ITEMS_1000)))
        for seed = 1, 3 do
          local again = strategy(scrambled(members, seed), scrambled(ITEMS_1000, seed * 7))
          assert.are.equal(first, canonical(again))
        end
      end)

      it("lists each member's items in bytewise order", function()
        local assignment = strategy(members_of(7), scrambled(ITEMS_1000))
        for _, owned in pairs(assignment) do
          for i = 2, #owned do assert.is_true(owned[i - 1] < owned[i]) end
        end
      end)

      it("takes any strings: empty, binary, UTF-8", function()
        local members = { "", "\0", "wörker", "worker-10", "worker-2" }
        local items = { "", "\0\1\255", "é", "😀", "ｚ", "a\0b", "a" }
        assert(strategies.validate(strategy(members, items), members, items))
      end)
    end)
  end
end)

describe("balance", function()
  it("round_robin, sticky and weighted with equal weights give floor or ceil of N/n", function()
    for _, name in ipairs({ "round_robin", "sticky", "weighted" }) do
      for _, n in ipairs({ 3, 7, 10, 33 }) do
        local low, high = spread(strategies[name](members_of(n), ITEMS_1000))
        assert.are.equal(math.floor(1000 / n), low, name .. " with " .. n .. " members")
        assert.are.equal(math.ceil(1000 / n), high, name .. " with " .. n .. " members")
      end
    end
  end)

  it("rendezvous keeps every member within 4 standard deviations of N/n", function()
    for _, n in ipairs({ 3, 10, 40 }) do
      local p = 1 / n
      local mean, sd = 1000 * p, math.sqrt(1000 * p * (1 - p))
      local low, high = spread(strategies.rendezvous(members_of(n), ITEMS_1000))
      print(string.format("rendezvous, %d members x 1000 items: %d .. %d (N/n %.1f)",
                          n, low, high, mean))
      assert.is_true(low >= mean - 4 * sd and high <= mean + 4 * sd)
    end
  end)

  it("consistent_hash keeps members within 40% of N/n with 160 virtual nodes", function()
    for _, n in ipairs({ 3, 10, 40 }) do
      local items = names("item-", 4000)
      local mean = 4000 / n
      local low, high = spread(strategies.consistent_hash(members_of(n), items))
      print(string.format("consistent_hash, %d members x 4000 items: %d .. %d (N/n %.1f)",
                          n, low, high, mean))
      assert.is_true(low >= 0.6 * mean and high <= 1.4 * mean)
    end
  end)

  it("consistent_hash balances better with more virtual nodes (ctx.vnodes)", function()
    local members, items = members_of(10), names("item-", 4000)
    local low1, high1 = spread(strategies.consistent_hash(members, items, { vnodes = 1 }))
    local low2, high2 = spread(strategies.consistent_hash(members, items, { vnodes = 2000 }))
    print(string.format("consistent_hash, 10 x 4000: vnodes 1: %d .. %d; vnodes 2000: %d .. %d",
                        low1, high1, low2, high2))
    assert.is_true(high2 - low2 < (high1 - low1) / 4)
    assert.are_not.equal(canonical(strategies.consistent_hash(members, items)),
                         canonical(strategies.consistent_hash(members, items, { vnodes = 1 })))
  end)
end)

describe("moves on a join and a leave (10 members x 1000 items)", function()
  local ten, eleven = members_of(10), members_of(11)

  -- old: the assignment of 10 members; after: the assignment once `group` is the membership,
  -- computed with the old ownership as ctx.current.
  local function step(name, group)
    local strategy = strategies[name]
    local old = strategy(ten, ITEMS_1000)
    local new = strategy(group, ITEMS_1000, { current = strategies.owners(old) })
    assert(strategies.validate(new, group, ITEMS_1000))
    return old, new, strategies.moves(old, new)
  end

  for _, name in ipairs(BUILTINS) do
    it(name .. ": reports its moves", function()
      local _, _, join = step(name, eleven)
      local old, _, leave = step(name, without(ten, "member-04"))
      print(string.format("%-16s join: %4d moved (ideal 1000/11 = %.1f)   leave: %4d moved " ..
                          "(ideal 1000/10 = 100; the leaver owned %d)",
                          name, join, 1000 / 11, leave, #old["member-04"]))
      assert.is_true(join > 0 and leave >= #old["member-04"])
    end)
  end

  for _, name in ipairs({ "sticky", "rendezvous" }) do
    it(name .. " moves at most 1.2 x the ideal", function()
      local _, _, join = step(name, eleven)
      local _, _, leave = step(name, without(ten, "member-04"))
      assert.is_true(join <= 1.2 * 1000 / 11, name .. " join moved " .. join)
      assert.is_true(leave <= 1.2 * 1000 / 10, name .. " leave moved " .. leave)
    end)
  end

  for _, name in ipairs({ "sticky", "rendezvous", "consistent_hash", "weighted" }) do
    it(name .. " moves items only to a joiner and only from a leaver", function()
      local old, new = step(name, eleven)
      local before = strategies.owners(old)
      for item, member in pairs(strategies.owners(new)) do
        if before[item] ~= member then assert.are.equal("member-11", member) end
      end
      local old2, new2 = step(name, without(ten, "member-04"))
      local after = strategies.owners(new2)
      for item, member in pairs(strategies.owners(old2)) do
        if member ~= "member-04" then assert.are.equal(member, after[item]) end
      end
    end)
  end

  it("round_robin moves most items (kazoo's stride), which is why the others exist", function()
    local _, _, join = step("round_robin", eleven)
    assert.is_true(join > 500)
  end)
end)

describe("sticky", function()
  it("keeps a balanced current ownership as it is", function()
    local members = members_of(10)
    local rr = strategies.round_robin(members, ITEMS_1000)
    local kept = strategies.sticky(members, ITEMS_1000, { current = strategies.owners(rr) })
    assert.are.equal(canonical(rr), canonical(kept))
  end)

  it("keeps as many current owners as balance allows, from an uneven ownership", function()
    local members = members_of(6)
    -- uneven: member-01 owns 500, member-02 300, member-03 150, member-04 50, the rest none;
    -- 0001..0040 are owned by a member that left
    local current, count = {}, { 0, 0, 0, 0 }
    for i, item in ipairs(ITEMS_1000) do
      local m = i <= 40 and "gone" or i <= 540 and 1 or i <= 840 and 2 or i <= 990 and 3 or 4
      if m ~= "gone" then count[m] = count[m] + 1 end
      current[item] = m == "gone" and "member-99" or members[m]
    end
    local new = strategies.sticky(members, ITEMS_1000, { current = current })
    assert(strategies.validate(new, members, ITEMS_1000))
    local low, high = spread(new)
    assert.are.equal(166, low) -- 1000 / 6: four members get 167, two get 166
    assert.are.equal(167, high)
    -- the most a balanced assignment can keep: the four largest owners keep 167 each at most
    local best = 0
    for _, c in ipairs(count) do best = best + math.min(c, 167) end
    local kept = 0
    for item, member in pairs(strategies.owners(new)) do
      if current[item] == member then kept = kept + 1 end
    end
    assert.are.equal(best, kept)
  end)

  it("treats owners that are not members as no owner", function()
    local members = members_of(4)
    local current = {}
    for _, item in ipairs(ITEMS_1000) do current[item] = "someone-else" end
    assert.are.equal(canonical(strategies.sticky(members, ITEMS_1000)),
                     canonical(strategies.sticky(members, ITEMS_1000, { current = current })))
  end)
end)

describe("weighted", function()
  it("gives shares proportional to the weights", function()
    local members = members_of(4)
    local weights = { ["member-01"] = 1, ["member-02"] = 2, ["member-03"] = 3, ["member-04"] = 4 }
    local count = loads(strategies.weighted(members, ITEMS_1000, { weights = weights }))
    assert.are.same({ ["member-01"] = 100, ["member-02"] = 200, ["member-03"] = 300,
                      ["member-04"] = 400 }, count)
  end)

  it("hands the items left over to the largest remainders (Hamilton), ties to the smaller id",
     function()
    local members = { "c", "a", "b" }
    assert.are.same({ a = 4, b = 3, c = 3 }, loads(strategies.weighted(members, names("i", 10))))
    -- 7 items, weights 1:1:5 -> exact 1, 1, 5 (no remainder)
    assert.are.same({ a = 1, b = 1, c = 5 },
                    loads(strategies.weighted(members, names("i", 7),
                                              { weights = { a = 1, b = 1, c = 5 } })))
    -- 10 items, 0.5 : 0.25 : 0.25 -> 5, 2.5, 2.5 -> the extra item to b (b < c)
    assert.are.same({ a = 5, b = 3, c = 2 },
                    loads(strategies.weighted(members, names("i", 10),
                                              { weights = { a = 0.5, b = 0.25, c = 0.25 } })))
  end)

  it("matches the largest remainder method computed exactly, for many integer weights",
     function()
    local state = 99
    for trial = 1, 30 do
      local n = 2 + trial % 9
      local members, weights, total = members_of(n), {}, 0
      for _, m in ipairs(members) do
        state = (state * 1103515245 + 12345) % 2147483648
        weights[m] = 1 + state % 50
        total = total + weights[m]
      end
      local N = 100 + trial * 37
      -- exact integer arithmetic: floor(N * w / W) and the remainder (N * w) mod W
      local want, rank, left = {}, {}, N
      for _, m in ipairs(members) do
        local r = (N * weights[m]) % total
        want[m] = math.floor((N * weights[m] - r) / total + 0.5)
        left = left - want[m]
        rank[#rank + 1] = { m = m, r = r }
      end
      table.sort(rank, function(x, y) if x.r ~= y.r then return x.r > y.r end return x.m < y.m end)
      for k = 1, left do want[rank[k].m] = want[rank[k].m] + 1 end
      local got = loads(strategies.weighted(members, names("i", N), { weights = weights }))
      assert.are.same(want, got)
    end
  end)

  it("weighs a member without a weight 1 and ignores weights of non-members", function()
    local count = loads(strategies.weighted({ "a", "b" }, names("i", 90),
                                            { weights = { a = 2, zz = 100 } }))
    assert.are.same({ a = 60, b = 30 }, count)
  end)

  it("moves only the change in shares when a weight changes", function()
    local members = { "a", "b" }
    local even = strategies.round_robin(members, ITEMS_1000) -- not where weighted would put them
    assert.are.equal(canonical(even), canonical(strategies.weighted(members, ITEMS_1000, {
      current = strategies.owners(even) })))
    local heavy = strategies.weighted(members, ITEMS_1000, {
      weights = { a = 1, b = 3 }, current = strategies.owners(even) })
    assert.are.same({ a = 250, b = 750 }, loads(heavy))
    assert.are.equal(250, strategies.moves(even, heavy))
  end)
end)

describe("round_robin", function()
  -- Writes members and items as JSON for the kazoo fixture.
  local function json_string(s)
    return '"' .. s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
  end
  local function json_list(list)
    local parts = {}
    for i, s in ipairs(list) do parts[i] = json_string(s) end
    return "[" .. table.concat(parts, ",") .. "]"
  end

  -- kazoo's own assignment: {member -> items in kazoo's order}.
  local function kazoo_partition(members, items)
    local file = os.tmpname()
    local f = assert(io.open(file, "w"))
    f:write('{"members": ', json_list(members), ', "items": ', json_list(items), "}")
    f:close()
    local pipe = assert(io.popen(helpers.PYTHON .. " spec/fixtures/kazoo_partition.py " .. file
                                 .. " 2>&1"))
    local out = pipe:read("*a")
    local ok = pipe:close()
    os.remove(file)
    assert(ok, "the kazoo fixture failed:\n" .. out)
    local assignment = {}
    for _, m in ipairs(members) do assignment[m] = {} end
    for member, item in out:gmatch("([^\t\n]*)\t([^\n]*)\n") do
      local owned = assert(assignment[member], "kazoo named an unknown member: " .. out)
      owned[#owned + 1] = item
    end
    return assignment
  end

  it("is kazoo's SetPartitioner partition function (its stride over the sorted set)", function()
    local cases = {
      { members_of(3), names("item-", 10) },
      { members_of(7), scrambled(names("q", 100, 1)) }, -- q1, q10, q100, q11, ...: bytewise
      { { "solo" }, names("item-", 5) },
      { members_of(5), names("item-", 3) },               -- more members than items
      { { "worker-10", "worker-2", "Worker-1", "wörker", "worker" },
        { "é", "z", "Z", "a10", "a9", "😀", "ｚ", "", "queue-1", "queue-10", "queue-2" } },
    }
    for _, case in ipairs(cases) do
      local members, items = case[1], case[2]
      assert.are.equal(canonical(kazoo_partition(members, items)),
                       canonical(strategies.round_robin(members, items)))
    end
  end)
end)

describe("strategies.hash", function()
  it("is FNV-1a 64 then fmix64, as an independent implementation computes it", function()
    local inputs = { "", "a", "member-01", "item-0001", "é😀", "zklua" }
    local code = [[
import sys
M = 2**64 - 1
def h(b):
    x = 0xcbf29ce484222325
    for c in b:
        x = ((x ^ c) * 0x100000001b3) & M
    x ^= x >> 33; x = (x * 0xff51afd7ed558ccd) & M
    x ^= x >> 33; x = (x * 0xc4ceb9fe1a85ec53) & M
    x ^= x >> 33
    return "%016x" % x
for line in sys.stdin.buffer.read().split(b"\n")[:-1]:
    print(h(line))
]]
    local script, input = os.tmpname(), os.tmpname()
    local f = assert(io.open(script, "w")); f:write(code); f:close()
    f = assert(io.open(input, "wb")); f:write(table.concat(inputs, "\n"), "\n"); f:close()
    local pipe = assert(io.popen(helpers.PYTHON .. " " .. script .. " < " .. input))
    local out = pipe:read("*a")
    pipe:close()
    os.remove(script); os.remove(input)
    local i = 0
    for want in out:gmatch("%x+") do
      i = i + 1
      assert.are.equal(want, strategies.hash(inputs[i]))
    end
    assert.are.equal(#inputs, i)
    assert.are.equal("efd01f60ba992926", strategies.hash("")) -- fixed forever
  end)
end)

describe("consistent_hash and rendezvous", function()
  -- The assignment an independent program computes from the documented definitions.
  local function reference(name, members, items, vnodes)
    local file = os.tmpname()
    local f = assert(io.open(file, "wb"))
    f:write(table.concat(members, "\n"), "\n\n", table.concat(items, "\n"), "\n")
    f:close()
    local pipe = assert(io.popen(string.format("%s spec/fixtures/strategies_reference.py %s %d %s",
                                               helpers.PYTHON, name, vnodes or 160, file)))
    local out = pipe:read("*a")
    pipe:close()
    os.remove(file)
    local assignment = {}
    for _, m in ipairs(members) do assignment[m] = {} end
    for member, item in out:gmatch("([^\t\n]*)\t([^\n]*)\n") do
      table.insert(assignment[member], item)
    end
    for _, owned in pairs(assignment) do table.sort(owned) end
    return assignment
  end

  it("are what their documented definitions give, computed by another program", function()
    local members, items = members_of(10), names("item-", 500)
    members[#members + 1] = "wörker-😀"
    items[#items + 1] = "é"
    for _, name in ipairs({ "consistent_hash", "rendezvous" }) do
      assert.are.equal(canonical(reference(name, members, items)),
                       canonical(strategies[name](members, items)))
    end
    assert.are.equal(canonical(reference("consistent_hash", members, items, 7)),
                     canonical(strategies.consistent_hash(members, items, { vnodes = 7 })))
  end)
end)

describe("strategies.get", function()
  it("returns built-ins by name, functions as they are, and a table's allocate", function()
    for _, name in ipairs(BUILTINS) do assert.are.equal(strategies[name], strategies.get(name)) end
    local fn = function() return {} end
    assert.are.equal(fn, strategies.get(fn))
    assert.are.equal(fn, strategies.get({ allocate = fn, name = "mine" }))
  end)
end)

describe("strategies.load", function()
  local DIR = "spec/fixtures/strategies/"

  it("loads a script that returns a function, in its own environment", function()
    local strategy, name = strategies.load(DIR .. "first_member.lua")
    assert.are.equal(DIR .. "first_member.lua", name)
    local assignment = strategy({ "b", "a" }, { "x", "y" })
    assert.are.same({ a = { "x", "y" }, b = {} }, assignment)
    assert.is_nil(rawget(_G, "LEAKED_BY_STRATEGY_SCRIPT"))
  end)

  it("runs examples/strategies/least_loaded.lua: balanced, valid, few moves", function()
    local least_loaded, name = strategies.load("examples/strategies/least_loaded.lua")
    assert.are.equal("least_loaded", name)
    local ten = members_of(10)
    local old = least_loaded(ten, ITEMS_1000)
    assert(strategies.validate(old, ten, ITEMS_1000))
    local low, high = spread(old)
    assert.is_true(high - low <= 1)
    local new = least_loaded(members_of(11), ITEMS_1000, { current = strategies.owners(old) })
    assert(strategies.validate(new, members_of(11), ITEMS_1000))
    local moved = strategies.moves(old, new)
    print(string.format("least_loaded join: %d moved (ideal %.1f)", moved, 1000 / 11))
    assert.is_true(moved <= 1.2 * 1000 / 11)
    assert.are.equal(canonical(new), canonical(least_loaded(scrambled(members_of(11)),
      scrambled(ITEMS_1000), { current = strategies.owners(old) })))
  end)

  it("reads the script afresh on every load (a reload without a restart)", function()
    local file = os.tmpname()
    local function write(body)
      local f = assert(io.open(file, "w")); f:write(body); f:close()
    end
    write('return { name = "v1", allocate = require("zklua.strategies").round_robin }')
    local s1, n1 = strategies.load(file)
    write('return { name = "v2", allocate = require("zklua.strategies").sticky }')
    local s2, n2 = strategies.load(file)
    os.remove(file)
    assert.are.equal("v1", n1)
    assert.are.equal("v2", n2)
    local members = members_of(3)
    assert.are.equal(canonical(strategies.round_robin(members, ITEMS_1000)),
                     canonical(s1(members, ITEMS_1000)))
    assert.are.equal(canonical(strategies.sticky(members, ITEMS_1000)),
                     canonical(s2(members, ITEMS_1000)))
  end)

  it("names the file when it is missing", function()
    script_error(strategies.load, "no_such_strategy.lua", "cannot load")(DIR .. "no_such_strategy.lua")
  end)

  it("names the file and the line of a syntax error", function()
    script_error(strategies.load, "syntax_error.lua:3")(DIR .. "syntax_error.lua")
  end)

  it("names the file when the script returns something other than a strategy", function()
    script_error(strategies.load, "returns_number.lua", "returned a number")(DIR .. "returns_number.lua")
    script_error(strategies.load, "no_allocate.lua", "without an allocate function")(DIR .. "no_allocate.lua")
  end)

  it("names the file when the script raises while loading", function()
    local err = script_error(strategies.load, "raises_on_load.lua", "no settings for this strategy")(
      DIR .. "raises_on_load.lua")
    assert.are.equal(DIR .. "raises_on_load.lua", err.file)
  end)

  it("names the script when its strategy raises or returns a non-table", function()
    local raiser = strategies.load(DIR .. "raises.lua")
    local err = script_error(raiser, "'raiser'", "raises.lua", "cannot place items among 2 members")(
      { "a", "b" }, { "x" })
    assert.matches("raises.lua:5", tostring(err.cause), 1, true)
    script_error(strategies.load(DIR .. "returns_string.lua"), "returns_string.lua",
                 "returned a string")({ "a" }, { "x" })
  end)
end)

describe("strategies.validate", function()
  local members, items = { "a", "b" }, { "x", "y", "z" }

  local function problem(assignment, text)
    local ok, message = strategies.validate(assignment, members, items)
    assert.is_nil(ok)
    assert.is_string(message)
    assert(message:find(text, 1, true), "expected '" .. text .. "' in: " .. message)
  end

  it("accepts a good assignment, and a member left out as owning nothing", function()
    assert.is_true(strategies.validate({ a = { "x", "z" }, b = { "y" } }, members, items))
    assert.is_true(strategies.validate({ a = { "x", "y", "z" } }, members, items))
    assert.is_true(strategies.validate({}, {}, {}))
  end)

  it("catches each kind of bad assignment", function()
    problem({ a = { "x", "z" } }, "item 'y' is not assigned")
    problem({ a = { "x", "y" }, b = { "y", "z" } }, "item 'y' is assigned twice")
    problem({ a = { "x", "y", "x", "z" } }, "item 'x' is assigned twice")
    problem({ a = { "x", "y" }, c = { "z" } }, "unknown member 'c'")
    problem({ a = { "x", "y", "w" }, b = { "z" } }, "unknown item 'w'")
    problem({ a = { "x", "y" }, b = { "z", 7 } }, "item 2 is a number")
    problem({ a = { "x", "y", "z" }, b = "none" }, "member 'b' has a string")
    problem({ [1] = { "x", "y", "z" } }, "a key of the assignment is a number")
    problem("x", "the assignment is a string")
    problem(nil, "the assignment is a nil")
  end)
end)

describe("strategies.moves", function()
  it("counts items whose owner changed, not items added or removed", function()
    local old = { a = { "x", "y" }, b = { "z", "gone" } }
    local new = { a = { "x", "z" }, b = { "y", "new" }, c = {} }
    assert.are.equal(2, strategies.moves(old, new))
    assert.are.equal(0, strategies.moves(old, old))
    assert.are.equal(0, strategies.moves({}, new))
  end)
end)

describe("bad input", function()
  local members, items = members_of(3), names("item-", 10)

  for _, name in ipairs(BUILTINS) do
    it(name .. " refuses it with BadArgumentsError naming the argument", function()
      local s = strategies[name]
      rejected("members", s, nil, items)
      rejected("members", s, "member-01", items)
      rejected("items", s, members, 42)
      rejected("members", s, { "a", 1 }, items)
      rejected("items", s, members, { "x", {} })
      rejected("members", s, { "a", "b", "a" }, items)
      rejected("items", s, members, { "x", "y", "x" })
      rejected("items", s, members, { "x", nil, "z" })
      rejected("members", s, { "a", "b", extra = "c" }, items)
      rejected("ctx", s, members, items, "ctx")
      rejected("ctx.current", s, members, items, { current = "a" })
      rejected("ctx.weights", s, members, items, { weights = 2 })
      rejected("ctx.identifier", s, members, items, { identifier = 1 })
      for _, v in ipairs({ 0, 1.5, 10001, "x" }) do
        rejected("ctx.vnodes", s, members, items, { vnodes = v })
      end
    end)
  end

  it("sticky and weighted refuse a current owner that is not a string", function()
    for _, name in ipairs({ "sticky", "weighted" }) do
      local err = rejected("ctx.current", strategies[name], members, items,
                           { current = { ["item-0003"] = 2 } })
      assert.matches("item-0003", err.message, 1, true)
    end
  end)

  it("weighted refuses a weight that is not a finite number > 0", function()
    for _, w in ipairs({ 0, -1, 0 / 0, math.huge, "2" }) do
      local err = rejected("ctx.weights", strategies.weighted, members, items,
                           { weights = { ["member-02"] = w } })
      assert.matches("member-02", err.message, 1, true)
    end
  end)

  it("get, load, hash, validate and moves refuse it too", function()
    rejected("strategy", strategies.get, 42)
    rejected("strategy", strategies.get, "no_such_strategy")
    rejected("strategy", strategies.get, { name = "no allocate" })
    rejected("file", strategies.load, nil)
    rejected("file", strategies.load, { "x.lua" })
    rejected("s", strategies.hash, 1)
    rejected("members", strategies.validate, {}, nil, {})
    rejected("items", strategies.validate, {}, {}, "x")
    rejected("members", strategies.validate, {}, { 1 }, {})
    rejected("old_assignment", strategies.moves, nil, {})
    rejected("new_assignment", strategies.moves, {}, { a = "x" })
    rejected("new_assignment", strategies.moves, {}, { a = { "x", "x" } })
    rejected("assignment", strategies.owners, { a = { 1 } })
  end)
end)
-- The C strategies under valgrind: spec/valgrind_spec.lua runs spec/fixtures/strategies_valgrind.lua.
