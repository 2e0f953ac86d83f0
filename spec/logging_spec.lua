-- libzookeeper's own log lines go through the client's logger (src/core/log.c, the `logger`
-- and `log_level` options of lua/zklua/client.lua): quiet by default, only to the session
-- they belong to, rate-limited when every server is down, nothing on stderr unless a level
-- name asks for it.  Dead servers are free loopback ports with nothing listening.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local helpers = require "support.helpers"

local REPEAT_S = 5 -- ZKL_LOG_REPEAT_S in src/core/log.h

local function dead_hosts(n)
  local list = {}
  for i = 1, n or 1 do list[i] = "127.0.0.1:" .. core.free_port() end
  return table.concat(list, ",")
end

-- A client on hosts whose logger records {t, level, message}; returns it and the records.
local function recorded_client(hosts, log_level, timeout)
  local lines = {}
  local zk = zklua.client{ hosts = hosts, timeout = timeout or 2, log_level = log_level,
                           logger = function(level, message)
                             lines[#lines + 1] = { t = core.monotonic(), level = level,
                                                   message = message }
                           end }
  return zk, lines
end

-- "libzookeeper check_events@2985: ..." -> "check_events@2985"
local function place_of(message)
  return message:match("^libzookeeper (%S+@%d+):")
end

local function suppressed_in(message)
  return tonumber(message:match("%((%d+) similar lines suppressed%)")) or 0
end

local function count(lines, pred)
  local n = 0
  for _, l in ipairs(lines) do if pred(l) then n = n + 1 end end
  return n
end

-- Tries to connect for seconds (all servers down); returns how long it tried.
local function fail_to_start(zk, seconds)
  local t0 = core.monotonic()
  local ok, err = pcall(zk.start, zk, seconds)
  assert.is_false(ok)
  assert.is_true(errors.is(err, errors.TimeoutError), tostring(err))
  return core.monotonic() - t0
end

-- Runs spec/fixtures/log_child.lua on the suite's interpreter; returns stdout, stderr.
local function run_log_child(hosts, logger, seconds)
  local c = child.spawn(helpers.lua_argv("spec/fixtures/log_child.lua", hosts, logger, seconds))
  local exited = c:wait_exit(seconds + 60)
  local out, err = c:stdout(), c:stderr()
  c:cleanup()
  assert.is_true(exited, "the child did not exit")
  assert.are.equal(0, c.status, err)
  return out, err
end

