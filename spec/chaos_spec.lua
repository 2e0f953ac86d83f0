-- The short form of `make chaos` (scripts/chaos.lua): PartitionAllocator worker processes
-- under random kill -9s, session expiries, clean leaves and set changes; its checker proves
-- from the workers' ownership logs (with fencing tokens) that no item was owned twice at once
-- and that every item was owned again once the faults stopped.
describe("chaos, short form", function()
  it("never two owners of an item, every item owned again after the faults", function()
    local pipe = assert(io.popen("./zklua scripts/chaos.lua 15 4 30 2>&1"))
    local out = pipe:read("a")
    local ok = pipe:close()
    assert(ok, out)
    assert.matches("chaos: ok", out, 1, true)
    local kills, expiries = out:match("(%d+) kills, (%d+) expiries")
    assert.is_true(tonumber(kills) + tonumber(expiries) > 0, "faults happened: " .. out)
  end)
end)
