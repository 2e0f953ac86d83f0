-- Every script in examples/ runs as written, against a real server (ZKLUA_HOSTS points it there).
local testing = require "zklua.testing"

local function run_example(name, hosts)
  local cmd = string.format("ZKLUA_HOSTS=%s ./zklua examples/%s 2>&1", hosts, name)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("*a")
  local ok, _, code = pipe:close()
  return ok == true or code == 0, out
end

describe("examples", function()
  local server
  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  it("hello.lua connects, writes, watches and stops", function()
    local ok, out = run_example("hello.lua", server.hosts)
    assert.is_true(ok, out)
    assert.matches("session\tCONNECTED", out, 1, true)
    assert.matches("config is now\tv1", out, 1, true)
    assert.matches("session\tLOST", out, 1, true)
  end)

  it("demo.lua shows workers joining, leaving, an expiry and a rejoin", function()
    local ok, out = run_example("demo.lua", server.hosts)
    assert.is_true(ok, out)
    assert.matches("workers now: [worker-1, worker-2, worker-3]", out, 1, true)
    assert.matches("expiring worker-1's session", out, 1, true)
    assert.matches("worker-1   session LOST", out, 1, true)
    assert.matches("done", out, 1, true)
  end)

  it("partition_demo.lua divides queues among worker processes and rebalances", function()
    local ok, out = run_example("partition_demo.lua", server.hosts)
    assert.is_true(ok, out)
    assert.matches("w1       owns queue-1, queue-4, queue-7", out, 1, true)
    assert.matches("stopping w2 %(pid %d+%) with SIGTERM", out)
    -- each table lists every queue once, owned by the live workers only
    local tables = {}
    for title, body in out:gmatch("demo     ([^\n]-) — who owns what[^\n]*\n(.-)\n[^ ]") do
      local owners = {}
      for q, w in body:gmatch("(queue%-%d) %-> (w%d)") do owners[q] = w end
      tables[title] = owners
    end
    local live = { ["3 workers"] = "[123]", ["w2 left"] = "[13]", ["w4 joined"] = "[134]" }
    for title, pattern in pairs(live) do
      local owners = assert(tables[title], "no table for " .. title .. " in:\n" .. out)
      for i = 1, 8 do
        assert.truthy(owners["queue-" .. i] and owners["queue-" .. i]:match("^w" .. pattern .. "$"),
                      title .. ": queue-" .. i)
      end
    end
    assert.are.equal("w1", tables["w2 left"]["queue-3"]) -- w1 took over one of w2's queues
    assert.matches("\ndone\n", out)
  end)

  it("registrar.lua keeps an instance registered until SIGTERM", function()
    local helpers = require "support.helpers"
    local kids = helpers.kids()
    local observer = helpers.client(server.hosts)
    local kid = kids:spawn({ "env", "ZKLUA_HOSTS=" .. server.hosts, "./zklua",
                             "examples/registrar.lua", "api", "10.0.0.7", "8080", "r1" })
    kid:wait_line("^registered api r1 at 10%.0%.0%.7:8080$", 30)
    local instance = observer:ServiceDiscovery("/services"):query_for_instance("api", "r1")
    assert.are.equal("10.0.0.7", instance.address)
    assert.are.equal(8080, instance.port)
    assert.is_not_nil(observer:exists("/services/api/r1").owner_session_id) -- ephemeral
    kid:signal("TERM")
    assert.is_true(kid:wait_exit(30))
    assert.is_nil(observer:exists("/services/api/r1")) -- gone at once: the session was closed
    observer:close()
    kids:cleanup()
  end)

  -- An example that needs a feature of the C client (build.tls, build.sasl, build.tls_sasl): it prints
  -- expected on a build with it, and says how to get one on a build without.
  local function feature_example(name, feature, expected)
    local ok, out = run_example(name, server.hosts)
    if require("zklua").build[feature] then
      assert.is_true(ok, out)
      assert.matches(expected, out, 1, true)
    else
      assert.matches("ZK_CLIENT=source", out, 1, true)
    end
  end

  it("tls.lua connects over TLS to a server of its own", function()
    feature_example("tls.lua", "tls", "/over-tls\thello")
  end)

  it("sasl.lua connects with SASL DIGEST-MD5 to a server of its own", function()
    feature_example("sasl.lua", "sasl", "hello\nfalse\tNoAuthError")
  end)

  it("kerberos.lua connects with SASL GSSAPI to a server and a KDC of its own", function()
    feature_example("kerberos.lua", "sasl", "hello\tbob@ZKLUA.TEST\nfalse\tNoAuthError")
  end)

  it("tls_sasl.lua connects with SASL DIGEST-MD5 over TLS; another user gets NoAuthError", function()
    feature_example("tls_sasl.lua", "tls_sasl", "hello\nfalse\tNoAuthError")
  end)

  it("x509.lua gives a node to one client certificate; another gets NoAuthError", function()
    feature_example("x509.lua", "tls", "CN=alice,OU=zklua-test,O=zklua\nsecret\nfalse\tNoAuthError")
  end)

  it("cqueues.lua runs three coroutines through one lock under the cqueues handler", function()
    local ok, out = run_example("cqueues.lua", server.hosts)
    assert.is_true(ok, out)
    for i = 1, 3 do assert.matches("counted\t" .. i, out, 1, true) end
    assert.matches("final\t3", out, 1, true)
  end)
end)
