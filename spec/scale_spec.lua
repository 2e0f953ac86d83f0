-- The scale points of make bench-scale (docs/scale.md) at a size make test can afford: a
-- SetPartitioner share of 10k items per member completes its join, a
-- rebalance and a leave with no session lost (before the session's window and O(1) work per
-- lock event, 20k items took 69 s and 26 s of client CPU to acquire, and 100k flooded the
-- server until sessions expired); a member process mid-acquire exits on SIGTERM, and one
-- whose session expires reports FAILURE and ends; 1100 sessions share one process.  The watch
-- bursts are in spec/nesting_spec.lua, the window itself in spec/window_spec.lua.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local child = require "fixtures.child"

local ITEMS = 10000
-- the members' session timeout (s): the issue's under-load points use 10 s (its 2 s grid runs
-- in make bench-scale, on a machine left alone: a loaded one can starve a client's own I/O
-- thread past 2/3 of 2 s)
local TIMEOUT = 10
local LONG = 300  -- an upper bound for each wait, never a speed claim

describe("at scale", function()
  local server, admin

  setup(function()
    server = testing.server()
    admin = helpers.client(server.hosts)
  end)
  teardown(function()
    admin:close()
    server:stop()
  end)

  -- A client whose every state change is kept.
  local function member_client()
    local zk = zklua.client{ hosts = server.hosts, timeout = TIMEOUT }
    local states = {}
    zk:add_listener(function(state) states[#states + 1] = state end)
    zk:start()
    return zk, states
  end

  local function pump(members, done, what)
    local ok = child.poll_until(function()
      for _, qp in ipairs(members) do
        if qp.release then qp:release_set() end
      end
      return done()
    end, LONG)
    assert(ok, "timed out waiting for " .. what)
  end

  local function assert_split(set, members)
    local owner, count = {}, 0
    for _, qp in ipairs(members) do
      for item in qp:iter() do
        assert(owner[item] == nil, item .. " is owned twice")
        owner[item] = qp.identifier
        count = count + 1
      end
    end
    assert.are.equal(#set, count)
    for _, item in ipairs(set) do assert(owner[item], item .. " is owned by nobody") end
  end

  it("SetPartitioner: 10k items join, rebalance and leave, no session lost",
     function()
    local path = "/scale/sp"
    local set = {}
    for i = 1, ITEMS do set[i] = "item" .. i end
    local a, a_states = member_client()
    local b, b_states = member_client()
    local pa = a:SetPartitioner{ path = path, set = set, identifier = "a", time_boundary = 0.3 }
    pump({ pa }, function() return pa.acquired end, "a to own the whole set")
    assert_split(set, { pa })

    local pb = b:SetPartitioner{ path = path, set = set, identifier = "b", time_boundary = 0.3 }
    pump({ pa, pb }, function() return pa.acquired and pb.acquired end, "the rebalance")
    assert_split(set, { pa, pb })
    assert.is_true(#pb:list() > 0 and #pa:list() > 0)

    pb:finish()
    pump({ pa }, function() return pa.acquired and #pa:list() == ITEMS end, "a to own it again")
    assert_split(set, { pa })
    pa:finish()

    -- no SUSPENDED, no LOST: the bursts never held a ping back past the session's timeout
    assert.are.same({ "CONNECTED" }, a_states)
    assert.are.same({ "CONNECTED" }, b_states)
    a:close()
    b:close()
    admin:delete(path, nil, true)
  end)

  -- A member process (spec/fixtures/partitioner_child.lua: the seed's loop) in the middle of
  -- acquiring a 10k share: the issue's failed members spun at 100 % and ignored SIGTERM.
  local function member_process(path)
    local numbers = {}
    for i = 1, ITEMS do numbers[i] = tostring(i) end
    local kid = child.spawn({ "./zklua", "spec/fixtures/partitioner_child.lua",
                              "hosts=" .. server.hosts, "path=" .. path, "numbers=1",
                              "set=" .. table.concat(numbers, ","), "ident=big", "tb=0.3",
                              "timeout=" .. TIMEOUT })
    kid:wait_line("^ready", 60)
    -- mid-acquire: a tenth of the share's locks made
    local ok = child.poll_until(function()
      local ok_, list = pcall(admin.get_children, admin, path .. "/locks")
      return ok_ and #list >= ITEMS / 10
    end, LONG)
    assert(ok, "the member never started acquiring")
    return kid
  end

  -- The member's party node is gone: its session ended.
  local function left(path)
    return child.poll_until(function() return #admin:get_children(path .. "/party") == 0 end, 60)
  end

  -- make bench-scale's sessions point (5000) in small: past 1024 fds, where core.poll once
  -- refused the blocking handler's wait ("too many fds") at the 1025th client.  The child
  -- raises its fd limit to the hard limit, as the bench does; 1100 sessions need about 3300.
  it("1100 sessions in one process all connect, none lost, 3 fds each", function()
    local own = testing.server({ config = { "maxClientCnxns=0" } })
    local kid = child.spawn({ "sh", "-c", 'ulimit -n "$(ulimit -Hn)" && exec "$@"', "sh",
                              "./zklua", "bench/sessions_bench.lua", own.hosts, "1100",
                              tostring(TIMEOUT), "1" })
    local ok, err = pcall(function()
      assert.is_true(kid:wait_exit(LONG), "the sessions process did not end")
      local out = kid:stdout()
      local line = assert(out:match("RESULT sessions [^\n]*"), "no RESULT line: " .. out ..
                          kid:stderr())
      assert.are.equal("1100", line:match(" connected=(%d+)"), line)
      assert.are.equal("0", line:match(" lost=(%d+)"), line)
      assert.are.equal("-", line:match(" error=(.*)$"), line)
      local fds, base = tonumber(line:match(" fds=(%d+)")), tonumber(line:match(" base_fds=(%d+)"))
      -- the eventfd patch: 3 per session, not 4.  Under load a session may be reconnecting as
      -- the fds are counted, with a resolver's socket open for a moment: a few over 3 per
      -- session are such moments, a 4th fd per session is 1100 over.
      assert.is_true(fds - base < 3 * 1100 + 1100 / 2, line)
    end)
    kid:cleanup()
    own:stop()
    assert(ok, err)
  end)

  it("a member acquiring a 10k share exits on SIGTERM, and its session ends", function()
    local path = "/scale/term"
    local kid = member_process(path)
    local ok, err = pcall(function()
      kid:signal("TERM")
      assert.is_true(kid:wait_exit(60), "the member did not exit after SIGTERM")
      assert.are.equal(128 + 15, kid.status)
      assert.is_true(left(path), "the member's party node outlived it")
    end)
    kid:cleanup()
    admin:delete(path, nil, true)
    assert(ok, err)
  end)

  it("a member whose session expires mid-acquire reports FAILURE and ends", function()
    local path = "/scale/expired"
    local kid = member_process(path)
    local ok, err = pcall(function()
      local id, hex = kid:stdout():match("^ready %d+ (%S+) (%x+)")
      local passwd = hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
      local failed = false
      for _ = 1, 30 do -- another session takes it over, then closes it: the server expires it
        local other = zklua.client{ hosts = server.hosts, client_id = { id, passwd }, timeout = 2 }
        pcall(other.start, other, 2)
        other:close()
        failed = child.poll_until(function() return kid:stdout():find("\nfailed ") ~= nil end, 1)
        if failed then break end
      end
      assert.is_true(failed, "the member did not see its session expire: " .. kid:stdout())
      -- (the member's wait can end on the FAILURE state before the notice that sets qp.error
      -- is handled; qp.error was nil then, "failed T nil": the likely cause of one loaded
      -- run's failure here.  qp.error is made from the state now)
      local out = kid:stdout()
      assert.truthy(out:find("SessionExpiredError", 1, true), out)
      assert.is_true(kid:wait_exit(60), "the member did not end after its FAILURE")
      assert.are.equal(0, kid.status)
      assert.is_true(left(path))
    end)
    kid:cleanup()
    admin:delete(path, nil, true)
    assert(ok, err)
  end)
end)
