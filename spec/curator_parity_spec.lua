-- make curator-parity inside the suite: Curator's test classes translated into spec/curator/
-- (scripts/curator-parity, on this suite's interpreter) print one line per Curator test; none
-- may be FAIL or missing (every test of spec/curator/inventory.lua translated, or listed not
-- applicable), and the script must exit 0.  The class files are not *_spec.lua files: this
-- spec is where `make test` runs them (once per interpreter, about 2.5 minutes each).
local helpers = require "support.helpers"

describe("make curator-parity", function()
  it("runs every Curator test of the inventory with no FAIL and none missing", function()
    local lua = helpers.LUAJIT and "luajit" or "lua5.4"
    local stdout, stderr, code = helpers.run("scripts/curator-parity --lua=" .. lua, 900)
    local out = stdout .. stderr
    local all = out:match("\n  all%s+([^\n]+)")
    assert.is_truthy(all, "no totals line:\n" .. out)
    local pass, diff, na, missing, fail =
      all:match("^(%d+) pass, (%d+) difference, (%d+) not applicable, (%d+) missing, (%d+) FAIL$")
    assert.is_truthy(pass, all)
    for line in out:gmatch("[^\n]+") do
      assert.is_falsy(line:match("^Test%S+%s%s+FAIL%s*$"), "a Curator test FAILs:\n" .. out)
    end
    assert.are.equal("0", fail, out)
    -- every line is counted: the totals add up to the tests of the inventory
    local inventory = dofile("spec/curator/inventory.lua")
    local total = 0
    for _, tests in pairs(inventory) do total = total + #tests end
    assert.are.equal(total, pass + diff + na + missing, out)
    assert.are.equal("0", missing, out)
    assert.are.equal(0, code, out)
  end)
end)
