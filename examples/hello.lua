-- examples/hello.lua: ZKLUA_HOSTS=host:port ./zklua examples/hello.lua
local zklua = require "zklua"

local zk = zklua.client()            -- hosts from $ZKLUA_HOSTS, else 127.0.0.1:2181
zk:add_listener(function(state) print("session", state) end)
zk:start()

zk:ensure_path("/app/config")
zk:set("/app/config", "v1")
local data, stat = zk:get("/app/config")
print(data, stat.version, stat.last_modified)

zk:DataWatch("/app/config", function(value)
  print("config is now", value)
end)

zk:create("/app/workers/w-", "me", { ephemeral = true, sequence = true, makepath = true })
zk:stop()
