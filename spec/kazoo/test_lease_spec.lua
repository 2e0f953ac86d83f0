-- kazoo's kazoo/tests/test_lease.py, translated (see /work/shared/reference/kazoo-tests):
-- NonBlockingLease and MultiNonBlockingLease on kazoo's harness (spec/kazoo/support.lua).
-- kazoo's
-- MockClock (a utcnow returning a datetime it moves forward) is a utcnow returning seconds
-- since the epoch here; a timedelta is seconds; `assert lease` (a lease is true when
-- obtained) is lease.obtained.  kazoo's NonBlockingLease(client, ...) is the class called
-- with a client: zklua.recipes.lease's NonBlockingLease(client, ...).
local support = require "kazoo.support"
local helpers = require "support.helpers"
local leases = require "zklua.recipes.lease"

local NonBlockingLease = leases.NonBlockingLease
local MultiNonBlockingLease = leases.MultiNonBlockingLease

-- kazoo's MockClock: clock.utcnow() returns the epoch, clock.forward(s) moves it on.
local function mock_clock(epoch)
  local clock = { epoch = epoch or 0 }
  function clock.forward(seconds) clock.epoch = clock.epoch + seconds end
  function clock.utcnow() return clock.epoch end
  return clock
end

describe("test_lease.py", function()
  local h, client, client2, client3, path, clock
  local kids = helpers.kids()

  -- KazooLeaseTests.setUp: two more clients, a fresh path and a clock at 10.  kazoo gives the
  -- two a 0.8 s session; the harness's default (10 s) keeps a loaded machine from expiring
  -- them mid-test, and no test here depends on it.
  before_each(function()
    h = support.harness()
    client = h.client
    client2 = h:get_client()
    client2:start()
    client3 = h:get_client()
    client3:start()
    path = "/" .. support.uuid()
    clock = mock_clock(10)
  end)

  after_each(function()
    kids:cleanup()
    h:teardown()
  end)

  -- NonBlockingLeaseTests
  it("test_renew", function()
    -- the client's convenience method, once
    local lease = client:NonBlockingLease(path, 3, nil, clock.utcnow)
    assert.is_true(lease.obtained)

    clock.forward(2)
    local renewed_lease = client:NonBlockingLease(path, 3, nil, clock.utcnow)
    assert.is_true(renewed_lease.obtained)
  end)

  it("test_busy", function()
    local lease = NonBlockingLease(client, path, 3, nil, clock.utcnow)
    assert.is_true(lease.obtained)

    clock.forward(2)
    local foreigner_lease = NonBlockingLease(client2, path, 3, "some.other.host", clock.utcnow)
    assert.is_false(foreigner_lease.obtained)
  end)

  it("test_overtake", function()
    local lease = NonBlockingLease(client, path, 3, nil, clock.utcnow)
    assert.is_true(lease.obtained)

    clock.forward(4)
    local foreigner_lease = NonBlockingLease(client2, path, 3, "some.other.host", clock.utcnow)
    assert.is_true(foreigner_lease.obtained)
  end)

  it("test_renew_no_overtake", function()
    local lease = client:NonBlockingLease(path, 3, nil, clock.utcnow)
    assert.is_true(lease.obtained)

    clock.forward(2)
    local renewed_lease = client:NonBlockingLease(path, 3, nil, clock.utcnow)
    assert.is_true(renewed_lease.obtained)

    clock.forward(2)
    local foreigner_lease = NonBlockingLease(client2, path, 3, "some.other.host", clock.utcnow)
    assert.is_false(foreigner_lease.obtained)
  end)

  it("test_overtaker_renews", function()
    local lease = NonBlockingLease(client, path, 3, nil, clock.utcnow)
    assert.is_true(lease.obtained)

    clock.forward(4)
    local foreigner_lease = NonBlockingLease(client2, path, 3, "some.other.host", clock.utcnow)
    assert.is_true(foreigner_lease.obtained)

    clock.forward(2)
    local foreigner_renew = NonBlockingLease(client2, path, 3, "some.other.host", clock.utcnow)
    assert.is_true(foreigner_renew.obtained)
  end)

  it("test_overtake_refuse_first", function()
    local lease = NonBlockingLease(client, path, 3, nil, clock.utcnow)
    assert.is_true(lease.obtained)

    clock.forward(4)
    local foreigner_lease = NonBlockingLease(client2, path, 3, "some.other.host", clock.utcnow)
    assert.is_true(foreigner_lease.obtained)

    clock.forward(2)
    local first_again_lease = NonBlockingLease(client, path, 3, nil, clock.utcnow)
    assert.is_false(first_again_lease.obtained)
  end)

  -- kazoo bumps its own class's record version for the first lease.  zklua writes only
  -- kazoo 2.8's version, so that lease is a real kazoo's, one version ahead
  -- (spec/fixtures/kazoo_lease.py obtain-newer), at the same clock.
  it("test_old_version", function()
    -- Skip to a future version
    local kid = kids:kazoo("spec/fixtures/kazoo_lease.py", h.hosts, "obtain-newer", path,
                           "3", "-", tostring(clock.epoch))
    assert.is_true(kid:wait_exit(60), "kazoo did not finish: " .. kid:stdout())
    assert.are.equal(0, kid.status, kid:stderr())
    assert.are.equal("obtained True", kid:stdout():match("^[^\n]*")) -- assert lease

    -- Then back to today.
    clock.forward(4)
    local foreigner_lease = NonBlockingLease(client2, path, 3, "some.other.host", clock.utcnow)
    -- Since a newer version wrote the lease file, the lease is not taken.
    assert.is_false(foreigner_lease.obtained)
  end)

  -- MultiNonBlockingLeaseTest
  it("test_1_renew", function()
    local ls = client:MultiNonBlockingLease(1, path, 4, nil, clock.utcnow)
    assert.is_true(ls.obtained)
    clock.forward(2)
    local ls2 = MultiNonBlockingLease(client, 1, path, 4, nil, clock.utcnow)
    assert.is_true(ls2.obtained)
  end)

  it("test_1_reject", function()
    local ls = MultiNonBlockingLease(client, 1, path, 4, nil, clock.utcnow)
    assert.is_true(ls.obtained)
    clock.forward(2)
    local ls2 = MultiNonBlockingLease(client2, 1, path, 4, "some.other.host", clock.utcnow)
    assert.is_false(ls2.obtained)
  end)

  it("test_2_renew", function()
    local ls = MultiNonBlockingLease(client, 2, path, 7, nil, clock.utcnow)
    assert.is_true(ls.obtained)
    clock.forward(2)
    local ls2 = MultiNonBlockingLease(client2, 2, path, 7, "host2", clock.utcnow)
    assert.is_true(ls2.obtained)
    clock.forward(2)
    local ls3 = MultiNonBlockingLease(client, 2, path, 7, nil, clock.utcnow)
    assert.is_true(ls3.obtained)
    clock.forward(2)
    local ls4 = MultiNonBlockingLease(client2, 2, path, 7, "host2", clock.utcnow)
    assert.is_true(ls4.obtained)
  end)

  it("test_2_reject", function()
    local ls = MultiNonBlockingLease(client, 2, path, 7, nil, clock.utcnow)
    assert.is_true(ls.obtained)
    clock.forward(2)
    local ls2 = MultiNonBlockingLease(client2, 2, path, 7, "host2", clock.utcnow)
    assert.is_true(ls2.obtained)
    clock.forward(2)
    local ls3 = MultiNonBlockingLease(client3, 2, path, 7, "host3", clock.utcnow)
    assert.is_false(ls3.obtained)
  end)

  it("test_2_handover", function()
    local ls = MultiNonBlockingLease(client, 2, path, 4, nil, clock.utcnow)
    assert.is_true(ls.obtained)
    clock.forward(2)
    local ls2 = MultiNonBlockingLease(client2, 2, path, 4, "host2", clock.utcnow)
    assert.is_true(ls2.obtained)
    clock.forward(3)
    local ls3 = MultiNonBlockingLease(client3, 2, path, 4, "host3", clock.utcnow)
    assert.is_true(ls3.obtained)
    clock.forward(2)
    local ls4 = MultiNonBlockingLease(client, 2, path, 4, nil, clock.utcnow)
    assert.is_true(ls4.obtained)
  end)
end)
