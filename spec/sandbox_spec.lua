-- `zklua --sandbox script.lua`: a throwaway ZooKeeper (zklua.sandbox) serves the script through
-- ZKLUA_HOSTS, and is stopped by its PID however the script ends: normally, by an error, by
-- SIGINT or SIGTERM (also twice in a row).  `make demo` runs examples/demo.lua this way.
local core = require "zklua.core"
local child = require "fixtures.child"
local helpers = require "support.helpers"

local ZKLUA = "./zklua"

-- The script each case runs: connects to the default hosts, proves the server serves, reports
-- "ready", then ends as its argument says.
local SCRIPT = [[
local zklua = require "zklua"
local how = ...
local zk = zklua.client()
zk:start(30)
zk:create("/sandboxed", "here", { ephemeral = true })
assert(zk:get("/sandboxed") == "here")
io.write("ready ", os.getenv("ZKLUA_HOSTS"), "\n")
io.flush()
if how == "error" then error("boom from the script") end
if how == "block" then zklua.sleep(120); io.write("woke up\n") end
]]

-- "zklua: sandbox ZooKeeper on 127.0.0.1:P (pid N), ..." -> hosts, pid
local function sandbox_of(stderr)
  local hosts, pid = stderr:match("sandbox ZooKeeper on (%S+) %(pid (%d+)%)")
  return hosts, tonumber(pid)
end

local function cmdline(pid)
  return (child.read_file("/proc/" .. pid .. "/cmdline") or ""):gsub("%z", " ")
end

-- The server process: alive, a ZooKeeper, answering on hosts; returns its temp dir.
local function assert_serving(pid, hosts)
  assert.is_true(child.alive(pid), "the sandbox server is not running")
  local cmd = cmdline(pid)
  assert.is_truthy(cmd:find("org.apache.zookeeper.server.quorum.QuorumPeerMain", 1, true), cmd)
  local port = tonumber(hosts:match(":(%d+)$"))
  assert.is_truthy(core.four_letter("127.0.0.1", port, "srvr", 5), "no answer on " .. hosts)
  return cmd:match("(/tmp/zklua%-zk%.[^/%s]+)/")
end

-- The live processes whose command line mentions text.
local function processes_mentioning(text)
  local found = {}
  local pipe = assert(io.popen("ls /proc", "r"))
  for entry in pipe:lines() do
    if entry:match("^%d+$") and child.alive(entry) and cmdline(entry):find(text, 1, true) then
      found[#found + 1] = entry
    end
  end
  pipe:close()
  return found
end

-- Gone: the process (and any other running on its files), and the files.  (Its port is not
-- checked: other suites on this machine take free ports, and may take this one at once.)
local function assert_gone(pid, dir)
  assert.is_false(child.alive(pid), "the sandbox server outlived the script")
  if dir then
    assert.are.same({}, processes_mentioning(dir .. "/"))
    assert.is_nil(io.open(dir .. "/node1/zoo.cfg", "r"), dir .. " was left behind")
  end
end

describe("zklua --sandbox", function()
  local kids = helpers.kids()
  local temps = {}
  after_each(function()
    kids:cleanup()
    for _, p in ipairs(temps) do os.remove(p) end
    temps = {}
  end)

  local function script_file()
    local path = os.tmpname() .. ".lua"
    temps[#temps + 1] = path
    local f = assert(io.open(path, "w"))
    f:write(SCRIPT)
    f:close()
    return path
  end

  -- Starts `zklua --sandbox SCRIPT how`; waits for "ready"; returns the child, hosts, pid, dir.
  local function start(how)
    local c = kids:spawn({ ZKLUA, "--sandbox", script_file(), how })
    local line = c:wait_line("^ready ", 120)
    local hosts, pid = sandbox_of(c:stderr())
    assert.is_truthy(pid, c:stderr())
    assert.are.equal("ready " .. hosts, line) -- the script's ZKLUA_HOSTS is the sandbox
    return c, hosts, pid, assert_serving(pid, hosts)
  end

  -- A dir of a server killed without its clean-up (two signals) is removed here.
  local function remove_dir(dir)
    if dir and dir:match("^/tmp/zklua%-zk%.") then os.execute("rm -rf '" .. dir .. "'") end
  end

  it("serves the script, then stops when the script ends normally", function()
    local c, _, pid, dir = start("end")
    assert.is_true(c:wait_exit(60))
    assert.are.equal(0, c.status, c:stderr())
    assert_gone(pid, dir)
  end)

  it("stops the server when the script raises an error", function()
    local c, _, pid, dir = start("error")
    assert.is_true(c:wait_exit(60))
    assert.are.equal(1, c.status)
    assert.is_truthy(c:stderr():find("boom from the script", 1, true), c:stderr())
    assert_gone(pid, dir)
  end)

  for _, case in ipairs({ { "INT", 2 }, { "TERM", 15 } }) do
    local signame, signum = case[1], case[2]
    it("stops the server when the script gets SIG" .. signame, function()
      local c, hosts, pid, dir = start("block")
      assert.is_false(c:exited())
      assert_serving(pid, hosts) -- still up while the script runs
      c:signal(signame)
      assert.is_true(c:wait_exit(60), "the runner did not exit after SIG" .. signame)
      assert.are.equal(128 + signum, c.status)
      assert.is_nil(c:stdout():find("woke up", 1, true))
      assert.is_truthy(dir)
      assert_gone(pid, dir)
    end)
  end

  it("leaves no server behind when the runner is killed outright (SIGKILL)", function()
    local c, _, pid, dir = start("block")
    c:signal("KILL") -- no finalizer runs: the harness's watchdog stops the server
    assert.is_true(c:wait_exit(60))
    helpers.eventually(function() return not child.alive(pid) end, 30, "the server to go")
    helpers.eventually(function() return io.open(dir .. "/node1/zoo.cfg", "r") == nil end, 30,
                       "its files to go")
    assert.are.same({}, processes_mentioning(dir .. "/"))
  end)

  it("stops the server even when SIGINT comes twice in a row", function()
    local c, _, pid, dir = start("block")
    local runner = c:program_pid()
    os.execute("kill -INT " .. runner .. "; kill -INT " .. runner .. " 2>/dev/null")
    assert.is_true(c:wait_exit(60))
    assert.are_not.equal(0, c.status)
    helpers.eventually(function() return not child.alive(pid) end, 30,
                       "the server to go (killed by PID if the runner was cut short)")
    assert.are.same({}, processes_mentioning(dir .. "/"))
    remove_dir(dir)
  end)

  it("runs examples/demo.lua as `make demo` does", function()
    local c = kids:spawn({ ZKLUA, "--sandbox", "examples/demo.lua" })
    assert.is_true(c:wait_exit(120), "the demo did not finish")
    assert.are.equal(0, c.status, c:stdout() .. c:stderr())
    local _, pid = sandbox_of(c:stderr())
    assert.is_truthy(pid, c:stderr())
    assert_gone(pid)
  end)
end)
