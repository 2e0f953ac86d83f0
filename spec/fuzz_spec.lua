-- Hostile scripts: spec/fixtures/fuzz.lua makes thousands of random API calls (wrong types,
-- nil holes, NaN, invalid, huge and unicode paths, values over 1 MiB, callbacks that raise or
-- close their client, calls on a closed client, stop() during an acquire, close() inside a
-- watch callback) in a process of its own.  It must end normally with every error a Lua
-- error of the right kind: no crash (a signal), no hang (the time limit is a hang detector,
-- far above a normal run), no internal error leaking out ("BAD" lines).
-- Under `make asan` the fixture runs in the sanitized runner, so a memory error aborts it.
local testing = require "zklua.testing"

local RUNNER = os.getenv("ZKLUA_SPEC_LUA")
if not (RUNNER and RUNNER:find("zklua$")) then RUNNER = "./zklua" end
local HANG_LIMIT_S = 600

local function fuzz(hosts, seed, calls)
  local cmd = string.format("timeout -s KILL %d %s spec/fixtures/fuzz.lua %s %d %d 2>&1",
                            HANG_LIMIT_S, RUNNER, hosts, seed, calls)
  local pipe = assert(io.popen(cmd))
  local out = pipe:read("a")
  local ok, how, code = pipe:close()
  return ok, how, code, out
end

describe("random API calls with hostile arguments", function()
  local server
  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  for _, seed in ipairs({ 11, 12, 13 }) do
    it("end in Lua errors only (seed " .. seed .. ")", function()
      local ok, how, code, out = fuzz(server.hosts, seed, 3000)
      local shown = out:sub(1, 4000)
      assert(ok, "fuzz process " .. tostring(how) .. " " .. tostring(code) .. ":\n" .. shown)
      assert.is_nil(out:find("\nBAD ") or out:find("^BAD "), shown)
      local calls, errs, bad = out:match("ok (%d+) (%d+) (%d+)")
      assert(calls, "no summary line:\n" .. shown)
      assert.are.equal("3000", calls)
      assert.are.equal("0", bad)
      assert.is_true(tonumber(errs) > 1000, "most hostile calls are refused")
    end)
  end
end)
