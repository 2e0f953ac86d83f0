--- zklua.bounded — runs a user function with a time limit (the allocator's hooks and
-- strategies).
--
--   local ok, a, b = bounded.call(1.5, fn, x, y)   -- like pcall; err == bounded.TIMEOUT
--                                                  -- when it was stopped at the limit
--
-- Guarantees:
-- * Like pcall, plus: once `limit` seconds have passed, the error bounded.TIMEOUT is raised
--   inside fn, at a safe point: while the user's own code runs, or in the blocking handler's
--   wait loop — never inside zklua's own event handling (a future half resolved, an event
--   taken from the queue but not handled), so the client stays sound.  The clock is read
--   every 1000 VM instructions (a count hook), so the overrun is small for code that runs.
-- * A function blocked inside one C call is stopped only when that call returns (zklua's
--   waits return to Lua at least every 0.2 s with one client).  An fn that catches every
--   error itself (pcall in a loop) can go on.
-- * LuaJIT runs no hooks inside compiled code, and a loop in any function fn calls may get
--   compiled while fn runs.  So under LuaJIT the JIT compiler is off while fn runs (the code
--   compiled so far is flushed; it compiles again afterwards): every loop is stopped there
--   too.  LuaJIT's hook is one for all coroutines: it stops only the coroutine that called
--   bounded.call, should fn yield (a coroutine handler) and others run meanwhile.
-- * The caller's own hook (of this coroutine) is put back afterwards; limit nil or math.huge
--   runs fn with no limit.
local core = require "zklua.core"

local bounded = {}

bounded.TIMEOUT = setmetatable({}, { __tostring = function() return "time limit reached" end })

local unpack = table.unpack or unpack -- luacheck: ignore (LuaJIT)
local jit = package.loaded.jit -- LuaJIT's (a sandboxed environment may hide the global)

-- zklua's own sources: "@<dir>/zklua/"; the blocking handler's loop is a safe point.
local HERE = debug.getinfo(1, "S").source
local PREFIX = HERE:match("^(@.*/)[^/]*$")
local BLOCKING = PREFIX and PREFIX .. "handlers/blocking.lua"

local function pack(...)
  return { n = select("#", ...), ... }
end

local function at_safe_point(source)
  if not PREFIX or source:sub(1, #PREFIX) ~= PREFIX then return true end
  return source == BLOCKING
end

--- Calls fn(...) like pcall, stopping it with bounded.TIMEOUT once limit seconds passed.
function bounded.call(limit, fn, ...)
  if limit == nil or limit == math.huge then return pcall(fn, ...) end
  local deadline = core.monotonic() + limit
  local old_hook, old_mask, old_count = debug.gethook()
  local caller = coroutine.running()
  local function hook()
    if core.monotonic() < deadline or coroutine.running() ~= caller then return end
    local info = debug.getinfo(2, "S")
    if info and at_safe_point(info.source) then error(bounded.TIMEOUT, 0) end
  end
  local jit_was_on = jit and jit.status()
  if jit_was_on then
    jit.off()
    jit.flush()
  end
  debug.sethook(hook, "", 1000)
  local results = pack(pcall(fn, ...))
  if type(old_hook) == "function" then
    debug.sethook(old_hook, old_mask, old_count)
  else
    debug.sethook()
  end
  if jit_was_on then jit.on() end
  return unpack(results, 1, results.n)
end

return bounded
