--- zklua.errors — error objects with kazoo's names and hierarchy.
--
-- Every error zklua raises is a table with `name` (kazoo's exception name), `message`,
-- `code` (ZooKeeper's integer, where there is one) and `path` (where known); `tostring(err)`
-- reads well.  Classes are callable: `errors.NoNodeError("msg", "/path")` builds one.
-- `errors.is(err, errors.ZookeeperError)` follows kazoo's hierarchy:
-- KazooException > ZookeeperError > NoNodeError, ...; ConnectionClosedError is a
-- SessionExpiredError, as in kazoo.
local C = require("zklua.core").codes -- ZooKeeper's return codes, from zookeeper.h

local errors = {}

local instance_mt = {}
instance_mt.__index = instance_mt

function instance_mt.__tostring(err)
  local text = err.name
  if err.message and err.message ~= "" then text = text .. ": " .. err.message end
  local path = err.path
  if type(path) == "string" and #path > 200 then -- a message, not a dump of a 1 MiB path
    path = path:sub(1, 160) .. "... (" .. #path .. " bytes)"
  end
  if path then text = text .. " (path " .. tostring(path) .. ")" end
  return text
end

local class_mt = {}

function class_mt.__call(class, message, path, fields)
  local err = { name = class.name, class = class, code = class.code,
                message = message or class.default_message, path = path,
                args = { message, path } } -- kazoo's exc.args: what it was made with
  if fields then
    for k, v in pairs(fields) do err[k] = v end
  end
  return setmetatable(err, instance_mt)
end

function class_mt.__tostring(class)
  return "zklua.errors." .. class.name
end

local by_code = {}

local function define(name, parent, code, default_message)
  local class = setmetatable({ name = name, parent = parent, code = code,
                               default_message = default_message }, class_mt)
  errors[name] = class
  if code then by_code[code] = class end
  return class
end

local K = define("KazooException")
local Z = define("ZookeeperError", K)
define("RolledBackError", Z, C.ZOK, "rolled back: another operation in the transaction failed")
define("SystemZookeeperError", Z, C.ZSYSTEMERROR, "system error")
define("RuntimeInconsistency", Z, C.ZRUNTIMEINCONSISTENCY, "runtime inconsistency")
define("DataInconsistency", Z, C.ZDATAINCONSISTENCY, "data inconsistency")
define("ConnectionLoss", Z, C.ZCONNECTIONLOSS, "connection to the server was lost")
define("MarshallingError", Z, C.ZMARSHALLINGERROR, "marshalling error")
define("UnimplementedError", Z, C.ZUNIMPLEMENTED, "operation is unimplemented")
define("OperationTimeoutError", Z, C.ZOPERATIONTIMEOUT, "operation timed out")
define("BadArgumentsError", Z, C.ZBADARGUMENTS, "bad arguments")
define("NewConfigNoQuorumError", Z, C.ZNEWCONFIGNOQUORUM, "no quorum for the new config")
define("ReconfigInProcessError", Z, C.ZRECONFIGINPROGRESS, "a reconfiguration is in progress")
define("APIError", Z, C.ZAPIERROR, "API error")
define("NoNodeError", Z, C.ZNONODE, "node does not exist")
define("NoAuthError", Z, C.ZNOAUTH, "not authorized")
define("BadVersionError", Z, C.ZBADVERSION, "version does not match")
define("NoChildrenForEphemeralsError", Z, C.ZNOCHILDRENFOREPHEMERALS, "ephemeral nodes may not have children")
define("NodeExistsError", Z, C.ZNODEEXISTS, "node already exists")
define("NotEmptyError", Z, C.ZNOTEMPTY, "node has children")
local expired = define("SessionExpiredError", Z, C.ZSESSIONEXPIRED, "session expired")
define("InvalidCallbackError", Z, C.ZINVALIDCALLBACK, "invalid callback")
define("InvalidACLError", Z, C.ZINVALIDACL, "invalid ACL")
define("AuthFailedError", Z, C.ZAUTHFAILED, "authentication failed")
define("SessionMovedError", Z, C.ZSESSIONMOVED, "session moved to another server")
define("NotReadOnlyCallError", Z, C.ZNOTREADONLY, "a write was sent to a read-only server")
define("ConnectionClosedError", expired, C.ZCLOSING, "connection has been closed")
define("CancelledError", K, nil, "cancelled")
define("ConfigurationError", K, nil, "bad configuration")
define("ZookeeperStoppedError", K, nil, "the client has been stopped")
define("ConnectionDropped", K, nil, "connection dropped")
define("LockTimeout", K, nil, "timed out acquiring the lock")
define("WriterNotClosedException", K, nil, "writer not closed")
define("TimeoutError", K, nil, "timed out")
define("RetryFailedError", K, nil, "retries exhausted")
define("ForceRetryError", K, nil, "retry requested")
define("InterruptedError", K, nil, "interrupted")
-- zklua's own: a call that waits, made where a coroutine handler cannot suspend the caller
define("WouldBlockError", K, nil, "the call would block where the handler cannot wait")
-- Codes the C library produces locally, reported as the kazoo error a user would expect.
by_code[C.ZINVALIDSTATE] = expired -- the handle died with its session

-- kazoo's aliases for the C library's exception names (NoNodeException is NoNodeError).
for alias, name in pairs({
  ConnectionLossException = "ConnectionLoss", MarshallingErrorException = "MarshallingError",
  SystemErrorException = "SystemZookeeperError",
  RuntimeInconsistencyException = "RuntimeInconsistency",
  DataInconsistencyException = "DataInconsistency", UnimplementedException = "UnimplementedError",
  OperationTimeoutException = "OperationTimeoutError",
  BadArgumentsException = "BadArgumentsError", ApiErrorException = "APIError",
  NoNodeException = "NoNodeError", NoAuthException = "NoAuthError",
  BadVersionException = "BadVersionError",
  NoChildrenForEphemeralsException = "NoChildrenForEphemeralsError",
  NodeExistsException = "NodeExistsError", InvalidACLException = "InvalidACLError",
  AuthFailedException = "AuthFailedError", NotEmptyException = "NotEmptyError",
  SessionExpiredException = "SessionExpiredError",
  InvalidCallbackException = "InvalidCallbackError",
}) do
  errors[alias] = errors[name]
end

--- kazoo's EXCEPTIONS: ZooKeeper's return code -> the error class (callable: EXCEPTIONS[-101]()
-- is a NoNodeError).  A code ZooKeeper does not have raises BadArgumentsError (kazoo:
-- RuntimeError "Invalid error code").
errors.EXCEPTIONS = setmetatable({}, { __index = function(_, code)
  local class = by_code[code]
  if class == nil or class.code ~= code then
    errors.raise(errors.BadArgumentsError, "EXCEPTIONS: invalid error code " .. tostring(code))
  end
  return class
end })

--- The error object for a ZooKeeper return code.
function errors.from_code(code, path)
  local class = by_code[code]
  if class then return class(nil, path) end
  return errors.ZookeeperError("ZooKeeper error code " .. tostring(code), path,
                               { code = code })
end

--- Whether err is an instance of class (or of one of its subclasses).
function errors.is(err, class)
  if type(err) ~= "table" or getmetatable(err) ~= instance_mt then return false end
  local c = err.class
  while c do
    if c == class then return true end
    c = c.parent
  end
  return false
end

--- Whether value is a zklua error object.
function errors.is_error(value)
  return type(value) == "table" and getmetatable(value) == instance_mt
end

--- Raises an error object of class; level as error()'s.
function errors.raise(class, message, path, fields)
  error(class(message, path, fields), 0)
end

return errors
