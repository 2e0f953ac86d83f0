-- zklua.bounded: a user function (allocator hook, strategy) is stopped at its time limit,
-- wherever its loop is, under Lua 5.4 and LuaJIT alike; results and errors pass as pcall's.
local bounded = require "zklua.bounded"
local core = require "zklua.core"

local jit = package.loaded.jit

-- A loop in a function of its own that calls nothing: LuaJIT compiles it once it is hot.
-- Counting to 2^31 takes seconds even compiled: returning means it was not stopped.
local function count_to(limit)
  local n = 0
  while n < limit do n = n + 1 end
  return n
end

describe("zklua.bounded", function()
  it("passes fn's results and errors through as pcall does", function()
    assert.are.same({ true, 1, nil, 3 }, { bounded.call(1, function() return 1, nil, 3 end) })
    local ok, err = bounded.call(1, function() error("boom", 0) end)
    assert.is_false(ok)
    assert.are.equal("boom", err)
  end)

  it("stops a loop in fn itself at the limit", function()
    local started = core.monotonic()
    local ok, err = bounded.call(0.2, function() while true do end end)
    assert.is_false(ok)
    assert.are.equal(bounded.TIMEOUT, err)
    assert.is_true(core.monotonic() - started >= 0.2)
  end)

  it("stops a loop in a function fn calls, even one compiled before", function()
    for _ = 1, 200 do count_to(1000) end
    local ok, err = bounded.call(0.2, function() return count_to(2 ^ 31) end)
    assert.is_false(ok)
    assert.are.equal(bounded.TIMEOUT, err)
  end)

  it("puts the caller's own hook back and, under LuaJIT, the compiler on again", function()
    local calls = 0
    local function mine() calls = calls + 1 end
    debug.sethook(mine, "", 100)
    bounded.call(0.05, function() while true do end end)
    local hook, mask, count = debug.gethook()
    debug.sethook()
    assert.are.equal(mine, hook)
    assert.are.equal("", mask)
    assert.are.equal(100, count)
    if jit then assert.is_true((jit.status())) end
  end)

  it("runs fn without a limit when limit is nil or math.huge", function()
    assert.are.same({ true, 7 }, { bounded.call(nil, function() return 7 end) })
    assert.are.same({ true, 8 }, { bounded.call(math.huge, function() return 8 end) })
  end)
end)
