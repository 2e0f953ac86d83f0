-- Error objects: kazoo's names and hierarchy, ZooKeeper's codes.
local testing = require "zklua.testing"
local errors = require "zklua.errors"
local helpers = require "support.helpers"

local raised = helpers.raised

-- Every ZooKeeper code errors.lua maps, with kazoo's class name.
local CODES = {
  [0] = "RolledBackError",
  [-1] = "SystemZookeeperError",
  [-2] = "RuntimeInconsistency",
  [-3] = "DataInconsistency",
  [-4] = "ConnectionLoss",
  [-5] = "MarshallingError",
  [-6] = "UnimplementedError",
  [-7] = "OperationTimeoutError",
  [-8] = "BadArgumentsError",
  [-13] = "NewConfigNoQuorumError",
  [-14] = "ReconfigInProcessError",
  [-100] = "APIError",
  [-101] = "NoNodeError",
  [-102] = "NoAuthError",
  [-103] = "BadVersionError",
  [-108] = "NoChildrenForEphemeralsError",
  [-110] = "NodeExistsError",
  [-111] = "NotEmptyError",
  [-112] = "SessionExpiredError",
  [-113] = "InvalidCallbackError",
  [-114] = "InvalidACLError",
  [-115] = "AuthFailedError",
  [-116] = "ConnectionClosedError",
  [-118] = "SessionMovedError",
  [-119] = "NotReadOnlyCallError",
}

local NOT_ZOOKEEPER = { "CancelledError", "ConfigurationError", "ZookeeperStoppedError",
                        "ConnectionDropped", "LockTimeout", "WriterNotClosedException",
                        "TimeoutError", "RetryFailedError", "ForceRetryError",
                        "InterruptedError" }

