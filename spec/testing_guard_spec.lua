-- zklua.testing's guard: a cluster the script leaves running is stopped by its PID when the
-- Lua state closes (normal end, or os.exit(code, true) as busted's), before the process ends:
-- not later by the watchdog, and whatever was finalized first (the client's session).  The
-- guard runs no client event loop (those sessions may be closed already) and, under LuaJIT,
-- no pairs() loop (which Debian's LuaJIT can spin in for ever while the state closes; see
-- stop_cluster in lua/zklua/testing.lua).
local helpers = require "support.helpers"
local child = require "fixtures.child"

local function quoted(argv)
  local words = {}
  for i, a in ipairs(argv) do words[i] = child.quote(a) end
  return table.concat(words, " ")
end

local function left_running(how)
  local stdout, stderr, code = helpers.run(quoted(helpers.lua_argv(
    "spec/fixtures/left_running.lua", how)), 120)
  local pid = tonumber(stdout:match("server (%d+)"))
  assert.is_number(pid, "no server pid; stderr: " .. stderr)
  -- the watchdog notices the script's end within a second: looked at before then, a server
  -- still running was not stopped by the guard
  local alive = child.alive(pid)
  if alive then os.execute("kill -KILL " .. pid .. " 2>/dev/null") end
  assert.is_false(alive, "the server outlived the script that left it running")
  assert.equals(0, code, stderr)
  assert.equals("", stderr)
end

describe("zklua.testing guard", function()
  it("stops a server left running, its client still open, when the script ends", function()
    left_running()
  end)

  it("stops a server left running when the script ends with os.exit(0, true)", function()
    left_running("exit")
  end)
end)
