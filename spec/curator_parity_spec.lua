-- make curator-parity inside the suite: Curator's test classes translated into spec/curator/
-- (scripts/curator-parity, on this suite's interpreter) print one line per Curator test, and
-- none of them may be FAIL.  The class files are not *_spec.lua files: this spec is where
-- `make test` runs them (once per interpreter).  A test of Curator's not translated yet is
-- printed "missing" and makes the script's exit status non-zero (the issue's "0 missing" is
-- still to come); only FAIL fails this spec.
local helpers = require "support.helpers"

describe("make curator-parity", function()
  it("runs every translated Curator test with no FAIL", function()
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
    -- a non-zero exit status only for tests not translated yet
    if code ~= 0 then
      assert.is_true(tonumber(missing) > 0, "exit " .. tostring(code) .. ":\n" .. out)
    end
  end)
end)
