--- zklua — a ZooKeeper coordination engine for Lua, with kazoo's API.
--
--   local zklua = require "zklua"
--   local zk = zklua.client("127.0.0.1:2181")   -- default hosts: $ZKLUA_HOSTS
--   zk:start()
local core = require "zklua.core"
local Client = require "zklua.client"
local Retry = require "zklua.retry"
local blocking = require "zklua.handlers.blocking"

local client_library = core.zookeeper
local function feature(has, name) return (has and "" or "no ") .. name end
local features = { feature(client_library.tls, "tls"), feature(client_library.sasl, "sasl") }
if client_library.tls and client_library.sasl then
  features[3] = feature(client_library.tls_sasl, "sasl over tls")
end

local zklua = {
  version = core.version,
  -- which ZooKeeper C client zklua is linked with, and whether it has TLS and SASL
  build = {
    zookeeper = client_library.version, -- "3.8.0"
    zookeeper_build = client_library.build, -- "Debian source package" or "system library"
    tls = client_library.tls,
    sasl = client_library.sasl,
    tls_sasl = client_library.tls_sasl, -- SASL over TLS (zklua's patch to the C client)
    description = "zklua " .. core.version .. ", ZooKeeper C client " ..
      client_library.version .. " (" .. client_library.build .. "): " ..
      table.concat(features, ", "),
  },
  errors = require "zklua.errors",
  security = require "zklua.security",
  states = { LOST = "LOST", SUSPENDED = "SUSPENDED", CONNECTED = "CONNECTED" },
}

--- A new client: zklua.client("hosts") or zklua.client{hosts = ..., timeout = ..., ...}.
function zklua.client(opts)
  return Client.new(opts)
end

--- A retry policy (kazoo's KazooRetry); callable: r(fn, ...).
function zklua.retry(opts)
  return Retry.new(opts, blocking.sleep)
end

--- Sleeps while running every client's event loop (the blocking handler's sleep).
function zklua.sleep(seconds)
  blocking.sleep(seconds)
end

return zklua
