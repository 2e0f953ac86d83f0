--- zklua.security — ACLs as kazoo builds them.
--
-- An ACL is {perms = n, id = {scheme = "...", id = "..."}} (kazoo's ACL(perms, Id(scheme,
-- id))).  Permissions: READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16, ALL 31.
local core = require "zklua.core"
local errors = require "zklua.errors"

local security = {}

security.Permissions = { READ = 1, WRITE = 2, CREATE = 4, DELETE = 8, ADMIN = 16, ALL = 31 }

local P = security.Permissions

local function acl(perms, scheme, id)
  return { perms = perms, id = { scheme = scheme, id = id } }
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

return security
