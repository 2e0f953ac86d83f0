-- Paths of client calls read as kazoo reads them (check.kazoo_path): a relative path is
-- absolute ("a/b" is "/a/b"), repeated and trailing slashes go ("/a//b/" is "/a/b"), "" is
-- "/", and a sequential create keeps its trailing "/" (the node is named by its sequence
-- number); "." and ".." components are still a BadArgumentsError before anything is sent.
-- Under a chroot the same forms name nodes inside it.  Recipes read their paths the same way.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/path_forms"

describe("kazoo's path forms", function()
  local server, zk

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)
  before_each(function() zk = helpers.client(server.hosts, ROOT) end)
  after_each(function() helpers.drop(zk, ROOT) end)

  it("reads relative paths, repeated and trailing slashes in every client call", function()
    local rel = ROOT:sub(2)
    assert.are.equal(ROOT .. "/a", zk:create(rel .. "/a", "1"))
    assert.are.equal("1", (zk:get(ROOT .. "//a/")))
    assert.are.equal("1", (zk:get_async(rel .. "/a"):get()))
    assert.is_not_nil(zk:exists(rel .. "/a/"))
    assert.is_not_nil(zk:exists_async(rel .. "//a"):get())
    assert.are.same({ "a" }, zk:get_children(rel .. "/"))
    assert.are.same({ "a" }, zk:get_children_async(ROOT .. "/"):get())
    zk:set(rel .. "/a/", "2")
    zk:set_async(rel .. "/a", "3"):get()
    assert.are.equal("3", (zk:get(ROOT .. "/a")))
    assert.are.equal(1, #zk:get_acls(rel .. "/a/"))
    zk:set_acls(rel .. "/a/", zklua.security.OPEN_ACL_UNSAFE)
    assert.are.equal(ROOT .. "/a", zk:sync(rel .. "/a/"))
    assert.is_true(zk:ensure_path(rel .. "/b/c/"))
    assert.is_not_nil(zk:exists(ROOT .. "/b/c"))
    assert.is_true(zk:delete(rel .. "/b", nil, true))
    assert.is_true(zk:delete(rel .. "//a/"))
    assert.are.same({}, zk:get_children(ROOT))
    assert.is_not_nil(zk:exists(""))          -- "" is "/"
    assert.is_true(zk:ensure_path(""))
  end)

  it("reads them in recipe paths too", function()
    local rel = ROOT:sub(2)
    local lock = zk:Lock(rel .. "//lock/", "me")
    assert.are.equal(ROOT .. "/lock", lock.path)
    assert.is_true(lock:acquire(true, 10))
    assert.are.same({ "me" }, lock:contenders())
    lock:release()
    local counter = zk:Counter(rel .. "/counter/")
    counter:add(2)
    assert.are.equal("2", (zk:get(ROOT .. "/counter")))
    local party = zk:Party(rel .. "/party", "p1")
    party:join()
    assert.are.same({ "p1" }, party:members())
    party:leave()
    assert.is_not_nil(zk:exists(ROOT .. "/party"))
    local err = select(2, pcall(zk.Lock, zk, ROOT .. "/../lock"))
    assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
  end)

  it("keeps the trailing slash of a sequential create", function()
    local created = zk:create(ROOT:sub(2) .. "/", "", { sequence = true })
    assert.matches("^" .. ROOT .. "/%d+$", created)
    assert.matches("^" .. ROOT .. "/q%d+$", zk:create(ROOT .. "//q", "", { sequence = true }))
  end)

  it("reads them in transactions and watchers", function()
    local t = zk:transaction()
    t:create(ROOT:sub(2) .. "/t/", "v")
    t:check(ROOT .. "//t", 0)
    t:set_data(ROOT:sub(2) .. "/t", "w")
    assert.are.same({ ROOT .. "/t", true, true }, (function()
      local results = t:commit()
      return { results[1], results[2] ~= nil, results[3] ~= nil }
    end)())
    assert.are.equal("w", (zk:get(ROOT .. "/t")))
    local seen = {}
    local dw = zk:DataWatch(ROOT:sub(2) .. "/t/", function(data) seen[#seen + 1] = data end)
    testing.wait_for(function() return #seen == 1 end, 10, "the DataWatch's first call")
    assert.are.equal("w", seen[1])
    assert.are.equal(ROOT .. "/t", dw.path)
    local kids
    zk:ChildrenWatch(ROOT .. "//", function(children) kids = children end)
    testing.wait_for(function() return kids ~= nil end, 10, "the ChildrenWatch's first call")
    assert.are.same({ "t" }, kids)
  end)

  it("still refuses '.' and '..' components before anything is sent", function()
    for _, bad in ipairs({ ROOT .. "/./x", ROOT .. "/../x", "./x", "x/.." }) do
      local err = helpers.raises(errors.BadArgumentsError, zk.create, zk, bad, "")
      assert.are.equal("path", err.argument)
      helpers.raises(errors.BadArgumentsError, zk.get, zk, bad)
    end
    assert.are.same({}, zk:get_children(ROOT))
  end)

  it("names nodes inside the chroot under a chroot", function()
    local chrooted = zklua.client(server.hosts .. ROOT)
    chrooted:start()
    finally(function() chrooted:close() end)
    assert.are.equal("/x", chrooted:create("x/", "v"))
    assert.are.equal("v", (zk:get(ROOT .. "/x")))
    assert.is_not_nil(chrooted:exists(""))
  end)
end)
