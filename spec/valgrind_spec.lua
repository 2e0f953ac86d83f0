-- Every spec/fixtures/*_valgrind.lua script (each drives one part of the C code through its
-- allocating and freeing paths: ops, watches, recipes, orphans, closed clients) runs under
-- valgrind against a real server: no definite leak and no memory error may be reported.
-- `make valgrind` runs this file alone; it is part of the suite too.
--
-- libzookeeper-mt itself loses a few completion entries when a handle closes while replies
-- are still queued inside it (ZOOKEEPER-2894, ZOOKEEPER-3868).  scripts/lsan.supp lists the
-- library frames those allocations come from, with the reasoning; valgrind gets the same list
-- (one source for both tools), so a leak is reported only when no such library frame is on
-- the allocating stack, which is every allocation zklua makes itself.
-- (It runs ./zklua, Lua 5.4, whatever runs busted: make test runs it in the Lua 5.4 suite only.)
local testing = require "zklua.testing"

-- Writes a valgrind suppression file holding one Memcheck:Leak entry per `leak:FRAME` line
-- of scripts/lsan.supp and returns its name.
local function library_leak_suppressions()
  local name = os.tmpname()
  local out = assert(io.open(name, "w"))
  for line in io.lines("scripts/lsan.supp") do
    local frame = line:match("^leak:([%w_]+)%s*$")
    if frame then
      out:write("{\n  libzookeeper-", frame, "\n  Memcheck:Leak\n  match-leak-kinds: definite\n",
                "  fun:*alloc\n  ...\n  fun:", frame, "\n}\n")
    end
  end
  out:close()
  return name
end

local function fixtures()
  local list = {}
  local pipe = assert(io.popen("ls spec/fixtures/*_valgrind.lua"))
  for line in pipe:lines() do list[#list + 1] = line end
  pipe:close()
  return list
end

local function run_under_valgrind(script, hosts, suppressions)
  local log = os.tmpname()
  local cmd = "valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite " ..
              "--suppressions=" .. suppressions .. " " ..
              "--error-exitcode=99 --log-file=" .. log .. " ./zklua " .. script .. " " ..
              hosts .. " 2>&1"
  local pipe = assert(io.popen(cmd))
  local out = pipe:read("a")
  local ok, _, code = pipe:close()
  local f = io.open(log)
  local report = f and f:read("a") or ""
  if f then f:close() end
  os.remove(log)
  return ok, code, out, report
end

describe("under valgrind", function()
  local server, suppressions
  setup(function()
    server = testing.server()
    suppressions = library_leak_suppressions()
  end)
  teardown(function()
    server:stop()
    os.remove(suppressions)
  end)

  local list = fixtures()
  it("finds the fixtures", function()
    assert.is_true(#list >= 3, "expected several *_valgrind.lua fixtures")
  end)

  it("suppresses only the library's own frames, never a zklua one", function()
    local text = assert(io.open(suppressions)):read("a")
    assert.matches("fun:zookeeper_process", text, 1, true)
    assert.matches("fun:zoo_aget\n", text, 1, true)
    assert.is_nil(text:find("fun:zkl", 1, true))
  end)

  for _, script in ipairs(list) do
    it(script .. " leaks nothing and touches no memory it should not", function()
      local ok, code, out, report = run_under_valgrind(script, server.hosts, suppressions)
      assert(ok, "valgrind exit " .. tostring(code) .. ":\n" .. out .. report)
      assert.matches("ok", out, 1, true)
      assert.are.equal("", report)
    end)
  end
end)
