-- Every spec/fixtures/*_valgrind.lua script (each drives one part of the C code through its
-- allocating and freeing paths: ops, watches, recipes, orphans, closed clients) runs under
-- valgrind against a real server: no definite leak and no memory error may be reported.
-- `make valgrind` runs this file alone; it is part of the suite too.
local testing = require "zklua.testing"

local function fixtures()
  local list = {}
  local pipe = assert(io.popen("ls spec/fixtures/*_valgrind.lua"))
  for line in pipe:lines() do list[#list + 1] = line end
  pipe:close()
  return list
end

local function run_under_valgrind(script, hosts)
  local log = os.tmpname()
  local cmd = "valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite " ..
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
  local server
  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  local list = fixtures()
  it("finds the fixtures", function()
    assert.is_true(#list >= 3, "expected several *_valgrind.lua fixtures")
  end)

  for _, script in ipairs(list) do
    it(script .. " leaks nothing and touches no memory it should not", function()
      local ok, code, out, report = run_under_valgrind(script, server.hosts)
      assert(ok, "valgrind exit " .. tostring(code) .. ":\n" .. out .. report)
      assert.matches("ok", out, 1, true)
      assert.are.equal("", report)
    end)
  end
end)
