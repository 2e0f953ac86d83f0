--- zklua.strategies — the public name of the partition strategies, whose code lives with the
-- rest of the partitioning family: zklua.recipes.partitioning.strategies
-- (lua/zklua/recipes/partitioning/strategies.lua), where each strategy is documented.

--- The strategies: the same table as zklua.recipes.partitioning.strategies.
-- @table strategies
local strategies = require "zklua.recipes.partitioning.strategies"

return strategies
