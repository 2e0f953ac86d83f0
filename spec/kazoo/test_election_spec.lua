-- kazoo's kazoo/tests/test_election.py in Lua, against a real server: every test and
-- assertion of kazoo's.  kazoo's contender threads are coroutines of one controller
-- (support.threads) running election:run(); its Condition waits are waits for the condition
-- they loop on (with kazoo's bounds where it has them), its exit Events support.event.
-- kazoo's ValueError is zklua's BadArgumentsError.
local errors = require "zklua.errors"
local support = require "kazoo.support"

local GUARD = 60 -- s: the most a wait for another thread may take before the test fails

-- Raised only by the test's leader function (kazoo's UniqueError).
local UniqueError = setmetatable({}, {
  __tostring = function() return "UniqueError: expected error in the leader function" end,
})

describe("test_election.py", function()
  local h, path

  before_each(function()
    h = support.harness()
    path = support.unique_path()
  end)
  after_each(function() h:teardown() end)

  it("test_election", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      -- election contenders set these when elected.  The exit event is set by the test to
      -- make the leader exit.
      local self = { leader_id = nil, exit_event = nil,
                     -- tests set this before the event to make the leader raise an error
                     raise_exception = false,
                     -- set by a worker thread when an unexpected error is hit
                     thread_exc_info = nil }

      local function wait_until(pred, timeout, what)
        if not env.handler.wait(pred, timeout or GUARD) then
          error("timed out waiting for " .. what, 2)
        end
      end

      local function leader_func(name)
        local exit_event = support.event(env)
        self.exit_event = exit_event
        self.leader_id = name
        env.handler.poke()

        exit_event.wait(45)
        if self.raise_exception then error(UniqueError, 0) end
      end

      local function election_thread(contender_id, election)
        local ok, err = pcall(election.run, election, leader_func, contender_id)
        if not ok then
          if err ~= UniqueError or not self.raise_exception then
            self.thread_exc_info = tostring(err)
          end
        elseif self.raise_exception then
          self.thread_exc_info = "expected leader func to raise exception"
        end
      end

      local function spawn_contender(contender_id, election)
        return env.spawn(election_thread, contender_id, election)
      end

      local function check_thread_error()
        if self.thread_exc_info then error(self.thread_exc_info, 2) end
      end

      local elections, threads, count = {}, {}, 0
      for _ = 1, 3 do
        local contender = "c" .. support.uuid()
        elections[contender] = client:Election(path, contender)
        threads[contender] = spawn_contender(contender, elections[contender])
        count = count + 1
      end

      -- wait for a leader to be elected (kazoo: at most 6 waits of 5 s)
      wait_until(function() return self.leader_id end, 30, "a leader")

      local election = client:Election(path)

      -- make sure all contenders are in the pool
      env.eventually(function() return #election:contenders() == count end, GUARD,
                     "every contender")
      local contenders = election:contenders()

      local set = {}
      for _, c in ipairs(contenders) do set[c] = true end
      local wanted = {}
      for c in pairs(elections) do wanted[c] = true end
      assert.are.same(wanted, set)

      -- first one in list should be leader
      local first_leader = contenders[1]
      assert.are.equal(first_leader, self.leader_id)

      -- tell second one to cancel election. should never get elected.
      elections[contenders[2]]:cancel()

      -- make leader exit. third contender should be elected.
      self.exit_event.set()
      wait_until(function() return self.leader_id ~= first_leader end, 45, "the next leader")
      assert.are.equal(contenders[3], self.leader_id)
      check_thread_error()

      -- make first contender re-enter the race
      threads[first_leader]:join()
      threads[first_leader] = spawn_contender(first_leader, elections[first_leader])

      -- contender set should now be the current leader plus the first leader
      env.eventually(function() return #election:contenders() == 2 end, GUARD, "2 contenders")
      contenders = election:contenders()
      assert.is_true(#contenders > 0) -- kazoo: assert set(contenders), set([...])

      -- make current leader raise an exception. first should be reelected
      self.raise_exception = true
      self.exit_event.set()
      wait_until(function() return self.leader_id == first_leader end, 45, "the first again")
      assert.are.equal(first_leader, self.leader_id)
      check_thread_error()

      self.exit_event.set()
      for _, thread in pairs(threads) do thread:join() end
      check_thread_error()
    end)
  end)

  it("test_bad_func", function()
    local election = h.client:Election(path)
    local ok, err = pcall(election.run, election, "not a callable")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
  end)
end)
