--- spec/support/helpers.lua — the helpers the spec files share.
--
--   local helpers = require "support.helpers"
--
-- busted's setup/teardown/before_each/after_each are globals only inside spec files, so the
-- spec files keep those calls; the helpers here are what they call.
-- busted's assert (luassert) is a global of spec files only.
local assert = require "luassert"
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local compat = require "zklua.compat"

local helpers = {}

--- A started client of node through a fault proxy (zklua.testing.proxy) for cut_reply
-- tests: when the client gives up on a connection whose reply was cut (SUSPENDED; the server
-- still hears it, so the session lives), the proxy resumes.  Returns the client, the proxy
-- and the list of states the client went through.
function helpers.client_losing_reply(node, timeout)
  local proxy = testing.proxy(node)
  local zk = zklua.client{ hosts = proxy.hosts, timeout = timeout or 4 }
  zk:start()
  local states = {}
  zk:add_listener(function(state)
    states[#states + 1] = state
    if state == "SUSPENDED" then proxy:resume() end
  end)
  return zk, proxy, states
end

--- Whether the suite runs under LuaJIT (scripts/run-specs --lua=luajit).
helpers.LUAJIT = compat.luajit

--- Lua 5.4's math.type(x) == "integer"; under LuaJIT, an integral number.
helpers.is_integer = compat.is_integer

--- Runs a shell command line under `timeout` (a hang fails instead of blocking the suite), with
--- no stdin; returns stdout, stderr and the exit code (128 + N when killed by signal N).
function helpers.run(cmdline, timeout)
  local base = os.tmpname()
  local out, err = base .. ".out", base .. ".err"
  local ok, how, code = compat.execute(string.format("timeout %d sh -c %s > %s 2> %s < /dev/null",
    timeout or 60, child.quote(cmdline), child.quote(out), child.quote(err)))
  local stdout, stderr = child.read_file(out) or "", child.read_file(err) or ""
  os.remove(out); os.remove(err); os.remove(base)
  if how == "signal" then code = 128 + code end
  if ok == true and code == nil then code = 0 end
  return stdout, stderr, code
end

--- The argv that runs a Lua script (relative to the checkout) as a child process on the
--- suite's own interpreter: ./zklua (Lua 5.4), or luajit with the checkout's module paths.
function helpers.lua_argv(script, ...)
  local argv
  if helpers.LUAJIT then
    argv = { "luajit", "-e", "package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path; " ..
             "package.cpath = 'build/luajit/?.so;' .. package.cpath", script }
  else
    argv = { "./zklua", script }
  end
  for i = 1, select("#", ...) do argv[#argv + 1] = select(i, ...) end
  return argv
end

--- Debian's python3, which has python3-kazoo (for the kazoo child processes).
helpers.PYTHON = "/usr/bin/python3"

--- Runs fn(...) and returns the error it raised (fails the test if it raised nothing).
function helpers.raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error, got none")
  return err
end

--- Runs fn(...), asserts it raised an error of class (a zklua.errors class); returns it.
function helpers.raises(class, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected " .. class.name)
  assert.is_true(errors.is(err, class), "expected " .. class.name .. ", got " .. tostring(err))
  return err
end

--- A sorted copy of list.
function helpers.sorted(list)
  local copy = {}
  for i, v in ipairs(list) do copy[i] = v end
  table.sort(copy)
  return copy
end

--- Whether list holds the items of wanted in that order (other items may come between).
function helpers.in_order(list, wanted)
  local i = 1
  for _, item in ipairs(list) do
    if item == wanted[i] then i = i + 1 end
  end
  return i > #wanted
end

--- Polls done() every 20 ms while running the zklua event loops (child.poll_until); raises,
--- blaming the caller, unless it holds within timeout seconds (default 10).
function helpers.eventually(done, timeout, what)
  if not child.poll_until(done, timeout or 10) then
    error("timed out waiting for " .. (what or "a condition"), 2)
  end
end

--- Polls pred (which may itself talk to the server) every 50 ms until it is true; raises,
--- blaming the caller, after timeout seconds (default 10).
--- (testing.wait_for re-evaluates its predicate only when an event arrives.)
function helpers.wait_until(pred, timeout, what)
  local deadline = core.monotonic() + (timeout or 10)
  while not pred() do
    if core.monotonic() > deadline then
      error("timed out after " .. (timeout or 10) .. " s waiting for " .. (what or "a condition"), 2)
    end
    testing.sleep(0.05)
  end
end

--- Polls, without running the event loop, until session (a client's _session) has no op in
--- flight: the replies are queued but not handled, so a recipe's next step is not sent yet.
function helpers.replies_queued(session, timeout, what)
  local deadline = core.monotonic() + (timeout or 10)
  while session:pending() > 0 do
    if core.monotonic() > deadline then
      error("timed out after " .. (timeout or 10) .. " s waiting for " .. (what or "the replies"), 2)
    end
    core.sleep(0.002)
  end
end

--- A recipe held through an outage is released while the server is out of reach (lock,
--- semaphore): the release returns at once and the holder's node (node_of(recipe), a full
--- path) goes once the server is back; the recipe is usable again.  make(zk) makes the recipe
--- on a client with an 8 s session timeout that reaches server's node through a fault proxy
--- (zklua.testing.proxy): the outage is the proxy refusing connections and dropping the live
--- one, not a server stop (a stop on a loaded machine could outlast the session: a connection
--- down for a whole session timeout is a LOST, and the holder would have lost it before the
--- release).  observer is a client of the server itself (a single-node ensemble).
function helpers.release_while_down(server, observer, make, node_of)
  local proxy = testing.proxy(server:node(1))
  local zk = zklua.client{ hosts = proxy.hosts, timeout = 8 }
  local ok, err = pcall(function()
    zk:start()
    local recipe = make(zk)
    assert.is_true(recipe:acquire())
    local node = node_of(recipe)
    proxy:refuse(true)
    proxy:drop()
    testing.wait_for(function() return zk.state ~= "CONNECTED" end, 10, "the disconnection")
    assert.is_true(recipe.is_acquired)
    assert.is_true(recipe:release())
    assert.is_false(recipe.is_acquired)
    proxy:refuse(false)
    testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "reconnection")
    helpers.eventually(function() return observer:exists(node) == nil end, 30, "the node to go")
    assert.is_true(recipe:acquire(true, 30)) -- and it is usable again
  end)
  zk:close()
  proxy:stop()
  if not ok then error(err, 0) end
end

--- testing.expire_session (it expires the session at its first call: the client's
--- reconnection is held until the session is gone).  Then, as kazoo's harness, it waits (at
--- most 30 s) until zk is CONNECTED on its new session: a call made before that raises
--- SessionExpiredError.
function helpers.expire(zk)
  testing.expire_session(zk, 30)
  zk.handler.wait(function()
    return zk.state == "CONNECTED" and zk.client_state ~= "EXPIRED_SESSION"
  end, 30)
end

--- A started client on hosts; when root is given, it is ensured first.
function helpers.client(hosts, root)
  local zk = zklua.client(hosts)
  zk:start()
  if root then zk:ensure_path(root) end
  return zk
end

--- n started clients on hosts (returned as n values).
function helpers.clients(hosts, n)
  local list = {}
  for i = 1, n do list[i] = helpers.client(hosts) end
  return table.unpack(list, 1, n)
end

--- Deletes root recursively (errors ignored) and closes zk; nothing when zk is nil.
function helpers.drop(zk, root)
  if zk then
    pcall(zk.delete, zk, root, nil, true)
    zk:close()
  end
end

--- With a fresh admin client on hosts, deletes each path recursively (errors ignored).
function helpers.delete_trees(hosts, ...)
  local admin = helpers.client(hosts)
  for _, p in ipairs({ ... }) do pcall(admin.delete, admin, p, nil, true) end
  admin:close()
end

--- Child processes spawned by a spec (fixtures.child), cleaned up together.  The list holds
--- the children in the order spawned (kids[#kids] is the last one).
local Kids = {}
Kids.__index = Kids

function helpers.kids()
  return setmetatable({}, Kids)
end

function Kids:spawn(argv)
  local kid = child.spawn(argv)
  self[#self + 1] = kid
  return kid
end

--- A kazoo child: PYTHON script args...
function Kids:kazoo(script, ...)
  return self:spawn({ helpers.PYTHON, script, ... })
end

--- Cleans up (SIGKILL if still running) every child, and empties the list.
function Kids:cleanup()
  for _, kid in ipairs(self) do kid:cleanup() end
  for i = #self, 1, -1 do self[i] = nil end
end

return helpers
