--- examples/strategies/least_loaded.lua — a partition strategy written in Lua, to start yours from.
--
-- Load it at runtime (and again after editing it, without a restart):
--   local strategies = require "zklua.strategies"
--   local least_loaded = strategies.load("examples/strategies/least_loaded.lua")
--   local assignment = least_loaded(members, items, { current = owners_now })
--
-- What it does: every item keeps its current owner while that owner is still a member; each
-- other item (new, or whose owner left) goes to the member that owns the fewest items at that
-- moment; then, while the most loaded member owns two or more items more than the least
-- loaded, it hands one item to the least loaded.  Result: loads differ by at most one, and a
-- join or a leave moves only the items it must.
--
-- The rules every strategy must follow (strategies.validate checks the first two):
-- - return {member -> array of items}, every member present, every item exactly once;
-- - be deterministic: every member of the group runs this with the same members, items and
--   current ownership and must reach the same answer.  Never depend on pairs() order, time,
--   randomness or the local machine; break ties by comparing strings (bytewise: `<` on
--   strings in the C locale, which zklua uses).  strategies.hash(s) is a stable hash if you
--   need one.
-- Errors it raises reach the caller as ConfigurationError naming this file.

local function least_loaded(members, items, ctx)
  local current = ctx and ctx.current or {}
  local assignment, load, is_member = {}, {}, {}
  for _, m in ipairs(members) do
    assignment[m], load[m], is_member[m] = {}, 0, true
  end
  if #members == 0 then return assignment end

  -- the member with the fewest items (or the most, when most is true); ties: the smaller name
  local function pick(most)
    local best
    for _, m in ipairs(members) do
      if best == nil or (most and load[m] > load[best]) or (not most and load[m] < load[best])
         or (load[m] == load[best] and m < best) then
        best = m
      end
    end
    return best
  end

  local owner = {}
  local function give(item, m)
    if owner[item] then load[owner[item]] = load[owner[item]] - 1 end
    owner[item], load[m] = m, load[m] + 1
  end

  local sorted = {}
  for i, item in ipairs(items) do sorted[i] = item end
  table.sort(sorted)
  for _, item in ipairs(sorted) do -- current owners keep their items
    if is_member[current[item]] then give(item, current[item]) end
  end
  for _, item in ipairs(sorted) do -- the rest go to the least loaded
    if not owner[item] then give(item, pick(false)) end
  end
  while true do -- even out: the most loaded hands its last item (in sorted order) over
    local most, least = pick(true), pick(false)
    if load[most] - load[least] <= 1 then break end
    for i = #sorted, 1, -1 do
      if owner[sorted[i]] == most then give(sorted[i], least); break end
    end
  end

  for _, item in ipairs(sorted) do
    local list = assignment[owner[item]]
    list[#list + 1] = item
  end
  return assignment
end

return { name = "least_loaded", allocate = least_loaded }
