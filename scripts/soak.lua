--- scripts/soak.lua — `make soak`: one million operations and watch events through one
-- client against a throwaway server, checking that the client's memory stays flat.
--
--   ./zklua scripts/soak.lua [OPS=1000000]
--
-- The load, in rounds of 1000: pipelined async gets and sets on a small set of nodes with
-- DataWatch and ChildrenWatch following them, sync creates and deletes of ephemeral children
-- (each firing the ChildrenWatch), one-shot get watches, a lock cycle, a transaction.  After
-- a warm-up (the first tenth) the process's RSS is sampled every round; the run fails when the
-- last tenth's RSS is more than GROWTH_LIMIT_KIB above the warm-up's, or any op failed.
-- Prints progress and a closing line "soak: N ops, M watch events, RSS a -> b KiB: ok".
local zklua = require "zklua"
local testing = require "zklua.testing"

local TOTAL = tonumber(arg[1] or 1000000)
local GROWTH_LIMIT_KIB = 8 * 1024
local ROOT = "/soak"

local function rss_kib()
  local f = assert(io.open("/proc/self/status"))
  local text = f:read("a")
  f:close()
  return tonumber(text:match("VmRSS:%s+(%d+)"))
end

local server = testing.server()
local zk = zklua.client{ hosts = server.hosts, timeout = 10 }
zk:start()
zk:ensure_path(ROOT .. "/kids")
for i = 1, 8 do zk:create(ROOT .. "/n" .. i, "0", { makepath = true }) end

local watch_events, ops = 0, 0
zk:DataWatch(ROOT .. "/n1", function() watch_events = watch_events + 1 end)
zk:ChildrenWatch(ROOT .. "/kids", function() watch_events = watch_events + 1 end)
local lock = zk:Lock(ROOT .. "/lock", "soak")

local function one_round(round)
  local futures = {}
  for i = 1, 400 do futures[#futures + 1] = zk:get_async(ROOT .. "/n" .. (i % 8 + 1)) end
  for i = 1, 400 do
    futures[#futures + 1] = zk:set_async(ROOT .. "/n" .. (i % 8 + 1), tostring(round))
  end
  for _, f in ipairs(futures) do f:get() end
  ops = ops + #futures
  for i = 1, 40 do
    local kid = zk:create(ROOT .. "/kids/k-", "", { ephemeral = true, sequence = true })
    zk:get(kid, function() watch_events = watch_events + 1 end)
    zk:delete(kid)
    ops = ops + 3 + (i % 2)
    if i % 2 == 0 then zk:exists(ROOT .. "/n2") end
  end
  lock:acquire()
  lock:release()
  local t = zk:transaction()
  t:check(ROOT .. "/n3", -1)
  t:set_data(ROOT .. "/n4", "t")
  t:commit()
  ops = ops + 5
end

local warm, samples, round = nil, {}, 0
local warmup = TOTAL / 10
while ops < TOTAL do
  round = round + 1
  one_round(round)
  if ops >= warmup then
    collectgarbage()
    local rss = rss_kib()
    if not warm then warm = rss end
    samples[#samples + 1] = rss
  end
  if round % 100 == 0 then
    io.write(string.format("soak: %d ops, %d watch events, RSS %d KiB\n", ops, watch_events,
                           rss_kib()))
    io.flush()
  end
end

local tail = {}
for i = math.max(1, #samples - math.floor(#samples / 10)), #samples do tail[#tail + 1] = samples[i] end
local final = 0
for _, v in ipairs(tail) do final = math.max(final, v) end
zk:delete(ROOT, nil, true)
zk:close()
server:stop()
local growth = final - warm
local verdict = growth <= GROWTH_LIMIT_KIB and "ok" or "GREW"
print(string.format("soak: %d ops, %d watch events, RSS %d -> %d KiB (%+d): %s", ops,
                    watch_events, warm, final, growth, verdict))
if verdict ~= "ok" then os.exit(1) end
