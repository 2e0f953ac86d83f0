-- kazoo's kazoo/tests/test_counter.py in Lua, against a real server: every test and
-- assertion of kazoo's.  kazoo's `counter += n` is `counter = counter + n` (Counter's __add
-- adds on the server and returns the counter), kazoo's TypeError zklua's BadArgumentsError,
-- and kazoo's float default (default=0.0) `0.0, { float = true }` (LuaJIT has no float
-- subtype: 0.0 alone would make an int counter there).
local errors = require "zklua.errors"
local support = require "kazoo.support"

describe("test_counter.py", function()
  local h

  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  -- kazoo's _makeOne(**kw): a counter on a fresh path.
  local function make_one(default, opts)
    return h.client:Counter(support.unique_path(), default, opts)
  end

  local function raises_type_error(fn)
    local ok, err = pcall(fn)
    assert.is_false(ok, "expected kazoo's TypeError")
    assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
  end

  it("test_int_counter", function()
    local counter = make_one()
    assert.are.equal(0, counter.value)
    counter = counter + 2
    local _ = counter + 1
    assert.are.equal(3, counter.value)
    counter = counter - 3
    _ = counter - 1
    assert.are.equal(-1, counter.value)
  end)

  it("test_int_curator_counter", function()
    local counter = make_one(0, { support_curator = true })
    assert.are.equal(0, counter.value)
    counter = counter + 2
    local _ = counter + 1
    assert.are.equal(3, counter.value)
    counter = counter - 3
    _ = counter - 1
    assert.are.equal(-1, counter.value)
    counter = counter + 1
    counter = counter + 2147483647
    assert.are.equal(2147483647, counter.value)
    counter = counter - 2147483647
    counter = counter - 2147483647
    assert.are.equal(-2147483647, counter.value)
  end)

  it("test_float_counter", function()
    local counter = make_one(0.0, { float = true })
    assert.are.equal(0.0, counter.value)
    counter = counter + 2.1
    assert.are.equal(2.1, counter.value)
    counter = counter - 3.1
    assert.are.equal(-1.0, counter.value)
  end)

  it("test_errors", function()
    local counter = make_one()
    raises_type_error(function() return counter + 2.1 end)
    raises_type_error(function() return counter + "a" end)
    raises_type_error(function() counter = make_one(0.0, { float = true, support_curator = true }) end)
  end)

  it("test_pre_post_values", function()
    local counter = make_one()
    assert.are.equal(0, counter.value)
    assert.is_nil(counter.pre_value)
    assert.is_nil(counter.post_value)
    counter = counter + 2
    assert.are.equal(0, counter.pre_value)
    assert.are.equal(2, counter.post_value)
    counter = counter - 3
    assert.are.equal(2, counter.pre_value)
    assert.are.equal(-1, counter.post_value)
  end)
end)
