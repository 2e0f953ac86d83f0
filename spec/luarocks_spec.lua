-- rockspec/zklua-scm-1.rockspec: `luarocks --lua-version 5.4 make --tree DIR` builds a copy of
-- the checkout offline and installs zklua.core, the Lua modules and bin/zklua into DIR; a
-- script run with the tree's paths (lua5.4, or the installed command from anywhere) uses
-- what was installed, against a real server.
-- (It runs lua5.4 and the installed command whatever runs busted: make test runs it in the Lua
-- 5.4 suite only.)
local zklua = require "zklua"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local helpers = require "support.helpers"

local quote = child.quote
local run = helpers.run

local function pwd()
  local pipe = assert(io.popen("pwd", "r"))
  local dir = pipe:read("*l")
  pipe:close()
  return dir
end

-- The script each way of running runs: where zklua came from, then a round trip.
local SCRIPT = [[
local zklua = require "zklua"
print("lua " .. package.searchpath("zklua", package.path))
print("core " .. tostring(package.searchpath("zklua.core", package.cpath)))
local zk = zklua.client()
zk:start(30)
zk:create("/rocks/" .. (... or "x"), "installed", { makepath = true })
print("read " .. zk:get("/rocks/" .. (... or "x")))
zk:stop()
]]

describe("the luarocks rockspec", function()
  local ROOT = pwd()
  local dir, tree, server, observer, built_out, built_code

  setup(function()
    local mk = assert(io.popen("mktemp -d /tmp/zklua-rock.XXXXXX", "r"))
    dir = mk:read("*l")
    mk:close()
    tree = dir .. "/tree"
    -- a copy of the checkout, without its build/: the rock is built from the sources alone
    local copy = string.format("mkdir %s/src && cd %s && cp -r Makefile rockspec src lua " ..
                               "scripts README.md %s/src/", quote(dir), quote(ROOT), quote(dir))
    local _, err, code = run(copy)
    assert(code == 0, err)
    local out
    out, err, built_code = run(string.format("cd %s/src && luarocks --lua-version 5.4 make " ..
      "--tree %s rockspec/zklua-scm-1.rockspec", quote(dir), quote(tree)), 600)
    built_out = out .. err
    server = testing.server()
    observer = helpers.client(server.hosts)
  end)

  teardown(function()
    if observer then observer:close() end
    if server then server:stop() end
    if dir and dir:match("^/tmp/zklua%-rock%.") then os.execute("rm -rf " .. quote(dir)) end
  end)

  local function script_file(name)
    local path = dir .. "/" .. name .. ".lua"
    local f = assert(io.open(path, "w"))
    f:write(SCRIPT)
    f:close()
    return path
  end

  -- Lines "lua <path>", "core <path>", "read <value>" -> table
  local function report(out)
    return { lua = out:match("lua (%S+)"), core = out:match("core (%S+)"),
             read = out:match("read (%S+)") }
  end

  local function within_tree(path)
    return path ~= nil and path:sub(1, #tree + 1) == tree .. "/"
  end

  it("builds offline and installs the module, the Lua files and the zklua command", function()
    assert.are.equal(0, built_code, built_out)
    for _, file in ipairs({ "lib/lua/5.4/zklua/core.so", "share/lua/5.4/zklua/init.lua",
                            "share/lua/5.4/zklua/client.lua", "share/lua/5.4/zklua/compat.lua",
                            "share/lua/5.4/zklua/recipes/lock.lua",
                            "share/lua/5.4/zklua/handlers/blocking.lua",
                            "share/lua/5.4/zklua/testing.lua", "share/lua/5.4/zklua/sandbox.lua",
                            "bin/zklua" }) do
      assert.is_truthy(child.read_file(tree .. "/" .. file), file .. " is not installed")
    end
    local out, err, code = run("luarocks --lua-version 5.4 --tree " .. quote(tree) ..
                               " list --porcelain")
    assert.are.equal(0, code, err)
    assert.is_truthy(out:find("zklua\tscm%-1\tinstalled"), out)
  end)

  it("links the system libzookeeper-mt and says what it has; use_ssl says how to get TLS", function()
    assert.are.equal(0, built_code, built_out)
    local out, err, code = run(quote(tree .. "/bin/zklua") .. " -v")
    assert.are.equal(0, code, err)
    local _, _, ssl_code = run("nm -D /usr/lib/x86_64-linux-gnu/libzookeeper_mt.so.2 | " ..
                               "grep -q ' T zookeeper_init_ssl$'")
    local has_ssl = ssl_code == 0 -- Debian's has no TLS
    assert.is_truthy(out:find("system library: " .. (has_ssl and "tls" or "no tls"), 1, true), out)
    if not has_ssl then
      out, err, code = run(quote(tree .. "/bin/zklua") .. " -e " .. quote(
        "local ok, e = pcall(require('zklua').client, {hosts = '127.0.0.1:1', use_ssl = true," ..
        " certfile = '/c', keyfile = '/k'}); print(e.name, tostring(e))"))
      assert.are.equal(0, code, err)
      assert.is_truthy(out:find("^ConfigurationError"), out)
      assert.is_truthy(out:find("ZK_CLIENT=source", 1, true), out)
    end
  end)

  it("lua5.4 with the tree's paths runs a script against a real server", function()
    assert.are.equal(0, built_code, built_out)
    local paths, err, code = run("luarocks --lua-version 5.4 --tree " .. quote(tree) .. " path")
    assert.are.equal(0, code, err)
    local cmd = string.format("cd / && env -u LUA_PATH_5_4 -u LUA_CPATH_5_4 ZKLUA_HOSTS=%s " ..
                              "sh -c %s", quote(server.hosts),
                              quote(paths .. "\nexec lua5.4 " .. quote(script_file("plain")) ..
                                    " plain"))
    local out, err2, code2 = run(cmd)
    assert.are.equal(0, code2, err2)
    local r = report(out)
    assert.is_true(within_tree(r.lua), r.lua)
    assert.is_true(within_tree(r.core), r.core)
    assert.are.equal("installed", r.read)
    assert.are.equal("installed", (observer:get("/rocks/plain")))
  end)

  it("the installed zklua command runs a script from anywhere with the tree's files", function()
    assert.are.equal(0, built_code, built_out)
    local out, err, code = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH " ..
      "-u LUA_PATH_5_4 -u LUA_CPATH_5_4 ZKLUA_HOSTS=%s %s %s command", quote(server.hosts),
      quote(tree .. "/bin/zklua"), quote(script_file("command"))))
    assert.are.equal(0, code, err)
    local r = report(out)
    assert.is_true(within_tree(r.lua), r.lua)
    assert.are.equal("installed", r.read)
    assert.are.equal("installed", (observer:get("/rocks/command")))
    local version = run(quote(tree .. "/bin/zklua") .. " -v")
    assert.are.equal("zklua " .. zklua.version .. " (Lua 5.4", version:sub(1, #zklua.version + 15))
  end)

  it("the installed command's --sandbox serves a script", function()
    assert.are.equal(0, built_code, built_out)
    local out, err, code = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH " ..
      "-u LUA_PATH_5_4 -u LUA_CPATH_5_4 -u ZKLUA_HOSTS %s --sandbox %s sandboxed",
      quote(tree .. "/bin/zklua"), quote(script_file("sandboxed"))), 120)
    assert.are.equal(0, code, err)
    assert.are.equal("installed", report(out).read)
    local pid = tonumber(err:match("%(pid (%d+)%)"))
    assert.is_truthy(pid, err)
    assert.is_false(child.alive(pid))
  end)
end)
