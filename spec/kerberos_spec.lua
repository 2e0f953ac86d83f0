-- SASL GSSAPI (Kerberos; kazoo's sasl_options) against a real MIT KDC (zklua.testing.kdc) and
-- real servers with Java's Krb5LoginModule (testing.server{sasl = {kerberos = kdc}}): a
-- client authenticates with the process's Kerberos credentials (here a client keytab,
-- KRB5_CLIENT_KTNAME) and has the sasl: identity "bob@ZKLUA.TEST"; a sasl: ACL refuses every
-- other client (NoAuthError, nothing changed); the identity comes back after a reconnect
-- (across an ensemble) and with a new session after an expiry; a Lock works, and is shared
-- with kazoo (its GSSAPI: pure-sasl and python3-kerberos).  Faults (a KDC down, principals
-- the KDC or the server does not know, a keytab without the principal, credentials lost at a
-- reconnect, a KDC that accepts and never answers, also at a reconnection and past MIT's own
-- timeout) each end with a named error within the start timeout, never a hang, and stop()
-- returns.
--
-- This process's clients are bob: kdc:use() sets KRB5_CONFIG, KRB5_CLIENT_KTNAME and
-- KRB5CCNAME here once.  Other principals run in child processes with their own environment.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local child = require "fixtures.child"
local errors = zklua.errors

local raises = helpers.raises

local function gssapi(extra)
  local o = { mechanism = "GSSAPI" }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

describe("SASL GSSAPI options", function()
  it("bad GSSAPI sasl_options are refused before anything is sent", function()
    local function refused(class, o, text)
      local err = raises(class, zklua.client, { hosts = "127.0.0.1:1", sasl_options = o })
      assert.is_truthy(tostring(err):find(text, 1, true), tostring(err))
    end
    refused(errors.ConfigurationError, gssapi({ username = "bob", password = "x" }),
            "GSSAPI takes no username or password")
    refused(errors.BadArgumentsError, gssapi({ principal = "bob smith@R" }),
            "principal must be a Kerberos principal")
    refused(errors.BadArgumentsError, gssapi({ principal = "a@b@c" }),
            "principal must be a Kerberos principal")
    refused(errors.BadArgumentsError, gssapi({ service = "zookeeper/host" }),
            "service must be a service name")
    refused(errors.BadArgumentsError, gssapi({ service = "" }), "service must be a service name")
    refused(errors.BadArgumentsError, gssapi({ principal = 7 }), "principal must be a string")
  end)
end)

if not core.zookeeper.sasl then
  describe("SASL GSSAPI on this build", function()
    pending("needs a ZooKeeper C client with SASL (make: ZK_CLIENT=source)")
  end)
  return
end

