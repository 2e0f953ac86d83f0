-- examples/tls_sasl.lua: ./zklua examples/tls_sasl.lua — SASL DIGEST-MD5 over TLS: a throwaway
-- server that zklua.testing starts with a secureClientPort and a JAAS DigestLoginModule
local zklua = require "zklua"
local testing = require "zklua.testing"

local server = testing.server{ tls = true, sasl = { users = { bob = "bob-pw", alice = "alice-pw" } } }
local function connect(username, password)
  local files = server.tls.files
  local zk = zklua.client{
    hosts = server.secure_hosts,     -- the TLS port(s)
    use_ssl = true, ca = files.ca, certfile = files.certfile, keyfile = files.keyfile,
    sasl_options = { mechanism = "DIGEST-MD5", username = username, password = password },
  }
  zk:start()                         -- the TLS handshake, then SASL over it
  return zk
end

local bob, alice = connect("bob", "bob-pw"), connect("alice", "alice-pw")
bob:create("/bobs", "hello", { acl = { zklua.security.make_acl("sasl", "bob", { all = true }) } })
print((bob:get("/bobs")))                    -- hello
print(pcall(alice.get, alice, "/bobs"))      -- false  NoAuthError: ...
bob:stop(); alice:stop()
server:stop()
