-- examples/x509.lua: ./zklua examples/x509.lua — a node only one client certificate may use:
-- a throwaway server with ssl.clientAuth=need and its X509AuthenticationProvider, two client
-- certificates signed by its CA (zklua.testing makes them with openssl in its temp dir)
local zklua = require "zklua"
local testing = require "zklua.testing"
local security = zklua.security

local server = testing.server{ tls = { x509 = true } }
local alice = server:client_certificate("alice") -- .certfile, .keyfile, .subject
local bob = server:client_certificate("bob")
print(alice.subject)                         -- CN=alice,OU=zklua-test,O=zklua

local function connect(cert)
  local zk = zklua.client{ hosts = server.secure_hosts, use_ssl = true, ca = server.tls.files.ca,
                           certfile = cert.certfile, keyfile = cert.keyfile }
  zk:start()
  return zk
end

local a, b = connect(alice), connect(bob)
a:create("/alice-only", "secret", { acl = { security.make_x509_acl(alice.subject, { all = true }) } })
print((a:get("/alice-only")))                -- secret
print(pcall(b.get, b, "/alice-only"))        -- false  NoAuthError: ...
a:stop(); b:stop()
server:stop()
