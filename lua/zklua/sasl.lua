--- zklua.sasl — kazoo's sasl_options read into what the ZooKeeper C client takes.
--
-- sasl_options = {mechanism = "DIGEST-MD5", username = ..., password = ..., service =
-- "zookeeper", principal = ...}: kazoo's names.  The C client (zookeeper_init_sasl, Cyrus
-- SASL) runs the exchange at every connection, before any request, as kazoo does.  For
-- DIGEST-MD5 the server's name is "zk-sasl-md5", the name ZooKeeper's servers give
-- themselves (kazoo sets the same); principal is used by GSSAPI only (as kazoo: pure-sasl
-- ignores it for DIGEST-MD5).  GSSAPI (Kerberos) uses the process's Kerberos credentials
-- (see gssapi below).  With use_ssl the exchange runs over TLS, after each handshake
-- (zookeeper_init_ssl_sasl, zklua's patch to the C client).  What zklua cannot do is refused
-- here with a ConfigurationError before anything is sent: SASL on a build whose C client has
-- none, a mechanism other than DIGEST-MD5 and GSSAPI, SASL together with use_ssl on a build
-- whose C client has no call for both (a system library).  Bad values are BadArgumentsError
-- naming the field.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"

local sasl = {}

local FIELDS = { mechanism = true, username = true, password = true, service = true,
                 principal = true }

local function refuse(message)
  errors.raise(errors.ConfigurationError, "client: sasl_options: " .. message)
end

-- GSSAPI (Kerberos): the credentials are the process's, found by MIT Kerberos as for any
-- program (the ticket cache KRB5CCNAME after kinit, or the keytab KRB5_CLIENT_KTNAME, from
-- which MIT gets the tickets itself; KRB5_CONFIG names the realm's KDCs): Cyrus SASL's
-- GSSAPI has no way to be handed other ones.  principal, when given, is the name the client
-- means to authenticate as: unless those credentials are principal's (a name without a realm:
-- of any realm), a ConfigurationError; it names the client in errors.  The server's name is
-- service/<the address the client connects to>, as the C client gives Cyrus SASL the peer's
-- address (kazoo: the host of its hosts string).  No authorization id is sent: the server
-- names the client after its ticket.
local function gssapi(o)
  if o.username ~= nil or o.password ~= nil then
    refuse("GSSAPI takes no username or password: the credentials are Kerberos's (a ticket " ..
           "cache, KRB5CCNAME, after kinit; or a keytab, KRB5_CLIENT_KTNAME)")
  end
  local principal = o.principal
  if principal ~= nil and not principal:match("^[^%s@]+@[^%s@]+$") and
     not principal:match("^[^%s@]+$") then
    check.fail("client", "sasl_options", "principal must be a Kerberos principal, " ..
               "name[/instance][@REALM] without blanks (got " .. string.format("%q", principal) .. ")")
  end
  if principal ~= nil then -- the credentials MIT will present must be principal's
    local found, where = core.kerberos_principal()
    if not found then refuse("GSSAPI as " .. principal .. ": " .. where) end
    local expected = principal:find("@", 1, true) and found or found:match("^(.*)@") or found
    if expected ~= principal then
      refuse("GSSAPI as " .. principal .. ": this process's Kerberos credentials are " ..
             found .. "'s (" .. where .. "); Cyrus SASL presents the default ones " ..
             "(KRB5CCNAME, KRB5_CLIENT_KTNAME)")
    end
  end
  local service = o.service or "zookeeper"
  if service == "" or service:find("[%s@/]") then
    check.fail("client", "sasl_options", "service must be a service name without blanks, " ..
               "'@' or '/' (e.g. \"zookeeper\"; got " .. string.format("%q", service) .. ")")
  end
  return { mechanism = "GSSAPI", service = service, host = nil, username = "", password = "",
           principal = principal }
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
  if opts.use_ssl and client.tls and not client.tls_sasl then
    refuse("SASL over TLS needs zookeeper_init_ssl_sasl, which this zklua's ZooKeeper C " ..
           "client has not got (" .. client.build .. " " .. client.version .. "); build " ..
           "zklua with `make` (ZK_CLIENT=source, the default), which builds the C client " ..
           "with zklua's patch for it from Debian's zookeeper source package")
  end
  local mechanism = o.mechanism
  if mechanism == nil then refuse("mechanism is required (\"DIGEST-MD5\" or \"GSSAPI\")") end
  if mechanism == "GSSAPI" then return gssapi(o) end
  if mechanism ~= "DIGEST-MD5" then
    refuse("mechanism " .. mechanism .. " is not supported; DIGEST-MD5 and GSSAPI are")
  end
  if o.username == nil or o.password == nil then
    refuse("DIGEST-MD5 needs username and password")
  end
  return { mechanism = mechanism, service = o.service or "zookeeper", host = "zk-sasl-md5",
           username = o.username, password = o.password }
end

--- What a refused authentication names: "SASL DIGEST-MD5 as bob", "SASL GSSAPI as
-- bob@EXAMPLE.COM" ("SASL GSSAPI with this process's Kerberos credentials" without principal).
function sasl.describe(params)
  if params.mechanism == "GSSAPI" then
    return "SASL GSSAPI " .. (params.principal and "as " .. params.principal or
                              "with this process's Kerberos credentials")
  end
  return "SASL " .. params.mechanism .. " as " .. params.username
end

--- Why a refused authentication may have been refused, for its error message.
function sasl.causes(params)
  if params.mechanism == "GSSAPI" then
    return "no Kerberos credentials, a KDC that cannot be reached, or a principal the KDC " ..
           "or the server does not know"
  end
  return "wrong password, or a user the server does not know"
end

return sasl
