-- examples/tls.lua: ./zklua examples/tls.lua — a client over TLS to a throwaway server that
-- zklua.testing starts with a secureClientPort (its CA and a client certificate in its temp dir)
local zklua = require "zklua"
local testing = require "zklua.testing"

local server = testing.server{ tls = true }
local files = server.tls.files
local zk = zklua.client{
  hosts = server.secure_hosts,       -- the TLS port(s); server.hosts is the plain one
  use_ssl = true,
  ca = files.ca,                     -- the CA that signed the server's certificate
  certfile = files.certfile,         -- the client's certificate and key (PEM)
  keyfile = files.keyfile,
}
zk:start()
print(zk:create("/over-tls", "hello"), (zk:get("/over-tls")))
print(zklua.build.description)
zk:stop()
server:stop()
