--- demo.lua — zklua in one minute, on a throwaway local ZooKeeper (`make demo`).
--
-- Three workers join a group as ephemeral nodes; an observer watches the group and a config
-- node; a worker leaves, the config changes, one worker's session expires and comes back.
-- Run against your own server instead with: ZKLUA_HOSTS=host:port ./zklua examples/demo.lua
local zklua = require "zklua"
local testing = require "zklua.testing"

local server
local hosts = os.getenv("ZKLUA_HOSTS")
if not hosts then
  io.write("starting a throwaway ZooKeeper... ")
  io.flush()
  server = testing.server()
  hosts = server.hosts
  print("serving on " .. hosts)
end

local function say(who, fmt, ...)
  print(string.format("%-10s " .. fmt, who, ...))
end

local observer = zklua.client(hosts)
observer:start()
observer:ensure_path("/demo/workers")
observer:create("/demo/config", "v1", { makepath = true })

observer:ChildrenWatch("/demo/workers", function(children)
  table.sort(children)
  say("observer", "workers now: [%s]", table.concat(children, ", "))
end)
observer:DataWatch("/demo/config", function(data, stat)
  if stat then say("observer", "config = %q (version %d)", data, stat.version) end
end)

local workers = {}
for i = 1, 3 do
  local zk = zklua.client(hosts)
  zk:add_listener(function(state) say("worker-" .. i, "session %s", state) end)
  zk:start()
  zk:create("/demo/workers/worker-" .. i, "ready", { ephemeral = true })
  workers[i] = zk
end
zklua.sleep(0.3)

say("worker-3", "leaving")
workers[3]:close()
zklua.sleep(0.3)

local t = observer:transaction()
t:set_data("/demo/config", "v2")
t:create("/demo/config-history", "v1 -> v2")
t:commit()
zklua.sleep(0.3)

say("demo", "expiring worker-1's session")
testing.expire_session(workers[1])
testing.wait_for(function() return workers[1].state == "CONNECTED" end, 10)
say("worker-1", "back with session %s; rejoining", workers[1]:client_id())
workers[1]:create("/demo/workers/worker-1", "ready", { ephemeral = true })
zklua.sleep(0.3)

for i = 1, 2 do workers[i]:close() end
observer:delete("/demo", nil, true)
observer:close()
if server then server:stop() end
print("done")
