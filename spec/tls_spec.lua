-- TLS (kazoo's use_ssl, certfile, keyfile, keyfile_password, ca, verify_certs) against real
-- servers with a secureClientPort (zklua.testing's tls option): CRUD, a watch, a lock, a
-- restarted server, re-auth after an expiry, a 3-node ensemble; and every bad input or fault
-- is a named error (ConfigurationError before anything is sent, or TimeoutError within the
-- start timeout, naming the TLS failure when there was one), never a hang.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local tls_files = require "zklua.testing.tls"
local helpers = require "support.helpers"
local errors = zklua.errors

local raises = helpers.raises

-- options with the cluster's TLS files (and more) merged in
local function tls_opts(cluster, extra)
  local o = cluster:tls_options()
  o.hosts, o.timeout = cluster.secure_hosts, 10
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- start(timeout) must fail with class within the timeout and a little: never a hang
local function fails_to_start(zk, timeout, class)
  local t0 = core.monotonic()
  local err = raises(class or errors.TimeoutError, zk.start, zk, timeout)
  local took = core.monotonic() - t0
  assert.is_true(took < timeout + 3, "start took " .. took .. " s")
  assert.are.equal("LOST", zk.state)
  return err
end

describe("TLS", function()
  it("the build says which C client and features it has", function()
    local build = zklua.build
    assert.are.equal(core.zookeeper.version, build.zookeeper)
    assert.is_boolean(build.tls)
    assert.is_boolean(build.sasl)
    assert.is_truthy(build.description:find(build.zookeeper, 1, true))
  end)

  it("a build without TLS refuses use_ssl, saying how to get one", function()
    local saved = core.zookeeper.tls
    core.zookeeper.tls = false
    local ok, err = pcall(zklua.client, { hosts = "127.0.0.1:1", use_ssl = true,
                                          certfile = "/c", keyfile = "/k" })
    core.zookeeper.tls = saved
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.ConfigurationError), tostring(err))
    assert.is_truthy(tostring(err):find("ZK_CLIENT=source", 1, true), tostring(err))
  end)
end)

if not core.zookeeper.tls then
  describe("TLS on this build", function()
    pending("needs a ZooKeeper C client with TLS (make: ZK_CLIENT=source)")
  end)
  return
end

