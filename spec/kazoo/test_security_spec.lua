-- kazoo's tests/test_security.py, translated: zklua.security is kazoo.security (make_acl,
-- Permissions, ACL with acl_list and kazoo's repr).  kazoo's `perms & P == P` is
-- security.has_perms(perms, P) (LuaJIT has no bit operators).
local security = require "zklua.security"

local Permissions = security.Permissions

describe("test_security.py", function()
  local function make_one(...)
    return security.make_acl(...)
  end

  it("test_read_acl", function()
    local acl = make_one("digest", ":", { read = true })
    assert.is_true(security.has_perms(acl.perms, Permissions.READ))
  end)

  it("test_all_perms", function()
    local acl = make_one("digest", ":", { read = true, write = true, create = true,
                                          delete = true, admin = true })
    for _, perm in ipairs({ Permissions.READ, Permissions.CREATE, Permissions.WRITE,
                            Permissions.DELETE, Permissions.ADMIN }) do
      assert.is_true(security.has_perms(acl.perms, perm))
    end
  end)

  it("test_perm_listing", function()
    local ACL = security.ACL
    local function has(list, name)
      for _, v in ipairs(list) do if v == name then return true end end
      return false
    end

    local f = ACL(15, "fred")
    assert.is_true(has(f.acl_list, "READ"))
    assert.is_true(has(f.acl_list, "WRITE"))
    assert.is_true(has(f.acl_list, "CREATE"))
    assert.is_true(has(f.acl_list, "DELETE"))

    f = ACL(16, "fred")
    assert.is_true(has(f.acl_list, "ADMIN"))

    f = ACL(31, "george")
    assert.is_true(has(f.acl_list, "ALL"))
  end)

  it("test_perm_repr", function()
    local f = security.ACL(16, "fred")
    assert.is_truthy(tostring(f):find("ACL(perms=16, acl_list=['ADMIN']", 1, true))
  end)
end)
