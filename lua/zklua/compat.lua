--- zklua.compat — the few differences between Lua 5.4 and LuaJIT (Lua 5.1 ABI) that zklua's
-- Lua code meets, in one place, so that the same modules run under both.
--
-- Guarantees:
-- * pack/unpack behave as table.pack/table.unpack of Lua 5.4.
-- * is_integer(x) is Lua 5.4's math.type(x) == "integer"; LuaJIT's numbers are all doubles,
--   so there it means "a number with an integral value" (2.0 counts).
-- * execute(cmd) returns what os.execute returns in Lua 5.4: true|nil, "exit"|"signal", code.
-- * len(obj) honours a __len metamethod on a table (LuaJIT's # ignores it).
-- * 64-bit ids (zxids, fencing tokens, a stat's ephemeralOwner) are Lua integers under 5.4.
--   Under LuaJIT the C module hands them over as plain numbers while they fit in 53 bits and
--   as int64_t cdata beyond (exact; they compare and add with numbers): is_id(x) accepts both,
--   id_string(x) prints either in decimal, exactly ("%d" as string.format gives it).
-- Nothing here talks to a server: SUSPENDED and LOST do not apply.
local compat = {}

compat.luajit = type(rawget(_G, "jit")) == "table"

compat.unpack = table.unpack or unpack -- luacheck: ignore unpack

function compat.pack(...)
  return { n = select("#", ...), ... }
end

local math_type = math.type
local floor, huge = math.floor, math.huge

function compat.is_integer(x)
  if math_type then return math_type(x) == "integer" end
  return type(x) == "number" and x == floor(x) and x ~= huge and x ~= -huge
end

--- The largest and smallest integers: 64-bit in Lua 5.4; under LuaJIT the doubles at the
-- ends of the 64-bit range (exact powers of two).
compat.maxinteger = math.maxinteger or 2 ^ 63
compat.mininteger = math.mininteger or -2 ^ 63

local ffi, ffi_int64
if compat.luajit then
  local ok, loaded = pcall(require, "ffi")
  if ok then ffi, ffi_int64 = loaded, loaded.typeof("int64_t") end
end

--- Whether x is a 64-bit id as the C module hands them over (an integer, or an int64 cdata
-- under LuaJIT).
function compat.is_id(x)
  if compat.is_integer(x) then return true end
  return ffi_int64 ~= nil and type(x) == "cdata" and ffi.istype(ffi_int64, x)
end

--- x (an id, or an integral number) in decimal, exact.
function compat.id_string(x)
  return string.format("%d", x)
end

--- os.execute with Lua 5.4's results: true or nil, "exit" or "signal", the code.
function compat.execute(cmd)
  local a, b, c = os.execute(cmd)
  if type(a) ~= "number" then return a, b, c end -- 5.2+ (or LuaJIT built with 5.2 compat)
  -- Lua 5.1 / LuaJIT: the raw wait status from system()
  local signal = a % 128
  if a % 256 ~= 0 and signal ~= 0 then return nil, "signal", signal end
  local code = floor(a / 256) % 256
  return code == 0 or nil, "exit", code
end

--- #obj, honouring a __len metamethod on a table.
function compat.len(obj)
  local mt = getmetatable(obj)
  local len = type(mt) == "table" and rawget(mt, "__len")
  if len then return len(obj) end
  return #obj
end

return compat
