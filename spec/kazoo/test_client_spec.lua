-- kazoo's tests/test_client.py, translated (see spec/kazoo/support.lua for the harness).
-- kazoo's TypeError and ValueError (bad arguments found before anything is sent) are zklua's
-- BadArgumentsError; its KazooTimeoutError is zklua's TimeoutError; Python's None is nil.
-- Where kazoo pokes a client's private state (_state, _make_state_change) the test sets the
-- zklua field that holds the same thing (client_state) or calls the same private function.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local security = require "zklua.security"
local testing = require "zklua.testing"
local Future = require "zklua.future"
local Retry = require "zklua.retry"
local helpers = require "support.helpers"
local support = require "kazoo.support"

local raises = helpers.raises
local unpack = table.unpack or unpack -- luacheck: ignore unpack
local BadArguments = errors.BadArgumentsError

local function contains(list, value)
  for _, v in ipairs(list) do
    if v == value then return true end
  end
  return false
end

local function same_acl(a, b)
  return a.perms == b.perms and a.id.scheme == b.id.scheme and a.id.id == b.id.id
end

local function has_acl(list, acl)
  for _, v in ipairs(list) do
    if same_acl(v, acl) then return true end
  end
  return false
end

describe("test_client.py", function()
  local h

  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  -- TestClientTransitions

  it("test_connection_and_disconnection", function()
    local states = {}
    local rc = false
    h.client:add_listener(function(state)
      states[#states + 1] = state
      if state == "CONNECTED" then rc = true end
    end)
    h.client:stop()
    assert.are.same({ "LOST" }, states)
    table.remove(states)

    h.client:start()
    testing.wait_for(function() return rc end, 10, "CONNECTED")
    assert.are.same({ "CONNECTED" }, states)
    rc = false
    table.remove(states)
    h:expire_session()
    testing.wait_for(function() return rc end, 10, "CONNECTED")
    -- kazoo's harness fakes the expiry inside the client; a real one (another handle takes
    -- the session over, then closes it) may first drop the connection: SUSPENDED, and
    -- CONNECTED again when the client wins the session back.  Those drops left out, the
    -- client heard the expiry and the new session, in that order, and nothing else.
    local heard = {}
    for i, state in ipairs(states) do
      local reconnection = state == "CONNECTED" and states[i - 1] == "SUSPENDED"
      if state ~= "SUSPENDED" and not reconnection then heard[#heard + 1] = state end
    end
    assert.are.same({ "LOST", "CONNECTED" }, heard)
  end)

  -- TestClientConstructor

  it("test_invalid_handler", function()
    raises(errors.ConfigurationError, zklua.client, { hosts = h.servers, handler = 42 })
    raises(errors.ConfigurationError, zklua.client, { hosts = h.servers, handler = {} })
  end)

  it("test_chroot", function()
    assert.are.equal("", zklua.client("127.0.0.1:2181/").chroot)
    assert.are.equal("/a", zklua.client("127.0.0.1:2181/a").chroot)
    assert.are.equal("/a", zklua.client("127.0.0.1/a").chroot)
    assert.are.equal("/a/b", zklua.client("127.0.0.1/a/b").chroot)
    assert.are.equal("/a/b", zklua.client("127.0.0.1:2181,127.0.0.1:2182/a/b").chroot)
  end)

  it("test_connection_timeout", function()
    local client = h:get_client({ hosts = "127.0.0.1:9" })
    assert.are.equal(errors.TimeoutError, client.handler.timeout_exception)
    raises(errors.TimeoutError, client.start, client, 0.1)
  end)

  it("test_ordered_host_selection", function()
    local client = h:get_client({ hosts = "127.0.0.1:9,127.0.0.2:9/a", randomize_hosts = false })
    local hosts = {}
    for i, pair in ipairs(client.hosts) do hosts[i] = pair end
    assert.are.same({ { "127.0.0.1", 9 }, { "127.0.0.2", 9 } }, hosts)
  end)

  it("test_invalid_hostname", function()
    local client = h:get_client({ hosts = "nosuchhost/a" })
    local timeout = client.handler.timeout_exception
    raises(timeout, client.start, client, 0.1)
  end)

  it("test_another_invalid_hostname", function()
    raises(BadArguments, zklua.client, { hosts = "/nosuchhost/a" })
  end)

  it("test_retry_options_dict", function()
    local client = h:get_client({ command_retry = { max_tries = 99 },
                                  connection_retry = { delay = 99 } })
    assert.are.equal(Retry, getmetatable(client._connection_retry))
    assert.are.equal(Retry, getmetatable(client.retry_policy))
    assert.are.equal(99, client.retry_policy.max_tries)
    assert.are.equal(99, client._connection_retry.delay)
  end)

  -- TestAuthentication

  it("test_auth", function()
    local username, password = support.uuid(), support.uuid()
    local digest_auth = username .. ":" .. password
    local acl = security.make_digest_acl(username, password, { all = true })

    local client = h:get_client()
    client:start()
    client:add_auth("digest", digest_auth)
    client.default_acl = { acl }

    local eve
    local ok, err = pcall(function()
      client:create("/1")
      client:create("/1/2")
      client:ensure_path("/1/2/3")

      eve = h:get_client()
      eve:start()
      raises(errors.NoAuthError, eve.get, eve, "/1/2")
      -- try again with the wrong auth token
      eve:add_auth("digest", "badbad:bad")
      raises(errors.NoAuthError, eve.get, eve, "/1/2")
    end)
    -- Ensure we remove the ACL protected nodes
    client:delete("/1", nil, true)
    if eve then eve:stop(); eve:close() end
    if not ok then error(err, 0) end
  end)

  it("test_connect_auth", function()
    local username, password = support.uuid(), support.uuid()
    local digest_auth = username .. ":" .. password
    local acl = security.make_digest_acl(username, password, { all = true })

    local client = h:get_client({ auth_data = { { "digest", digest_auth } } })
    client:start()
    local ok, err = pcall(function()
      client:create("/1", nil, { acl = { acl } })
      raises(errors.NoAuthError, h.client.get, h.client, "/1")
    end)
    client:delete("/1")
    client:stop()
    client:close()
    if not ok then error(err, 0) end
  end)

  it("test_unicode_auth", function()
    local username = "xe4/\\hm"
    local password = "/\\xe4hm"
    local digest_auth = username .. ":" .. password
    local acl = security.make_digest_acl(username, password, { all = true })

    local client = h:get_client()
    client:start()
    client:add_auth("digest", digest_auth)
    client.default_acl = { acl }

    local eve
    local ok, err = pcall(function()
      client:create("/1")
      client:ensure_path("/1/2/3")
      eve = h:get_client()
      eve:start()
      raises(errors.NoAuthError, eve.get, eve, "/1/2")
      -- try again with the wrong auth token
      eve:add_auth("digest", "badbad:bad")
      raises(errors.NoAuthError, eve.get, eve, "/1/2")
    end)
    client:delete("/1", nil, true)
    if eve then eve:stop(); eve:close() end
    if not ok then error(err, 0) end
  end)

  it("TestAuthentication::test_invalid_auth", function()
    local client = h:get_client()
    client:start()
    raises(BadArguments, client.add_auth, client, "digest", { "user", "pass" })
    raises(BadArguments, client.add_auth, client, nil, { "user", "pass" })
  end)

  it("test_async_auth", function()
    local client = h:get_client()
    client:start()
    local digest_auth = support.uuid() .. ":" .. support.uuid()
    local result = client:add_auth_async("digest", digest_auth)
    assert.are.equal(true, result:get())
  end)

  it("test_async_auth_failure", function()
    local client = h:get_client()
    client:start()
    local digest_auth = support.uuid() .. ":" .. support.uuid()
    raises(errors.AuthFailedError, client.add_auth, client, "unknown-scheme", digest_auth)
  end)

  it("test_add_auth_on_reconnect", function()
    -- kazoo shuts the client's socket down; here a proxy drops the connection
    local proxy = testing.proxy(h.server:node(1))
    local client = h:get_client({ hosts = proxy.hosts .. h.namespace })
    local ok, err = pcall(function()
      client:start()
      client:add_auth("digest", "jsmith:jsmith")
      local suspended = false
      client:add_listener(function(state) if state == "SUSPENDED" then suspended = true end end)
      proxy:drop()
      testing.wait_for(function() return suspended end, 10, "SUSPENDED")
      testing.wait_for(function() return client.connected end, 10, "reconnected")
      local found = false
      for _, pair in ipairs(client.auth_data) do
        found = found or (pair[1] == "digest" and pair[2] == "jsmith:jsmith")
      end
      assert.is_true(found)
    end)
    client:close()
    proxy:stop()
    if not ok then error(err, 0) end
  end)

  -- TestConnection

  it("test_chroot_warning", function()
    local warned = {}
    -- kazoo sets the chroot of a client made without one; here the client is made with it
    local k = h:get_client({ hosts = h.servers .. "/abba" .. support.uuid(),
                             logger = function(level, message)
      if level == "WARN" then warned[#warned + 1] = message end
    end })
    k:start()
    assert.is_true(#warned > 0)
    k:stop()
  end)

  it("test_session_expire", function()
    local cv = false
    h.client:add_listener(function(event)
      if event == "LOST" then cv = true end
    end)
    h:expire_session()
    testing.wait_for(function() return cv end, 3, "LOST")
    assert.is_true(cv)
  end)

  it("test_bad_session_expire", function()
    local cv, ab = false, false
    h.client:add_listener(function(event)
      if event == "LOST" then
        ab = true
        error("oops")
      end
    end)
    h:expire_session()
    testing.wait_for(function() return ab end, 5, "LOST")
    assert.is_true(ab)
    assert.is_false(cv)
    assert.are.equal("CONNECTED", h.client.state) -- the listener's error stopped nothing
  end)

  it("test_state_listener", function()
    local states = {}
    h.client:stop()
    assert.are.equal("LOST", h.client.state)
    h.client:add_listener(function(state) states[#states + 1] = state end)
    h.client:start(5)
    testing.wait_for(function() return #states > 0 end, 5, "a state")
    assert.are.equal(1, #states)
    assert.are.equal("CONNECTED", states[1])
  end)

  it("test_invalid_listener", function()
    raises(errors.ConfigurationError, h.client.add_listener, h.client, 15)
  end)

  it("test_listener_only_called_on_real_state_change", function()
    assert.are.equal("CONNECTED", h.client.state)
    local called = false
    h.client:add_listener(function() called = true end)
    h.client:_change_state("CONNECTED", "CONNECTED")
    h.client:dispatch(0)
    assert.is_false(called)
  end)

  it("test_no_connection", function()
    local client = h.client
    client:stop()
    assert.is_false(client.connected)
    assert.is_nil(client:client_id())
    raises(errors.ConnectionClosedError, client.exists, client, "/")
  end)

  it("test_close_connecting_connection", function()
    local client = h.client
    client:stop()
    local ev = false
    client:add_listener(function(state)
      if state == "CONNECTED" or state == "LOST" then ev = true end
    end)
    client:start()
    -- Wait until we connect
    testing.wait_for(function() return ev end, 5, "CONNECTED")
    ev = false
    client:stop()
    -- ...and then wait until the connection is lost
    testing.wait_for(function() return ev end, 5, "LOST")
    raises(errors.ConnectionClosedError, client.create, client, "/foobar")
  end)

  it("test_double_start", function()
    assert.is_true(h.client.connected)
    h.client:start()
    assert.is_true(h.client.connected)
  end)

  it("test_double_stop", function()
    h.client:stop()
    assert.is_false(h.client.connected)
    h.client:stop()
    assert.is_false(h.client.connected)
  end)

  it("test_restart", function()
    assert.is_true(h.client.connected)
    h.client:restart()
    assert.is_true(h.client.connected)
  end)

  it("test_closed", function()
    local client = h.client
    client:stop()
    -- close the connection to free the socket
    client:close()
    assert.is_nil(client:fileno())
    -- a call made after stop(); close() (kazoo races one against them)
    raises(errors.ConnectionClosedError, client.exists, client, "/")
    raises(errors.ConnectionClosedError, client.exists, client, "/")
  end)

  it("test_watch_trigger_expire", function()
    local client = h.client
    local cv = false
    client:create("/test", "")
    client:get("/test/", function() cv = true end)
    h:expire_session()
    testing.wait_for(function() return cv end, 3, "the watch")
    assert.is_true(cv)
  end)

  -- TestClient

  it("test_server_version_retries_fail", function()
    local client = h.client
    local side_effects = { "", "zookeeper.version=", "zookeeper.version=1.", "zookeeper.ver" }
    local i = 0
    client.command = function() i = i + 1; return side_effects[i] end
    raises(errors.KazooException, client.server_version, client, #side_effects - 1)
  end)

  it("test_server_version_retries_eventually_ok", function()
    local client = h.client
    local actual_version = "zookeeper.version=1.2"
    local side_effects = {}
    for i = 0, #actual_version do side_effects[#side_effects + 1] = actual_version:sub(1, i) end
    local n = 0
    client.command = function() n = n + 1; return side_effects[n] end
    assert.are.same({ 1, 2 }, client:server_version(#side_effects - 1))
  end)

  it("test_client_id", function()
    local id, passwd = h.client:client_id()
    assert.is_not_nil(id)
    -- make sure password is of correct length
    assert.are.equal(16, #passwd)
  end)

  it("test_connected", function()
    assert.is_true(h.client.connected)
  end)

  it("TestClient::test_create", function()
    local client = h.client
    local path = client:create("/1")
    assert.are.equal("/1", path)
    assert.is_truthy(client:exists("/1"))
  end)

  it("test_create_on_broken_connection", function()
    local client = h.client
    client:start()
    client.client_state = "EXPIRED_SESSION"
    raises(errors.SessionExpiredError, client.create, client, "/closedpath", "bar")
    client.client_state = "AUTH_FAILED"
    raises(errors.AuthFailedError, client.create, client, "/closedpath", "bar")
    client.client_state = "CONNECTED"
    client:stop()
    client:close()
    raises(errors.ConnectionClosedError, client.create, client, "/closedpath", "bar")
  end)

  it("test_create_null_data", function()
    local client = h.client
    client:create("/nulldata", nil)
    local value = client:get("/nulldata")
    assert.is_nil(value)
  end)

  it("test_create_empty_string", function()
    local client = h.client
    client:create("/empty", "")
    local value = client:get("/empty")
    assert.are.equal("", value)
  end)

  it("test_create_unicode_path", function()
    local client = h.client
    local path = client:create("/ascii")
    assert.are.equal("/ascii", path)
    path = client:create("/\u{e4}hm")
    assert.are.equal("/\u{e4}hm", path)
  end)

  it("test_create_async_returns_unchrooted_path", function()
    local path = h.client:create_async("/1"):get()
    assert.are.equal("/1", path)
  end)

  it("test_create_invalid_path", function()
    local client = h.client
    raises(BadArguments, client.create, client, { "a" })
    raises(BadArguments, client.create, client, ".")
    raises(BadArguments, client.create, client, "/a/../b")
    raises(BadArguments, client.create, client, "/b\0")
    raises(BadArguments, client.create, client, "/b\x1e")
  end)

  it("test_create_invalid_arguments", function()
    local single_acl = security.OPEN_ACL_UNSAFE[1]
    local client = h.client
    raises(BadArguments, client.create, client, "a", nil, { acl = "all" })
    raises(BadArguments, client.create, client, "a", nil, { acl = single_acl })
    raises(BadArguments, client.create, client, "a", { "a" })
    raises(BadArguments, client.create, client, "a", nil, { ephemeral = "yes" })
    raises(BadArguments, client.create, client, "a", nil, { sequence = "yes" })
    raises(BadArguments, client.create, client, "a", nil, { makepath = "yes" })
  end)

  it("test_create_value", function()
    local client = h.client
    client:create("/1", "bytes")
    local data = client:get("/1")
    assert.are.equal("bytes", data)
  end)

  it("test_create_large_value [difference: oversize-value]", function()
    local client = h.client
    local kb_512 = string.rep("a", 512 * 1024)
    client:create("/1", kb_512)
    assert.is_truthy(client:exists("/1"))
    local mb_2 = string.rep("a", 2 * 1024 * 1024)
    -- kazoo sends it and the server drops the connection (ConnectionLoss); zklua refuses it
    -- before sending, as every argument over the server's limit
    raises(BadArguments, client.create, client, "/2", mb_2)
  end)

  it("test_create_acl_duplicate", function()
    local single_acl = security.OPEN_ACL_UNSAFE[1]
    local client = h.client
    client:create("/1", nil, { acl = { single_acl, single_acl } })
    local acls = client:get_acls("/1")
    -- ZK >3.4 removes duplicate ACL entries
    local version = client:server_version()
    local newer = version[1] > 3 or (version[1] == 3 and version[2] > 4)
    assert.are.equal(newer and 1 or 2, #acls)
  end)

  it("test_create_acl_empty_list", function()
    local client = h.client
    client:create("/1", nil, { acl = {} })
    local acls = client:get_acls("/1")
    assert.are.same(security.OPEN_ACL_UNSAFE, acls)
  end)

  it("test_version_no_connection", function()
    h.client:stop()
    raises(errors.ConnectionLoss, h.client.server_version, h.client)
  end)

  it("test_create_ephemeral", function()
    local client = h.client
    client:create("/1", "ephemeral", { ephemeral = true })
    local data, stat = client:get("/1")
    assert.are.equal("ephemeral", data)
    assert.is_true(stat.ephemeralOwner == (client:client_id()))
  end)

  it("test_create_no_ephemeral", function()
    local client = h.client
    client:create("/1", "val1")
    local _, stat = client:get("/1")
    assert.is_true(stat.ephemeralOwner == 0)
    assert.is_nil(stat.owner_session_id)
  end)

  it("test_create_ephemeral_no_children", function()
    local client = h.client
    client:create("/1", "ephemeral", { ephemeral = true })
    raises(errors.NoChildrenForEphemeralsError, client.create, client, "/1/2", "val1")
    raises(errors.NoChildrenForEphemeralsError, client.create, client, "/1/2", "val1",
           { ephemeral = true })
  end)

  it("test_create_sequence", function()
    local client = h.client
    client:create("/folder")
    local path = client:create("/folder/a", "sequence", { sequence = true })
    assert.are.equal("/folder/a0000000000", path)
    local path2 = client:create("/folder/a", "sequence", { sequence = true })
    assert.are.equal("/folder/a0000000001", path2)
    local path3 = client:create("/folder/", "sequence", { sequence = true })
    assert.are.equal("/folder/0000000002", path3)
  end)

  it("test_create_ephemeral_sequence", function()
    local basepath = "/" .. support.uuid()
    local realpath = h.client:create(basepath, "sandwich", { sequence = true, ephemeral = true })
    assert.is_true(basepath ~= realpath and realpath:sub(1, #basepath) == basepath)
    local data = h.client:get(realpath)
    assert.are.equal("sandwich", data)
  end)

  it("test_create_makepath", function()
    h.client:create("/1/2", "val1", { makepath = true })
    local data = h.client:get("/1/2")
    assert.are.equal("val1", data)

    h.client:create("/1/2/3/4/5", "val2", { makepath = true })
    data = h.client:get("/1/2/3/4/5")
    assert.are.equal("val2", data)

    raises(errors.NodeExistsError, h.client.create, h.client, "/1/2/3/4/5", "val2",
           { makepath = true })
  end)

  it("test_create_makepath_incompatible_acls", function()
    local credential = security.make_digest_acl_credential("username", "password")
    local alt_client = h:get_client({ auth_data = { { "digest", credential } } })
    alt_client:start()
    alt_client:create("/1/2", "val2", { makepath = true, acl = security.CREATOR_ALL_ACL })
    local ok, err = pcall(raises, errors.NoAuthError, h.client.create, h.client, "/1/2/3/4/5",
                          "val2", { makepath = true })
    alt_client:delete("/", nil, true)
    alt_client:stop()
    if not ok then error(err, 0) end
  end)

  it("test_create_no_makepath", function()
    raises(errors.NoNodeError, h.client.create, h.client, "/1/2", "val1")
    raises(errors.NoNodeError, h.client.create, h.client, "/1/2", "val1", { makepath = false })
    h.client:create("/1/2", "val1", { makepath = true })
    raises(errors.NoNodeError, h.client.create, h.client, "/1/2/3/4", "val1", { makepath = false })
  end)

  it("test_create_exists", function()
    local client = h.client
    local path = client:create("/1")
    raises(errors.NodeExistsError, client.create, client, path)
  end)

  it("test_create_stat", function()
    local version = h.client:server_version()
    assert.is_true(version[1] > 3 or (version[1] == 3 and version[2] >= 5))
    local client = h.client
    local path, stat1 = client:create("/1", "bytes", { include_data = true })
    assert.are.equal("/1", path)
    local data, stat2 = client:get("/1")
    assert.are.equal("bytes", data)
    assert.are.same(stat1:asdict(), stat2:asdict())
  end)

  it("test_create_get_set", function()
    local nodepath = "/" .. support.uuid()
    h.client:create(nodepath, "sandwich", { ephemeral = true })

    local data, stat = h.client:get(nodepath)
    assert.are.equal("sandwich", data)

    local newstat = h.client:set(nodepath, "hats", stat.version)
    assert.is_truthy(newstat)
    assert.is_true(newstat.version > stat.version)

    -- Some other checks of the ZnodeStat object we got
    assert.are.equal(stat.acl_version, newstat.acl_version)
    assert.are.equal(stat.ctime / 1000.0, newstat.created)
    assert.are.equal(newstat.mtime / 1000.0, newstat.last_modified)
    assert.is_true(newstat.owner_session_id == stat.ephemeralOwner)
    assert.is_true(newstat.creation_transaction_id == stat.czxid)
    assert.is_true(newstat.last_modified_transaction_id == newstat.mzxid)
    assert.are.equal(newstat.dataLength, newstat.data_length)
    assert.are.equal(stat.numChildren, newstat.children_count)
    assert.are.equal(stat.cversion, newstat.children_version)
  end)

  it("test_get_invalid_arguments", function()
    local client = h.client
    raises(BadArguments, client.get, client, { "a", "b" })
    raises(BadArguments, client.get, client, "a", true)
  end)

  it("test_bad_argument", function()
    local client = h.client
    client:ensure_path("/1")
    raises(BadArguments, client.set, client, "/1", 1)
  end)

  it("test_ensure_path", function()
    local client = h.client
    client:ensure_path("/1/2")
    assert.is_truthy(client:exists("/1/2"))
    client:ensure_path("/1/2/3/4")
    assert.is_truthy(client:exists("/1/2/3/4"))
  end)

  it("test_sync", function()
    local client = h.client
    assert.are.equal("/", client:sync("/"))
    -- Albeit surprising, you can sync anything, even what does not exist.
    assert.are.equal("/not_there", client:sync("/not_there"))
  end)

  it("test_exists", function()
    local nodepath = "/" .. support.uuid()
    local exists = h.client:exists(nodepath)
    assert.is_nil(exists)

    h.client:create(nodepath, "sandwich", { ephemeral = true })
    exists = h.client:exists(nodepath)
    assert.is_truthy(exists)
    assert.is_true(helpers.is_integer(exists.version))

    local multi_node_nonexistent = "/" .. support.uuid() .. "/hats"
    exists = h.client:exists(multi_node_nonexistent)
    assert.is_nil(exists)
  end)

  it("test_exists_invalid_arguments", function()
    local client = h.client
    raises(BadArguments, client.exists, client, { "a", "b" })
    raises(BadArguments, client.exists, client, "a", true)
  end)

  it("test_exists_watch", function()
    local nodepath = "/" .. support.uuid()
    local event, seen_path = false, nil
    local exists = h.client:exists(nodepath, function(watch_event)
      seen_path = watch_event.path
      event = true
    end)
    assert.is_nil(exists)
    h.client:create(nodepath, nil, { ephemeral = true })
    testing.wait_for(function() return event end, 5, "the watch")
    assert.is_true(event)
    assert.are.equal(nodepath, seen_path)
  end)

  it("test_exists_watcher_exception", function()
    local nodepath = "/" .. support.uuid()
    local event, seen_path = false, nil
    -- if the watcher throws an exception, all we can really do is log it
    local exists = h.client:exists(nodepath, function(watch_event)
      seen_path = watch_event.path
      event = true
      error("test exception in callback")
    end)
    assert.is_nil(exists)
    h.client:create(nodepath, nil, { ephemeral = true })
    testing.wait_for(function() return event end, 5, "the watch")
    assert.is_true(event)
    assert.are.equal(nodepath, seen_path)
  end)

  it("test_create_delete", function()
    local nodepath = "/" .. support.uuid()
    h.client:create(nodepath, "zzz")
    h.client:delete(nodepath)
    local exists = h.client:exists(nodepath)
    assert.is_nil(exists)
  end)

  it("test_get_acls", function()
    local acl = security.make_digest_acl("user", "pass", { all = true })
    local client = h.client
    local ok, err = pcall(function()
      client:create("/a", nil, { acl = { acl } })
      client:add_auth("digest", "user:pass")
      assert.is_true(has_acl((client:get_acls("/a")), acl))
    end)
    client:delete("/a")
    if not ok then error(err, 0) end
  end)

  it("test_get_acls_invalid_arguments", function()
    raises(BadArguments, h.client.get_acls, h.client, { "a", "b" })
  end)

  it("test_set_acls", function()
    local acl = security.make_digest_acl("user", "pass", { all = true })
    local client = h.client
    client:create("/a")
    local ok, err = pcall(function()
      client:set_acls("/a", { acl })
      client:add_auth("digest", "user:pass")
      assert.is_true(has_acl((client:get_acls("/a")), acl))
    end)
    client:delete("/a")
    if not ok then error(err, 0) end
  end)

  it("test_set_acls_empty", function()
    local client = h.client
    client:create("/a")
    raises(errors.InvalidACLError, client.set_acls, client, "/a", {})
  end)

  it("test_set_acls_no_node", function()
    raises(errors.NoNodeError, h.client.set_acls, h.client, "/a", security.OPEN_ACL_UNSAFE)
  end)

  it("test_set_acls_invalid_arguments", function()
    local single_acl = security.OPEN_ACL_UNSAFE[1]
    local client = h.client
    raises(BadArguments, client.set_acls, client, { "a", "b" }, {})
    raises(BadArguments, client.set_acls, client, "a", single_acl)
    raises(BadArguments, client.set_acls, client, "a", "all")
    raises(BadArguments, client.set_acls, client, "a", { single_acl }, "V1")
  end)

  it("TestClient::test_set", function()
    local client = h.client
    client:create("a", "first")
    local stat = client:set("a", "second")
    local data, stat2 = client:get("a")
    assert.are.equal("second", data)
    assert.are.same(stat:asdict(), stat2:asdict())
  end)

  it("test_set_null_data", function()
    local client = h.client
    client:create("/nulldata", "not none")
    client:set("/nulldata", nil)
    local value = client:get("/nulldata")
    assert.is_nil(value)
  end)

  it("test_set_empty_string", function()
    local client = h.client
    client:create("/empty", "not empty")
    client:set("/empty", "")
    local value = client:get("/empty")
    assert.are.equal("", value)
  end)

  it("test_set_invalid_arguments", function()
    local client = h.client
    client:create("a", "first")
    raises(BadArguments, client.set, client, { "a", "b" }, "value")
    raises(BadArguments, client.set, client, "a", { "v", "w" })
    raises(BadArguments, client.set, client, "a", "value", "V1")
  end)

  it("test_delete", function()
    local client = h.client
    client:ensure_path("/a/b")
    assert.is_true(contains(client:get_children("a"), "b"))
    client:delete("/a/b")
    assert.is_false(contains(client:get_children("a"), "b"))
  end)

  it("test_delete_recursive", function()
    local client = h.client
    client:ensure_path("/a/b/c")
    client:ensure_path("/a/b/d")
    client:delete("/a/b", nil, true)
    client:delete("/a/b/c", nil, true)
    assert.is_false(contains(client:get_children("a"), "b"))
  end)

  it("test_delete_invalid_arguments", function()
    local client = h.client
    client:ensure_path("/a/b")
    raises(BadArguments, client.delete, client, "/a/b", nil, "all")
    raises(BadArguments, client.delete, client, { "a", "b" })
    raises(BadArguments, client.delete, client, "/a/b", "V1")
  end)

  it("test_get_children", function()
    local client = h.client
    client:ensure_path("/a/b/c")
    client:ensure_path("/a/b/d")
    assert.are.same({ "b" }, client:get_children("/a"))
    assert.are.same({ "c", "d" }, helpers.sorted(client:get_children("/a/b")))
    assert.are.same({}, client:get_children("/a/b/c"))
  end)

  it("test_get_children2", function()
    local client = h.client
    client:ensure_path("/a/b")
    local children, stat = client:get_children("/a", nil, true)
    local _, stat2 = client:get("/a")
    assert.are.same({ "b" }, children)
    assert.are.equal(stat.version, stat2.version)
  end)

  it("test_get_children2_many_nodes", function()
    local client = h.client
    client:ensure_path("/a/b")
    client:ensure_path("/a/c")
    client:ensure_path("/a/d")
    local children, stat = client:get_children("/a", nil, true)
    local _, stat2 = client:get("/a")
    assert.are.same({ "b", "c", "d" }, helpers.sorted(children))
    assert.are.equal(stat.version, stat2.version)
  end)

  it("test_get_children_no_node", function()
    local client = h.client
    raises(errors.NoNodeError, client.get_children, client, "/none")
    raises(errors.NoNodeError, client.get_children, client, "/none", nil, true)
  end)

  it("test_get_children_invalid_path", function()
    raises(BadArguments, h.client.get_children, h.client, "../a")
  end)

  it("test_get_children_invalid_arguments", function()
    local client = h.client
    raises(BadArguments, client.get_children, client, { "a", "b" })
    raises(BadArguments, client.get_children, client, "a", true)
    raises(BadArguments, client.get_children, client, "a", nil, "yes")
  end)

  it("TestClient::test_invalid_auth", function()
    local client = h.client
    client:stop()
    client.client_state = "AUTH_FAILED"
    raises(errors.AuthFailedError, client.get, client, "/")
  end)

  it("test_client_state", function()
    assert.are.equal("CONNECTED", h.client.client_state)
  end)

  -- TestClientTransactions

  it("test_basic_create", function()
    local t = h.client:transaction()
    t:create("/freddy")
    t:create("/fred", nil, { ephemeral = true })
    t:create("/smith", nil, { sequence = true })
    local results = t:commit()
    assert.are.equal(3, #results)
    assert.are.equal("/freddy", results[1])
    assert.are.equal("/smith0", results[3]:sub(1, 7))
  end)

  it("test_bad_creates", function()
    local args_list = {
      { true },
      { "/smith", 0 },
      { "/smith", "", "bleh" },
      { "/smith", "", { acl = "fred" } },
      { "/smith", "", { ephemeral = "fred" } },
    }
    for _, args in ipairs(args_list) do
      local t = h.client:transaction()
      raises(BadArguments, t.create, t, unpack(args, 1, 3))
    end
  end)

  it("test_default_acl", function()
    local username, password = support.uuid(), support.uuid()
    local digest_auth = username .. ":" .. password
    local acl = security.make_digest_acl(username, password, { all = true })
    h.client:add_auth("digest", digest_auth)
    h.client.default_acl = { acl }

    local t = h.client:transaction()
    t:create("/freddy")
    local results = t:commit()
    assert.are.equal("/freddy", results[1])
  end)

  it("test_basic_delete", function()
    h.client:create("/fred")
    local t = h.client:transaction()
    t:delete("/fred")
    local results = t:commit()
    assert.are.equal(true, results[1])
  end)

  it("test_bad_deletes", function()
    local args_list = { { true }, { "/smith", "woops" } }
    for _, args in ipairs(args_list) do
      local t = h.client:transaction()
      raises(BadArguments, t.delete, t, args[1], args[2])
    end
  end)

  it("TestClientTransactions::test_set", function()
    h.client:create("/fred", "01")
    local t = h.client:transaction()
    t:set_data("/fred", "oops")
    t:commit()
    local res = h.client:get("/fred")
    assert.are.equal("oops", res)
  end)

  it("test_bad_sets", function()
    local args_list = { { 42, 52 }, { "/smith", false }, { "/smith", "", "oops" } }
    for _, args in ipairs(args_list) do
      local t = h.client:transaction()
      raises(BadArguments, t.set_data, t, args[1], args[2], args[3])
    end
  end)

  it("test_check", function()
    h.client:create("/fred")
    local _, stat = h.client:get("/fred")
    local version = stat.version
    local t = h.client:transaction()
    t:check("/fred", version)
    t:create("/blah")
    local results = t:commit()
    assert.are.equal(true, results[1])
    assert.are.equal("/blah", results[2])
  end)

  it("test_bad_checks", function()
    local args_list = { { 42, 52 }, { "/smith", "oops" } }
    for _, args in ipairs(args_list) do
      local t = h.client:transaction()
      raises(BadArguments, t.check, t, args[1], args[2])
    end
  end)

  it("test_bad_transaction", function()
    local t = h.client:transaction()
    t:create("/fred")
    t:delete("/smith")
    local results = t:commit()
    assert.are.equal(errors.RolledBackError, results[1].class)
    assert.are.equal(errors.NoNodeError, results[2].class)
  end)

  it("test_bad_commit", function()
    local t = h.client:transaction()
    t.committed = true
    raises(BadArguments, t.commit, t)
  end)

  it("test_bad_context", function()
    raises(BadArguments, function()
      h.client:transaction():with(function(t) t:check(4232) end)
    end)
  end)

  it("test_context", function()
    h.client:transaction():with(function(t) t:create("/smith", "32") end)
    assert.are.equal("32", (h.client:get("/smith")))
    if _VERSION == "Lua 5.4" then -- the same with a to-be-closed variable
      local block = assert(load([[
        local zk = ...
        do
          local t <close> = zk:transaction()
          t:create("/smith2", "33")
        end
      ]]))
      block(h.client)
      assert.are.equal("33", (h.client:get("/smith2")))
    end
  end)

  -- TestSessionCallbacks

  it("test_session_callback_states", function()
    -- kazoo feeds fabricated KeeperStates to its session callback; here the server produces
    -- them: a connection (CONNECTED), a dropped one (connecting: SUSPENDED), an auth the
    -- server refuses (AUTH_FAILED: LOST)
    local proxy = testing.proxy(h.server:node(1))
    local client = h:get_client({ hosts = proxy.hosts })
    local ok, err = pcall(function()
      client:start()
      assert.are.equal("CONNECTED", client.state)
      proxy:refuse(true) -- no reconnection until resume(): SUSPENDED cannot be missed
      proxy:drop()
      testing.wait_for(function() return client.state == "SUSPENDED" end, 10, "SUSPENDED")
      proxy:resume()
      testing.wait_for(function() return client.state == "CONNECTED" end, 10, "CONNECTED")
      pcall(client.add_auth, client, "unknown-scheme", "x")
      testing.wait_for(function() return client.client_state == "AUTH_FAILED" end, 10,
                       "AUTH_FAILED")
      assert.are.equal("LOST", client.state)
    end)
    client:close()
    proxy:stop()
    if not ok then error(err, 0) end
  end)

  -- TestCallbacks

  it("test_async_result_callbacks_are_always_called", function()
    -- create a callback object
    local call_count = 0
    local function callback_mock() call_count = call_count + 1 end
    -- simulate waiting for a response
    local async_result = Future.new(h.client.handler)
    async_result:rawlink(callback_mock)
    -- begin the procedure to stop the client
    h.client:stop()
    -- the response has just been received
    async_result:set_exception(errors.KazooException("Anything that throws an exception"))
    -- with the fix the callback should be called
    assert.is_true(call_count > 0)
  end)

  -- TestNonChrootClient

  it("TestNonChrootClient::test_create", function()
    local client = h:get_nonchroot_client()
    assert.are.equal("", client.chroot)
    client:start()
    local node = support.uuid()
    local path = client:create(node, nil, { ephemeral = true })
    client:delete(path)
    client:stop()
  end)

  it("test_unchroot", function()
    local client = h:get_nonchroot_client()
    client.chroot = "/a"
    -- Unchroot'ing the chroot path should return "/"
    assert.are.equal("/", client:unchroot("/a"))
    assert.are.equal("/b", client:unchroot("/a/b"))
    assert.are.equal("/b/c", client:unchroot("/b/c"))
  end)
  -- The tests that stop a server or reconfigure the ensemble run on a 3-node ensemble of
  -- their own (kazoo's harness runs every test on one): reconfigEnabled, and a superuser
  -- "super" (password "test").  Called inside a describe: h is a harness on it.
  local ens
  local function on_ensemble()
    local outer
    setup(function() ens = testing.ensemble(3, { reconfig = true }) end)
    teardown(function() ens:stop() end)
    before_each(function()
      outer = h
      h = support.harness({ server = ens })
    end)
    after_each(function()
      h:teardown()
      h = outer
    end)
  end

  describe("TestSSLClient", function()
    -- kazoo's cluster listens on TLS ports too; here a server started with the tls option,
    -- for this class only (the shared server stays plaintext)
    local tls_server, outer
    setup(function() tls_server = testing.server({ tls = true }) end)
    teardown(function() if tls_server then tls_server:stop() end end)

    -- setUp: the cluster's client key, certificate and CA written to files of a temp dir
    before_each(function()
      outer = h
      local pipe = io.popen("mktemp -d")
      local ssl_path = pipe:read("*l")
      pipe:close()
      local key_path = ssl_path .. "/key.pem"
      local cert_path = ssl_path .. "/cert.pem"
      local cacert_path = ssl_path .. "/cacert.pem"
      local config = tls_server:ssl_client_configuration()
      for path, text in pairs({ [key_path] = config.client_key, [cert_path] = config.client_cert,
                                [cacert_path] = config.ca_cert }) do
        local f = assert(io.open(path, "wb"))
        f:write(text)
        f:close()
      end
      h = support.harness({ server = tls_server, use_ssl = true, keyfile = key_path,
                            certfile = cert_path, ca = cacert_path })
      h.ssl_path = ssl_path
    end)
    after_each(function()
      h:teardown()
      os.execute("rm -rf '" .. h.ssl_path .. "'")
      h = outer
    end)

    it("test_create", function()
      local client = h.client
      local path = client:create("/1")
      assert.are.equal("/1", path)
      assert.is_truthy(client:exists("/1"))
    end)
  end)

  describe("TestClient", function()
    on_ensemble()

    it("test_update_host_list", function()
      local node = ens:node(1)
      local hosts = node.hosts
      -- create a client with only one server in its list
      local client = h:get_client({ hosts = hosts })
      client:start()
      -- try to change the chroot, not currently allowed
      raises(errors.ConfigurationError, client.set_hosts, client, hosts .. "/new_chroot")
      -- grow the cluster to 3
      client:set_hosts(h.servers)
      -- shut down the first host
      node:stop()
      local ok, err = pcall(function()
        -- kazoo sleeps 5 s, then asserts; here: until the client is connected to another node
        testing.wait_for(function()
          local server = client.client_state == "CONNECTED" and client._session:current_server()
          return server and not server:find(":" .. node.port .. "$")
        end, 30, "a connection to another node")
        assert.are.equal("CONNECTED", client.client_state)
        assert.are.equal("imok", client:command("ruok"))
      end)
      node:start()
      if not ok then error(err, 0) end
    end)

    -- utility for test_request_queuing*: a client with only one server in its list, and
    -- infinite retries
    local function make_request_queuing_client()
      local server = ens:node(1)
      local client = h:get_client({
        hosts = server.hosts .. h.namespace,
        connection_retry = { max_tries = -1, delay = 0.1, backoff = 1, max_jitter = 0.0 },
      })
      return client, server
    end

    -- utility for test_request_queuing*
    local function request_queuing_common(client, server, path, expire_session)
      local ev_suspended, ev_connected = false, false
      client:add_listener(function(state)
        if state == "SUSPENDED" then
          ev_suspended = true
        elseif state == "CONNECTED" then
          ev_connected = true
        end
      end)
      -- wait for the client to connect
      client:start()
      local result
      local ok, err = pcall(function()
        -- force the client to suspend
        server:stop()
        testing.wait_for(function() return ev_suspended end, 5, "SUSPENDED")
        assert.is_true(ev_suspended)
        ev_connected = false
        -- submit a request, expecting it to be queued
        result = client:create_async(path)
        assert.is_false(result:ready())
        assert.are.equal("SUSPENDED", client.state)
        -- optionally expire the session meanwhile (kazoo mangles the client's password;
        -- here another handle takes the session over through another node and closes it)
        if expire_session then
          local id, passwd = client:client_id()
          local other = zklua.client({ hosts = ens:node(2).hosts, client_id = { id, passwd } })
          other:start()
          other:close()
        end
      end)
      server:start()
      if not ok then error(err, 0) end
      -- wait for the client to reconnect (either with a recovered session, or with a new one
      -- if expire_session was set)
      testing.wait_for(function() return ev_connected end, 30, "CONNECTED")
      assert.is_true(ev_connected)
      return result
    end

    it("test_request_queuing_session_recovered", function()
      local path = "/" .. support.uuid()
      local client, server = make_request_queuing_client()
      local result = request_queuing_common(client, server, path, false)
      assert.are.equal(path, result:get())
      assert.is_not_nil(client:exists(path))
      client:stop()
    end)

    it("test_request_queuing_session_expired", function()
      local path = "/" .. support.uuid()
      local client, server = make_request_queuing_client()
      local result = request_queuing_common(client, server, path, true)
      raises(errors.SessionExpiredError, result.get, result)
      client:stop()
    end)

  end)

  describe("TestReconfig", function()
    on_ensemble()

    it("test_no_super_auth", function()
      raises(errors.NoAuthError, h.client.reconfig, h.client,
             "server.999=0.0.0.0:1234:2345:observer;3456", nil, nil)
    end)

    it("test_add_remove_observer", function()
      local client = h:get_client({ auth_data = { { "digest", "super:test" } } })
      client:start()
      -- ports for election, zab and client endpoints that nothing listens on
      local port1, port2, port3 = core.free_port(), core.free_port(), core.free_port()
      local joining = string.format("server.100=0.0.0.0:%d:%d:observer;0.0.0.0:%d",
                                    port1, port2, port3)
      local data = client:reconfig(joining, nil, nil)
      assert.is_truthy(data:find(joining, 1, true))

      data = client:reconfig(nil, "100", nil)
      assert.is_falsy(data:find(joining, 1, true))

      -- try to add it again, but a config number in the future
      local curver = tonumber(data:match("\nversion=(%x+)%s*$"), 16)
      raises(errors.BadVersionError, h.client.reconfig, client, joining, nil, nil, curver + 1)
    end)

    it("test_bad_input", function()
      raises(errors.BadArgumentsError, h.client.reconfig, h.client, "some thing", nil, nil)
    end)
  end)
end)
