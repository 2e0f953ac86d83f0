--- zklua.ngx.balancer — nginx upstreams from ZooKeeper service discovery (Curator's layout):
-- in balancer_by_lua, the peer of each request comes from the worker's ServiceCache of a named
-- service, so backends registered by Curator (Java, Spring Cloud Zookeeper) or zklua
-- processes take traffic as they come and go, in a stock nginx with ngx_lua.
--
--   init_worker_by_lua_block {
--     require("zklua.ngx.balancer").init_worker{ hosts = "127.0.0.1:2181",
--       base_path = "/services", services = { "api" } }
--   }
--   exit_worker_by_lua_block { require("zklua.ngx.balancer").exit_worker() }
--   upstream api {
--     server 0.0.0.1;   # a placeholder nginx needs; every peer comes from the balancer
--     balancer_by_lua_block { require("zklua.ngx.balancer").balance("api") }
--   }
--   location = /upstreams { content_by_lua_block { require("zklua.ngx.balancer").status() } }
--
-- init_worker(opts) — opts: hosts (default $ZKLUA_HOSTS), base_path (default "/services"),
--   services (the names balanced), session_timeout (s, default 10), strategy (the
--   ServiceProvider's: "round_robin" (default), "random", "consistent_hash", "rendezvous"),
--   tries (peers tried per request at most, default 3), down_threshold (default 1) and
--   down_timeout (s, default 10): a peer that failed that many times is skipped that long,
--   keep_last (s, default 30; 0 turns it off): when a service's list of instances goes empty
--   (the registrars' old sessions expiring together after an outage, a registration being
--   replaced), the worker goes on balancing over the last instances it knew for up to that
--   long, marked stale in status(); a registration ends it (ServiceProvider's keep_last),
--   wakeup (the ngx handler's).  One session per worker, started from a timer (init_worker
--   cannot wait), set up again and again until it succeeds.
-- balance(name, key) — sets the peer: the next instance of the provider (by key with a key
--   strategy: the same key goes to the same instance on every worker).  On the first try it
--   allows min(tries, instances) - 1 more tries (ngx.balancer.set_more_tries); when nginx
--   comes back for another try (ngx.balancer.get_last_failure(): the peer failed, see
--   proxy_next_upstream), the failed instance is noted down (note_error) and an instance this
--   request has not tried yet ($upstream_addr lists those it tried) is set.  The first try
--   keeps no per-request state (no ngx.ctx).  No
--   instance known: the request fails with 502 (nothing is waited for: balancer_by_lua cannot
--   yield; stock nginx turns any ngx.exit status here into 500 but NGX_BUSY, which it answers
--   with 502 and logs as "no live upstreams").  Instances need an address nginx can connect
--   to without DNS (an IP).
-- status() — content handler: this worker's view as JSON, with an X-Worker-Pid header:
--   {"pid": the worker's pid, "state": its session's state ("CONNECTED", "SUSPENDED", "LOST";
--   "none" before init_worker), "services": {name: ["<id> <address>:<port>[ down][ disabled]",
--   ...]} (each service set up, with the instances balanced over, by id; a service is there
--   once its cache loaded on the worker's first session; " down": skipped after failing, until
--   down_timeout; " disabled": the instance is disabled), "stale": {name: seconds} (the
--   services balanced over their last known instances, keep_last, and for how long)}.
-- exit_worker() — closes the session, so this worker's watches go at once.
--
-- SUSPENDED (connection loss): every worker goes on balancing over the instances it knows
-- (the caches keep them), and catches up when reconnected.  LOST: the same, on a new session
-- (the caches re-read and apply what changed).  A worker whose session never came up balances
-- nothing (502) until it does.  Sharing: balance() runs in the request's context and only
-- reads the worker's caches; nothing is shared between workers.
local zklua = require "zklua"
local ngx_handler = require "zklua.handlers.ngx"
local ngx_balancer = require "ngx.balancer"

local ngx = ngx -- luacheck: ignore (the ngx_lua global)

local M = {}

local STRATEGIES = { round_robin = true, random = true, consistent_hash = true,
                     rendezvous = true }

local settings, zk, handler
local providers = {} -- service name -> ServiceProvider (set up once connected)

local function log(level, ...)
  ngx.log(level, "zklua.ngx.balancer: ", ...)
end

local NGX_LEVELS = { ERROR = ngx.ERR, WARN = ngx.WARN, INFO = ngx.INFO, DEBUG = ngx.DEBUG }
local function logger(level, message)
  local ngx_level = NGX_LEVELS[level] or ngx.ERR
  if ngx_level == ngx.ERR and message:sub(1, 13) == "libzookeeper " then
    ngx_level = ngx.WARN -- a connection attempt that failed: zklua reconnects
  end
  ngx.log(ngx_level, "zklua: ", message)
end

local function set_up()
  zk:start(30)
  local sd = zk:ServiceDiscovery(settings.base_path)
  for _, name in ipairs(settings.services) do
    if not providers[name] then
      local provider = sd:ServiceProvider(name, {
        strategy = settings.strategy, down_threshold = settings.down_threshold,
        down_timeout = settings.down_timeout, keep_last = settings.keep_last })
      provider:start(30)
      providers[name] = provider
    end
  end
end

local function main(premature)
  if premature then return end
  while not ngx.worker.exiting() do
    local ok, err = pcall(set_up)
    if ok or ngx.worker.exiting() then return end
    log(ngx.WARN, "setting up: ", tostring(err), "; again in 1 s")
    pcall(handler.sleep, 1)
  end
end

local function option(opts, key, kind, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= kind then
    error("zklua.ngx.balancer.init_worker: " .. key .. " must be a " .. kind, 3)
  end
  return v
end

--- Makes the worker's session and, from a timer, its providers (see the top).
function M.init_worker(opts)
  if type(opts) ~= "table" then error("zklua.ngx.balancer.init_worker: opts must be a table", 2) end
  local services = option(opts, "services", "table", nil)
  if not services or #services == 0 then
    error("zklua.ngx.balancer.init_worker: services must list at least one name", 2)
  end
  settings = {
    base_path = option(opts, "base_path", "string", "/services"),
    services = services,
    strategy = option(opts, "strategy", "string", "round_robin"),
    tries = option(opts, "tries", "number", 3),
    down_threshold = option(opts, "down_threshold", "number", 1),
    down_timeout = option(opts, "down_timeout", "number", 10),
    keep_last = option(opts, "keep_last", "number", 30),
  }
  if not (settings.keep_last >= 0 and settings.keep_last < math.huge) then
    error("zklua.ngx.balancer.init_worker: keep_last must be a finite number >= 0 (0: off)", 2)
  end
  handler = ngx_handler.new{ wakeup = option(opts, "wakeup", "string", nil) }
  zk = zklua.client{
    hosts = option(opts, "hosts", "string", os.getenv("ZKLUA_HOSTS")),
    timeout = option(opts, "session_timeout", "number", 10),
    handler = handler, logger = logger, log_level = "WARN",
  }
  if not STRATEGIES[settings.strategy] then
    error("zklua.ngx.balancer.init_worker: strategy must be round_robin, random, " ..
          "consistent_hash or rendezvous", 2)
  end
  assert(ngx.timer.at(0, main))
end

function M.exit_worker()
  if zk then zk:close() end
end

-- An instance of list that this request has not tried, starting after the one at start.
local function untried(list, tried, start)
  local n = #list
  for k = 1, n do
    local inst = list[(start + k - 1) % n + 1]
    if not tried[inst.id] then return inst end
  end
  return nil
end

-- nginx's NGX_BUSY: ngx_lua's balancer hands it to nginx (any other status but NGX_ERROR and
-- NGX_DECLINED is 500 without OpenResty's patch), which answers 502 ("no live upstreams").
-- NGX_DECLINED would make nginx try again, and come back here, without end.
local NGX_BUSY = -3

local function fail(...)
  log(ngx.ERR, ...)
  return ngx.exit(NGX_BUSY)
end

local function set_peer(inst)
  local ok, err = ngx_balancer.set_current_peer(inst.address, inst.port)
  if not ok then
    return fail("set_current_peer ", tostring(inst.address), ":", tostring(inst.port), ": ", err)
  end
end

-- The instances of this request's earlier tries, from $upstream_addr ("addr:port, addr:port,
-- ..."; nginx fills it try by try), the last one last.
local function tried_before(provider)
  local by_peer = {}
  for _, inst in ipairs((provider:_known())) do
    by_peer[tostring(inst.address) .. ":" .. tostring(inst.port)] = inst
  end
  local tried, last = {}, nil
  for peer in tostring(ngx.var.upstream_addr or ""):gmatch("[^,%s]+") do
    local inst = by_peer[peer]
    if inst then
      tried[inst.id] = true
      last = inst
    end
  end
  return tried, last
end

-- nginx came back for another try: the last peer failed.
local function retry(provider, name, key)
  local tried, failed = tried_before(provider)
  if failed then provider:note_error(failed) end
  local list = provider:get_all_instances()
  local inst = #list > 0 and provider:_pick(list, key) or nil
  if not inst or tried[inst.id] then
    inst = untried(list, tried, 0) or untried((provider:_known()), tried, 0)
  end
  if not inst then return fail("every instance of service ", name, " failed for this request") end
  return set_peer(inst)
end

--- Sets the peer of this try of the request (see the top).
function M.balance(name, key)
  local provider = providers[name]
  if not provider then return fail("service ", name, ": not set up yet (no session)") end
  if ngx_balancer.get_last_failure() then return retry(provider, name, key) end
  local list = provider:get_all_instances()
  local n = #list
  if n == 0 then return fail("no instance of service ", name, " is known") end
  local more = settings.tries
  if more > n then more = n end
  if more > 1 then
    local ok, err = ngx_balancer.set_more_tries(more - 1)
    if not ok then log(ngx.WARN, "set_more_tries: ", err) end
  end
  return set_peer(provider:_pick(list, key))
end

local function quoted(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

--- Content handler: this worker's view, as JSON (see the top).
function M.status()
  local parts, stale = {}, {}
  for _, name in ipairs(settings and settings.services or {}) do
    local provider, list = providers[name], {}
    if provider then -- (a service not set up yet is left out)
      provider:get_all_instances() -- forgets down marks past down_timeout
      for i, inst in ipairs((provider:_known())) do
        list[i] = quoted(inst.id .. " " .. tostring(inst.address) .. ":" .. tostring(inst.port) ..
                         (provider:is_down(inst.id) and " down" or "") ..
                         (inst.enabled and "" or " disabled"))
      end
      local since = provider:stale_for()
      if since then stale[#stale + 1] = quoted(name) .. ":" .. string.format("%.3f", since) end
      parts[#parts + 1] = quoted(name) .. ":[" .. table.concat(list, ",") .. "]"
    end
  end
  ngx.header["Content-Type"] = "application/json"
  ngx.header["X-Worker-Pid"] = ngx.worker.pid()
  ngx.say('{"pid":', ngx.worker.pid(), ',"state":', quoted(zk and zk.state or "none"),
          ',"services":{', table.concat(parts, ","), '},"stale":{', table.concat(stale, ","),
          "}}")
end

return M
