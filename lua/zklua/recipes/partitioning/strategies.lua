--- zklua.recipes.partitioning.strategies (public name: zklua.strategies) — partition
-- strategies: who owns which item of a set among a group's members.
--
--   local strategies = require "zklua.strategies"
--   local assignment = strategies.sticky(members, items, ctx)  -- {member -> array of items}
--
-- A strategy is a Lua function  assignment = strategy(members, items, ctx):
--   members  array of distinct member identifiers (strings), sorted bytewise by callers
--   items    array of distinct items (strings), sorted bytewise by callers
--   ctx      nil or a table, every field optional: current = {item -> member} (who owns what
--            now), weights = {member -> number > 0} (default 1), identifier = the caller's
--            member id, vnodes = points per member on the consistent_hash ring (default 160)
--   returns  {member -> array of items}: every member present (maybe with {}), every item in
--            exactly one member's array.  With no members it returns {} (nobody to own).
--
-- Guarantees of the built-ins (C, src/recipes/partitioning/strategy*.c): each covers every item exactly once;
-- each is deterministic, the same on every machine (strings compare bytewise; one fixed 64-bit
-- hash, strategies.hash) and independent of the order of members and items; each member's
-- items come back in bytewise order.  Bad input (a non-string, a repeated member or item, a
-- weight <= 0) raises BadArgumentsError naming the argument.
--   round_robin      kazoo's SetPartitioner default: member i of the sorted members owns
--                    sorted items i, i + n, i + 2n, ...  (kazoo and zklua members agree)
--   consistent_hash  a hash ring, ctx.vnodes points per member (default 160)
--   rendezvous       highest random weight: a join or leave moves only the items it must
--   sticky           floor or ceil of N/n items each; current owners (ctx.current) keep all
--                    they can within that, so a join or leave moves the fewest items
--   weighted         shares proportional to ctx.weights (largest remainder), filled like sticky
--
-- SUSPENDED and LOST do not apply: a strategy only maps strings to strings, keeps no state and
-- talks to no server.  What a connection loss does to the ownership a strategy computes is up
-- to its caller (SetPartitioner, PartitionAllocator).
--
-- strategies.get(name_or_function), strategies.load(file) (a strategy script, read afresh on
-- every call, so a running allocator can reload it), strategies.validate(assignment, members,
-- items), strategies.moves(old, new), strategies.hash(s), strategies.names,
-- strategies.is_builtin(fn).
local core = require "zklua.core"
local check = require "zklua.check"
local errors = require "zklua.errors"

local strategies = {}

--- The built-ins' names, in the order they are documented.
strategies.names = { "round_robin", "consistent_hash", "rendezvous", "sticky", "weighted" }

local MAX_VNODES = 10000

local function fail(fname, argument, message)
  check.fail("strategies." .. fname, argument, message)
end

local function check_table(fname, value, argument, what)
  if type(value) ~= "table" then
    fail(fname, argument, argument .. " must be " .. what .. " (got " .. type(value) .. ")")
  end
end

local function check_ctx(fname, ctx)
  if ctx == nil then return nil end
  check_table(fname, ctx, "ctx", "a table or nil")
  if ctx.current ~= nil then
    check_table(fname, ctx.current, "ctx.current", "a table {item -> member} or nil")
  end
  if ctx.weights ~= nil then
    check_table(fname, ctx.weights, "ctx.weights", "a table {member -> number} or nil")
  end
  if ctx.identifier ~= nil and type(ctx.identifier) ~= "string" then
    fail(fname, "ctx.identifier", "ctx.identifier must be a string or nil (got " ..
         type(ctx.identifier) .. ")")
  end
  local v = ctx.vnodes
  if v ~= nil and (type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v > MAX_VNODES) then
    fail(fname, "ctx.vnodes", "ctx.vnodes must be an integer from 1 to " .. MAX_VNODES ..
         " (got " .. tostring(v) .. ")")
  end
  return ctx
end

