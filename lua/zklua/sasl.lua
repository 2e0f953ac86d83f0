--- zklua.sasl — kazoo's sasl_options read into what the ZooKeeper C client takes.
--
-- sasl_options = {mechanism = "DIGEST-MD5", username = ..., password = ..., service =
-- "zookeeper", principal = ...}: kazoo's names.  The C client (zookeeper_init_sasl, Cyrus
-- SASL) runs the exchange at every connection, before any request, as kazoo does.  For
-- DIGEST-MD5 the server's name is "zk-sasl-md5", the name ZooKeeper's servers give
-- themselves (kazoo sets the same); principal is used by GSSAPI only (as kazoo: pure-sasl
-- ignores it for DIGEST-MD5).  What zklua cannot do is refused here with a
-- ConfigurationError before anything is sent: SASL on a build whose C client has none, a
-- mechanism other than DIGEST-MD5 (GSSAPI: not yet), SASL together with use_ssl (the C
-- client has no call for both).  Bad values are BadArgumentsError naming the field.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"

local sasl = {}

local FIELDS = { mechanism = true, username = true, password = true, service = true,
                 principal = true }

local function refuse(message)
  errors.raise(errors.ConfigurationError, "client: sasl_options: " .. message)
end

--- The client's options -> the table core.session takes, or nil without sasl_options.
function sasl.params(opts)
  local o = opts.sasl_options
  if o == nil then return nil end
  if type(o) ~= "table" then
    check.fail("client", "sasl_options", "sasl_options must be a table, like kazoo's")
  end
  for key in pairs(o) do
    if not FIELDS[key] then
      check.fail("client", "sasl_options", "unknown field " .. tostring(key) .. " (kazoo's: " ..
                 "mechanism, username, password, service, principal)")
    end
  end
  for key in pairs(FIELDS) do
    local v = o[key]
    if v ~= nil and (type(v) ~= "string" or v:find("\0", 1, true)) then
      check.fail("client", "sasl_options", key .. " must be a string without NUL bytes")
    end
  end
  local client = core.zookeeper
  if not client.sasl then
    refuse("this zklua is linked with a ZooKeeper C client without SASL (" .. client.build ..
           " " .. client.version .. "); build zklua with `make` (ZK_CLIENT=source, the " ..
           "default), which builds the C client with TLS and SASL from Debian's zookeeper " ..
           "source package")
  end
  if opts.use_ssl then
    refuse("SASL over TLS is not possible: ZooKeeper 3.8's C client has no call for both " ..
           "(use SASL on a plaintext port, or TLS with client certificates)")
  end
  local mechanism = o.mechanism
  if mechanism == nil then refuse("mechanism is required (\"DIGEST-MD5\")") end
  if mechanism == "GSSAPI" then
    refuse("GSSAPI (Kerberos) is not supported yet; DIGEST-MD5 is")
  end
  if mechanism ~= "DIGEST-MD5" then
    refuse("mechanism " .. mechanism .. " is not supported; DIGEST-MD5 is")
  end
  if o.username == nil or o.password == nil then
    refuse("DIGEST-MD5 needs username and password")
  end
  return { mechanism = mechanism, service = o.service or "zookeeper", host = "zk-sasl-md5",
           username = o.username, password = o.password }
end

--- What a refused authentication names: "SASL DIGEST-MD5 as bob".
function sasl.describe(params)
  return "SASL " .. params.mechanism .. " as " .. params.username
end

return sasl