describe("a TLS client on a standalone server", function()
  local server, other, zk
  local clients = {}

  local function client(extra)
    local c = zklua.client(tls_opts(server, extra))
    clients[#clients + 1] = c
    return c
  end

  setup(function()
    server = testing.server({ tls = true })
    other = tls_files.make(server.tls.files.dir .. "/other") -- a CA the server does not trust
  end)
  teardown(function() if server then server:stop() end end)
  before_each(function()
    clients = {}
    zk = client()
    zk:start()
  end)
  after_each(function()
    for _, c in ipairs(clients) do pcall(c.close, c) end
    helpers.delete_trees(server.hosts, "/tls")
  end)

  it("connects and does CRUD", function()
    assert.is_true(zk.use_ssl)
    assert.are.equal("/tls/a", zk:create("/tls/a", "v1", { makepath = true }))
    local data, stat = zk:get("/tls/a")
    assert.are.equal("v1", data)
    zk:set("/tls/a", "v2", stat.version)
    assert.are.equal("v2", (zk:get("/tls/a")))
    assert.are.same({ "a" }, zk:get_children("/tls"))
    zk:delete("/tls/a")
    assert.is_nil(zk:exists("/tls/a"))
    -- a plaintext client on the plain port sees the same tree
    local plain = helpers.client(server.hosts)
    clients[#clients + 1] = plain
    zk:create("/tls/b", "x")
    assert.are.equal("x", (plain:get("/tls/b")))
  end)

  it("delivers a watch", function()
    zk:ensure_path("/tls/w")
    local seen = {}
    zk:DataWatch("/tls/w", function(data) seen[#seen + 1] = data or "<nil>" end)
    zk:set("/tls/w", "changed")
    testing.wait_for(function() return seen[#seen] == "changed" end, 10, "the watch")
  end)

  -- The bytes the server has not read on its TLS connections: the rx_queue of the
  -- established sockets on its secure port (/proc/net/tcp6 too: Java listens on both).
  local function server_unread()
    local wanted = string.format("%04X", tonumber(server.secure_hosts:match(":(%d+)$")))
    local unread = 0
    for _, table_file in ipairs({ "/proc/net/tcp", "/proc/net/tcp6" }) do
      local f = io.open(table_file)
      for line in (f and f:lines() or function() end) do
        local port, st, rx = line:match("^%s*%d+:%s+%x+:(%x+)%s+%x+:%x+%s+(%x+)%s+%x+:(%x+)")
        if port == wanted and st == "01" then unread = unread + tonumber(rx, 16) end
      end
      if f then f:close() end
    end
    return unread
  end

  it("pipelines past a stalled connection: each request once, whole, in order", function()
    -- The C client sends the requests waiting at the head of its queue in one TLS write
    -- (tls-requests-batched.patch) and retries a write that would block with the batch
    -- gathered again, longer if more came meanwhile.  With the server paused, 1000 sets of
    -- 7 KB (7 MB, more than both sockets' buffers hold) block its writes with batches under
    -- way and more queued; the server is resumed once its socket holds unread bytes.
    local c = client({ timeout = 30 })
    c:start()
    local n, values, futures = 1000, {}, {}
    c:ensure_path("/tls/pipe")
    for i = 1, n do futures[i] = c:create_async("/tls/pipe/n" .. i) end
    for i = 1, n do futures[i]:get(30) end
    server:node(1):pause()
    local ok, err = pcall(function()
      for i = 1, n do
        values[i] = string.rep(string.char(65 + i % 26), 7000) .. i
        futures[i] = c:set_async("/tls/pipe/n" .. i, values[i])
      end
      testing.wait_for(function() return server_unread() >= 32768 end, 20,
                       "the server's socket to fill")
    end)
    server:node(1):resume()
    assert(ok, err)
    for i = 1, n do assert.are.equal(1, futures[i]:get(30).version) end
    for i = 1, n do futures[i] = c:get_async("/tls/pipe/n" .. i) end
    for i = 1, n do assert.are.equal(values[i], (futures[i]:get(30))) end
  end)

  it("shares a lock between two TLS clients", function()
    local zk2 = client()
    zk2:start()
    local l1, l2 = zk:Lock("/tls/lock", "one"), zk2:Lock("/tls/lock", "two")
    assert.is_true(l1:acquire())
    assert.is_false(l2:acquire(false))
    assert.are.same({ "one" }, l2:contenders())
    l1:release()
    assert.is_true(l2:acquire(true, 10))
    l2:release()
  end)

  it("resumes the session after the server restarts", function()
    -- a restart on a loaded machine may take longer than 10 s: a session that outlives it
    zk = client({ timeout = 60 })
    zk:start()
    local id = zk:client_id()
    zk:create("/tls/eph", "", { ephemeral = true, makepath = true })
    server:node(1):stop()
    testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    server:node(1):start()
    testing.wait_for(function() return zk.state == "CONNECTED" end, 60, "CONNECTED again")
    assert.are.equal(id, (zk:client_id()))
    assert.is_not_nil(zk:exists("/tls/eph"))
  end)

  it("re-applies auth to a new session after an expiry", function()
    local authed = client({ auth_data = { { "digest", "user:pw" } } })
    authed:start()
    authed:create("/tls/acl", "secret", {
      acl = { zklua.security.make_digest_acl("user", "pw", { all = true }) }, makepath = true })
    testing.expire_session(authed, 30, server.hosts)
    testing.wait_for(function() return authed.state == "CONNECTED" end, 30, "a new session")
    assert.are.equal("secret", (authed:retry(authed.get, authed, "/tls/acl")))
    raises(errors.NoAuthError, zk.get, zk, "/tls/acl")
  end)

  it("a frozen server: LOST within the session timeout, stop() at once, no hang", function()
    local short = client({ timeout = 2 })
    short:start()
    server:node(1):pause()
    local ok, err = pcall(function()
      local t0 = core.monotonic()
      testing.wait_for(function() return short.state == "LOST" end, 10, "LOST")
      assert.is_true(core.monotonic() - t0 < 5)
      -- reconnection attempts meet a server that accepts and never answers the handshake:
      -- each ends at its deadline, and stop() does not wait for one
      zklua.sleep(2)
      local t1 = core.monotonic()
      short:stop()
      assert.is_true(core.monotonic() - t1 < 1.5, "stop took " .. core.monotonic() - t1)
    end)
    server:node(1):resume()
    assert(ok, err)
  end)

  it("a CA that did not sign the server's certificate: TimeoutError naming it", function()
    local err = fails_to_start(client({ ca = other.ca, timeout = 6 }), 6)
    assert.is_truthy(tostring(err):find("certificate verify failed", 1, true), tostring(err))
  end)

  it("a client certificate the server does not trust (clientAuth need): TimeoutError", function()
    local err = fails_to_start(client({ certfile = other.certfile, keyfile = other.keyfile,
                                        timeout = 6 }), 6)
    assert.is_truthy(tostring(err):find("TLS handshake failed", 1, true), tostring(err))
  end)

  it("a plain client on the TLS port: TimeoutError within the timeout", function()
    local plain = zklua.client({ hosts = server.secure_hosts, timeout = 6 })
    clients[#clients + 1] = plain
    fails_to_start(plain, 6)
  end)

  it("a TLS client on the plain port: TimeoutError naming the handshake", function()
    local err = fails_to_start(client({ hosts = server.hosts, timeout = 6 }), 6)
    assert.is_truthy(tostring(err):find("TLS handshake failed", 1, true), tostring(err))
  end)

  it("a key with a password: the right one connects, a wrong or missing one is refused", function()
    local files = server.tls.files
    local cert, key = tls_files.certificate(files, "locked", { password = "s3cret" })
    local ok = client({ certfile = cert, keyfile = key, keyfile_password = "s3cret" })
    ok:start()
    assert.are.equal("CONNECTED", ok.state)
    local err = raises(errors.ConfigurationError, zklua.client,
                       tls_opts(server, { certfile = cert, keyfile = key,
                                          keyfile_password = "wrong" }))
    assert.is_truthy(tostring(err):find("wrong keyfile_password", 1, true), tostring(err))
    err = raises(errors.ConfigurationError, zklua.client,
                 tls_opts(server, { certfile = cert, keyfile = key }))
    assert.is_truthy(tostring(err):find("needs keyfile_password", 1, true), tostring(err))
  end)

  it("refuses what ZooKeeper's C client cannot do, before anything is sent", function()
    local function refused(extra, words, drop)
      local o = tls_opts(server, extra)
      if drop then o[drop] = nil end
      local err = raises(errors.ConfigurationError, zklua.client, o)
      assert.is_truthy(tostring(err):find(words, 1, true), tostring(err))
    end
    refused({ verify_certs = false }, "always verifies")
    refused({}, "needs certfile and keyfile", "certfile")
    refused({}, "needs certfile and keyfile", "keyfile")
    refused({ ca = "/nonexistent/ca.pem" }, "cannot be read")
    refused({ ca = server.tls.files.dir .. "/a,b.pem" }, "may not hold a comma")
    refused({ keyfile = other.keyfile }, "is not the key of certfile")
    refused({ ca = server.tls.files.dir .. "/client.csr" }, "holds no CA certificate")
    raises(errors.BadArgumentsError, zklua.client, tls_opts(server, { use_ssl = "yes" }))
  end)
end)

describe("a TLS client and a server certificate that cannot be verified", function()
  for _, kind in ipairs({ "expired", "self_signed" }) do
    it("refuses an " .. kind .. " server certificate: TimeoutError naming it", function()
      local server = testing.server({ tls = { server_certificate = kind } })
      local zk = zklua.client(tls_opts(server, { timeout = 6 }))
      local ok, err = pcall(fails_to_start, zk, 6)
      zk:close()
      server:stop()
      assert(ok, err)
      assert.is_truthy(tostring(err):find("certificate verify failed", 1, true), tostring(err))
    end)
  end
end)

describe("a TLS client on a 3-node ensemble", function()
  local ens
  setup(function() ens = testing.ensemble(3, { tls = true }) end)
  teardown(function() if ens then ens:stop() end end)

  it("does CRUD and a lock, and moves to another node when its server stops", function()
    local zk = zklua.client(tls_opts(ens))
    local zk2 = zklua.client(tls_opts(ens))
    zk:start()
    zk2:start()
    zk:create("/ens/a", "v", { makepath = true })
    assert.are.equal("v", (zk2:get("/ens/a")))
    local lock = zk:Lock("/ens/lock", "one")
    assert.is_true(lock:acquire())
    assert.is_false(zk2:Lock("/ens/lock", "two"):acquire(false))
    -- stop the node zk is connected to: zk reconnects over TLS to another, same session
    local id = zk:client_id()
    local current = zk._session:current_server()
    for i = 1, 3 do
      if ens:node(i).secure_hosts == current then ens:node(i):stop() end
    end
    testing.wait_for(function() return zk.state == "CONNECTED" and
                       zk._session:current_server() ~= current end, 30, "another node")
    assert.are.equal(id, (zk:client_id()))
    assert.is_true(lock.is_acquired)
    zk:set("/ens/a", "w")
    testing.wait_for(function() return zk2:get("/ens/a") == "w" end, 10, "zk2 to read w")
    lock:release()
    zk:close()
    zk2:close()
    for i = 1, 3 do ens:node(i):start() end
  end)

  it("moves to another node when its server freezes, same session", function()
    local zk = zklua.client(tls_opts(ens))
    zk:start()
    local id, current = zk:client_id(), zk._session:current_server()
    local frozen
    for i = 1, 3 do
      if ens:node(i).secure_hosts == current then frozen = ens:node(i) end
    end
    frozen:pause()
    local ok, err = pcall(testing.wait_for, function()
      return zk.state == "CONNECTED" and zk._session:current_server() ~= current
    end, 30, "another node")
    frozen:resume()
    assert(ok, err)
    assert.are.equal(id, (zk:client_id()))
    zk:close()
  end)
end)
