-- examples/kerberos.lua: ./zklua examples/kerberos.lua — SASL GSSAPI (Kerberos; kazoo's
-- sasl_options) to a throwaway server that zklua.testing starts with Java's Krb5LoginModule,
-- and a throwaway MIT KDC of its own (realm ZKLUA.TEST, on a free loopback port)
local zklua = require "zklua"
local testing = require "zklua.testing"

local kdc = testing.kdc()
local keytab = kdc:add_principal("bob")      -- bob@ZKLUA.TEST, its keys exported to a keytab
kdc:use(keytab) -- this process's KRB5_CONFIG, KRB5_CLIENT_KTNAME = keytab, KRB5CCNAME
local server = testing.server{ sasl = { kerberos = kdc } }
local zk = zklua.client{
  hosts = server.hosts,
  sasl_options = { mechanism = "GSSAPI", principal = "bob@ZKLUA.TEST" },
}
zk:start()
-- only bob (authenticated by Kerberos) may touch this node; every other client gets NoAuthError
local bob = zklua.security.make_acl("sasl", "bob@ZKLUA.TEST", { all = true })
zk:create("/bobs", "hello", { acl = { bob } })
print((zk:get("/bobs")), zk:get_acls("/bobs")[1].id.id)
zk:stop()
local other = zklua.client{ hosts = server.hosts }
other:start()
print(pcall(other.get, other, "/bobs"))
other:stop()
server:stop()
kdc:close()
