--- counter_contention.lua — Counter adds under contention: ADDS concurrent add(1) spread over
-- SESSIONS client sessions in this process (like ADDS requests over SESSIONS nginx workers,
-- each request with its own Counter object on its worker's session), all on one counter node.
-- Every add is started at once (the C state machine runs it, src/recipes/counter.c); the
-- latency of an add is the time from its start to its end, on CLOCK_MONOTONIC, as this
-- process saw it dispatching every session's events.  Repeated ROUNDS times on a fresh node;
-- the figures are over every add of every round.  Checks that the node sums exactly.
-- Prints:
--   RESULT counter_contention adds=<n> sessions=<s> rounds=<r> p50_ms=<ms> p99_ms=<ms>
--          max_ms=<ms> retries_per_add=<x>
-- (retries_per_add: BadVersion retries per add, when the counter reports them; else "-").
--   ./zklua bench/counter_contention.lua [HOSTS] [ADDS=200] [SESSIONS=4] [ROUNDS=5]
-- Without HOSTS it starts a throwaway server (zklua.testing).  COUNTER_BACKOFF="base_ms,cap_ms"
-- (environment) sets the backoff policy (counter:set_backoff) instead of the default.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"

local hosts = arg[1] ~= "" and arg[1] or nil
local adds = tonumber(arg[2] or 200)
local nsessions = tonumber(arg[3] or 4)
local rounds = tonumber(arg[4] or 5)

local server
if not hosts then
  server = testing.server()
  hosts = server.hosts
end

local clients = {}
for i = 1, nsessions do
  clients[i] = zklua.client{ hosts = hosts, timeout = 10 }
  clients[i]:start(15)
end
local fds = {}
for i, zk in ipairs(clients) do fds[i] = zk:fileno() end

local backoff = os.getenv("COUNTER_BACKOFF")
local base_ms, cap_ms
if backoff and backoff ~= "" then
  base_ms, cap_ms = backoff:match("^(%d+),(%d+)$")
  assert(base_ms, "COUNTER_BACKOFF must be base_ms,cap_ms")
  base_ms, cap_ms = tonumber(base_ms), tonumber(cap_ms)
end

local root = "/bench-counter-" .. tostring(os.time()) .. "-" .. tostring(math.random(1e9))
local latencies, retries, reported = {}, 0, true

local function round(r)
  local path = root .. "/c" .. r
  clients[1]:ensure_path(path) -- the node exists, as in a long-running service
  local uds = {}
  for i = 1, adds do
    local zk = clients[(i - 1) % nsessions + 1]
    uds[i] = core.counter(zk._session, path, "int", 0)
    if base_ms then uds[i]:set_backoff(base_ms, cap_ms) end
  end
  local started, finished, left = {}, {}, adds
  for i, ud in ipairs(uds) do
    started[i] = core.monotonic()
    assert(ud:start(true, 1))
  end
  local deadline = core.monotonic() + 120
  while left > 0 do
    local handled = 0
    for _, zk in ipairs(clients) do handled = handled + zk:dispatch(0) end
    local now = core.monotonic()
    for i, ud in ipairs(uds) do
      if not finished[i] and ud:phase() == "idle" then
        finished[i] = now
        left = left - 1
        local outcome, rc = ud:outcome()
        assert(outcome == "ok", "an add failed: " .. outcome .. " " .. rc)
        latencies[#latencies + 1] = (now - started[i]) * 1000
        if ud.stats then retries = retries + ud:stats().retries else reported = false end
      end
    end
    assert(now < deadline, "adds did not finish in 120 s")
    if handled == 0 and left > 0 then core.poll(fds, 0.05) end
  end
  local value = clients[1]:get(path)
  assert(value == tostring(adds), "the counter holds " .. value .. ", not " .. adds)
end

for r = 1, rounds do round(r) end
table.sort(latencies)
local function pct(q) return latencies[math.max(1, math.ceil(q * #latencies))] end
print(string.format("RESULT counter_contention adds=%d sessions=%d rounds=%d p50_ms=%.1f " ..
                    "p99_ms=%.1f max_ms=%.1f retries_per_add=%s", adds, nsessions, rounds,
                    pct(0.5), pct(0.99), latencies[#latencies],
                    reported and string.format("%.2f", retries / #latencies) or "-"))
clients[1]:delete(root, -1, true)
for _, zk in ipairs(clients) do zk:close() end
if server then server:stop() end
