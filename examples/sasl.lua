-- examples/sasl.lua: ./zklua examples/sasl.lua — SASL DIGEST-MD5 (kazoo's sasl_options) to a
-- throwaway server that zklua.testing starts with a JAAS DigestLoginModule and users of its own
local zklua = require "zklua"
local testing = require "zklua.testing"

local server = testing.server{ sasl = { users = { bob = "bob-secret" } } }
local zk = zklua.client{
  hosts = server.hosts,
  sasl_options = { mechanism = "DIGEST-MD5", username = "bob", password = "bob-secret" },
}
zk:start()
-- only bob (authenticated by SASL) may touch this node; every other client gets NoAuthError
zk:create("/bobs", "hello", { acl = { zklua.security.make_acl("sasl", "bob", { all = true }) } })
print((zk:get("/bobs")))
zk:stop()
local other = zklua.client{ hosts = server.hosts }
other:start()
print(pcall(other.get, other, "/bobs"))
other:stop()
server:stop()
