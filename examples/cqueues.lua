-- examples/cqueues.lua: ZKLUA_HOSTS=host:port ./zklua examples/cqueues.lua
-- zklua under cqueues: every blocking call yields its coroutine, so the three workers below
-- queue for one lock and wait on ZooKeeper at the same time, in one thread.
local cqueues = require "cqueues"
local zklua = require "zklua"

local cq = cqueues.new()
local handler = require("zklua.handlers.cqueues").new(cq)
local zk = zklua.client{ handler = handler }   -- hosts from $ZKLUA_HOSTS

cq:wrap(function()
  zk:start()                                    -- yields until CONNECTED
  zk:ensure_path("/examples/cqueues")
  zk:set("/examples/cqueues", "0")
  zk:DataWatch("/examples/cqueues", function(data)
    print("count is now", data)                 -- a callback; it could call zk too
  end)

  local finished = 0
  for i = 1, 3 do
    cq:wrap(function()
      local lock = zk:Lock("/examples/cqueues-lock", "worker-" .. i)
      lock:with(function()                      -- waits for the others: yields meanwhile
        local n = tonumber((zk:get("/examples/cqueues")))
        handler.sleep(0.05)                     -- a sleep that lets the loop run
        zk:set("/examples/cqueues", tostring(n + 1))
        print("worker-" .. i, "counted", n + 1)
      end)
      finished = finished + 1
    end)
  end
  while finished < 3 do handler.sleep(0.01) end
  print("final", (zk:get("/examples/cqueues")))
  zk:delete("/examples/cqueues", nil, true)
  zk:delete("/examples/cqueues-lock", nil, true)
  zk:close()                                    -- the loop ends once nothing is left to do
end)

assert(cq:loop())
