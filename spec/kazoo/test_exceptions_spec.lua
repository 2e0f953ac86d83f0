-- kazoo's tests/test_exceptions.py, translated: zklua.errors is kazoo.exceptions, with its
-- *Exception aliases and EXCEPTIONS (code -> class).  kazoo's RuntimeError for an unknown
-- code is zklua's BadArgumentsError; exc.args is what the error was made with.
local errors = require "zklua.errors"
local helpers = require "support.helpers"

describe("test_exceptions.py", function()
  local function get() return require "zklua.errors" end

  it("test_backwards_alias", function()
    local module = get()
    assert.is_not_nil(module.NoNodeException)
    assert.are.equal(module.NoNodeError, module.NoNodeException)
  end)

  it("test_exceptions_code", function()
    local module = get()
    local exc_8 = module.EXCEPTIONS[-8]
    assert.is_true(module.is(exc_8(), module.BadArgumentsError))
  end)

  it("test_invalid_code", function()
    local module = get()
    helpers.raises(errors.BadArgumentsError, function() return module.EXCEPTIONS[666] end)
  end)

  it("test_exceptions_construction", function()
    local module = get()
    local exc = module.EXCEPTIONS[-101]()
    assert.are.equal(module.NoNodeError, exc.class)
    assert.are.same({}, exc.args)
  end)
end)
