--- zklua.transaction — kazoo's TransactionRequest: ops applied atomically, all or none.
--
--   local t = zk:transaction()
--   t:create("/a", "v"); t:set_data("/b", "w", 3); t:check("/c", 0); t:delete("/d")
--   local results = t:commit()
--
-- commit() returns one result per op, in order: the created path, true (delete, check) or
-- the new stat (set_data).  When the server refuses the transaction nothing was applied: the
-- op that failed holds its error object, every other op a RolledBackError.  A transaction
-- that never reached the server (connection loss, expiry) raises that error instead.
-- Arguments are checked as each op is added; a transaction commits once.
--
-- As kazoo's `with client.transaction() as t:`, a transaction commits when its block ends
-- without an error, and is dropped (nothing sent) when the block raised:
--   t:with(function(t) t:create("/a"); t:delete("/b") end)   -- returns commit()'s results
--   do local t <close> = zk:transaction(); t:create("/a") end -- Lua 5.4
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local Future = require "zklua.future"

local Transaction = {}
Transaction.__index = Transaction

function Transaction.new(client)
  return setmetatable({ client = client, operations = {}, committed = false }, Transaction)
end

local function add(t, op)
  if t.committed then
    check.fail(op.kind, "transaction", "the transaction was already committed")
  end
  t.operations[#t.operations + 1] = op
end

local CREATE_OPTIONS = { acl = "table", ephemeral = "boolean", sequence = "boolean" }

--- create(path, value, {acl, ephemeral, sequence})
function Transaction:create(path, ...)
  local value, opts = ...
  if select("#", ...) == 0 then value = "" end -- kazoo's value=b"": only an explicit nil is null
  opts = check.options("create", opts, CREATE_OPTIONS)
  path = check.kazoo_path("create", path, "path", opts.sequence)
  value = check.data("create", value, path)
  local acl = opts.acl and next(opts.acl) ~= nil and check.acls("create", opts.acl) or self.client:_acl()
  local flags = (opts.ephemeral and 1 or 0) + (opts.sequence and 2 or 0)
  add(self, { kind = "create", path = path, value = value, acl = acl, flags = flags })
end

function Transaction:delete(path, version)
  path = check.kazoo_path("delete", path)
  add(self, { kind = "delete", path = path, version = check.version("delete", version) })
end

function Transaction:set_data(path, value, version)
  path = check.kazoo_path("set_data", path)
  value = check.data("set_data", value, path)
  add(self, { kind = "set", path = path, value = value,
              version = check.version("set_data", version) })
end

function Transaction:check(path, version)
  path = check.kazoo_path("check", path)
  if version == nil then check.fail("check", "version", "check needs a version") end
  add(self, { kind = "check", path = path, version = check.version("check", version) })
end

local function results_of(ops, rc, values, codes)
  local results = {}
  for i, op in ipairs(ops) do
    if rc == 0 then
      results[i] = values[i]
    else
      local code = codes[i]
      if code == core.codes.ZOK or code == core.codes.ZRUNTIMEINCONSISTENCY then
        results[i] = errors.RolledBackError(nil, op.path)
      else
        results[i] = errors.from_code(code, op.path)
      end
    end
  end
  return results
end

-- A transaction is one request: its paths and values together must fit the server's limit.
local function check_total_size(ops)
  local total = 0
  for _, op in ipairs(ops) do total = total + #op.path + #(op.value or "") + 32 end
  if total > core.max_packet - 128 then
    check.fail("commit", "transaction", string.format("the transaction carries %d bytes, " ..
               "over the server's limit of %d per request (1 MiB)", total, core.max_packet - 128))
  end
end

--- commit_async() -> future of the results list
function Transaction:commit_async()
  if self.committed then
    check.fail("commit", "transaction", "the transaction was already committed")
  end
  check_total_size(self.operations)
  self.committed = true
  local ops = self.operations
  if #ops == 0 then
    local done = Future.new(self.client.handler)
    done:set({})
    return done
  end
  local future = self.client:_submit_multi(ops)
  future._complete = function(f, rc, values, codes)
    if rc ~= 0 and not codes then
      f:set_exception(errors.from_code(rc)) -- never reached the server
    else
      f:set(results_of(ops, rc, values, codes))
    end
  end
  return future
end

function Transaction:commit()
  return self:commit_async():get()
end

--- kazoo's context manager: fn(t) adds ops, then they are committed; an error in fn is
-- raised again and nothing is committed.  Returns commit()'s results.
function Transaction:with(fn)
  if not check.callable(fn) then
    check.fail("with", "fn", "fn must be a function (got " .. type(fn) .. ")")
  end
  local ok, err = pcall(fn, self)
  if not ok then error(err, 0) end
  return self:commit()
end

--- Lua 5.4's to-be-closed variable: commits when its scope ends without an error.
function Transaction:__close(err)
  if err == nil and not self.committed then self:commit() end
end

return Transaction