local function builtin(name)
  return function(members, items, ctx)
    check_table(name, members, "members", "an array of strings")
    check_table(name, items, "items", "an array of strings")
    ctx = check_ctx(name, ctx)
    local result, argument, message
    if ctx then
      result, argument, message = core.strategy(name, members, items, ctx.current, ctx.weights,
                                                ctx.vnodes)
    else
      result, argument, message = core.strategy(name, members, items)
    end
    if result == nil then fail(name, argument, message) end
    return result
  end
end

local BUILTIN = {}
for _, name in ipairs(strategies.names) do
  BUILTIN[name] = builtin(name)
  strategies[name] = BUILTIN[name]
end

--- Whether fn is one of the built-ins (their results need no validate: the C code gives every
--- item to exactly one member, strategies_spec checks it).
function strategies.is_builtin(fn)
  for _, builtin_fn in pairs(BUILTIN) do
    if fn == builtin_fn then return true end
  end
  return false
end

--- The 64-bit hash the built-ins use (FNV-1a 64, then MurmurHash3's fmix64), as 16 hex digits.
function strategies.hash(s)
  if type(s) ~= "string" then
    fail("hash", "s", "s must be a string (got " .. type(s) .. ")")
  end
  return core.strategy_hash(s)
end

--- A strategy function: a built-in's name, a function (returned as it is) or a table with an
--- allocate function (a loaded script's form).
function strategies.get(strategy)
  local t = type(strategy)
  if t == "function" then return strategy end
  if t == "string" then
    local fn = BUILTIN[strategy]
    if not fn then
      fail("get", "strategy", "no built-in strategy named '" .. strategy .. "' (there are: " ..
           table.concat(strategies.names, ", ") .. ")")
    end
    return fn
  end
  if t == "table" and type(strategy.allocate) == "function" then return strategy.allocate end
  fail("get", "strategy", "strategy must be a built-in's name, a function or a table " ..
       "{allocate = function} (got " .. t .. ")")
end

local function script_problem(file, message, cause)
  errors.raise(errors.ConfigurationError, "strategies.load: " .. file .. ": " .. message, nil,
               { file = file, cause = cause })
end

-- Runs the script in its own environment (its globals do not leak into the caller's) and
-- returns what it returned.
local function run_script(file)
  local env = setmetatable({}, { __index = _G })
  local chunk, err = loadfile(file, "t", env)
  if not chunk then script_problem(file, "cannot load: " .. tostring(err), err) end
  if setfenv then setfenv(chunk, env) end -- LuaJIT / Lua 5.1
  local ok, result = pcall(chunk)
  if not ok then script_problem(file, "raised while loading: " .. tostring(result), result) end
  return result
end

-- The function a script returned, wrapped: an error it raises, or a result that is not a table,
-- becomes a ConfigurationError naming the script.
local function wrap_script_strategy(file, label, allocate)
  return function(members, items, ctx)
    local ok, result = pcall(allocate, members, items, ctx)
    if not ok then
      errors.raise(errors.ConfigurationError, "strategy " .. label .. " raised: " ..
                   tostring(result), nil, { file = file, cause = result })
    end
    if type(result) ~= "table" then
      errors.raise(errors.ConfigurationError, "strategy " .. label .. " returned a " ..
                   type(result) .. ", not a table {member -> array of items}", nil,
                   { file = file })
    end
    return result
  end
end

--- Loads a strategy script: a Lua file that returns a strategy function, or a table
--- {allocate = function, name = string}.  Returns the strategy and its name (the table's name,
--- else the file's).  The file is read afresh on every call.  Any problem (no such file, a
--- syntax error, an error while loading, a wrong return value) raises ConfigurationError
--- naming the file; later, an error the strategy raises or a non-table it returns does too.
function strategies.load(file)
  if type(file) ~= "string" then
    fail("load", "file", "file must be a path (a string) (got " .. type(file) .. ")")
  end
  local returned = run_script(file)
  local allocate, name = returned, nil
  if type(returned) == "table" then
    allocate, name = returned.allocate, returned.name
    if type(allocate) ~= "function" then
      script_problem(file, "returned a table without an allocate function")
    end
    if name ~= nil and type(name) ~= "string" then
      script_problem(file, "returned a name that is a " .. type(name) .. ", not a string")
    end
  elseif type(returned) ~= "function" then
    script_problem(file, "returned a " .. type(returned) .. "; a strategy script returns a " ..
                   "function or a table {allocate = function, name = string}")
  end
  local label = name and ("'" .. name .. "' (" .. file .. ")") or file
  return wrap_script_strategy(file, label, allocate), name or file
end

--- Whether assignment gives every item of items to exactly one member of members: true, or
--- nil and what is wrong (the first problem found).  A member missing from assignment owns
--- nothing.  members and items must be arrays of strings (else BadArgumentsError).
function strategies.validate(assignment, members, items)
  check_table("validate", members, "members", "an array of strings")
  check_table("validate", items, "items", "an array of strings")
  local is_member, is_item = {}, {}
  for i, m in ipairs(members) do
    if type(m) ~= "string" then
      fail("validate", "members", "members[" .. i .. "] must be a string (got " .. type(m) .. ")")
    end
    is_member[m] = true
  end
  for i, item in ipairs(items) do
    if type(item) ~= "string" then
      fail("validate", "items", "items[" .. i .. "] must be a string (got " .. type(item) .. ")")
    end
    is_item[item] = true
  end
  if type(assignment) ~= "table" then
    return nil, "the assignment is a " .. type(assignment) .. ", not a table {member -> items}"
  end
  local owner_of = {}
  for member, owned in pairs(assignment) do
    if type(member) ~= "string" then
      return nil, "a key of the assignment is a " .. type(member) .. ", not a member string"
    end
    if not is_member[member] then return nil, "unknown member '" .. member .. "'" end
    if type(owned) ~= "table" then
      return nil, "member '" .. member .. "' has a " .. type(owned) .. ", not an array of items"
    end
    for i = 1, #owned do
      local item = owned[i]
      if type(item) ~= "string" then
        return nil, "member '" .. member .. "' item " .. i .. " is a " .. type(item) ..
                    ", not a string"
      end
      if not is_item[item] then
        return nil, "member '" .. member .. "' has unknown item '" .. item .. "'"
      end
      if owner_of[item] then
        return nil, "item '" .. item .. "' is assigned twice: to '" .. owner_of[item] ..
                    "' and to '" .. member .. "'"
      end
      owner_of[item] = member
    end
  end
  for _, item in ipairs(items) do
    if not owner_of[item] then return nil, "item '" .. item .. "' is not assigned" end
  end
  return true
end

-- {item -> member} from an assignment, refusing malformed ones.
local function owners(fname, assignment, argument)
  check_table(fname, assignment, argument, "a table {member -> array of items}")
  local owner_of = {}
  for member, owned in pairs(assignment) do
    if type(member) ~= "string" or type(owned) ~= "table" then
      fail(fname, argument, argument .. " must map member strings to arrays of items (got " ..
           type(member) .. " -> " .. type(owned) .. ")")
    end
    for i = 1, #owned do
      local item = owned[i]
      if type(item) ~= "string" then
        fail(fname, argument, argument .. "['" .. member .. "'][" .. i .. "] must be a string " ..
             "(got " .. type(item) .. ")")
      end
      if owner_of[item] then
        fail(fname, argument, argument .. " assigns item '" .. item .. "' twice")
      end
      owner_of[item] = member
    end
  end
  return owner_of
end

--- How many items changed owner between two assignments: items present in both whose owner
--- differs.  (An item only in one of them was added or removed, not moved.)
function strategies.moves(old_assignment, new_assignment)
  local old = owners("moves", old_assignment, "old_assignment")
  local new = owners("moves", new_assignment, "new_assignment")
  local moved = 0
  for item, member in pairs(new) do
    local before = old[item]
    if before ~= nil and before ~= member then moved = moved + 1 end
  end
  return moved
end

--- {item -> member} from an assignment (what ctx.current wants).
function strategies.owners(assignment)
  return owners("owners", assignment, "assignment")
end

return strategies
