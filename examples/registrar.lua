-- examples/registrar.lua: a backend's long-lived registrar, for zklua.ngx.balancer or any
-- Curator ServiceDiscovery client.  Registers one instance of a service and keeps it
-- registered for as long as it runs: through connection losses, session expiries and
-- ZooKeeper outages of any length (its PersistentNode re-creates the znode on every new
-- session, replacing at once one its old session still owns).  SIGINT or SIGTERM ends it; the
-- runner then closes the session, so the instance leaves every balancer at once.
--
--   ZKLUA_HOSTS=zk1:2181,zk2:2181 ./zklua examples/registrar.lua api 10.0.0.7 8080 [id]
local zklua = require "zklua"
io.stdout:setvbuf("line") -- one line at a time, also into a pipe or a log file

local name, address, port, id = ...
assert(name and address and tonumber(port),
       "usage: ./zklua examples/registrar.lua NAME ADDRESS PORT [ID]")

local zk = zklua.client{ timeout = 10, logger = "WARN" } -- hosts: $ZKLUA_HOSTS
zk:add_listener(function(state) print("session " .. state) end)
zk:start(60)

local sd = zk:ServiceDiscovery("/services")
local me = sd:register{ name = name, id = id, address = address, port = tonumber(port) }
print("registered " .. name .. " " .. me.id .. " at " .. address .. ":" .. port)

while true do
  zk:dispatch(1) -- runs the session's events (and the registration's re-creates) for good
end
