-- The session's window (max_in_flight, src/core/ops.c): at most that many requests are sent and
-- not yet answered; the rest wait in order and go out as answers come back.  A burst larger
-- than the window completes in order; a wait behind a full window completes; a connection
-- dropped with the window full fails what was sent (ConnectionLoss) and sends the rest after
-- the reconnection; stop() fails what still waits (ConnectionClosedError) at once; bad values
-- are refused before anything is made.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local errors = zklua.errors

local ROOT = "/window"
local BURST = 20000 -- ten times what a recipe usually sends at once; spec/nesting_spec.lua
                    -- and make bench-scale go further

describe("the session's window (max_in_flight)", function()
  local server, admin

  setup(function()
    server = testing.server()
    admin = helpers.client(server.hosts, ROOT)
  end)
  teardown(function()
    helpers.drop(admin, ROOT)
    admin:close()
    server:stop()
  end)

  local function client(window, hosts, timeout)
    local zk = zklua.client{ hosts = hosts or server.hosts, max_in_flight = window,
                             timeout = timeout or 10 }
    zk:start()
    return zk
  end

  it("sends a burst larger than the window, never more than the window at once, in order",
     function()
    local zk = client(100)
    local base = ROOT .. "/burst"
    zk:create(base, "")
    local futures = {}
    for i = 1, BURST do
      futures[i] = zk:create_async(base .. "/n-", "", { sequence = true })
    end
    local last = -1
    for i = 1, BURST do
      local path = futures[i]:get(60)
      local seq = tonumber(path:match("(%d+)$"))
      assert.is_true(seq > last, "created out of order at " .. i)
      last = seq
    end
    local now, most = zk._session:window_use()
    assert.are.equal(0, now)
    assert.are.equal(100, most)
    assert.are.equal(BURST, #zk:get_children(base))
    zk:delete(base, nil, true)
    zk:close()
  end)

  it("bounds what goes out even while the script never waits (no answer taken)", function()
    local zk = client(100)
    zk:create(ROOT .. "/quiet", "v")
    local core = require "zklua.core"
    local function received() -- requests the server has read, from its srvr report
      local report = core.four_letter("127.0.0.1", server:node(1).port, "srvr", 2)
      return tonumber(report and report:match("Received: (%d+)"))
    end
    local before = received()
    local futures = {}
    for i = 1, 3000 do futures[i] = zk:get_async(ROOT .. "/quiet") end -- past the cork's 1024
    local deadline = core.monotonic() + 30
    while received() - before < 100 and core.monotonic() < deadline do
      core.sleep(0.05) -- (core.sleep dispatches nothing: no answer is taken)
    end
    core.sleep(0.5) -- without dispatching: nothing is taken, so nothing more may go out
    -- (the other sessions' pings count too: a few at most)
    local sent = received() - before
    assert.is_true(sent >= 100 and sent <= 110, "sent without a wait: " .. sent)
    for i = 1, 3000 do assert.are.equal("v", (futures[i]:get(30))) end
    zk:delete(ROOT .. "/quiet")
    zk:close()
  end)

  it("the default window is 1000", function()
    local zk = client(nil)
    local base = ROOT .. "/default"
    zk:create(base, "")
    local futures = {}
    for i = 1, 3000 do futures[i] = zk:create_async(base .. "/n" .. i, "") end
    for i = 1, 3000 do futures[i]:get(60) end
    local _, most = zk._session:window_use()
    assert.are.equal(1000, most)
    zk:delete(base, nil, true)
    zk:close()
  end)

  it("a call waiting behind a full window completes", function()
    local zk = client(10)
    local base = ROOT .. "/behind"
    zk:create(base, "v")
    local futures = {}
    for i = 1, 2000 do futures[i] = zk:exists_async(base) end
    assert.are.equal("v", (zk:get(base))) -- behind 2000 reads, 10 at a time
    for i = 1, 2000 do assert.is_table(futures[i]:get(60)) end
    zk:delete(base)
    zk:close()
  end)

  it("a dropped connection fails what was sent; what waited goes out after the reconnection",
     function()
    local p = testing.proxy(server:node(1))
    local zk = client(5, p.hosts)
    local base = ROOT .. "/dropped"
    zk:create(base, "")
    local futures = {}
    p:silence("down") -- nothing answers: the window fills and stays full
    for i = 1, 200 do futures[i] = zk:create_async(base .. "/n" .. i, "") end
    local now = zk._session:window_use()
    assert.are.equal(5, now)
    p:drop()
    p:resume()
    local created, lost = 0, 0
    for i = 1, 200 do
      local ok, err = pcall(futures[i].get, futures[i], 60)
      if ok then
        created = created + 1
      else
        assert.is_true(errors.is(err, errors.ConnectionLoss), tostring(err))
        assert.is_true(i <= 5, "op " .. i .. " had not been sent, yet it failed: " .. tostring(err))
        lost = lost + 1
      end
    end
    assert.are.equal(200, created + lost)
    assert.is_true(created >= 195)
    -- (a lost op's request may have reached the server: its reply was what went missing)
    local children = #admin:get_children(base)
    assert.is_true(children >= created and children <= 200, children .. " nodes")
    zk:delete(base, nil, true)
    zk:close()
    p:stop()
  end)

  it("stop() fails what the window still holds back at once, and nothing is sent after",
     function()
    local p = testing.proxy(server:node(1))
    local zk = client(3, p.hosts)
    local base = ROOT .. "/stopped"
    zk:create(base, "")
    p:silence("down")
    local futures = {}
    for i = 1, 50 do futures[i] = zk:create_async(base .. "/n" .. i, "") end
    p:resume()
    zk:stop()
    for i = 4, 50 do
      local ok, err = pcall(futures[i].get, futures[i], 10)
      assert.is_false(ok, "op " .. i)
      assert.is_true(errors.is(err, errors.ConnectionClosedError), tostring(err))
    end
    for i = 1, 3 do futures[i]:wait(10) end -- sent: answered, or failed with the close
    assert.is_true(#admin:get_children(base) <= 3)
    admin:delete(base, nil, true)
    zk:close()
    p:stop()
  end)

  it("refuses a window that is not a whole number >= 1, before anything is made", function()
    for _, bad in ipairs({ 0, -1, 1.5, 0 / 0, math.huge, 2 ^ 31 }) do
      local ok, err = pcall(zklua.client, { hosts = server.hosts, max_in_flight = bad })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
      assert.is_truthy(tostring(err):find("max_in_flight", 1, true), tostring(err))
    end
    local ok, err = pcall(zklua.client, { hosts = server.hosts, max_in_flight = "10" })
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("max_in_flight", 1, true), tostring(err))
  end)
end)
