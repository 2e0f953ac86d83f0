-- Basic node operations against a real server: create, ensure_path, exists, get,
-- get_children, set, delete, sync, the stat's fields under both names, and chroots.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local errors = zklua.errors
local security = zklua.security

local ROOT = "/crud"

local sorted = helpers.sorted
local raised = helpers.raised

describe("crud", function()
  local server, zk

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function() zk = helpers.client(server.hosts, ROOT) end)

  after_each(function() helpers.drop(zk, ROOT) end)

  describe("create", function()
    it("returns the path and stores the value", function()
      assert.are.equal(ROOT .. "/a", zk:create(ROOT .. "/a", "hello"))
      local data = zk:get(ROOT .. "/a")
      assert.are.equal("hello", data)
    end)

    it("is binary-safe: embedded zero bytes and every byte value survive", function()
      zk:create(ROOT .. "/zero", "a\0b")
      local data, stat = zk:get(ROOT .. "/zero")
      assert.are.equal("a\0b", data)
      assert.are.equal(3, #data)
      assert.are.equal(3, stat.dataLength)

      local bytes = {}
      for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
      local all = table.concat(bytes) .. "\0\0"
      zk:create(ROOT .. "/bytes", all)
      assert.are.equal(all, (zk:get(ROOT .. "/bytes")))
    end)

    it("stores ZooKeeper's null value when the value is nil, which reads back as nil", function()
      zk:create(ROOT .. "/null", nil)
      local data, stat = zk:get(ROOT .. "/null")
      assert.is_nil(data)
      assert.are.equal(0, stat.dataLength)
      zk:create(ROOT .. "/empty", "")
      data, stat = zk:get(ROOT .. "/empty")
      assert.are.equal("", data)
      assert.are.equal(0, stat.dataLength)
    end)

    it("writes an empty value when given none at all, as kazoo's value=b\"\"", function()
      zk:create(ROOT .. "/novalue")
      assert.are.equal("", (zk:get(ROOT .. "/novalue")))
      zk:create_async(ROOT .. "/novalue-async"):get(10)
      assert.are.equal("", (zk:get(ROOT .. "/novalue-async")))
      local t = zk:transaction()
      t:create(ROOT .. "/novalue-t")
      t:create(ROOT .. "/null-t", nil)
      t:commit()
      assert.are.equal("", (zk:get(ROOT .. "/novalue-t")))
      assert.is_nil((zk:get(ROOT .. "/null-t")))
    end)

    it("creates ephemeral nodes owned by the session, gone when it ends", function()
      zk:create(ROOT .. "/eph", "e", { ephemeral = true })
      local stat = zk:exists(ROOT .. "/eph")
      assert.are_not.equal(0, stat.ephemeralOwner)
      local other = zklua.client(server.hosts)
      other:start()
      assert.is_not_nil(other:exists(ROOT .. "/eph"))
      zk:stop()
      assert.is_nil(other:exists(ROOT .. "/eph"))
      other:close()
      zk:start()
    end)

    it("refuses children under an ephemeral node", function()
      zk:create(ROOT .. "/eph", "", { ephemeral = true })
      local err = raised(zk.create, zk, ROOT .. "/eph/child", "")
      assert.is_true(errors.is(err, errors.NoChildrenForEphemeralsError))
    end)

    it("appends a 10-digit, increasing sequence suffix", function()
      local first = zk:create(ROOT .. "/seq-", "1", { sequence = true })
      local second = zk:create(ROOT .. "/seq-", "2", { sequence = true })
      assert.matches("^" .. ROOT .. "/seq%-%d%d%d%d%d%d%d%d%d%d$", first)
      assert.matches("^" .. ROOT .. "/seq%-%d%d%d%d%d%d%d%d%d%d$", second)
      assert.is_true(tonumber(second:sub(-10)) > tonumber(first:sub(-10)))
      assert.are.equal("1", (zk:get(first)))
      assert.are.equal("2", (zk:get(second)))
    end)

    it("accepts a sequential path ending in '/' (the name is the suffix alone)", function()
      zk:create(ROOT .. "/dir", "")
      local made = zk:create(ROOT .. "/dir/", "x", { sequence = true })
      assert.matches("^" .. ROOT .. "/dir/%d%d%d%d%d%d%d%d%d%d$", made)
    end)

    it("creates ephemeral sequential nodes", function()
      local made = zk:create(ROOT .. "/es-", "", { ephemeral = true, sequence = true })
      assert.matches("%d%d%d%d%d%d%d%d%d%d$", made)
      assert.are_not.equal(0, zk:exists(made).ephemeralOwner)
    end)

    it("creates missing parents with makepath", function()
      local path = ROOT .. "/m/n/o"
      assert.are.equal(path, zk:create(path, "deep", { makepath = true }))
      assert.are.equal("deep", (zk:get(path)))
      assert.are.equal("", (zk:get(ROOT .. "/m")))
      assert.are.equal("", (zk:get(ROOT .. "/m/n")))
    end)

    it("makepath works when the parents already exist and with sequence", function()
      zk:create(ROOT .. "/p", "")
      assert.are.equal(ROOT .. "/p/q", zk:create(ROOT .. "/p/q", "", { makepath = true }))
      local made = zk:create(ROOT .. "/r/s/t-", "", { makepath = true, sequence = true })
      assert.matches("^" .. ROOT .. "/r/s/t%-%d%d%d%d%d%d%d%d%d%d$", made)
    end)

    it("returns the path alone without include_data, sync and async, as kazoo", function()
      assert.are.equal(1, select("#", zk:create(ROOT .. "/alone", "abc")))
      assert.are.equal(1, select("#", zk:create_async(ROOT .. "/alone-a", "abc"):get()))
      assert.are.equal(1, select("#", zk:create(ROOT .. "/alone-e", "", { ephemeral = true })))
      -- an outstanding watch sends sync ops through the submitted path: the same result
      zk:exists(ROOT .. "/alone-watched", function() end)
      assert.are.equal(1, select("#", zk:create(ROOT .. "/alone-w", "abc")))
      assert.are.equal(1, select("#", zk:exists(ROOT .. "/alone-missing")))
    end)

    it("returns the path and the stat with include_data", function()
      local path, stat = zk:create(ROOT .. "/inc", "abc", { include_data = true })
      assert.are.equal(ROOT .. "/inc", path)
      assert.is_table(stat)
      assert.are.equal(0, stat.version)
      assert.are.equal(3, stat.dataLength)
      assert.are.equal(zk:exists(ROOT .. "/inc").czxid, stat.czxid)
    end)

    it("returns the created sequential name and stat with include_data and makepath", function()
      local path, stat = zk:create(ROOT .. "/x/y-", "v",
                                   { include_data = true, makepath = true, sequence = true })
      assert.matches("^" .. ROOT .. "/x/y%-%d+$", path)
      assert.are.equal(zk:exists(path).czxid, stat.czxid)
    end)

    it("applies the acl option", function()
      local acl = { security.make_acl("world", "anyone", { read = true, write = true }) }
      zk:create(ROOT .. "/acl", "", { acl = acl })
      local acls = zk:get_acls(ROOT .. "/acl")
      assert.are.equal(1, #acls)
      assert.are.equal(security.Permissions.READ + security.Permissions.WRITE, acls[1].perms)
      assert.are.equal("world", acls[1].id.scheme)
      assert.are.equal("anyone", acls[1].id.id)
      -- no DELETE on the node does not stop its own deletion; no CREATE does stop children
      local err = raised(zk.create, zk, ROOT .. "/acl/child", "")
      assert.is_true(errors.is(err, errors.NoAuthError))
    end)

    it("gives nodes the open ACL by default", function()
      zk:create(ROOT .. "/default", "")
      local acls = zk:get_acls(ROOT .. "/default")
      assert.are.equal(1, #acls)
      assert.are.equal(31, acls[1].perms)
      assert.are.equal("world", acls[1].id.scheme)
      assert.are.equal("anyone", acls[1].id.id)
    end)

    it("raises NodeExistsError with the path when the node exists", function()
      zk:create(ROOT .. "/dup", "first")
      local err = raised(zk.create, zk, ROOT .. "/dup", "second")
      assert.is_true(errors.is(err, errors.NodeExistsError))
      assert.are.equal("NodeExistsError", err.name)
      assert.are.equal(-110, err.code)
      assert.are.equal(ROOT .. "/dup", err.path)
      assert.are.equal("first", (zk:get(ROOT .. "/dup")))
    end)

    it("raises NoNodeError without makepath when the parent is missing", function()
      local err = raised(zk.create, zk, ROOT .. "/missing/child", "")
      assert.is_true(errors.is(err, errors.NoNodeError))
      assert.are.equal(ROOT .. "/missing/child", err.path)
      assert.is_nil(zk:exists(ROOT .. "/missing"))
    end)
  end)

  describe("ensure_path", function()
    it("creates every missing node and is idempotent", function()
      local path = ROOT .. "/e1/e2/e3"
      assert.is_true(zk:ensure_path(path))
      assert.is_not_nil(zk:exists(ROOT .. "/e1"))
      assert.is_not_nil(zk:exists(ROOT .. "/e1/e2"))
      assert.is_not_nil(zk:exists(path))
      local before = zk:exists(path)
      assert.is_true(zk:ensure_path(path))
      assert.are.equal(before.czxid, zk:exists(path).czxid)
    end)

    it("leaves an existing node's data alone", function()
      zk:create(ROOT .. "/keep", "data")
      zk:ensure_path(ROOT .. "/keep")
      assert.are.equal("data", (zk:get(ROOT .. "/keep")))
    end)

    it("accepts the root", function()
      assert.is_true(zk:ensure_path("/"))
    end)
  end)

  describe("exists", function()
    it("returns the stat of an existing node", function()
      zk:create(ROOT .. "/ex", "12345")
      local stat = zk:exists(ROOT .. "/ex")
      assert.is_table(stat)
      assert.are.equal(5, stat.dataLength)
      assert.are.equal(0, stat.version)
    end)

    it("returns nil for a missing node", function()
      assert.is_nil(zk:exists(ROOT .. "/nope"))
      assert.is_nil(zk:exists(ROOT .. "/nope/deeper"))
    end)
  end)

  describe("get", function()
    it("returns the data and the stat", function()
      zk:create(ROOT .. "/g", "value")
      local data, stat = zk:get(ROOT .. "/g")
      assert.are.equal("value", data)
      assert.are.equal(0, stat.version)
      assert.are.equal(5, stat.dataLength)
    end)

    it("raises NoNodeError with the path for a missing node", function()
      local err = raised(zk.get, zk, ROOT .. "/nope")
      assert.is_true(errors.is(err, errors.NoNodeError))
      assert.are.equal(ROOT .. "/nope", err.path)
      assert.are.equal(-101, err.code)
    end)
  end)

  -- A client waiting alone runs sync calls directly in the C core (src/core/ops_now.c) when
  -- nothing is in flight, and through the event queue otherwise: both must give the same.
  describe("synchronous calls, direct and queued", function()
    it("read a value larger than the first read buffer (64 KiB) whole", function()
      local big = string.rep("0123456789abcdef", 40 * 1024) -- 640 KiB
      zk:create(ROOT .. "/big", big)
      local data, stat = zk:get(ROOT .. "/big")
      assert.are.equal(#big, #data)
      assert.are.equal(big, data)
      assert.are.equal(#big, stat.dataLength)
    end)

    it("return created paths whole: longer than the read buffer, right after a read", function()
      local long = ROOT .. "/" .. string.rep("n", 70 * 1024)
      assert.are.equal(long, zk:create(long, "x"))
      local made = zk:create(long .. "-s-", "", { sequence = true })
      assert.are.equal(#long + 3 + 10, #made)
      assert.are.equal(long .. "-s-", made:sub(1, #long + 3))
      zk:create(ROOT .. "/v", string.rep("v", 1000))
      local value = zk:get(ROOT .. "/v") -- the direct read buffer holds it; the create reuses it
      local seq = zk:create(ROOT .. "/after-", "", { sequence = true })
      assert.matches("^" .. ROOT:gsub("%-", "%%-") .. "/after%-%d+$", seq)
      assert.are.equal(string.rep("v", 1000), value)
      assert.are.equal(ROOT .. "/plain", zk:create(ROOT .. "/plain", ""))
    end)

    it("set a watch that fires once the node changes", function()
      zk:create(ROOT .. "/w", "1")
      local events = {}
      zk:get(ROOT .. "/w", function(ev) events[#events + 1] = ev end)
      assert.is_not_nil(zk:exists(ROOT .. "/w", function(ev) events[#events + 1] = ev end))
      zk:set(ROOT .. "/w", "2")
      helpers.eventually(function() return #events == 2 end)
      assert.are.equal("CHANGED", events[1].type)
      assert.are.equal("CHANGED", events[2].type)
    end)

    it("see a watch event before the data that changed (ZooKeeper's ordering promise)", function()
      zk:create(ROOT .. "/ord", "1")
      -- the writer is a bare core session, not a client: zk stays the blocking handler's only
      -- client, whose sync calls may take the direct path
      local writer = core.session(server.hosts, 10000, false)
      writer:start()
      local function run(id)
        local deadline = core.monotonic() + 10
        repeat
          writer:wait(0.05)
          local kind, got, rc = writer:next()
          if kind == "op" and got == id then return rc end
        until core.monotonic() > deadline
        error("the writer's op did not complete")
      end
      for round = 1, 20 do
        local fired = false
        zk:get(ROOT .. "/ord", function() fired = true end)
        assert.are.equal(0, run(writer:set(ROOT .. "/ord", tostring(round + 1), -1)))
        local data = zk:get(ROOT .. "/ord")
        assert.are.equal(tostring(round + 1), data)
        assert.is_true(fired, "round " .. round .. ": the watch ran before get returned")
      end
      writer:stop()
      writer:close()
    end)

    it("resolve an async op submitted before them first", function()
      zk:create(ROOT .. "/o", "1")
      local set = zk:set_async(ROOT .. "/o", "2")
      local data = zk:get(ROOT .. "/o")
      assert.are.equal("2", data)
      assert.is_true(set:ready(), "the earlier set's future is resolved by then")
      assert.are.equal(1, set:get().version)
    end)

    it("read values of any size exactly, around the 64 KiB first read", function()
      for _, size in ipairs({ 0, 1, 65535, 65536, 65537, 300000, 1024 * 1000 }) do
        local value = string.rep("\0ab", math.floor(size / 3) + 1):sub(1, size)
        local path = ROOT .. "/size-" .. size
        zk:create(path, value)
        local fired = false
        local data, stat = zk:get(path, function() fired = true end)
        assert.are.equal(size, #data, "size " .. size)
        assert.is_true(data == value, "size " .. size)
        assert.are.equal(size, stat.dataLength)
        zk:set(path, "changed") -- the watch set by the first read fires, once
        helpers.wait_until(function()
          zk:dispatch(0)
          return fired
        end, 10, "the watch of the read of size " .. size)
      end
    end)

    it("give the same errors, paths and stats either way", function()
      zk:create(ROOT .. "/e", "x")
      local pending = zk:exists_async(ROOT .. "/e") -- in flight: the next calls queue
      local queued = raised(zk.create, zk, ROOT .. "/e", "y")
      local _, queued_stat = zk:get(ROOT .. "/e")
      pending:get()
      local direct = raised(zk.create, zk, ROOT .. "/e", "y")
      local _, direct_stat = zk:get(ROOT .. "/e")
      assert.is_true(errors.is(queued, errors.NodeExistsError))
      assert.is_true(errors.is(direct, errors.NodeExistsError))
      assert.are.equal(ROOT .. "/e", queued.path)
      assert.are.equal(ROOT .. "/e", direct.path)
      assert.are.same(queued_stat, direct_stat)
      local made = zk:create(ROOT .. "/s-", "", { sequence = true, ephemeral = true })
      assert.matches("^" .. ROOT .. "/s%-%d%d%d%d%d%d%d%d%d%d$", made)
    end)
  end)

  describe("get_children", function()
    it("returns the names of the children as an array", function()
      zk:create(ROOT .. "/kids", "")
      for _, name in ipairs({ "c", "a", "b" }) do zk:create(ROOT .. "/kids/" .. name, "") end
      local children, extra = zk:get_children(ROOT .. "/kids")
      assert.are.same({ "a", "b", "c" }, sorted(children))
      assert.are.equal(3, #children)
      assert.is_nil(extra)
    end)

    it("returns an empty array for a leaf", function()
      zk:create(ROOT .. "/leaf", "")
      assert.are.same({}, zk:get_children(ROOT .. "/leaf"))
    end)

    it("returns the parent's stat too with include_data", function()
      zk:create(ROOT .. "/kids", "")
      zk:create(ROOT .. "/kids/one", "")
      zk:create(ROOT .. "/kids/two", "")
      local children, stat = zk:get_children(ROOT .. "/kids", nil, true)
      assert.are.same({ "one", "two" }, sorted(children))
      assert.is_table(stat)
      assert.are.equal(2, stat.numChildren)
      assert.are.equal(2, stat.cversion)
    end)

    it("raises NoNodeError for a missing node", function()
      local err = raised(zk.get_children, zk, ROOT .. "/nope")
      assert.is_true(errors.is(err, errors.NoNodeError))
      assert.are.equal(ROOT .. "/nope", err.path)
    end)
  end)

  describe("set", function()
    it("replaces the data and returns the stat with version + 1", function()
      zk:create(ROOT .. "/s", "one")
      local stat = zk:set(ROOT .. "/s", "two")
      assert.are.equal(1, stat.version)
      assert.are.equal(3, stat.dataLength)
      local data, read = zk:get(ROOT .. "/s")
      assert.are.equal("two", data)
      assert.are.equal(1, read.version)
      assert.are.equal(read.mzxid, stat.mzxid)
      assert.are.equal(2, zk:set(ROOT .. "/s", "three", 1).version)
    end)

    it("is binary-safe and writes nil as ZooKeeper's null value", function()
      zk:create(ROOT .. "/s", "x")
      zk:set(ROOT .. "/s", "\0\1\0")
      assert.are.equal("\0\1\0", (zk:get(ROOT .. "/s")))
      zk:set(ROOT .. "/s", nil)
      assert.is_nil((zk:get(ROOT .. "/s")))
      zk:set(ROOT .. "/s", "")
      assert.are.equal("", (zk:get(ROOT .. "/s")))
    end)

    it("raises BadVersionError on a version mismatch and changes nothing", function()
      zk:create(ROOT .. "/s", "one")
      local err = raised(zk.set, zk, ROOT .. "/s", "two", 5)
      assert.is_true(errors.is(err, errors.BadVersionError))
      assert.are.equal(ROOT .. "/s", err.path)
      local data, stat = zk:get(ROOT .. "/s")
      assert.are.equal("one", data)
      assert.are.equal(0, stat.version)
    end)

    it("raises NoNodeError for a missing node", function()
      local err = raised(zk.set, zk, ROOT .. "/nope", "x")
      assert.is_true(errors.is(err, errors.NoNodeError))
    end)
  end)

  describe("delete", function()
    it("deletes a node and returns true", function()
      zk:create(ROOT .. "/d", "")
      assert.is_true(zk:delete(ROOT .. "/d"))
      assert.is_nil(zk:exists(ROOT .. "/d"))
    end)

    it("checks the version", function()
      zk:create(ROOT .. "/d", "")
      zk:set(ROOT .. "/d", "v1")
      local err = raised(zk.delete, zk, ROOT .. "/d", 0)
      assert.is_true(errors.is(err, errors.BadVersionError))
      assert.is_not_nil(zk:exists(ROOT .. "/d"))
      assert.is_true(zk:delete(ROOT .. "/d", 1))
      assert.is_nil(zk:exists(ROOT .. "/d"))
    end)

    it("raises NotEmptyError for a node with children", function()
      zk:create(ROOT .. "/d/child", "", { makepath = true })
      local err = raised(zk.delete, zk, ROOT .. "/d")
      assert.is_true(errors.is(err, errors.NotEmptyError))
      assert.are.equal(ROOT .. "/d", err.path)
      assert.is_not_nil(zk:exists(ROOT .. "/d/child"))
    end)

    it("raises NoNodeError for a missing node", function()
      local err = raised(zk.delete, zk, ROOT .. "/nope")
      assert.is_true(errors.is(err, errors.NoNodeError))
    end)

    it("deletes a whole subtree with recursive", function()
      zk:create(ROOT .. "/t/a/1", "", { makepath = true })
      zk:create(ROOT .. "/t/a/2", "", { makepath = true })
      zk:create(ROOT .. "/t/b", "")
      zk:create(ROOT .. "/t/b/x-", "", { sequence = true })
      zk:create(ROOT .. "/t-sibling", "")
      assert.is_true(zk:delete(ROOT .. "/t", nil, true))
      assert.is_nil(zk:exists(ROOT .. "/t"))
      assert.is_not_nil(zk:exists(ROOT .. "/t-sibling"))
    end)

    it("recursive delete of a missing node is not an error", function()
      assert.is_true(zk:delete(ROOT .. "/nope", nil, true))
    end)
  end)

  describe("sync", function()
    it("returns the path", function()
      zk:create(ROOT .. "/sy", "")
      assert.are.equal(ROOT .. "/sy", zk:sync(ROOT .. "/sy"))
    end)
  end)

  describe("stat", function()
    it("has ZooKeeper's field names with consistent values", function()
      zk:create(ROOT .. "/st", "")
      local _, before = zk:get(ROOT .. "/st")
      zk:set(ROOT .. "/st", "1234")
      zk:create(ROOT .. "/st/child", "")
      local _, stat = zk:get(ROOT .. "/st")
      local child = zk:exists(ROOT .. "/st/child")
      for _, name in ipairs({ "czxid", "mzxid", "pzxid", "ctime", "mtime", "version",
                              "cversion", "aversion", "ephemeralOwner", "dataLength",
                              "numChildren" }) do
        assert.is_true(helpers.is_integer(stat[name]), name .. " should be an integer")
      end
      assert.are.equal(before.czxid, stat.czxid)
      assert.is_true(stat.mzxid > stat.czxid)
      assert.are.equal(child.czxid, stat.pzxid)
      assert.are.equal(before.ctime, stat.ctime)
      assert.is_true(stat.mtime >= stat.ctime)
      assert.are.equal(1, stat.version)
      assert.are.equal(1, stat.cversion)
      assert.are.equal(0, stat.aversion)
      assert.are.equal(0, stat.ephemeralOwner)
      assert.are.equal(4, stat.dataLength)
      assert.are.equal(1, stat.numChildren)
    end)

    it("has kazoo's field names", function()
      local start = os.time()
      zk:create(ROOT .. "/st", "abc")
      zk:set(ROOT .. "/st", "abcdef")
      zk:create(ROOT .. "/st/c1", "")
      zk:create(ROOT .. "/st/c2", "")
      local _, stat = zk:get(ROOT .. "/st")
      assert.are.equal(stat.czxid, stat.creation_transaction_id)
      assert.are.equal(stat.mzxid, stat.last_modified_transaction_id)
      assert.are.equal(stat.ctime / 1000, stat.created)
      assert.are.equal(stat.mtime / 1000, stat.last_modified)
      assert.is_true(math.abs(stat.created - start) < 60, "created is in seconds")
      assert.is_true(stat.last_modified >= stat.created)
      assert.are.equal(stat.aversion, stat.acl_version)
      assert.are.equal(2, stat.children_count)
      assert.are.equal(6, stat.data_length)
      assert.is_nil(stat.owner_session_id)
    end)

    it("is kazoo's ZnodeStat: its values in kazoo's order, readable by position", function()
      zk:create(ROOT .. "/st", "abc")
      zk:create(ROOT .. "/st/c", "")
      local _, stat = zk:get(ROOT .. "/st")
      -- kazoo.protocol.states.ZnodeStat._fields
      local order = { "czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
                      "ephemeralOwner", "dataLength", "numChildren", "pzxid" }
      for i, name in ipairs(order) do assert.are.equal(stat[name], stat[i], name) end
      assert.is_nil(stat[12])
      assert.are.equal(3, stat[9])
      assert.are.equal(1, stat[10])
      assert.are.equal("ZnodeStat", getmetatable(stat).__name)
      -- printed as kazoo prints it
      assert.matches("^ZnodeStat%(czxid=%d+, mzxid=%d+, ctime=%d+, mtime=%d+, version=0, " ..
                     "cversion=1, aversion=0, ephemeralOwner=0, dataLength=3, " ..
                     "numChildren=1, pzxid=%d+%)$", tostring(stat))
    end)

    it("asdict() gives every name as a plain table; pairs walks names under Lua 5.4", function()
      zk:create(ROOT .. "/st", "abcd", { ephemeral = true })
      local stat = zk:exists(ROOT .. "/st")
      local dict = stat:asdict()
      assert.is_nil(getmetatable(dict))
      local names = { "czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
                      "ephemeralOwner", "dataLength", "numChildren", "pzxid",
                      "creation_transaction_id", "last_modified_transaction_id", "created",
                      "last_modified", "acl_version", "children_version", "data_length",
                      "children_count", "owner_session_id" }
      local count = 0
      for _ in pairs(dict) do count = count + 1 end
      assert.are.equal(#names, count)
      for _, name in ipairs(names) do assert.are.equal(stat[name], dict[name], name) end
      assert.are.equal(4, dict.data_length)
      assert.are.equal(zk:client_id(), dict.owner_session_id)
      local walked = {}
      for k, v in pairs(stat) do walked[k] = v end
      if helpers.LUAJIT then
        -- LuaJIT has no __pairs: pairs sees the table itself, its positions
        for i = 1, 11 do assert.are.equal(stat[i], walked[i]) end
      else
        assert.are.same(dict, walked)
      end
    end)

    it("owner_session_id is the owning session's id for an ephemeral node", function()
      zk:create(ROOT .. "/eph", "", { ephemeral = true })
      local stat = zk:exists(ROOT .. "/eph")
      local id = zk:client_id()
      -- one value, exact (under LuaJIT an int64 cdata, as it exceeds 2^53)
      assert.is_true(id == stat.owner_session_id)
      assert.is_true(id == stat.ephemeralOwner)
      assert.is_nil(zk:exists(ROOT).owner_session_id) -- kazoo's None: not ephemeral
    end)
  end)

  describe("with a chroot", function()
    local rooted

    before_each(function()
      zk:ensure_path("/chroot")
      rooted = zklua.client(server.hosts .. "/chroot")
      rooted:start()
    end)

    after_each(function()
      rooted:close()
      zk:delete("/chroot", nil, true)
    end)

    it("sees paths relative to the chroot", function()
      assert.are.equal("/x", rooted:create("/x", "in chroot"))
      assert.are.equal("in chroot", (zk:get("/chroot/x")))
      assert.are.equal("in chroot", (rooted:get("/x")))
      assert.is_nil(rooted:exists("/chroot"))
      zk:create("/chroot/y", "")
      assert.are.same({ "x", "y" }, sorted(rooted:get_children("/")))
      assert.are.equal("/x", rooted:sync("/x"))
    end)

    it("returns relative names for sequential and makepath creates", function()
      local made = rooted:create("/a/b/s-", "", { makepath = true, sequence = true })
      assert.matches("^/a/b/s%-%d%d%d%d%d%d%d%d%d%d$", made)
      assert.is_not_nil(zk:exists("/chroot" .. made))
      assert.is_true(rooted:ensure_path("/p/q"))
      assert.is_not_nil(zk:exists("/chroot/p/q"))
    end)

    it("reports relative paths in errors and watch events", function()
      local err = raised(rooted.get, rooted, "/missing")
      assert.are.equal("/missing", err.path)
      rooted:create("/w", "")
      local event
      rooted:get("/w", function(ev) event = ev end)
      zk:set("/chroot/w", "changed")
      testing.wait_for(function() return event ~= nil end, 5, "the watch")
      assert.are.equal("/w", event.path)
      assert.are.equal("CHANGED", event.type)
    end)

    it("recursive delete of the chroot's root deletes a user node named 'zookeeper' too", function()
      -- only the real /zookeeper is ZooKeeper's own; inside a chroot it is a user node
      rooted:create("/zookeeper/x", "", { makepath = true })
      rooted:create("/other", "")
      assert.is_true(rooted:delete("/", nil, true))
      assert.are.same({}, rooted:get_children("/"))
      assert.is_not_nil(zk:exists("/chroot"))
    end)

    it("recursive delete stays inside the chroot", function()
      rooted:create("/d/e", "", { makepath = true })
      assert.is_true(rooted:delete("/d", nil, true))
      assert.is_nil(zk:exists("/chroot/d"))
      assert.is_not_nil(zk:exists("/chroot"))
    end)
  end)
end)
