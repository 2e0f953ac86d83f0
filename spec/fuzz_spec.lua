-- Hostile scripts: spec/fixtures/fuzz.lua makes thousands of random API calls (wrong types,
-- nil holes, NaN, invalid, huge and unicode paths, values over 1 MiB, callbacks that raise or
-- close their client, calls on a closed client, stop() during an acquire, close() inside a
-- watch callback) and the shapes that once hung or leaked raw errors (hostile hosts for
-- zklua.client and set_hosts, makepath and ensure_path 2000 levels under a read-only or an
-- ephemeral parent, calls where Lua cannot yield under the cqueues handler, clients closed
-- and made inside watch callbacks and listeners while a blocking call waits), in a process of
-- its own, on the suite's interpreter (Lua 5.4 or LuaJIT).  It must end normally with every
-- error a Lua error of the right kind: no crash (a signal), no hang (each call has a
-- watchdog, "HANG" lines; the process a time limit far above a normal run), no raw error
-- leaking out ("RAW" lines), no shape ending in the wrong error ("WRONG" lines).  A bounded
-- seed set here; `make fuzz-long` runs 50k calls.
-- Under `make asan` the fixture runs in the sanitized runner, so a memory error aborts it.
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local child = require "fixtures.child"

local HANG_LIMIT_S = 300
local CALLS = 1000
-- seed -> the depth of the two deep paths every run makes (a read-only and an ephemeral
-- parent); random ones go to 2000 levels now and then too
local SEEDS = { { 11, 2000 }, { 12, 300 }, { 13, 52 } }

local function argv()
  local runner = os.getenv("ZKLUA_SPEC_LUA")
  if runner and runner:find("zklua$") then return { runner, "spec/fixtures/fuzz.lua" } end
  return helpers.lua_argv("spec/fixtures/fuzz.lua")
end

local function fuzz(hosts, seed, calls, depth)
  local words = {}
  for i, a in ipairs(argv()) do words[i] = child.quote(a) end
  local cmd = string.format("timeout -s KILL %d %s %s %d %d %d 2>&1", HANG_LIMIT_S,
                            table.concat(words, " "), hosts, seed, calls, depth)
  local pipe = assert(io.popen(cmd))
  local out = pipe:read("a")
  local ok, how, code = pipe:close()
  return ok, how, code, out
end

describe("random API calls with hostile arguments", function()
  local server
  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  for _, case in ipairs(SEEDS) do
    local seed, depth = case[1], case[2]
    it("end in Lua errors only, none hangs (seed " .. seed .. ", depth " .. depth .. ")", function()
      local ok, how, code, out = fuzz(server.hosts, seed, CALLS, depth)
      local shown = out:sub(1, 4000)
      assert(ok, "fuzz process " .. tostring(how) .. " " .. tostring(code) .. ":\n" .. shown)
      local findings = {}
      for line in ("\n" .. out):gmatch("\n((%u+) [^\n]*)") do
        local kind = line:match("^%u+")
        if kind == "RAW" or kind == "WRONG" or kind == "HANG" then findings[#findings + 1] = line end
      end
      assert.are.same({}, findings)
      local calls, errs, raw, wrong, hangs = out:match("ok (%d+) (%d+) (%d+) (%d+) (%d+)")
      assert(calls, "no summary line:\n" .. shown)
      assert.are.equal(tostring(CALLS), calls)
      assert.are.same({ "0", "0", "0" }, { raw, wrong, hangs })
      assert.is_true(tonumber(errs) > CALLS / 3, "most hostile calls are refused")
      -- every shape ran (each at least once per run, the 2000-level paths among them)
      local hosts, deep, noyield, churn = out:match("shapes hosts=(%d+) deep=(%d+) " ..
                                                    "noyield=(%d+) churn=(%d+)")
      assert(hosts, "no shapes line:\n" .. shown)
      for name, count in pairs({ hosts = hosts, deep = deep, noyield = noyield, churn = churn }) do
        assert.is_true(tonumber(count) > 0, name .. " never ran:\n" .. shown)
      end
    end)
  end
end)
