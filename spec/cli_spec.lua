-- The ./zklua runner: options, arg, finding the Lua half without an install, ZKLUA_HOSTS,
-- readable errors, and a prompt, clean exit on SIGTERM / SIGINT (ephemeral nodes vanish).
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local compat = require "zklua.compat"

local quote = child.quote

local ROOT = (function()
  local pipe = assert(io.popen("pwd", "r"))
  local dir = pipe:read("l")
  pipe:close()
  return dir
end)()
local ZKLUA = ROOT .. "/zklua"

-- Runs a shell command line (under `timeout`, so a hang fails instead of blocking the suite);
-- returns stdout, stderr, exit code.
local function run(cmdline)
  local base = os.tmpname()
  local out, err = base .. ".out", base .. ".err"
  local ok, how, code = compat.execute(string.format("timeout 30 sh -c %s > %s 2> %s < /dev/null",
                                                 quote(cmdline), quote(out), quote(err)))
  local stdout, stderr = child.read_file(out) or "", child.read_file(err) or ""
  os.remove(out); os.remove(err); os.remove(base)
  if how == "signal" then code = 128 + code end
  if ok == true and code == nil then code = 0 end
  return stdout, stderr, code
end

local function zklua_cmd(args)
  local words = { quote(ZKLUA) }
  for _, a in ipairs(args) do words[#words + 1] = quote(a) end
  return table.concat(words, " ")
end

local function write_temp(text)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

describe("the zklua runner", function()
  local temps = {}
  after_each(function()
    for _, p in ipairs(temps) do os.remove(p) end
    temps = {}
  end)
  local function script(text)
    local p = write_temp(text)
    temps[#temps + 1] = p
    return p
  end

  it("-v prints the version and exits 0", function()
    local out, _, code = run(zklua_cmd{ "-v" })
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^zklua %S+"), out)
    assert.is_truthy(out:find(core.version, 1, true), out)
    assert.are.equal(zklua.version, core.version)
    local out2, _, code2 = run(zklua_cmd{ "--version" })
    assert.are.equal(0, code2)
    assert.are.equal(out, out2)
  end)

  it("-h prints the usage on stdout and exits 0", function()
    local out, _, code = run(zklua_cmd{ "-h" })
    assert.are.equal(0, code)
    assert.is_truthy(out:find("usage: zklua", 1, true), out)
    assert.is_truthy(out:find("ZKLUA_HOSTS", 1, true), out)
  end)

  it("without arguments, or with an unknown option, prints the usage and fails", function()
    local _, err, code = run(zklua_cmd{})
    assert.are_not.equal(0, code)
    assert.is_truthy(err:find("usage", 1, true), err)
    local _, err2, code2 = run(zklua_cmd{ "--bogus" })
    assert.are_not.equal(0, code2)
    assert.is_truthy(err2:find("--bogus", 1, true), err2)
  end)

  it("-e runs a chunk", function()
    local out, err, code = run(zklua_cmd{ "-e", "print(1+1)" })
    assert.are.equal(0, code, err)
    assert.are.equal("2\n", out)
  end)

  it("gives a script arg and ... as lua5.4 does", function()
    local path = script([[
      print("arg0=" .. tostring(arg[0]))
      print("argn=" .. #arg)
      for i = 1, #arg do print("arg" .. i .. "=" .. arg[i]) end
      print("dots=" .. select("#", ...))
      for i = 1, select("#", ...) do print("dot" .. i .. "=" .. select(i, ...)) end
    ]])
    local args = { path, "one", "two words", "" }
    local out, err, code = run(zklua_cmd(args))
    assert.are.equal(0, code, err)
    local expected = { "arg0=" .. path, "argn=3", "arg1=one", "arg2=two words", "arg3=",
                       "dots=3", "dot1=one", "dot2=two words", "dot3=" }
    assert.are.equal(table.concat(expected, "\n") .. "\n", out)
    -- the same as the stock interpreter gives
    local ref = run("lua5.4 " .. table.concat({ quote(path), quote("one"), quote("two words"),
                                                quote("") }, " "))
    assert.are.equal(ref, out)
    -- arg[-1] is the program, as lua5.4 sets it
    local out2 = run(zklua_cmd{ script("print(arg[-1])") })
    assert.are.equal(ZKLUA .. "\n", out2)
  end)

  it("finds zklua without an install, from any directory", function()
    local code_text = [[
      local z = require "zklua"
      print(z.version)
      print(package.searchpath("zklua", package.path))
      print(type(require("zklua.core").session))
    ]]
    local out, err, code = run("cd / && env -u LUA_PATH -u LUA_PATH_5_4 -u LUA_CPATH " ..
                               "-u LUA_CPATH_5_4 " .. zklua_cmd{ "-e", code_text })
    assert.are.equal(0, code, err)
    local version, found, session = out:match("^(.-)\n(.-)\n(.-)\n$")
    assert.are.equal(core.version, version)
    assert.are.equal(ROOT .. "/lua/zklua/init.lua", found)
    assert.are.equal("function", session)
  end)

  it("takes the default hosts of zklua.client() from ZKLUA_HOSTS", function()
    local hosts = "10.0.0.1:2181,10.0.0.2:2182/app"
    local out, err, code = run("ZKLUA_HOSTS=" .. quote(hosts) .. " " .. zklua_cmd{ "-e", [[
      local zklua = require "zklua"
      local function shown(zk) -- zk.hosts: kazoo's {host, port} pairs
        local list = {}
        for i, pair in ipairs(zk.hosts) do list[i] = pair[1] .. ":" .. pair[2] end
        return table.concat(list, ",")
      end
      print(shown(zklua.client()))
      print(zklua.client().chroot)
      print(shown(zklua.client{ timeout = 5 }))
      print(shown(zklua.client("127.0.0.1:1")))
    ]] })
    assert.are.equal(0, code, err)
    local servers = "10.0.0.1:2181,10.0.0.2:2182"
    assert.are.equal(table.concat({ servers, "/app", servers, "127.0.0.1:1" }, "\n") .. "\n", out)
    local out2 = run("env -u ZKLUA_HOSTS " .. zklua_cmd{ "-e", "local h = require('zklua')" ..
                     ".client().hosts[1]; print(h[1] .. ':' .. h[2])" })
    assert.are.equal("127.0.0.1:2181\n", out2)
  end)

  describe("on an error", function()
    it("error('boom') prints a readable message on stderr and exits non-zero", function()
      local out, err, code = run(zklua_cmd{ script("print('before')\nerror('boom')\n") })
      assert.are_not.equal(0, code)
      assert.are.equal("before\n", out)
      assert.is_truthy(err:find("boom", 1, true), err)
      local out2, err2, code2 = run(zklua_cmd{ "-e", "error('boom')" })
      assert.are_not.equal(0, code2)
      assert.are.equal("", out2)
      assert.is_truthy(err2:find("boom", 1, true), err2)
    end)

    it("an error object prints as its message, not as a table", function()
      local _, err, code = run(zklua_cmd{ "-e", [[
        local errors = require("zklua").errors
        error(errors.NoNodeError(nil, "/no/such/node"))
      ]] })
      assert.are_not.equal(0, code)
      assert.is_truthy(err:find("NoNodeError", 1, true), err)
      assert.is_truthy(err:find("/no/such/node", 1, true), err)
      assert.is_nil(err:find("table: 0x", 1, true), err)
    end)

    it("a non-string error value is still reported", function()
      local _, err, code = run(zklua_cmd{ "-e", "error({})" })
      assert.are_not.equal(0, code)
      assert.is_truthy(err:match("%S"), "nothing on stderr")
      local _, err2, code2 = run(zklua_cmd{ "-e", "error()" })
      assert.are_not.equal(0, code2)
      assert.is_truthy(err2:match("%S"), "nothing on stderr")
    end)

    it("a syntax error or a missing script is reported and fails", function()
      local _, err, code = run(zklua_cmd{ script("this is not lua") })
      assert.are_not.equal(0, code)
      assert.is_truthy(err:find("syntax error", 1, true) or err:find("expected", 1, true), err)
      local _, err2, code2 = run(zklua_cmd{ "/nonexistent/script.lua" })
      assert.are_not.equal(0, code2)
      assert.is_truthy(err2:find("/nonexistent/script.lua", 1, true), err2)
    end)
  end)

  describe("with a server", function()
    local server, observer

    setup(function()
      server = testing.server()
      observer = zklua.client(server.hosts)
      observer:start()
    end)
    teardown(function()
      if observer then observer:close() end
      if server then server:stop() end
    end)

    it("an uncaught NoNodeError from an op is readable and fails the script", function()
      local _, err, code = run("ZKLUA_HOSTS=" .. quote(server.hosts) .. " " .. zklua_cmd{ "-e", [[
        local zk = require("zklua").client()
        zk:start()
        zk:get("/missing/node")
      ]] })
      assert.are_not.equal(0, code)
      assert.is_truthy(err:find("NoNodeError", 1, true), err)
      assert.is_truthy(err:find("/missing/node", 1, true), err)
    end)

    it("ends a script's session on a normal exit: its ephemeral node goes at once", function()
      local path = script(string.format([[
        local zk = require("zklua").client{ hosts = %q, timeout = 30 }
        zk:start()
        zk:create("/cli-normal-exit", "", { ephemeral = true })
        print("created")
      ]], server.hosts))
      local out, err, code = run(zklua_cmd{ path })
      assert.are.equal(0, code, err)
      assert.are.equal("created\n", out)
      local t0 = core.monotonic()
      while observer:exists("/cli-normal-exit") and core.monotonic() - t0 < 5 do
        testing.sleep(0.05)
      end
      assert.is_nil(observer:exists("/cli-normal-exit"),
                    "the node outlived the script (session timeout 30 s)")
    end)

    for _, case in ipairs({ { "TERM", 15, "sleep" }, { "INT", 2, "sleep" },
                            { "TERM", 15, "future" }, { "INT", 2, "future" } }) do
      local signame, signum, mode = case[1], case[2], case[3]
      local blocked_in = mode == "sleep" and "zklua.sleep(60)" or "a future:get()"
      it("SIG" .. signame .. " while blocked in " .. blocked_in ..
         " exits promptly and the ephemeral node goes", function()
        local node = "/cli-" .. signame .. "-" .. mode
        local c = child.spawn({ ZKLUA, ROOT .. "/spec/fixtures/hold_session.lua", server.hosts,
                                node, mode, "30" })
        local ok, err = pcall(function()
          local line = c:wait_line("^ready", 20)
          local reported = tonumber(line:match("^ready (%d+)"))
          assert.are.equal(reported, c:program_pid(), "the PID of the running script")
          assert.is_truthy(observer:exists(node))
          -- it is blocked, not finished
          testing.sleep(0.3)
          assert.is_false(c:exited())

          c:signal(signame)
          assert.is_true(c:wait_exit(10), "the script did not exit after SIG" .. signame)
          assert.are_not.equal(0, c.status)
          assert.are.equal(128 + signum, c.status)
          assert.is_nil(c:stdout():find("woke up", 1, true), "the wait was not interrupted")
          -- the session was closed, not left to expire (its timeout is 30 s)
          local t0 = core.monotonic()
          while observer:exists(node) and core.monotonic() - t0 < 5 do testing.sleep(0.05) end
          assert.is_nil(observer:exists(node), "the ephemeral node outlived the script")
        end)
        c:cleanup()
        assert(ok, err)
      end)
    end
  end)
end)
