-- make kazoo-parity's report (spec/support/parity.lua, a busted output handler), on a demo
-- "kazoo file" with one test of each outcome (spec/fixtures/parity/): pass, difference KEY
-- (with and without a README row), FAIL for a failed test, for a name that is no kazoo test,
-- for a bare name two classes share and for a not-applicable entry that is also translated or
-- names no test, "not applicable: reason", "missing"; the totals; and the count of FAILs and
-- missing tests it leaves for scripts/kazoo-parity's exit status.  The same handler for
-- make curator-parity (ZKLUA_PARITY_KIND=curator), on a demo "Curator class".
local helpers = require "support.helpers"

local DIR = "spec/fixtures/parity/"

-- Runs the parity handler over a demo file with env (inventory, not-applicable list, kind)
-- before busted; returns its output and the count it leaves in ZKLUA_PARITY_RESULT.
local function report(env, pattern, file)
  local result_file = os.tmpname()
  local lua = helpers.LUAJIT and "luajit" or "lua5.4"
  local stdout, stderr = helpers.run(string.format(
    "%s ZKLUA_PARITY_RESULT=%s ZKLUA_PARITY_PARTIAL=0 busted --lua=%s " ..
    "-o spec/support/parity.lua --pattern=%s %s%s", env, result_file, lua, pattern, DIR, file), 120)
  local f = io.open(result_file)
  local result = f and f:read("*a")
  if f then f:close() end
  os.remove(result_file)
  return stdout .. stderr, result
end

-- The status printed on the line of test name (its name, then spaces, then the status).
local function status_in(out, name)
  for line in out:gmatch("[^\n]+") do
    local n, s = line:match("^(%S+)%s%s+(.-)%s*$")
    if n == name then return s end
  end
  return nil
end

describe("make kazoo-parity's report", function()
  local out, result

  setup(function()
    out, result = report(string.format("ZKLUA_PARITY_INVENTORY=%sinventory.lua " ..
                         "ZKLUA_PARITY_NOT_APPLICABLE=%snot_applicable.lua", DIR, DIR),
                         "_parity", "test_demo_parity.lua")
  end)

  local function status(name)
    return status_in(out, "test_demo.py::" .. name)
  end

  it("prints pass, difference KEY, not applicable and missing", function()
    assert.are.equal("pass", status("test_pass"), out)
    assert.are.equal("difference lost-after-timeout", status("test_diff"), out)
    assert.are.equal("pass", status("Shared::test_shared"), out)
    assert.are.equal("not applicable: a reason", status("test_na"), out)
    assert.are.equal("missing", status("test_missing"), out)
    assert.are.equal("missing", status("A::test_shared"), out) -- only Shared's was translated
  end)

  it("prints FAIL, with the reason after the totals", function()
    assert.are.equal("FAIL", status("test_fails"), out)
    assert.are.equal("FAIL", status("test_nokey"), out)
    assert.is_truthy(out:find("difference no-such-key has no row in README.md", 1, true), out)
    assert.are.equal("FAIL", status("test_unknown"), out)
    assert.is_truthy(out:find("no kazoo test of that name in test_demo.py", 1, true), out)
    assert.are.equal("FAIL", status("test_twice"), out)
    assert.is_truthy(out:find("name it Class::test_twice", 1, true), out)
    assert.are.equal("FAIL", status("test_listed"), out)
    assert.is_truthy(out:find("translated and also listed", 1, true), out)
    assert.are.equal("FAIL", status("test_nowhere"), out)
  end)

  it("totals the file and leaves the number of FAILs and missing tests", function()
    assert.is_truthy(out:find("test_demo.py%s+2 pass, 1 difference, 1 not applicable, 2 missing, 6 FAIL"), out)
    assert.are.equal("8\n", result)
  end)
end)

describe("make curator-parity's report", function()
  local out, result

  setup(function()
    out, result = report(string.format("ZKLUA_PARITY_KIND=curator " ..
                         "ZKLUA_PARITY_INVENTORY=%sinventory_curator.lua " ..
                         "ZKLUA_PARITY_NOT_APPLICABLE=%snot_applicable_curator.lua", DIR, DIR),
                         "^TestDemo", "TestDemo.lua")
  end)

  local function status(name)
    return status_in(out, name)
  end

  it("names each test Class::method, the describe's class or the file's", function()
    assert.are.equal("pass", status("TestDemo::testPass"), out)
    assert.are.equal("pass", status("TestDemoBase::testInherited"), out)
    assert.are.equal("not applicable: a Java-only API", status("TestDemo::testNa"), out)
    assert.are.equal("missing", status("TestDemo::testMissing"), out)
    assert.are.equal("FAIL", status("TestDemo::testFails"), out)
  end)

  it("takes difference keys from the Differences from Curator table only", function()
    assert.are.equal("difference mutex-reentry", status("TestDemo::testDiff"), out)
    assert.are.equal("FAIL", status("TestDemo::testKazooKey"), out)
    assert.is_truthy(out:find("difference lost-after-timeout has no row in README.md's " ..
                              "\"Differences from Curator\" table", 1, true), out)
  end)

  it("totals per Curator class and leaves the number of FAILs and missing tests", function()
    assert.is_truthy(out:find("totals per Curator class:", 1, true), out)
    assert.is_truthy(out:find("TestDemo%s+1 pass, 1 difference, 1 not applicable, 1 missing, 2 FAIL"), out)
    assert.is_truthy(out:find("TestDemoBase%s+1 pass, 0 difference"), out)
    assert.are.equal("3\n", result)
  end)
end)
