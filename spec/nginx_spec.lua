-- zklua inside a real nginx (Debian's nginx + libnginx-mod-http-lua, LuaJIT) against a real
-- ZooKeeper server: the LuaJIT module (make luajit) under zklua.handlers.ngx.
--
-- 1. examples/nginx/nginx.conf as a user would start it (only its port changed to a free
--    one): 4 workers, each with its own session, in one Election and one PartitionAllocator.
--    GET /status tells a worker's pid, whether it leads and its items.  The spec reads every
--    worker's status, sees exactly one leader and a disjoint full cover of the items, kills the
--    leader worker (SIGKILL, by pid), and sees another worker take over and the items covered
--    again by the live workers (the master starts a new worker, which joins).  All the while
--    requests are answered, by the workers that wait for the contended lock too.
-- 2. The luaunit tests of spec/fixtures/nginx/ngx_handler_tests.lua, run inside one worker.
--
-- nginx runs in the foreground (daemon off) with its own prefix and temp dirs under /tmp, on
-- a free loopback port, and is stopped by its master's pid (SIGQUIT, then SIGKILL).
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local child = require "fixtures.child"
local socket = require "socket"

local NGINX = "/usr/sbin/nginx"
local ITEMS = { "item-01", "item-02", "item-03", "item-04", "item-05", "item-06", "item-07",
                "item-08", "item-09", "item-10", "item-11", "item-12" }

local function read_file(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function free_port()
  local s = assert(socket.tcp())
  assert(s:bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

local function cwd()
  local pipe = assert(io.popen("pwd"))
  local dir = pipe:read("l")
  pipe:close()
  return dir
end

-- One HTTP/1.0 GET on a new connection: the body, or nil and why.
local function get(port, path, timeout)
  local s = assert(socket.tcp())
  s:settimeout(timeout or 10)
  local ok, err = s:connect("127.0.0.1", port)
  if not ok then
    s:close()
    return nil, err
  end
  s:send("GET " .. path .. " HTTP/1.0\r\nHost: localhost\r\n\r\n")
  local response, why, partial = s:receive("*a")
  s:close()
  response = response or partial
  if not response or response == "" then return nil, why end
  local status = response:match("^HTTP/1%.%d (%d+)")
  local body = response:match("\r\n\r\n(.*)$")
  if status ~= "200" then return nil, "status " .. tostring(status) .. ": " .. tostring(body) end
  return body
end

local function parse_status(body)
  local status = {}
  for key, value in body:gmatch("(%w+) ([^\n]*)") do status[key] = value end
  status.pid = tonumber(status.pid)
  status.items_list = {}
  for item in (status.items or ""):gmatch("[^,]+") do status.items_list[#status.items_list + 1] = item end
  return status
end

-- A running nginx: conf (a file) copied into a fresh prefix with its port replaced.
local Nginx = {}
Nginx.__index = Nginx

local function start_nginx(conf, env, kids)
  local prefix = os.tmpname()
  os.remove(prefix)
  assert(os.execute("mkdir -p " .. child.quote(prefix .. "/logs")))
  local port = free_port()
  local text = assert(read_file(conf), "cannot read " .. conf)
  local replaced
  text, replaced = text:gsub("listen 127%.0%.0%.1:8080", "listen 127.0.0.1:" .. port)
  assert(replaced == 1, conf .. " must have one `listen 127.0.0.1:8080`")
  write_file(prefix .. "/nginx.conf", text)
  local self = setmetatable({ prefix = prefix, port = port, seen = {} }, Nginx)
  self.kid = child.spawn({ NGINX, "-p", prefix, "-c", prefix .. "/nginx.conf",
                           "-e", prefix .. "/logs/error.log" }, env)
  kids[#kids + 1] = self.kid -- cleaned up (SIGKILL by pid) with the others
  self.master = self.kid:program_pid(10)
  assert(self.master, "nginx did not start: " .. self.kid:stderr())
  return self
end

--- Waits until nginx answers GET path (any answer).
function Nginx:wait_serving(path)
  helpers.eventually(function()
    self:workers()
    local s = socket.tcp()
    s:settimeout(5)
    local ok = s:connect("127.0.0.1", self.port)
    s:close()
    return ok
  end, 30, "nginx to accept connections on " .. self.port)
  local body, why = get(self.port, path)
  assert(body, "GET " .. path .. ": " .. tostring(why) .. "\n" .. self:error_log())
end

--- The pids of the master's live worker processes.
function Nginx:workers()
  local list = {}
  local text = read_file("/proc/" .. self.master .. "/task/" .. self.master .. "/children") or ""
  for pid in text:gmatch("%d+") do
    if child.alive(pid) then
      list[#list + 1] = tonumber(pid)
      self.seen[tonumber(pid)] = true -- killed by pid at the end if still there
    end
  end
  return list
end

function Nginx:error_log()
  return read_file(self.prefix .. "/logs/error.log") or ""
end

--- Lines of the error log at level error or worse.
function Nginx:errors()
  local bad = {}
  for line in self:error_log():gmatch("[^\n]+") do
    if line:match("%[error%]") or line:match("%[crit%]") or line:match("%[emerg%]") then
      bad[#bad + 1] = line
    end
  end
  return bad
end

--- Graceful stop by the master's pid (SIGQUIT): true when nginx and every worker it had
-- exited; otherwise SIGKILL, by pid, for the master and every worker seen, and false.
function Nginx:stop()
  local clean = true
  if not self.kid:exited() then
    self:workers()
    os.execute("kill -QUIT " .. self.master .. " 2>/dev/null")
    clean = self.kid:wait_exit(30)
  end
  for pid in pairs(self.seen) do
    if child.alive(pid) then
      clean = false
      os.execute("kill -KILL " .. pid .. " 2>/dev/null")
    end
  end
  if not self.kid:exited() then
    os.execute("kill -KILL " .. self.master .. " 2>/dev/null")
    self.kid:wait_exit(10)
  end
  return clean
end

function Nginx:remove()
  os.execute("rm -rf " .. child.quote(self.prefix))
end

describe("zklua in nginx (ngx_lua, LuaJIT)", function()
  local server
  local kids = helpers.kids()
  local nginx
  local root = cwd()

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
    kids:cleanup()
  end)

  it("examples/nginx: one leader, the items divided; the leader killed, another takes over", function()
    local app = "/zklua-nginx-spec"
    helpers.delete_trees(server.hosts, app)
    nginx = start_nginx(root .. "/examples/nginx/nginx.conf", {
      ZKLUA_ROOT = root, ZKLUA_HOSTS = server.hosts, ZKLUA_SESSION_TIMEOUT = "2",
      ZKLUA_APP = app }, kids)
    nginx:wait_serving("/status")
    local answered = {} -- pid -> how many of its answers came in

    local last_round = "no round yet" -- what the last snapshot() saw, for failure messages

    -- Asks /status until every live worker answered (new connections: reuseport spreads them);
    -- returns pid -> its latest status, and the live pids; nil when some live worker did not
    -- answer 400 requests (it may just have been started by the master, or be dying).
    local function snapshot()
      local latest, seen, failed, why = {}, 0, 0, nil
      local live = nginx:workers()
      local wanted = {}
      for _, pid in ipairs(live) do wanted[pid] = true end
      for _ = 1, 400 do
        local body, err = get(nginx.port, "/status")
        if body then
          local status = parse_status(body)
          answered[status.pid] = (answered[status.pid] or 0) + 1
          if wanted[status.pid] then
            if not latest[status.pid] then seen = seen + 1 end
            latest[status.pid] = status
          end
          if seen == #live then return latest, live end
        else
          failed, why = failed + 1, err
        end
      end
      local parts = {}
      for _, pid in ipairs(live) do
        parts[#parts + 1] = pid .. (latest[pid] and (" " .. latest[pid].state) or " silent")
      end
      last_round = string.format("live workers %s; %d requests failed (%s)",
                                 table.concat(parts, ", "), failed, tostring(why))
      return nil
    end

    -- Whether the statuses show one leader and a disjoint full cover of ITEMS, all at one
    -- generation; returns the leader's pid then.
    local function settled(latest, live)
      local leader, generation, owner = nil, nil, {}
      for _, pid in ipairs(live) do
        local status = latest[pid]
        if status.state ~= "CONNECTED" then return nil end
        if status.leader == "true" then
          if leader then return nil end
          leader = pid
        end
        generation = generation or status.generation
        if status.generation ~= generation or generation == "nil" then return nil end
        for _, item in ipairs(status.items_list) do
          if owner[item] then return nil end -- owned twice
          owner[item] = pid
        end
      end
      for _, item in ipairs(ITEMS) do
        if not owner[item] then return nil end
      end
      local n = 0
      for _ in pairs(owner) do n = n + 1 end
      if n ~= #ITEMS then return nil end
      return leader
    end

    -- Repeats snapshots until settled() holds for `count` live workers (and, given
    -- `contenders`, every worker read that many election contenders); returns the leader.
    -- A worker joins the allocator and the election separately, so the items may settle
    -- before the last worker's election node is there.
    local function until_settled(count, what, unless, contenders)
      local deadline = os.time() + 120
      while os.time() < deadline do
        local latest, live = snapshot()
        if latest and #live == count and not (unless and unless(live)) then
          local leader = settled(latest, live)
          if leader and contenders then
            for _, pid in ipairs(live) do
              if latest[pid].contenders ~= contenders then leader = nil end
            end
          end
          if leader then return leader, latest, live end
          local parts = {}
          for _, pid in ipairs(live) do
            local st = latest[pid]
            parts[#parts + 1] = string.format("%d %s leader=%s gen=%s items=%s contenders=%s",
                                              pid, st.state, st.leader, st.generation, st.items,
                                              st.contenders)
          end
          last_round = table.concat(parts, "; ")
        end
        testing.sleep(0.05)
      end
      error("timed out waiting for " .. what .. ": " .. last_round .. "\n" .. nginx:error_log())
    end

    local leader, latest, live = until_settled(4, "one leader and the items divided among 4 workers",
                                               nil, "4")
    assert.are.equal(4, #live)
    for _, pid in ipairs(live) do
      assert.are.equal(3, #latest[pid].items_list) -- round_robin: 12 items, 4 workers
      assert.are.equal("4", latest[pid].contenders) -- read from ZooKeeper by the request
    end
    -- the election's nodes agree: the leader's identifier (its pid) comes first
    local zk = helpers.client(server.hosts)
    assert.are.equal(tostring(leader), zk:Election(app .. "/leader"):contenders()[1])

    -- kill the leader; the others keep answering while they contend for the lock
    for pid in pairs(answered) do answered[pid] = 0 end
    assert(os.execute("kill -KILL " .. leader))
    local new_leader = until_settled(4, "a new leader and the items divided among the live workers",
      function(live_now)
        for _, pid in ipairs(live_now) do
          if pid == leader then return true end -- not dead yet
        end
      end)
    assert.are_not.equal(leader, new_leader)
    assert.are.equal(0, answered[leader] or 0)
    local survivors = 0
    for pid, n in pairs(answered) do
      if pid ~= leader and n > 0 then survivors = survivors + 1 end
    end
    assert.is_true(survivors >= 3, "fewer than 3 workers answered during the takeover")
    assert.are.equal(tostring(new_leader), zk:Election(app .. "/leader"):contenders()[1])

    -- a graceful stop closes every session: the workers' nodes go at once
    assert.is_true(nginx:stop(), "nginx did not exit on SIGQUIT")
    helpers.eventually(function()
      return #zk:get_children(app .. "/leader") == 0
    end, 10, "the election's nodes to go")
    assert.are.same({}, nginx:errors())
    zk:close()
    helpers.delete_trees(server.hosts, app)
  end)

  it("runs the ngx handler's luaunit tests inside a worker", function()
    nginx = start_nginx(root .. "/spec/fixtures/nginx/handler_tests.conf", {
      ZKLUA_ROOT = root, ZKLUA_HOSTS = server.hosts }, kids)
    nginx:wait_serving("/filter")
    local report, why = get(nginx.port, "/run", 300)
    assert.is_truthy(report, why)
    local failures = tonumber(report:match("failures (%-?%d+)%s*$"))
    assert.are.equal(0, failures, report .. "\n" .. nginx:error_log())
    assert.truthy(report:find("Ran 7 tests", 1, true), report)
    assert.is_true(nginx:stop(), "nginx did not exit on SIGQUIT")
    assert.are.same({}, nginx:errors())
    helpers.delete_trees(server.hosts, "/ngx-handler-tests")
  end)
end)
