-- luacheck configuration for `make lint` (luacheck 1.x, Debian's lua-check); any warning fails.
-- All Lua here is Lua 5.4 that also loads under LuaJIT; no file defines a global (modules
-- return a table). Lines are written to 100 columns; up to 120 is let through for test names
-- and messages that read better unbroken.
std = "lua54"
max_line_length = 120

files["spec/"] = { std = "+busted" }

-- Code that runs inside nginx (ngx_lua) reads the host's `ngx` table; a handler sets
-- ngx.status and ngx.header fields.
local ngx = { read_globals = { ngx = { other_fields = true, fields = {
  status = { read_only = false }, header = { read_only = false, other_fields = true } } } } }
files["lua/zklua/handlers/ngx.lua"] = ngx
files["examples/nginx/"] = ngx
files["spec/fixtures/nginx/"] = {
  read_globals = ngx.read_globals,
  globals = { "print" }, -- M.run() routes luaunit's print-based report into the response
  self = false,          -- luaunit calls each test as a method; not every test needs self
}

-- The LuaJIT (Lua 5.1) fallbacks, each read only where 5.4 lacks the function:
-- `table.unpack or unpack`, setfenv for a sandbox's environment, newproxy for __gc on 5.1.
files["lua/zklua/handlers/cqueues.lua"] = { read_globals = { "unpack" } }
files["lua/zklua/retry.lua"] = { read_globals = { "unpack" } }
files["spec/kazoo/support.lua"] = { read_globals = { "unpack" } }
files["bench/partitioner_bench.lua"] = { read_globals = { "unpack" } }
files["bench/strategies_bench.lua"] = { read_globals = { "unpack" } }
files["lua/zklua/recipes/partitioning/strategies.lua"] = { read_globals = { "setfenv" } }
files["lua/zklua/testing.lua"] = { read_globals = { "newproxy" } }
files["lua/zklua/testing/proxy.lua"] = { read_globals = { "newproxy" } }
files["lua/zklua/testing/kdc.lua"] = { read_globals = { "newproxy" } }
files["spec/locking_queue_spec.lua"] = { read_globals = { "jit" } }

-- Fixtures that are wrong on purpose: a strategy script that sets a global (the sandbox must
-- keep it in the script's environment) and one that does not parse.
files["spec/fixtures/strategies/first_member.lua"] = { globals = { "LEAKED_BY_STRATEGY_SCRIPT" } }
exclude_files = { "spec/fixtures/strategies/syntax_error.lua" }