describe("errors", function()
  describe("raised by operations", function()
    local server, zk

    setup(function() server = testing.server() end)
    teardown(function() server:stop() end)

    before_each(function()
      zk = helpers.client(server.hosts)
    end)

    after_each(function() zk:close() end)

    it("are tables with name, code, path and message", function()
      local err = raised(zk.get, zk, "/errors-missing")
      assert.is_table(err)
      assert.are.equal("NoNodeError", err.name)
      assert.are.equal(-101, err.code)
      assert.are.equal("/errors-missing", err.path)
      assert.is_string(err.message)
      assert.is_true(#err.message > 0)
      assert.are.equal(errors.NoNodeError, err.class)
      assert.is_true(errors.is_error(err))
    end)

    it("read well with tostring", function()
      local err = raised(zk.get, zk, "/errors-missing")
      local text = tostring(err)
      assert.matches("^NoNodeError", text)
      assert.truthy(text:find(err.message, 1, true))
      assert.truthy(text:find("/errors-missing", 1, true))
      assert.falsy(text:find("table: ", 1, true))
    end)

    it("come through pcall and error unchanged, without a position prefix", function()
      local err = raised(zk.delete, zk, "/errors-missing")
      local again = raised(function() error(err, 0) end)
      assert.are.equal(err, again)
      assert.falsy(tostring(err):find("%.lua:%d+:"))
    end)

    it("argument errors carry the argument's name", function()
      local err = raised(zk.get, zk, "/no/../dots")
      assert.are.equal("BadArgumentsError", err.name)
      assert.are.equal("path", err.argument)
      assert.truthy(tostring(err):find("get", 1, true))
    end)
  end)

  describe("classes", function()
    it("build error objects: errors.NoNodeError(message, path)", function()
      local err = errors.NoNodeError("m", "/p")
      assert.are.equal("NoNodeError", err.name)
      assert.are.equal("m", err.message)
      assert.are.equal("/p", err.path)
      assert.are.equal(-101, err.code)
      assert.is_true(errors.is(err, errors.NoNodeError))
      assert.are.equal("NoNodeError: m (path /p)", tostring(err))
    end)

    it("use a default message and no path when given none", function()
      local err = errors.NodeExistsError()
      assert.is_string(err.message)
      assert.is_true(#err.message > 0)
      assert.is_nil(err.path)
      assert.are.equal("NodeExistsError: " .. err.message, tostring(err))
    end)

    it("accept extra fields", function()
      local err = errors.BadArgumentsError("bad", nil, { argument = "path" })
      assert.are.equal("path", err.argument)
    end)

    it("have a readable tostring and kazoo's names", function()
      assert.are.equal("zklua.errors.NoNodeError", tostring(errors.NoNodeError))
      assert.are.equal("zklua.errors.KazooException", tostring(errors.KazooException))
      assert.are.equal("KazooException", errors.KazooException.name)
    end)

    it("errors.raise raises the object itself", function()
      local err = raised(errors.raise, errors.TimeoutError, "slow", "/t")
      assert.is_true(errors.is(err, errors.TimeoutError))
      assert.are.equal("slow", err.message)
      assert.are.equal("/t", err.path)
    end)
  end)

  describe("errors.is", function()
    it("follows kazoo's hierarchy", function()
      local err = errors.NoNodeError()
      assert.is_true(errors.is(err, errors.NoNodeError))
      assert.is_true(errors.is(err, errors.ZookeeperError))
      assert.is_true(errors.is(err, errors.KazooException))
      assert.is_false(errors.is(err, errors.NodeExistsError))
      assert.is_false(errors.is(err, errors.TimeoutError))
    end)

    it("every ZooKeeper code class is a ZookeeperError", function()
      for code, name in pairs(CODES) do
        local err = errors[name]()
        assert.is_true(errors.is(err, errors.ZookeeperError), name)
        assert.is_true(errors.is(err, errors.KazooException), name)
        assert.are.equal(code, err.code, name)
      end
    end)

    it("client-side errors are KazooExceptions but not ZookeeperErrors", function()
      for _, name in ipairs(NOT_ZOOKEEPER) do
        assert.is_table(errors[name], name)
        local err = errors[name]()
        assert.is_true(errors.is(err, errors.KazooException), name)
        assert.is_false(errors.is(err, errors.ZookeeperError), name)
        assert.is_nil(err.code, name)
      end
    end)

    it("ConnectionClosedError is a SessionExpiredError, not the other way round", function()
      local closed = errors.ConnectionClosedError()
      assert.is_true(errors.is(closed, errors.SessionExpiredError))
      assert.is_true(errors.is(closed, errors.ZookeeperError))
      assert.is_false(errors.is(errors.SessionExpiredError(), errors.ConnectionClosedError))
    end)

    it("is false for anything that is not an error object", function()
      assert.is_false(errors.is(nil, errors.KazooException))
      assert.is_false(errors.is("NoNodeError", errors.NoNodeError))
      assert.is_false(errors.is({ name = "NoNodeError", class = errors.NoNodeError },
                                errors.NoNodeError))
      assert.is_false(errors.is(42, errors.KazooException))
      assert.is_false(errors.is_error("x"))
      assert.is_false(errors.is_error({}))
    end)
  end)

  describe("from_code", function()
    it("maps each ZooKeeper code to kazoo's class, keeping the path", function()
      for code, name in pairs(CODES) do
        local err = errors.from_code(code, "/some/path")
        assert.are.equal(name, err.name, "code " .. code)
        assert.is_true(errors.is(err, errors[name]), "code " .. code)
        assert.are.equal(code, err.code, "code " .. code)
        assert.are.equal("/some/path", err.path, "code " .. code)
        assert.is_string(err.message, "code " .. code)
      end
    end)

    it("maps ZINVALIDSTATE (-9) to SessionExpiredError", function()
      assert.is_true(errors.is(errors.from_code(-9), errors.SessionExpiredError))
    end)

    it("maps an unknown code to a plain ZookeeperError that keeps the code", function()
      local err = errors.from_code(-999, "/x")
      assert.are.equal("ZookeeperError", err.name)
      assert.are.equal(-999, err.code)
      assert.are.equal("/x", err.path)
      assert.truthy(tostring(err):find("-999", 1, true))
    end)
  end)
end)
