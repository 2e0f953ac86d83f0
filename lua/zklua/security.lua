--- zklua.security — ACLs as kazoo builds them.
--
-- An ACL is {perms = n, id = {scheme = "...", id = "..."}} (kazoo's ACL(perms, Id(scheme,
-- id))).  Permissions: READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16, ALL 31.
-- security.ACL(perms, id) and security.Id(scheme, id) build them as kazoo's namedtuples do;
-- an ACL built here (make_acl, the *_ACL_* constants) also has kazoo's acl.acl_list (the
-- names of its permissions: {"ALL"} when it has all) and tostring(acl) reads as kazoo's
-- repr: ACL(perms=16, acl_list=['ADMIN'], id=Id(scheme='digest', id='fred')).
-- make_x509_acl(subject, perms): the ACL of a TLS client's certificate subject.
local core = require "zklua.core"
local errors = require "zklua.errors"

local security = {}

security.Permissions = { READ = 1, WRITE = 2, CREATE = 4, DELETE = 8, ADMIN = 16, ALL = 31 }

local P = security.Permissions
local PERM_ORDER = { "READ", "WRITE", "CREATE", "DELETE", "ADMIN" }

--- Whether perms has every bit of bits (kazoo's perms & bits == bits; no bit operators:
--- LuaJIT has none).
function security.has_perms(perms, bits)
  for _, name in ipairs(PERM_ORDER) do
    local bit = P[name]
    if math.floor(bits / bit) % 2 == 1 and math.floor(perms / bit) % 2 ~= 1 then
      return false
    end
  end
  return true
end

local function repr(value)
  if type(value) == "string" then return "'" .. value .. "'" end
  return tostring(value)
end

local Id = {}
Id.__index = Id
function Id.__tostring(id)
  return "Id(scheme=" .. repr(id.scheme) .. ", id=" .. repr(id.id) .. ")"
end

local ACL = {}
function ACL.__index(acl, key)
  if key ~= "acl_list" then return nil end
  if security.has_perms(acl.perms, P.ALL) then return { "ALL" } end
  local list = {}
  for _, name in ipairs(PERM_ORDER) do
    if security.has_perms(acl.perms, P[name]) then list[#list + 1] = name end
  end
  return list
end
function ACL.__tostring(acl)
  local names = {}
  for i, name in ipairs(acl.acl_list) do names[i] = "'" .. name .. "'" end
  return "ACL(perms=" .. tostring(acl.perms) .. ", acl_list=[" .. table.concat(names, ", ") ..
         "], id=" .. repr(acl.id) .. ")"
end

--- kazoo's Id(scheme, id).
function security.Id(scheme, id)
  return setmetatable({ scheme = scheme, id = id }, Id)
end

--- kazoo's ACL(perms, id): id is normally an Id (kazoo's tests also give a plain name).
function security.ACL(perms, id)
  if type(perms) ~= "number" or perms < 0 or perms > P.ALL or perms ~= math.floor(perms) then
    errors.raise(errors.BadArgumentsError, "ACL: perms must be an integer from 0 to 31 (got " ..
                 tostring(perms) .. ")", nil, { argument = "perms" })
  end
  return setmetatable({ perms = perms, id = id }, ACL)
end

local function acl(perms, scheme, id)
  return security.ACL(perms, security.Id(scheme, id))
end

security.OPEN_ACL_UNSAFE = { acl(P.ALL, "world", "anyone") }
security.READ_ACL_UNSAFE = { acl(P.READ, "world", "anyone") }
security.CREATOR_ALL_ACL = { acl(P.ALL, "auth", "") }

local function check_string(fname, name, value)
  if type(value) ~= "string" then
    errors.raise(errors.BadArgumentsError, fname .. ": " .. name .. " must be a string", nil,
                 { argument = name })
  end
end

--- Permission bits from {read=, write=, create=, delete=, admin=, all=} (all false by default).
local function perms_from(fname, perms)
  if perms == nil then return 0 end
  if type(perms) ~= "table" then
    errors.raise(errors.BadArgumentsError, fname .. ": perms must be a table like " ..
                 "{read = true, write = true}", nil, { argument = "perms" })
  end
  local bits, seen = 0, {}
  for name, value in pairs(perms) do
    local bit = type(name) == "string" and P[name:upper()]
    if not bit or name ~= name:lower() then
      errors.raise(errors.BadArgumentsError, fname .. ": unknown permission '" ..
                   tostring(name) .. "'", nil, { argument = "perms" })
    end
    if value and not seen[bit] then
      seen[bit] = true
      bits = bits + bit
    end
  end
  if perms.all then bits = P.ALL end
  return bits
end

--- make_acl(scheme, credential, {read=true, ...}) -> an ACL
function security.make_acl(scheme, credential, perms)
  check_string("make_acl", "scheme", scheme)
  check_string("make_acl", "credential", credential)
  return acl(perms_from("make_acl", perms), scheme, credential)
end

--- "user:base64(sha1(user:password))", the id of a digest ACL.
function security.make_digest_acl_credential(username, password)
  check_string("make_digest_acl_credential", "username", username)
  check_string("make_digest_acl_credential", "password", password)
  return core.digest_credential(username, password)
end

--- make_digest_acl(user, password, {read=true, ...}) -> a digest ACL for that user
function security.make_digest_acl(username, password, perms)
  local cred = security.make_digest_acl_credential(username, password)
  return acl(perms_from("make_digest_acl", perms), "digest", cred)
end

--- make_x509_acl(subject_dn, {read=true, ...}) -> an x509 ACL for the client whose TLS
-- certificate has that subject.  A server with a secureClientPort and ssl.clientAuth=need
-- (X509AuthenticationProvider, ZooKeeper's default ssl.authProvider) names each TLS client
-- x509:<subject>, the subject as Java's X500Principal.getName() prints it (RFC 2253: the
-- most specific part first, no space after a comma: "CN=client-a,OU=ops,O=example";
-- `openssl x509 -noout -subject -nameopt RFC2253 -in cert.pem` prints it so), and compares
-- it with the ACL's id exactly.  A subject with a space after a comma ("CN=a, O=b", as
-- openssl prints it by default) could never match: refused, as is a string that is not
-- TYPE=value pairs.
function security.make_x509_acl(subject_dn, perms)
  local fname = "make_x509_acl"
  check_string(fname, "subject_dn", subject_dn)
  local function bad(why)
    errors.raise(errors.BadArgumentsError, fname .. ": subject_dn " .. why, nil,
                 { argument = "subject_dn" })
  end
  if subject_dn == "" then bad("must not be empty") end
  if not subject_dn:match("^[%w%.]+=") then
    bad("must be a certificate subject in RFC 2253 form, like \"CN=client-a,O=example\" " ..
        "(got \"" .. subject_dn .. "\")")
  end
  -- a separator (an unescaped "," or "+") followed or preceded by blanks
  local unescaped = subject_dn:gsub("\\.", "__")
  if unescaped:find("%s[,+]") or unescaped:find("[,+]%s") or unescaped:find("^%s") or
     unescaped:find("%s$") then
    bad("has blanks around a separator (\"" .. subject_dn .. "\"): the server names a " ..
        "client as RFC 2253 does, without them (\"CN=a,O=b\"; openssl x509 -noout " ..
        "-subject -nameopt RFC2253 prints it so), and an ACL id that differs never matches")
  end
  return acl(perms_from(fname, perms), "x509", subject_dn)
end

return security
