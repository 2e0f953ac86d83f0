-- zklua inside a real nginx (Debian's nginx + libnginx-mod-http-lua, LuaJIT) against a real
-- ZooKeeper server: the LuaJIT module (make luajit) under zklua.handlers.ngx.
--
-- examples/nginx/nginx.conf runs as a user would start it (only its port changed to a free
-- one): 4 workers, each with its own session, a DataWatch on a config node, a shared Counter
-- and an Election latch.  Every worker is reached by asking on new connections (reuseport
-- spreads them) until each live pid answered, with a bound.  The scenarios:
-- 1. one leader among 4 workers; /static, /get, /counter answer (concurrent /counter requests
--    share each worker's Counter: every add counts once); the leader killed (SIGKILL,
--    by pid), another worker takes over while the others keep answering;
-- 2. config propagation: the config node changed, every worker's /config shows it; under the
--    handler's default wakeup and under wakeup = "timer";
-- 3. reload (SIGHUP) while requests wait on a lock held elsewhere: each finishes with an
--    answer (the old worker wakes it with a clean 503), the new workers take over;
-- 4. ZooKeeper restarted: the service recovers; ZooKeeper down longer than the session
--    timeout: every worker sees LOST, then recovers on a new session, one leader re-elected;
-- 5. `make install-nginx` into a DESTDIR: the default PREFIX is where nginx's LuaJIT looks,
--    and nginx runs the example, then README.md's complete nginx.conf, on what was installed,
--    with README.md's two path lines;
-- 6. the luaunit tests of spec/fixtures/nginx/ngx_handler_tests.lua, inside one worker.
-- After each: no [alert], [crit], [error] or [emerg] line in error.log (a crashed worker is an
-- [alert] "exited on signal"), and no core file in nginx's prefix.
--
-- nginx runs in the foreground (daemon off) with its own prefix and temp dirs under /tmp, on
-- a free loopback port, and is stopped by its master's pid (SIGQUIT, then SIGKILL).
-- (nginx runs its own LuaJIT whatever runs busted: make test runs this in the LuaJIT suite only.)
local testing = require "zklua.testing"
local compat = require "zklua.compat"
local core = require "zklua.core"
local helpers = require "support.helpers"
local child = require "fixtures.child"
local json = require "dkjson"

local support = require "support.nginx"
local read_file, write_file, cwd = support.read_file, support.write_file, support.cwd
local temp_dir, send_get, receive, request = support.temp_dir, support.send_get, support.receive, support.request
local start_nginx, Nginx = support.start, support.Nginx
local NGINX = support.NGINX
local SESSION_TIMEOUT = "2" -- s: a dead worker's session, and its leadership, go this fast

--- pid -> /status (decoded) of every live worker once accept(status) holds for each.
function Nginx:statuses(accept, what, timeout, pids)
  local answers = self:every_worker("/status", function(code, body)
    if code ~= 200 then return false end
    local status = json.decode(body)
    return status ~= nil and accept(status)
  end, what, timeout, pids)
  local result = {}
  for pid, a in pairs(answers) do result[pid] = json.decode(a.body) end
  return result
end

--- Waits until every one of count live workers is set up and connected and exactly one
-- leads; the election's contenders (observer's view) agree: count of them, the leader first.
-- Returns the leader's pid and the statuses.
function Nginx:settled(observer, app, count, what)
  local deadline = core.monotonic() + 60
  local last = "nothing yet"
  while core.monotonic() < deadline do
    local live = self:workers()
    if #live == count then
      local statuses = self:statuses(function(s)
        return s.ready and s.state == "CONNECTED"
      end, what .. ": every worker connected", 60)
      local leaders = {}
      for pid, s in pairs(statuses) do
        if s.leader then leaders[#leaders + 1] = pid end
      end
      local election = observer:Election(app .. "/leader")
      local ok, contenders = pcall(election.contenders, election)
      if #leaders == 1 and ok and #contenders == count and
         contenders[1] == tostring(leaders[1]) then
        return leaders[1], statuses
      end
      last = string.format("leaders {%s}, contenders {%s}", table.concat(leaders, ","),
                           ok and table.concat(contenders, ",") or tostring(contenders))
    else
      last = #live .. " live workers"
    end
    testing.sleep(0.05)
  end
  error("timed out waiting for " .. what .. ": " .. last .. "\n" .. self:error_log(), 2)
end

--- Sets the config node to value and waits until every live worker's /config shows it.
function Nginx:propagate(observer, app, value)
  observer:set(app .. "/config", value)
  local version = observer:exists(app .. "/config").version
  local answers = self:every_worker("/config", function(status, body)
    return status == 200 and body == value
  end, "every worker's /config to show " .. value)
  for _, a in pairs(answers) do
    assert.are.equal(tostring(version), a.headers["x-config-version"])
  end
end

describe("zklua in nginx (ngx_lua, LuaJIT)", function()
  local server
  local kids = helpers.kids()
  local nginx, observer
  local root = cwd()
  local app = "/zklua-nginx-spec"

  local function example_env(extra)
    local env = { ZKLUA_ROOT = root, ZKLUA_HOSTS = server.hosts,
                  ZKLUA_SESSION_TIMEOUT = SESSION_TIMEOUT, ZKLUA_APP = app }
    for k, v in pairs(extra or {}) do env[k] = v or nil end -- false: unset
    return env
  end

  -- Starts the example (env: example_env(extra)) and waits until it settled with 4 workers.
  local function start_example(extra, http_lines)
    helpers.delete_trees(server.hosts, app)
    observer = helpers.client(server.hosts, app)
    observer:create(app .. "/config", "v0")
    nginx = start_nginx(root .. "/examples/nginx/nginx.conf", example_env(extra), kids,
                        http_lines)
    return nginx:settled(observer, app, 4, "one leader among 4 workers")
  end

  -- A graceful stop closes every session: the workers' nodes go at once; nothing was logged
  -- at error level or worse.
  local function stop_cleanly()
    assert.is_true(nginx:stop(), "nginx did not exit on SIGQUIT")
    helpers.wait_until(function()
      return #observer:get_children(app .. "/leader") == 0
    end, 10, "the election's nodes to go")
    nginx:assert_clean("the graceful stop")
  end

  setup(function()
    assert(io.open(root .. "/build/luajit/zklua/core.so"), "build/luajit/zklua/core.so is " ..
           "missing: run make luajit")
    server = testing.server()
  end)
  teardown(function() server:stop() end)
  after_each(function()
    if nginx then
      nginx:stop()
      nginx:remove()
      nginx = nil
    end
    if observer then
      helpers.drop(observer, app)
      observer = nil
    end
    kids:cleanup()
  end)

  it("examples/nginx: one leader among 4 workers, the endpoints; the leader killed, another " ..
     "takes over", function()
    local leader = start_example()
    assert.are.equal(4, #nginx:workers())
    -- the endpoints, on every worker
    nginx:every_worker("/static", function(status, body)
      return status == 200 and body == "ok"
    end, "/static on every worker")
    nginx:every_worker("/get", function(status, body)
      return status == 200 and body == "v0"
    end, "/get on every worker")
    local values = {}
    for i = 1, 20 do
      local status, body = request(nginx.port, "/counter")
      assert.are.equal(200, status, body)
      values[i] = tonumber(body)
    end
    for i = 1, 20 do assert.are.equal(i, values[i]) end -- one add each, in order
    assert.are.equal("20", (observer:get(app .. "/counter")))
    -- concurrent requests share each worker's Counter object: every add counts once
    local sockets, seen = {}, {}
    for i = 1, 16 do sockets[i] = assert(send_get(nginx.port, "/counter")) end
    for i = 1, 16 do
      local status, body = receive(sockets[i])
      assert.are.equal(200, status, body)
      local value = tonumber(body)
      assert.is_nil(seen[value], "two adds answered " .. tostring(value))
      seen[value] = true
    end
    for value = 21, 36 do assert.is_true(seen[value], "no add answered " .. value) end
    assert.are.equal("36", (observer:get(app .. "/counter")))
    nginx:propagate(observer, app, "v1")
    nginx:assert_clean("the endpoints")

    -- kill the leader; the others keep answering while they contend for the leadership
    nginx:kill_worker(leader)
    local survivors = {}
    for _, pid in ipairs(nginx:workers()) do
      if pid ~= leader then survivors[pid] = true end
    end
    local answered = nginx:statuses(function() return true end, "the survivors' /status", 10,
                                    survivors)
    for pid in pairs(answered) do assert.are_not.equal(leader, pid) end
    local new_leader = nginx:settled(observer, app, 4, "a new leader among 4 workers")
    assert.are_not.equal(leader, new_leader)
    assert.is_false(child.alive(leader))
    -- the worker the master started in place of the killed one has the config too
    nginx:propagate(observer, app, "v2")
    nginx:assert_clean("the leader killed")
    stop_cleanly()
  end)

  it("propagates the config to every worker under the timer wakeup", function()
    start_example({ ZKLUA_NGX_WAKEUP = "timer" })
    for i = 1, 3 do nginx:propagate(observer, app, "timer-" .. i) end
    nginx:every_worker("/get", function(status, body)
      return status == 200 and body == "timer-3"
    end, "/get on every worker")
    nginx:assert_clean("config propagation")
    stop_cleanly()
  end)

  it("a reload (HUP) while requests wait on a contended lock: each is answered, the new " ..
     "workers take over", function()
    start_example()
    local old = {}
    for _, pid in ipairs(nginx:workers()) do old[pid] = true end
    local holder = observer:Lock(app .. "/lock", "spec")
    assert.is_true(holder:acquire(true, 10))
    local waiting = {}
    for i = 1, 8 do waiting[i] = assert(send_get(nginx.port, "/lock?timeout=60", 20)) end
    helpers.wait_until(function()
      return #holder:contenders() == 9
    end, 10, "8 requests to wait for the lock")

    assert(compat.execute("kill -HUP " .. nginx.master))
    for i = 1, 8 do
      local status, body = receive(waiting[i])
      assert.is_truthy(status, body) -- an answer, not a hang (the socket waits 20 s)
      assert.are.equal(503, status, body)
      assert.truthy(body:find("ConnectionClosedError", 1, true), body)
    end
    helpers.wait_until(function()
      for _, pid in ipairs(nginx:workers()) do
        if old[pid] then return false end
      end
      return true
    end, 20, "the old workers to exit")
    for pid in pairs(old) do assert.is_false(child.alive(pid)) end
    holder:release()
    nginx:settled(observer, app, 4, "one leader among the 4 new workers")
    -- the lock works again: the waiters' nodes went with the old sessions
    helpers.wait_until(function() return #holder:contenders() == 0 end, 10,
                       "the old waiters' lock nodes to go")
    nginx:every_worker("/lock?timeout=5", function(status, body)
      return status == 200 and body == "acquired"
    end, "/lock on every new worker")
    nginx:propagate(observer, app, "after-reload")
    nginx:assert_clean("the reload")
    stop_cleanly()
  end)

  it("ZooKeeper restarted, then down longer than the session timeout: the service recovers, " ..
     "a leader is re-elected", function()
    start_example()
    -- a restart: the workers reconnect, their requests reach ZooKeeper again
    server:node(1):stop()
    server:node(1):start()
    observer:close()
    observer = helpers.client(server.hosts)
    nginx:settled(observer, app, 4, "one leader after the restart")
    nginx:every_worker("/get", function(status, body)
      return status == 200 and body == "v0"
    end, "/get on every worker after the restart")
    nginx:propagate(observer, app, "after-restart")
    nginx:assert_clean("the ZooKeeper restart")

    -- down longer than the session timeout: every worker's session counts as expired
    local sessions = {}
    for pid, s in pairs(nginx:statuses(function() return true end, "/status", 10)) do
      sessions[pid] = s.session
    end
    observer:close()
    server:node(1):stop()
    nginx:statuses(function(s) return s.state == "LOST" end, "every worker to see LOST", 30)
    local status, body = request(nginx.port, "/get")
    assert.are.equal(503, status, body) -- a clean error while ZooKeeper is away
    status, body = request(nginx.port, "/counter")
    -- a LOST client refuses a call at once, as kazoo's does in EXPIRED_SESSION
    assert.are.equal(503, status, body)
    assert.truthy(body:find("SessionExpiredError", 1, true), body)
    server:node(1):start()
    observer = helpers.client(server.hosts)
    local _, statuses = nginx:settled(observer, app, 4, "one leader re-elected on new sessions")
    for pid, s in pairs(statuses) do
      assert.are_not.equal(sessions[pid], s.session, "worker " .. pid .. " kept its session")
    end
    nginx:propagate(observer, app, "after-expiry")
    local counted = request(nginx.port, "/counter")
    assert.are.equal(200, counted)
    nginx:assert_clean("ZooKeeper down past the session timeout")
    stop_cleanly()
  end)

  it("make install-nginx: installed where nginx's LuaJIT looks; nginx runs the example on " ..
     "what was installed", function()
    local dest = temp_dir()
    local out, err, code = helpers.run("make -s install-nginx DESTDIR=" .. child.quote(dest), 120)
    assert.are.equal(0, code, out .. err)
    local lib, share = dest .. "/usr/local/lib/lua/5.1", dest .. "/usr/local/share/lua/5.1"
    for _, file in ipairs({ lib .. "/zklua/core.so", share .. "/zklua/init.lua",
                            share .. "/zklua/handlers/ngx.lua",
                            share .. "/zklua/recipes/election.lua" }) do
      assert.is_truthy(read_file(file), file .. " is not installed")
    end

    -- nginx's own default paths hold the default PREFIX's directories
    local probe = temp_dir()
    assert(os.execute("mkdir -p " .. child.quote(probe .. "/logs")))
    write_file(probe .. "/nginx.conf", [[
worker_processes 1;
daemon off;
master_process off;
pid logs/nginx.pid;
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
events {}
http {
  init_by_lua_block {
    local f = assert(io.open(ngx.config.prefix() .. "/paths", "w"))
    f:write(package.path, "\n", package.cpath, "\n")
    f:close()
  }
}
]])
    local kid = child.spawn({ NGINX, "-p", probe, "-c", probe .. "/nginx.conf",
                              "-e", probe .. "/logs/error.log" })
    kids[#kids + 1] = kid
    helpers.wait_until(function() return read_file(probe .. "/paths") ~= nil end, 10,
                       "nginx to write its Lua paths")
    kid:signal("QUIT")
    kid:wait_exit(10)
    local paths = read_file(probe .. "/paths")
    os.execute("rm -rf " .. child.quote(probe))
    for _, wanted in ipairs({ "/usr/local/share/lua/5.1/?.lua;",
                              "/usr/local/share/lua/5.1/?/init.lua;",
                              "/usr/local/lib/lua/5.1/?.so;" }) do
      assert.truthy(paths:find(wanted, 1, true), wanted .. " is not in " .. paths)
    end

    -- the example on the installed tree: README.md's lines for a PREFIX nginx does not search
    local prefix = dest .. "/usr/local"
    local leader, statuses = start_example({
      ZKLUA_ROOT = false, ZKLUA_EXAMPLE = root .. "/examples/nginx" },
      '    lua_package_path "' .. prefix .. '/share/lua/5.1/?.lua;' .. prefix ..
      '/share/lua/5.1/?/init.lua;;";\n    lua_package_cpath "' .. prefix ..
      '/lib/lua/5.1/?.so;;";')
    assert.is_truthy(leader)
    for _, s in pairs(statuses) do
      assert.are.equal(lib .. "/zklua/core.so", s.zklua_core)
    end
    nginx:propagate(observer, app, "installed")
    stop_cleanly()
    nginx:remove()

    -- README.md's complete nginx.conf, as written there, on the installed tree
    local readme = assert(read_file(root .. "/README.md"))
    local conf = readme:match("<!%-%- spec/nginx_spec%.lua runs this configuration %-%->\n" ..
                              "```nginx\n(.-)```")
    assert.is_truthy(conf, "README.md's nginx.conf is missing")
    local conf_file = dest .. "/readme-nginx.conf"
    write_file(conf_file, conf)
    nginx = start_nginx(conf_file, { ZKLUA_HOSTS = server.hosts }, kids,
      '    lua_package_path "' .. prefix .. '/share/lua/5.1/?.lua;' .. prefix ..
      '/share/lua/5.1/?/init.lua;;";\n    lua_package_cpath "' .. prefix ..
      '/lib/lua/5.1/?.so;;";')
    helpers.delete_trees(server.hosts, "/app")
    helpers.wait_until(function()
      return request(nginx.port, "/get") == 404 -- connected: the node is missing
    end, 30, "README.md's nginx to answer 404")
    observer:create("/app/config", "from README", { makepath = true })
    helpers.wait_until(function()
      local status, body = request(nginx.port, "/get")
      return status == 200 and body == "from README"
    end, 10, "README.md's nginx to answer the config")
    assert.is_true(nginx:stop(), "nginx did not exit on SIGQUIT")
    nginx:assert_clean("README.md's nginx.conf")
    helpers.delete_trees(server.hosts, "/app")
    os.execute("rm -rf " .. child.quote(dest))
  end)

  it("runs the ngx handler's luaunit tests inside a worker", function()
    nginx = start_nginx(root .. "/spec/fixtures/nginx/handler_tests.conf", {
      ZKLUA_ROOT = root, ZKLUA_HOSTS = server.hosts }, kids)
    local status, report = nil, nil
    helpers.wait_until(function()
      status, report = request(nginx.port, "/run", 300)
      return status ~= nil
    end, 30, "nginx to serve /run")
    assert.are.equal(200, status, report)
    local failures = tonumber(report:match("failures (%-?%d+)%s*$"))
    assert.are.equal(0, failures, report .. "\n" .. nginx:error_log())
    assert.truthy(report:find("Ran 13 tests", 1, true), report)
    assert.is_true(nginx:stop(), "nginx did not exit on SIGQUIT")
    nginx:assert_clean("the handler's tests")
    helpers.delete_trees(server.hosts, "/ngx-handler-tests")
  end)
end)