describe("libzookeeper's log lines", function()
  local server

  setup(function() server = testing.server() end)
  teardown(function() if server then server:stop() end end)

  describe("with every server down", function()
    it("reach a function logger as ERROR/WARN lines, one per place per " .. REPEAT_S ..
       " s, with a count of those suppressed", function()
      local hosts = dead_hosts(1)
      local zk, lines = recorded_client(hosts)
      local tried = fail_to_start(zk, 2 * REPEAT_S + 1)
      zk:close()
      local port = hosts:match(":(%d+)$")
      local errs = count(lines, function(l)
        return l.level == "ERROR" and l.message:find("127.0.0.1:" .. port, 1, true) ~= nil
      end)
      assert.is_true(errs >= 1, "no ERROR line about the dead server")
      -- per place, at most one line per window (+1 for the first)
      local per_place, suppressed = {}, 0
      for _, l in ipairs(lines) do
        if l.level == "ERROR" or l.level == "WARN" then
          local place = assert(place_of(l.message), l.message)
          per_place[place] = (per_place[place] or 0) + 1
          suppressed = suppressed + suppressed_in(l.message)
        end
      end
      for place, n in pairs(per_place) do
        assert.is_true(n <= math.floor(tried / REPEAT_S) + 1,
                       n .. " lines from " .. place .. " in " .. tried .. " s")
      end
      -- the library retried many more times than was shown: the lines say how many
      assert.is_true(suppressed >= 1, "no line reported suppressed repeats")
      assert.is_true(#lines <= 20, #lines .. " lines")
    end)

    it("retries on two dead hosts come out as a few lines with counts of the rest",
       function()
      local zk, lines = recorded_client(dead_hosts(2))
      local tried = fail_to_start(zk, REPEAT_S + 2)
      local attempts = zk._session:failed_connection_attempts()
      zk:close()
      local shown, suppressed = 0, 0
      for _, l in ipairs(lines) do
        if l.level == "ERROR" or l.level == "WARN" then
          shown = shown + 1
          suppressed = suppressed + suppressed_in(l.message)
        end
      end
      assert.is_true(shown >= 1)
      assert.is_true(shown <= 2 * (math.floor(tried / REPEAT_S) + 1), shown .. " lines shown")
      -- every failed attempt logs an ERROR line; all but the few shown are counted
      -- (the attempts are paced: spec/connection_retry_spec.lua)
      assert.is_true(attempts > shown, attempts .. " attempts, " .. shown .. " lines shown")
      assert.is_true(suppressed >= 1, "only " .. suppressed .. " suppressed")
    end)

    it("print nothing at all by default, on stdout or stderr", function()
      local out, err = run_log_child(dead_hosts(1), "none", 3)
      assert.are.equal("done\n", out)
      assert.are.equal("", err)
    end)

    it("go to a function logger and nothing to stderr", function()
      local out, err = run_log_child(dead_hosts(1), "function", 3)
      assert.are.equal("", err)
      assert.is_truthy(out:find("\nline ERROR libzookeeper ", 1, true) or
                       out:find("^line ERROR libzookeeper "), out)
      assert.is_truthy(out:find("done\n$"), out)
    end)

    it("a level name prints that level and more severe ones on stderr, a few lines", function()
      local out, err = run_log_child(dead_hosts(1), "WARN", 3)
      assert.are.equal("done\n", out)
      local n = 0
      for line in err:gmatch("[^\n]+") do
        n = n + 1
        assert.is_truthy(line:match("^zklua ERROR: libzookeeper ") or
                         line:match("^zklua WARN: libzookeeper "), line)
      end
      assert.is_true(n >= 1, "nothing on stderr")
      assert.is_true(n <= 6, n .. " lines in 3 s: " .. err)
    end)
  end)

  it("reach only the client whose session logged them", function()
    local live, live_lines = recorded_client(server.hosts, "INFO", 10)
    live:start()
    local hosts = dead_hosts(1)
    local dead, dead_lines = recorded_client(hosts)
    fail_to_start(dead, 2)
    live:create("/logging-routed", "x", { ephemeral = true })
    live:close()
    dead:close()
    local dead_port, live_port = hosts:match(":(%d+)$"), server.hosts:match(":(%d+)$")
    assert.is_true(#dead_lines >= 1)
    for _, l in ipairs(live_lines) do
      assert.is_nil(l.message:find(":" .. dead_port, 1, true), l.message)
    end
    for _, l in ipairs(dead_lines) do
      assert.is_nil(l.message:find(":" .. live_port, 1, true), l.message)
    end
    assert.is_true(count(live_lines, function(l)
      return l.level == "INFO" and l.message:lower():find("session establishment complete", 1,
                                                          true)
    end) == 1, "the live client's INFO line about its session")
  end)

  it("the library formats only what the most verbose logger wants; levels filter", function()
    assert.are.equal(0, core.library_log_level())
    local quiet = zklua.client(server.hosts)
    quiet:start()
    -- a client without a logger asks for ERROR lines only: they pace its reconnections
    assert.are.equal(1, core.library_log_level())
    local errs_only, errs_lines = recorded_client(server.hosts, "ERROR", 10)
    errs_only:start()
    assert.are.equal(1, core.library_log_level())
    local chatty, chatty_lines = recorded_client(server.hosts, "DEBUG", 10)
    chatty:start()
    assert.are.equal(4, core.library_log_level())
    chatty:get("/")
    chatty:close()
    assert.are.equal(1, core.library_log_level())
    errs_only:get("/")
    errs_only:close()
    quiet:close()
    assert.are.equal(0, core.library_log_level())
    assert.is_true(count(chatty_lines, function(l) return l.level == "DEBUG" end) >= 1)
    assert.are.equal(0, count(errs_lines, function(l) return l.level ~= "ERROR" end))
  end)

  it("SUSPENDED: lines about the lost connection come through; LOST: the new session's too",
     function()
    local own = testing.server()
    local zk, lines = recorded_client(own.hosts, "INFO", 10)
    local ok, err = pcall(function()
      zk:start()
      helpers.expire(zk) -- LOST, and a new session on a new handle
      testing.wait_for(function() return zk.state == "CONNECTED" end, 20, "a new session")
      local established = count(lines, function(l)
        return l.message:lower():find("session establishment complete", 1, true) ~= nil
      end)
      assert.is_true(established >= 2, "lines from the handle opened after the expiry")
      local before = #lines
      own:stop() -- SUSPENDED: the connection is gone, the session may live
      testing.wait_for(function() return zk.state == "SUSPENDED" end, 20, "SUSPENDED")
      helpers.eventually(function()
        for i = before + 1, #lines do
          if lines[i].level == "ERROR" or lines[i].level == "WARN" then return true end
        end
        return false
      end, 20, "an ERROR or WARN line about the lost connection")
    end)
    zk:close()
    own:stop()
    assert(ok, err)
  end)

  it("refuses a bad logger or log_level, naming it", function()
    local function rejected(argument, opts)
      opts.hosts = server.hosts
      local raised = helpers.raises(errors.BadArgumentsError, zklua.client, opts)
      assert.are.equal(argument, raised.argument)
    end
    rejected("logger", { logger = 42 })
    rejected("logger", { logger = "LOUD" })
    rejected("log_level", { logger = print, log_level = "VERBOSE" })
    rejected("log_level", { logger = print, log_level = 3 })
    rejected("log_level", { log_level = "INFO" }) -- without a logger
  end)
end)