describe("SASL GSSAPI (Kerberos)", function()
  local kdc, server, admin, keytabs, kids
  local BOB = "bob@ZKLUA.TEST"
  local n = 0
  local root

  -- a child zklua (the suite's interpreter) running script with env; returns its stdout
  local function zklua_child(env, script, ...)
    local path = kdc.dir .. "/child-" .. n .. "-" .. math.random(1e9) .. ".lua"
    local f = assert(io.open(path, "w"))
    f:write(script)
    f:close()
    local words = {}
    for k, v in pairs(env) do words[#words + 1] = k .. "=" .. child.quote(v) end
    for _, a in ipairs(helpers.lua_argv(path, ...)) do words[#words + 1] = child.quote(a) end
    local out, err, code = helpers.run("env " .. table.concat(words, " "), 90)
    assert.are.equal(0, code, err .. out)
    return out
  end

  -- a child connecting with env and sasl_options o (a Lua table constructor's text); prints
  -- "ok" or the error's class and message, then the seconds start() took
  local CONNECT = [[
local zklua = require "zklua"
local core = require "zklua.core"
local hosts, path = arg[1], arg[2]
local ok, err = pcall(function()
  local zk = zklua.client{ hosts = hosts, timeout = 10, sasl_options = %s }
  local t0 = core.monotonic()
  local started, why = pcall(zk.start, zk, 15)
  io.write(string.format("took %%.3f\n", core.monotonic() - t0))
  if not started then error(why, 0) end
  if path ~= "" then
    local read, e = pcall(zk.get, zk, path)
    print(read and "read:" .. e or "get:" .. tostring(e))
  end
  zk:close()
end)
print(ok and "ok" or "error:" .. tostring(err))
]]
  local function connect_child(env, options, path)
    local out = zklua_child(env, CONNECT:format(options), server.hosts, path or "")
    local took = tonumber(out:match("took ([%d%.]+)"))
    return out, took
  end

  setup(function()
    kdc = testing.kdc()
    keytabs = { bob = kdc:add_principal("bob"), alice = kdc:add_principal("alice") }
    kdc:use(keytabs.bob)
    server = testing.server({ sasl = { kerberos = kdc } })
    admin = zklua.client{ hosts = server.hosts, timeout = 10,
                          sasl_options = gssapi({ principal = BOB }) }
    admin:start()
    kids = helpers.kids()
  end)
  teardown(function()
    kids:cleanup()
    admin:close()
    server:stop()
    kdc:close()
  end)
  before_each(function()
    n = n + 1
    root = "/krb/" .. n
    admin:ensure_path(root)
  end)

  local bob_only = function() return { zklua.security.make_acl("sasl", BOB, { all = true }) } end

  it("connects with the keytab's principal; the server names it bob@ZKLUA.TEST", function()
    local zk = zklua.client{ hosts = server.hosts, timeout = 10, sasl_options = gssapi() }
    zk:start()
    zk:create(root .. "/mine", "v", { acl = zklua.security.CREATOR_ALL_ACL })
    local acl = zk:get_acls(root .. "/mine")
    assert.are.equal("sasl", acl[1].id.scheme)
    assert.are.equal(BOB, acl[1].id.id) -- realm kept: no kerberos.removeRealmFromPrincipal
    zk:set(root .. "/mine", "w")
    assert.are.equal("w", (zk:get(root .. "/mine")))
    zk:close()
  end)

  it("a ticket cache filled by kinit does as well as a keytab (KRB5CCNAME alone)", function()
    local env = kdc:env() -- KRB5_CONFIG, a cache of its own, and no client keytab
    env.KRB5_CLIENT_KTNAME = kdc.dir .. "/missing.keytab"
    local prefix = ""
    for k, v in pairs(env) do prefix = prefix .. k .. "=" .. child.quote(v) .. " " end
    local _, err, code = helpers.run(prefix .. "kinit -k -t " .. child.quote(keytabs.alice) ..
                                     " alice@ZKLUA.TEST", 30)
    assert.are.equal(0, code, err)
    local out = connect_child(env, '{ mechanism = "GSSAPI", principal = "alice@ZKLUA.TEST" }')
    assert.matches("\nok\n", out, 1, true)
  end)

  it("a sasl: ACL for bob: other clients get NoAuthError and nothing changes", function()
    local path = root .. "/guarded"
    admin:create(path, "original", { acl = bob_only() })
    local plain = zklua.client{ hosts = server.hosts, timeout = 10 }
    plain:start()
    local digest = zklua.client{ hosts = server.hosts, timeout = 10,
                                 auth_data = { { "digest", BOB .. ":x" } } }
    digest:start()
    for _, zk in ipairs({ plain, digest }) do
      raises(errors.NoAuthError, zk.get, zk, path)
      raises(errors.NoAuthError, zk.set, zk, path, "changed")
      raises(errors.NoAuthError, zk.create, zk, path .. "/child", "c")
      raises(errors.NoAuthError, zk.set_acls, zk, path, zklua.security.OPEN_ACL_UNSAFE)
      zk:close()
    end
    -- alice, authenticated by Kerberos too, in a process of her own
    local out = zklua_child(kdc:env(keytabs.alice), [[
local zklua = require "zklua"
local zk = zklua.client{ hosts = arg[1], timeout = 10,
                         sasl_options = { mechanism = "GSSAPI", principal = "alice@ZKLUA.TEST" } }
zk:start(15)
for _, op in ipairs({ "get", "set", "create", "set_acls" }) do
  local ok, err
  if op == "get" then ok, err = pcall(zk.get, zk, arg[2])
  elseif op == "set" then ok, err = pcall(zk.set, zk, arg[2], "changed")
  elseif op == "create" then ok, err = pcall(zk.create, zk, arg[2] .. "/child", "c")
  else ok, err = pcall(zk.set_acls, zk, arg[2], zklua.security.OPEN_ACL_UNSAFE) end
  print(op, ok, zklua.errors.is(err, zklua.errors.NoAuthError))
end
zk:close()
]], server.hosts, path)
    for _, op in ipairs({ "get", "set", "create", "set_acls" }) do
      assert.matches(op .. "\tfalse\ttrue", out, 1, true)
    end
    local value, stat = admin:get(path)
    assert.are.equal("original", value)
    assert.are.equal(0, stat.version)
    assert.are.equal(0, stat.numChildren)
    assert.are.equal(0, stat.aversion)
  end)

  it("a server with kerberos.removeRealmFromPrincipal names the client bob", function()
    local own = testing.server({ sasl = { kerberos = kdc, remove_realm = true } })
    local ok, err = pcall(function()
      local zk = zklua.client{ hosts = own.hosts, timeout = 10, sasl_options = gssapi() }
      zk:start()
      zk:create("/mine", "v", { acl = zklua.security.CREATOR_ALL_ACL })
      assert.are.equal("bob", zk:get_acls("/mine")[1].id.id)
      zk:close()
    end)
    own:stop()
    assert(ok, err)
  end)

  it("re-authenticates with a new session after an expiry", function()
    local zk = zklua.client{ hosts = server.hosts, timeout = 10, sasl_options = gssapi() }
    zk:start()
    zk:create(root .. "/x", "v", { acl = bob_only() })
    local before = zk:client_id()
    testing.expire_session(zk, 30, server.hosts)
    testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "a new session")
    assert.are_not.equal(before, (zk:client_id()))
    assert.are.equal("v", (zk:retry(zk.get, zk, root .. "/x")))
    zk:close()
  end)

  it("a Lock over GSSAPI, shared with kazoo's GSSAPI; kazoo reads bob's node, not alice", function()
    local path = root .. "/shared"
    admin:create(path, "from zklua", { acl = bob_only() })
    local script = kdc.dir .. "/kazoo-" .. n .. ".py"
    local f = assert(io.open(script, "w"))
    f:write([[
import sys, threading
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
hosts, path, lock_path, mode = sys.argv[1:5]
zk = KazooClient(hosts=hosts, timeout=10,
                 sasl_options={"mechanism": "GSSAPI", "service": "zookeeper"})
zk.start(timeout=30)
try:
    print("read:" + zk.get(path)[0].decode(), flush=True)
except NoAuthError:
    print("NoAuthError", flush=True)
if mode == "lock":
    lock = zk.Lock(lock_path, "kazoo")
    lock.acquire(timeout=30)
    print("held", flush=True)
    done = threading.Event()
    zk.exists(lock_path + "-done", watch=lambda event: done.set())
    if zk.exists(lock_path + "-done"):
        done.set()
    done.wait(60)
    # zklua's contender queues behind kazoo's node before kazoo lets go (its blocking acquire
    # follows the -done node: released at once, kazoo could take the free lock again first)
    queued = threading.Event()
    def contenders(children):
        if len(children) >= 2:
            queued.set()
    zk.ChildrenWatch(lock_path, contenders)
    queued.wait(60)
    lock.release()
    print("released", flush=True)
    # zklua holds it now: kazoo cannot take it
    print("kazoo got it while zklua held it:", lock.acquire(blocking=False), flush=True)
zk.stop()
]])
    f:close()
    -- alice's kazoo: refused; bob's kazoo reads, and takes the lock first
    local alice = child.spawn({ helpers.PYTHON, script, server.hosts, path, root .. "/lock",
                                "read" }, kdc:env(keytabs.alice))
    kids[#kids + 1] = alice
    alice:wait_line("^NoAuthError$", 60)
    assert.is_true(alice:wait_exit(60))
    local bob = child.spawn({ helpers.PYTHON, script, server.hosts, path, root .. "/lock", "lock" },
                            kdc:env(keytabs.bob))
    kids[#kids + 1] = bob
    bob:wait_line("^read:from zklua$", 60)
    bob:wait_line("^held$", 60)
    local zk = zklua.client{ hosts = server.hosts, timeout = 10, sasl_options = gssapi() }
    zk:start()
    local lock = zk:Lock(root .. "/lock", "zklua")
    assert.is_false(lock:acquire(false)) -- kazoo holds it
    zk:create(root .. "/lock-done", "")
    assert.is_true(lock:acquire(true, 60))
    bob:wait_line("^released$", 60)
    bob:wait_line("^kazoo got it while zklua held it: False$", 60)
    assert.is_true(bob:wait_exit(60))
    assert.are.equal(0, bob.status)
    lock:release()
    zk:close()
  end)

  it("faults at connect: a named AuthFailedError within the start timeout, never a hang", function()
    local function fails(env, options, pattern)
      local out, took = connect_child(env, options)
      assert.matches("error:AuthFailedError: the client's SASL GSSAPI", out, 1, true)
      assert.matches(pattern, out, 1, true)
      assert.is_true(took ~= nil and took < 15, out)
      return took
    end
    -- a principal the KDC does not know (deleted after its keytab was made)
    local carol = kdc:add_principal("carol")
    kdc:delete_principal("carol")
    fails(kdc:env(carol), '{ mechanism = "GSSAPI" }', "(Client 'carol@ZKLUA.TEST' not found in Kerberos database)")
    -- a service the KDC does not know
    fails(kdc:env(keytabs.bob), '{ mechanism = "GSSAPI", service = "nosuch" }',
          "(Server nosuch/127.0.0.1@ZKLUA.TEST not found in Kerberos database)")
    -- a keytab that does not exist (and no ticket cache)
    local missing = kdc.dir .. "/missing.keytab"
    fails(kdc:env(missing), '{ mechanism = "GSSAPI" }', "No Kerberos credentials available")
    -- the KDC down, with no ticket in the cache yet
    kdc:stop()
    local ok, err = pcall(fails, kdc:env(keytabs.bob), '{ mechanism = "GSSAPI" }',
                          "Cannot contact any KDC for realm 'ZKLUA.TEST'")
    kdc:start()
    assert(ok, err)
    -- and back: the same keytab connects
    local out = connect_child(kdc:env(keytabs.bob), '{ mechanism = "GSSAPI" }')
    assert.matches("\nok\n", out, 1, true)
  end)

  it("a KDC that accepts and never answers: start's TimeoutError names it, stop returns", function()
    -- SIGSTOP: the kernel accepts the connection and queues the request, nothing answers.
    -- MIT waits about 27 s by its own timeouts; the client's tickets are fetched on a thread
    -- of their own before the connection, so start(5) ends by its timeout, naming the KDC,
    -- while MIT still waits (the message says the fetch had not ended), and stop/close return
    local script = [[
local zklua = require "zklua"
local zk = zklua.client{ hosts = arg[1], timeout = 10, sasl_options = { mechanism = "GSSAPI" } }
local ok, err = pcall(zk.start, zk, 5)
print(ok and "started" or "error:" .. tostring(err))
zk:stop()
print("stopped:" .. zk.state)
zk:close()
print("closed")
]]
    kdc:pause()
    local ok, out = pcall(zklua_child, kdc:env(keytabs.bob), script, server.hosts)
    kdc:resume()
    assert(ok, out)
    assert.matches("error:TimeoutError: could not connect to " .. server.hosts .. " within 5 s " ..
                   "(the Kerberos KDC has not answered the client's SASL GSSAPI ticket requests)",
                   out, 1, true)
    assert.matches("\nstopped:LOST\nclosed\n", out, 1, true)
    -- the KDC answers again: a client with a ticket cache of its own connects and reads
    admin:create(root .. "/after", "v")
    out = connect_child(kdc:env(keytabs.bob), '{ mechanism = "GSSAPI" }', root .. "/after")
    assert.matches("read:v\nok\n", out, 1, true)
  end)

  it("a reconnection needing tickets from a KDC that never answers: SUSPENDED, stop returns, " ..
     "and the session comes back once it answers", function()
    -- The ticket cache gone and the KDC frozen, a dropped connection needs new tickets to
    -- reconnect.  MIT waits about 27 s a request.  The I/O thread waits for the ticket fetch
    -- (its own thread), where stop ends the wait, not inside the library's SASL step, where
    -- nothing could: b stops while its request waits in the KDC's socket.  a keeps trying
    -- and, once the KDC answers, gets its session back.  Each client has a proxy of its own.
    local pa, pb = testing.proxy(server:node(1)), testing.proxy(server:node(1))
    local a = zklua.client{ hosts = pa.hosts, timeout = 30, sasl_options = gssapi() }
    local b = zklua.client{ hosts = pb.hosts, timeout = 30, sasl_options = gssapi() }
    a:start()
    b:start()
    a:create(root .. "/guarded", "v", { acl = bob_only() })
    local id = a:client_id()
    local cache = assert(os.getenv("KRB5CCNAME")):gsub("^FILE:", "")
    kdc:pause()
    local ok, err = pcall(function()
      assert(os.remove(cache))
      assert.is_false(kdc:request_waiting())
      pb:cut_reply("get") -- a read in flight when the connection drops: ConnectionLoss at once
      local read = b:get_async(root .. "/guarded")
      testing.wait_for(function() return pb:status().cut end, 10, "the read at the server")
      pb:drop()
      raises(errors.ConnectionLoss, read.get, read, 10)
      testing.wait_for(function() return b.state == "SUSPENDED" end, 10, "b SUSPENDED")
      testing.wait_for(function() return kdc:request_waiting() end, 10, "b's ticket request")
      local t0 = core.monotonic()
      b:stop()
      local took = core.monotonic() - t0
      assert.is_true(took < 5, "stop took " .. took .. " s with the KDC frozen")
      pa:drop()
      testing.wait_for(function() return a.state == "SUSPENDED" end, 10, "a SUSPENDED")
    end)
    kdc:resume()
    if ok then
      ok, err = pcall(function()
        testing.wait_for(function() return a.state == "CONNECTED" end, 25, "a CONNECTED again")
        assert.are.equal(id, (a:client_id()))
        assert.are.equal("v", (a:get(root .. "/guarded")))
      end)
    end
    a:close()
    b:close()
    pa:stop()
    pb:stop()
    assert(ok, err)
  end)

  it("a KDC frozen past MIT's own timeout at a reconnection: the fetch asks again, and no SASL " ..
     "step waits for it", function()
    -- MIT gives up on a KDC that never answers after about 27 s.  Were the reconnection then
    -- left to the library's SASL step, it would connect (the proxy counts it) and wait for the
    -- KDC inside the I/O thread for as long again.  The fetch asks again instead: when the
    -- KDC holds a second request and the client has closed the first, the client has made no
    -- connection and stop returns at once.
    local p = testing.proxy(server:node(1))
    local a = zklua.client{ hosts = p.hosts, timeout = 60, sasl_options = gssapi() }
    a:start()
    local id = a:client_id()
    local cache = assert(os.getenv("KRB5CCNAME")):gsub("^FILE:", "")
    kdc:pause()
    local ok, err = pcall(function()
      assert(os.remove(cache))
      local accepted = p:status().accepted
      p:drop()
      testing.wait_for(function() return kdc:request_waiting() end, 10, "the ticket request")
      local first = {}
      for _, c in ipairs(kdc:connections()) do first[c.peer] = true end
      testing.wait_for(function()
        local gave_up, asked_again = false, false
        for _, c in ipairs(kdc:connections()) do
          if first[c.peer] and c.state == "08" then gave_up = true end
          if not first[c.peer] and c.state == "01" and c.unread > 0 then asked_again = true end
        end
        return gave_up and asked_again
      end, 90, "MIT to give up on the first request and the fetch to ask again")
      assert.are.equal(accepted, p:status().accepted, "the client connected without tickets")
      assert.are.equal("SUSPENDED", a.state)
    end)
    kdc:resume()
    if ok then -- the KDC answers the request waiting: the session comes back
      ok, err = pcall(function()
        testing.wait_for(function() return a.state == "CONNECTED" end, 25, "CONNECTED again")
        assert.are.equal(id, (a:client_id()))
      end)
    end
    a:close()
    p:stop()
    assert(ok, err)
  end)

  it("a service principal the server has no key for: the server refuses, AuthFailedError", function()
    -- the KDC knows zkother/127.0.0.1 and gives a ticket for it; the server's keytab has
    -- only zookeeper/127.0.0.1, so it cannot accept the ticket
    kdc:add_principal("zkother/127.0.0.1")
    local out, took = connect_child(kdc:env(keytabs.bob), '{ mechanism = "GSSAPI", service = "zkother" }')
    assert.matches("error:AuthFailedError: the server refused the client's SASL GSSAPI", out, 1, true)
    assert.is_true(took ~= nil and took < 15, out)
  end)

  it("a principal whose keytab is not the process's: ConfigurationError before anything is sent", function()
    -- this process's credentials are bob's: naming alice is refused at zklua.client
    local err = raises(errors.ConfigurationError, zklua.client,
                       { hosts = server.hosts, sasl_options = gssapi({ principal = "alice@ZKLUA.TEST" }) })
    assert.matches("credentials are " .. BOB .. "'s (the ", tostring(err), 1, true)
    -- a principal without its realm: of any realm
    zklua.client{ hosts = server.hosts, sasl_options = gssapi({ principal = "bob" }) }:close()
    -- a keytab without the principal (alice's keytab, bob named), in a process of its own
    local out = connect_child(kdc:env(keytabs.alice),
                              '{ mechanism = "GSSAPI", principal = "bob@ZKLUA.TEST" }')
    assert.matches("error:ConfigurationError: client: sasl_options: GSSAPI as bob@ZKLUA.TEST: " ..
                   "this process's Kerberos credentials are alice@ZKLUA.TEST's (the client " ..
                   "keytab FILE:" .. keytabs.alice .. ")", out, 1, true)
    -- no credentials at all, a principal named
    out = connect_child(kdc:env(kdc.dir .. "/missing.keytab"),
                        '{ mechanism = "GSSAPI", principal = "bob@ZKLUA.TEST" }')
    assert.matches("error:ConfigurationError: client: sasl_options: GSSAPI as bob@ZKLUA.TEST: " ..
                   "no Kerberos credentials", out, 1, true)
  end)

  it("credentials lost and the KDC down at a reconnect: AUTH_FAILED ends every wait", function()
    local own = testing.server({ sasl = { kerberos = kdc } })
    local zk = zklua.client{ hosts = own.hosts, timeout = 30, sasl_options = gssapi() }
    zk:start()
    zk:create("/guarded", "v", { acl = bob_only() })
    own:node(1):stop()
    testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    local futures = { zk:get_async("/guarded"), zk:exists_async("/guarded"),
                      zk:create_async("/other", "x"), zk:set_async("/guarded", "w") }
    -- the ticket cache gone (kdestroy) and no KDC to get new tickets from
    kdc:stop()
    local cache = assert(os.getenv("KRB5CCNAME")):gsub("^FILE:", "")
    os.remove(cache)
    own:node(1):start()
    local ok, err = pcall(function()
      local t0 = core.monotonic()
      for _, f in ipairs(futures) do raises(errors.AuthFailedError, f.get, f, 30) end
      local took = core.monotonic() - t0
      assert.is_true(took < 15, "the waits ended after " .. took .. " s")
      helpers.wait_until(function() return zk.client_state == "AUTH_FAILED" end, 10, "AUTH_FAILED")
      assert.are.equal("LOST", zk.state)
      raises(errors.AuthFailedError, zk.get, zk, "/guarded")
      raises(errors.AuthFailedError, zk.Lock, zk, "/lock")
    end)
    kdc:start()
    zk:close()
    if ok then -- nothing was written; the keytab gets new tickets once the KDC is back
      local bob = zklua.client{ hosts = own.hosts, timeout = 10, sasl_options = gssapi() }
      bob:start()
      assert.are.equal("v", (bob:get("/guarded")))
      assert.is_nil(bob:exists("/other"))
      bob:close()
    end
    own:stop()
    assert(ok, err)
  end)
end)

describe("SASL GSSAPI across an ensemble", function()
  it("re-authenticates on another node after its node stops, with the KDC down", function()
    local kdc = testing.kdc()
    kdc:use(kdc:add_principal("bob"))
    local ens = testing.ensemble(3, { sasl = { kerberos = kdc } })
    local ok, err = pcall(function()
      local zk = zklua.client{ hosts = ens.hosts, timeout = 10,
                               sasl_options = gssapi({ principal = "bob@ZKLUA.TEST" }) }
      zk:start(30)
      zk:create("/guarded", "v", { acl = { zklua.security.make_acl("sasl", "bob@ZKLUA.TEST",
                                                                  { all = true }) } })
      -- the service ticket is in the cache: reconnections need no KDC
      kdc:stop()
      local function current() return zk.connected and zk._session:current_server() end
      local server = current()
      local node
      for _, candidate in ipairs(ens.nodes) do
        if candidate.hosts == server then node = candidate end
      end
      assert(node, "connected to " .. tostring(server))
      node:stop()
      testing.wait_for(function()
        local now = zk.state == "CONNECTED" and current()
        return now and now ~= server
      end, 60, "a connection to another node")
      assert.are.equal("v", (zk:retry(zk.get, zk, "/guarded")))
      zk:set("/guarded", "w")
      node:start()
      zk:close()
    end)
    ens:stop()
    kdc:close()
    assert(ok, err)
  end)
end)
