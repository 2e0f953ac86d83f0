-- Bad arguments are refused with a BadArgumentsError naming the argument, before anything
-- is sent; ops on a client that is not running raise ConnectionClosedError.  Nothing here
-- may crash the process.
local zklua = require "zklua"
local testing = require "zklua.testing"
local security = zklua.security
local errors = zklua.errors
local Future = require "zklua.future"
local helpers = require "support.helpers"

local ROOT = "/bad_input"

local OPEN = security.OPEN_ACL_UNSAFE

-- Asserts fn(...) raises a BadArgumentsError whose `argument` is argument.
local function rejected_argument(argument, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected a BadArgumentsError for " .. argument .. ", got no error")
  assert(errors.is(err, errors.BadArgumentsError),
         "expected a BadArgumentsError for " .. argument .. ", got " .. tostring(err))
  assert.are.equal(argument, err.argument)
  return err
end

-- The same, and the message names the argument too.
local function rejected(argument, fn, ...)
  local err = rejected_argument(argument, fn, ...)
  assert(tostring(err.message):find(argument, 1, true),
         "the message does not name '" .. argument .. "': " .. tostring(err.message))
  return err
end

-- (relative paths, "" and repeated or trailing slashes are read as kazoo reads them:
-- spec/path_forms_spec.lua)
local BAD_PATHS = {
  { "'.' component", ROOT .. "/./x" },
  { "'..' component", ROOT .. "/../x" },
  { "zero byte", ROOT .. "/a\0b" },
  { "invalid UTF-8", ROOT .. "/\xff\xfe" },
  { "overlong UTF-8", ROOT .. "/\xc0\xaf" },
  { "truncated UTF-8", ROOT .. "/\xe2\x82" },
  { "control character", ROOT .. "/a\1b" },
  { "longer than one request can carry", ROOT .. "/" .. string.rep("p", 1024 * 1024) },
  { "a number", 42 },
  { "a table", {} },
  { "nil", nil },
  { "a boolean", true },
}

-- Every path-taking entry point, called with path p.
local function path_calls(zk)
  return {
    create = function(p) return zk:create(p, "v") end,
    create_makepath = function(p) return zk:create(p, "v", { makepath = true }) end,
    create_async = function(p) return zk:create_async(p, "v") end,
    ensure_path = function(p) return zk:ensure_path(p) end,
    exists = function(p) return zk:exists(p) end,
    get = function(p) return zk:get(p) end,
    get_async = function(p) return zk:get_async(p) end,
    get_children = function(p) return zk:get_children(p) end,
    set = function(p) return zk:set(p, "v") end,
    delete = function(p) return zk:delete(p) end,
    delete_recursive = function(p) return zk:delete(p, nil, true) end,
    get_acls = function(p) return zk:get_acls(p) end,
    set_acls = function(p) return zk:set_acls(p, OPEN) end,
    sync = function(p) return zk:sync(p) end,
    DataWatch = function(p) return zk:DataWatch(p, function() end) end,
    ChildrenWatch = function(p) return zk:ChildrenWatch(p, function() end) end,
  }
end

describe("bad input", function()
  local server, zk, before_root

  local function snapshot(path)
    local children = zk:get_children(path)
    table.sort(children)
    return table.concat(children, "\n")
  end

  -- nothing was created anywhere we could have written
  local function assert_nothing_created()
    assert.are.equal(before_root, snapshot("/"))
    assert.are.equal("", snapshot(ROOT))
  end

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    zk = helpers.client(server.hosts, ROOT)
    before_root = snapshot("/")
  end)

  after_each(function() helpers.drop(zk, ROOT) end)

  describe("paths", function()
    for _, case in ipairs(BAD_PATHS) do
      local what, bad = case[1], case[2]
      it("refuses a path that is " .. what .. " in every op", function()
        for name, call in pairs(path_calls(zk)) do
          local ok, err = pcall(call, bad)
          assert(not ok, name .. " accepted a path that is " .. what)
          assert(errors.is(err, errors.BadArgumentsError),
                 name .. ": expected BadArgumentsError, got " .. tostring(err))
          assert.are.equal("path", err.argument, name)
        end
        assert_nothing_created()
      end)

      it("names the path argument in the message for a path that is " .. what, function()
        rejected("path", zk.create, zk, bad, "v")
        rejected("path", zk.get, zk, bad)
      end)
    end

    it("refuses bad paths in transactions when the op is added", function()
      local t = zk:transaction()
      for _, case in ipairs(BAD_PATHS) do
        rejected_argument("path", t.create, t, case[2], "")
        rejected_argument("path", t.check, t, case[2], 0)
      end
      assert.are.same({}, t:commit())
      assert_nothing_created()
    end)

    it("names the same argument first, sync or async: path, then value, then acl", function()
      for _, create in ipairs({ zk.create, zk.create_async }) do
        rejected("path", create, zk, "/bad/../x", "v", { acl = { "x" } })
        rejected("value", create, zk, ROOT .. "/v", 42, { acl = { "x" } })
        rejected("acl", create, zk, ROOT .. "/v", "v", { acl = { "x" } })
      end
      assert_nothing_created()
    end)

    it("keeps a trailing slash only for sequential creates (as kazoo)", function()
      assert.are.equal(ROOT .. "/s", zk:create(ROOT .. "/s/", ""))
      assert.matches("^" .. ROOT .. "/s/%d+$", zk:create(ROOT .. "/s/", "", { sequence = true }))
    end)

    it("accepts valid unicode names from the Basic Multilingual Plane", function()
      local path = ROOT .. "/caf\xc3\xa9-\xe2\x82\xac-\xe4\xb8\xad"
      assert.are.equal(path, zk:create(path, ""))
      assert.is_not_nil(zk:exists(path))
    end)

    it("refuses, before sending, characters beyond U+FFFF that the server refuses", function()
      -- the server validates UTF-16 code units: a surrogate pair is a forbidden character
      local path = ROOT .. "/smile-\xf0\x9f\x98\x80"
      rejected_argument("path", zk.create, zk, path, "")
      rejected_argument("path", zk.exists, zk, path)
      assert_nothing_created()
    end)
  end)

  describe("values", function()
    for _, case in ipairs({ { "a number", 42 }, { "a table", {} }, { "a boolean", true },
                            { "false", false }, { "a function", print } }) do
      it("refuses a value that is " .. case[1], function()
        rejected("value", zk.create, zk, ROOT .. "/v", case[2])
        rejected("value", zk.create_async, zk, ROOT .. "/v", case[2])
        zk:create(ROOT .. "/existing", "keep")
        rejected("value", zk.set, zk, ROOT .. "/existing", case[2])
        assert.are.equal("keep", (zk:get(ROOT .. "/existing")))
        zk:delete(ROOT .. "/existing")
        assert_nothing_created()
      end)
    end

    it("refuses a value of 1 MiB or more", function()
      local huge = string.rep("x", 1024 * 1024)
      rejected("value", zk.create, zk, ROOT .. "/huge", huge)
      rejected("value", zk.create, zk, ROOT .. "/huge", huge .. "x")
      zk:create(ROOT .. "/existing", "keep")
      rejected("value", zk.set, zk, ROOT .. "/existing", huge)
      assert.are.equal("keep", (zk:get(ROOT .. "/existing")))
      zk:delete(ROOT .. "/existing")
      assert_nothing_created()
      assert.are.equal("CONNECTED", zk.state)
    end)

    it("accepts a value just under the limit and reads it back whole", function()
      local big = string.rep("0123456789", 100 * 1000)
      assert.are.equal(1000 * 1000, #big)
      zk:create(ROOT .. "/big", big)
      local data, stat = zk:get(ROOT .. "/big")
      assert.are.equal(#big, #data)
      assert.are.equal(big, data)
      assert.are.equal(#big, stat.dataLength)
      local other = big:reverse()
      zk:set(ROOT .. "/big", other)
      assert.are.equal(other, (zk:get(ROOT .. "/big")))
    end)
  end)

  -- A server closes the connection on a request over its 1 MiB limit, and a recipe that
  -- retried one would close every new connection after it: the session flapped for ever,
  -- never LOST (the fuzz found it with a 1 MiB path under a watch).
  describe("requests over the server's limit", function()
    local core = require "zklua.core"

    -- the connection carried on: same session, no state change, the next op works
    local function assert_connection_kept(session_id, states)
      assert.are.same({}, states)
      assert.are.equal("CONNECTED", zk.state)
      assert.are.equal(session_id, (zk:client_id()))
      assert.are.same({}, zk:get_children(ROOT))
    end

    it("fail at once when what the checks let through is over it (a value and a long ACL)",
       function()
      local states = {}
      zk:add_listener(function(state) states[#states + 1] = state end)
      local session_id = zk:client_id()
      local path = ROOT .. "/full"
      -- the value is within the value check's limit; the ACL (not in that check) takes the
      -- request over the server's
      local value = string.rep("v", core.max_packet - #path - 128)
      local acl = {}
      for i = 1, 200 do
        acl[i] = security.make_digest_acl("user" .. i, "password" .. i, { all = true })
      end
      local ok, err = pcall(zk.create, zk, path, value, { acl = acl })
      assert.is_false(ok)
      assert(errors.is(err, errors.BadArgumentsError), tostring(err))
      assert(#tostring(err) < 400, "the message is not a dump of the request")
      assert.is_nil(zk:exists(path))
      assert_connection_kept(session_id, states)
    end)

    it("refuse an auth that every new connection would send again", function()
      local states = {}
      zk:add_listener(function(state) states[#states + 1] = state end)
      local session_id = zk:client_id()
      rejected("credential", zk.add_auth, zk, "digest", string.rep("u", 1024 * 1024))
      assert.are.same({}, zk.auth_data)
      assert_connection_kept(session_id, states)
    end)
  end)

  describe("versions", function()
    for _, case in ipairs({ { "a fraction", 1.5 }, { "below -1", -2 }, { "a string", "1" },
                            { "a table", {} }, { "too large", 2 ^ 31 }, { "NaN", 0 / 0 } }) do
      it("refuses a version that is " .. case[1], function()
        zk:create(ROOT .. "/n", "keep")
        rejected("version", zk.set, zk, ROOT .. "/n", "new", case[2])
        rejected("version", zk.delete, zk, ROOT .. "/n", case[2])
        rejected("version", zk.set_acls, zk, ROOT .. "/n", OPEN, case[2])
        assert.are.equal("keep", (zk:get(ROOT .. "/n")))
      end)
    end

    it("refuses a version with a recursive delete", function()
      zk:create(ROOT .. "/n", "")
      rejected("version", zk.delete, zk, ROOT .. "/n", 0, true)
      assert.is_not_nil(zk:exists(ROOT .. "/n"))
    end)
  end)

  describe("watches and flags", function()
    for _, case in ipairs({ { "a string", "fn" }, { "a table", {} }, { "true", true },
                            { "a number", 1 } }) do
      it("refuses a watch that is " .. case[1], function()
        zk:create(ROOT .. "/w", "")
        rejected("watch", zk.get, zk, ROOT .. "/w", case[2])
        rejected("watch", zk.exists, zk, ROOT .. "/w", case[2])
        rejected("watch", zk.get_children, zk, ROOT .. "/w", case[2])
        rejected("watch", zk.get_async, zk, ROOT .. "/w", case[2])
      end)
    end

    it("refuses non-boolean flags", function()
      zk:create(ROOT .. "/f", "")
      rejected("include_data", zk.get_children, zk, ROOT .. "/f", nil, "yes")
      rejected("recursive", zk.delete, zk, ROOT .. "/f", nil, 1)
      assert.is_not_nil(zk:exists(ROOT .. "/f"))
    end)

    it("refuses a DataWatch or ChildrenWatch function that is not a function", function()
      zk:create(ROOT .. "/f", "")
      rejected("func", zk.DataWatch, zk, ROOT .. "/f", "fn")
      rejected("func", zk.ChildrenWatch, zk, ROOT .. "/f", {})
      rejected("func", zk:DataWatch(ROOT .. "/f"), 42)
    end)
  end)

  describe("options", function()
    it("refuses unknown create options, naming the key", function()
      rejected("makepaths", zk.create, zk, ROOT .. "/o", "", { makepaths = true })
      rejected("Ephemeral", zk.create, zk, ROOT .. "/o", "", { Ephemeral = true })
      assert_nothing_created()
    end)

    it("refuses create options of the wrong type", function()
      rejected("ephemeral", zk.create, zk, ROOT .. "/o", "", { ephemeral = "yes" })
      rejected("sequence", zk.create, zk, ROOT .. "/o", "", { sequence = 1 })
      rejected("makepath", zk.create, zk, ROOT .. "/o/p", "", { makepath = "true" })
      rejected("opts", zk.create, zk, ROOT .. "/o", "", "ephemeral")
      assert_nothing_created()
    end)

    it("refuses unknown and mistyped client options, naming them", function()
      rejected("timout", zklua.client, { hosts = server.hosts, timout = 5 })
      rejected("timeout", zklua.client, { hosts = server.hosts, timeout = "10" })
      rejected("read_only", zklua.client, { hosts = server.hosts, read_only = "no" })
      rejected("hosts", zklua.client, { hosts = 42 })
      rejected("hosts", zklua.client, { hosts = "" })
      rejected("auth_data", zklua.client, { hosts = server.hosts, auth_data = { "digest" } })
      rejected("auth_data", zklua.client, { hosts = server.hosts,
                                            auth_data = { { "digest", 42 } } })
      rejected("logger", zklua.client, { hosts = server.hosts, logger = "loud" })
      rejected("default_acl", zklua.client, { hosts = server.hosts, default_acl = { "x" } })
      rejected("options", zklua.client, 42)
    end)

    it("refuses a bad chroot in the hosts string (kazoo normalises \"/a//b/\" to \"/a/b\")", function()
      rejected_argument("hosts (chroot)", zklua.client, server.hosts .. "/a/../b")
      rejected_argument("hosts (chroot)", zklua.client, server.hosts .. "/./a")
      rejected_argument("hosts (chroot)", zklua.client, server.hosts .. "/a\0b")
      assert.are.equal("/a/b", zklua.client(server.hosts .. "/a//b/").chroot)
    end)
  end)

  describe("ACLs", function()
    local BAD_ACLS = {
      { "a string", "world:anyone" },
      { "a single ACL, not a list", OPEN[1] },
      { "a list of lists", { OPEN } },
      { "an entry without perms", { { id = { scheme = "world", id = "anyone" } } } },
      { "an entry with perms 32", { { perms = 32, id = { scheme = "world", id = "anyone" } } } },
      { "an entry with negative perms", { { perms = -1, id = { scheme = "world", id = "anyone" } } } },
      { "an entry with fractional perms", { { perms = 1.5, id = { scheme = "world", id = "anyone" } } } },
      { "an entry with string perms", { { perms = "all", id = { scheme = "world", id = "anyone" } } } },
      { "an entry without an id", { { perms = 31 } } },
      { "an entry without a scheme", { { perms = 31, id = { id = "anyone" } } } },
      { "an entry with a numeric id", { { perms = 31, id = { scheme = "world", id = 1 } } } },
      { "a non-table entry", { 31 } },
    }

    for _, case in ipairs(BAD_ACLS) do
      it("refuses an acl that is " .. case[1], function()
        rejected("acl", zk.create, zk, ROOT .. "/a", "", { acl = case[2] })
        rejected("acl", zk.create, zk, ROOT .. "/a/b", "", { acl = case[2], makepath = true })
        rejected("acl", zk.ensure_path, zk, ROOT .. "/a/b", case[2])
        local t = zk:transaction()
        rejected("acl", t.create, t, ROOT .. "/a", "", { acl = case[2] })
        zk:create(ROOT .. "/n", "")
        rejected("acls", zk.set_acls, zk, ROOT .. "/n", case[2])
        assert.are.same(OPEN, (zk:get_acls(ROOT .. "/n")))
        zk:delete(ROOT .. "/n")
        assert_nothing_created()
      end)
    end

    it("refuses bad arguments to security's ACL builders", function()
      rejected("scheme", security.make_acl, 1, "anyone", { read = true })
      rejected("credential", security.make_acl, "world", nil, { read = true })
      rejected("perms", security.make_acl, "world", "anyone", "rw")
      rejected_argument("perms", security.make_acl, "world", "anyone", { reed = true })
      rejected("username", security.make_digest_acl, nil, "pw", { read = true })
      rejected("password", security.make_digest_acl_credential, "user", 42)
    end)
  end)

  describe("timeouts", function()
    it("refuses a negative or non-numeric start timeout", function()
      local client = zklua.client(server.hosts)
      rejected("timeout", client.start, client, -1)
      rejected("timeout", client.start, client, "5")
      rejected("timeout", client.start, client, 0 / 0)
      client:close()
    end)

    it("refuses a client session timeout that is not positive", function()
      rejected("timeout", zklua.client, { hosts = server.hosts, timeout = -1 })
      rejected("timeout", zklua.client, { hosts = server.hosts, timeout = 0 })
    end)

    it("refuses a NaN or infinite client session timeout", function()
      rejected("timeout", zklua.client, { hosts = server.hosts, timeout = 0 / 0 })
      rejected("timeout", zklua.client, { hosts = server.hosts, timeout = math.huge })
    end)

    it("refuses a non-numeric timeout to a future's get and wait", function()
      local f = Future.new(zk.handler)
      rejected("timeout", f.get, f, "soon")
      rejected("timeout", f.wait, f, {})
    end)
  end)

  describe("a client that is not running", function()
    -- Every op: raises ConnectionClosedError (or, for _async, a future that raises it).
    local function ops(client)
      return {
        create = function() return client:create(ROOT .. "/c", "") end,
        create_makepath = function() return client:create(ROOT .. "/c/d", "", { makepath = true }) end,
        create_async = function() return client:create_async(ROOT .. "/c", "") end,
        ensure_path = function() return client:ensure_path(ROOT .. "/c") end,
        ensure_path_async = function() return client:ensure_path_async(ROOT .. "/c") end,
        exists = function() return client:exists(ROOT) end,
        exists_async = function() return client:exists_async(ROOT) end,
        get = function() return client:get(ROOT) end,
        get_async = function() return client:get_async(ROOT) end,
        get_children = function() return client:get_children(ROOT) end,
        get_children_async = function() return client:get_children_async(ROOT) end,
        set = function() return client:set(ROOT, "x") end,
        set_async = function() return client:set_async(ROOT, "x") end,
        delete = function() return client:delete(ROOT) end,
        delete_async = function() return client:delete_async(ROOT) end,
        delete_recursive = function() return client:delete(ROOT, nil, true) end,
        get_acls = function() return client:get_acls(ROOT) end,
        set_acls = function() return client:set_acls(ROOT, OPEN) end,
        set_acls_async = function() return client:set_acls_async(ROOT, OPEN) end,
        sync = function() return client:sync(ROOT) end,
        add_auth = function() return client:add_auth("digest", "u:p") end,
        commit = function()
          local t = client:transaction()
          t:create(ROOT .. "/c", "")
          return t:commit()
        end,
      }
    end

    local function assert_all_closed(client, how)
      for name, op in pairs(ops(client)) do
        local ok, result = pcall(op)
        if ok and getmetatable(result) == Future then
          ok, result = pcall(result.get, result, 1)
        end
        assert(not ok, name .. " on a " .. how .. " client did not raise")
        assert(errors.is(result, errors.ConnectionClosedError),
               name .. " on a " .. how .. " client raised " .. tostring(result))
      end
      assert_nothing_created()
      assert.is_not_nil(zk:exists(ROOT))
    end

    it("raises ConnectionClosedError before start", function()
      local client = zklua.client(server.hosts)
      assert_all_closed(client, "never started")
      client:stop() -- stopping a client that never started is harmless
      client:close()
    end)

    it("raises ConnectionClosedError after stop, and works again after start", function()
      local client = zklua.client(server.hosts)
      client:start()
      client:stop()
      assert.are.equal("LOST", client.state)
      assert_all_closed(client, "stopped")
      client:start()
      assert.is_not_nil(client:exists(ROOT))
      client:close()
    end)

    it("raises ConnectionClosedError after close, also from start", function()
      local client = zklua.client(server.hosts)
      client:start()
      client:close()
      assert_all_closed(client, "closed")
      local ok, err = pcall(client.start, client)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.ConnectionClosedError))
      client:close() -- closing twice is harmless
      assert.is_nil(client:client_id())
    end)
  end)

  describe("the C core", function()
    it("refuses wrong types with Lua errors, without crashing", function()
      local core = require "zklua.core"
      local session = core.session(server.hosts, 10000, false)
      local attempts = {
        function() return core.session(nil, 1000, false) end,
        function() return core.session(server.hosts, 1000, false, "not-hex", "pw") end,
        function() return session:create(nil, "v", OPEN, 0) end,
        function() return session:create("/x", {}, OPEN, 0) end,
        function() return session:create("/x", "v", "acl", 0) end,
        function() return session:create("/x", "v", { { perms = 31 } }, 0) end,
        function() return session:set("/x", "v", "version") end,
        function() return session:multi("ops") end,
        function() return session:multi({ 1, 2 }) end,
        function() return session:multi({ { kind = "create", path = "/x", acl = { 5 } } }) end,
        function() return session:multi({ { kind = "bogus", path = "/x" } }) end,
        function() return core.path_problem(nil) end,
        function() return core.digest_credential({}, "pw") end,
        function() return core.poll("fds", 0) end,
        function() return core.poll({ "x" }, 0) end,
      }
      for i, attempt in ipairs(attempts) do
        local ok = pcall(attempt)
        assert.is_false(ok, "attempt " .. i .. " was accepted")
      end
      session:close()
      assert.is_false((pcall(session.get, session, "/")))
      session:close() -- twice
    end)
  end)
end)
