--- sessions_bench.lua — N sessions in one process (bench/scale.lua); bench/kazoo_sessions_bench.py
-- is its kazoo twin (same steps, same output).
--
--   ./zklua bench/sessions_bench.lua HOSTS N [SESSION_S=2] [HOLD_S=6]
--
-- Starts N clients one after the other (zk:start(), as a script would), holds them all
-- connected for HOLD_S seconds (the server must see their pings: a session it expires is
-- counted as lost), then closes them.  The fd soft limit is whatever the process got: run it
-- under `ulimit -n $(ulimit -Hn)` for many sessions (bench/scale.lua does and says so).
-- Prints one line:
--   RESULT sessions n=<N> connected=<n> connect_s=<s> close_s=<s> base_kb=<kb> rss_kb=<kb>
--          threads=<n> fds=<n> base_threads=<n> base_fds=<n> lost=<n> nofile=<soft limit>
--          error=<first error, to the line's end, or ->
-- rss_kb: VmRSS with every session connected (after a full garbage collection); base_kb:
-- before the first; threads and fds: the process's, with every session connected (base_:
-- before the first).
local zklua = require "zklua"
local core = require "zklua.core"
local blocking = require "zklua.handlers.blocking"

local hosts = arg[1] or error("usage: sessions_bench.lua HOSTS N [SESSION_S] [HOLD_S]")
local N = assert(tonumber(arg[2]), "N")
local SESSION = tonumber(arg[3]) or 2
local HOLD = tonumber(arg[4]) or 6

local function status(field)
  local f = assert(io.open("/proc/self/status", "r"))
  local text = f:read("a")
  f:close()
  return tonumber(text:match(field .. ":%s*(%d+)"))
end

local function count_fds() -- ($PPID: this process, the shell's parent)
  local pipe = assert(io.popen("ls /proc/$PPID/fd | wc -l", "r"))
  local n = tonumber(pipe:read("a"):match("%d+"))
  pipe:close()
  return n - 1 -- less the pipe's end this process reads
end

local function nofile()
  local f = io.open("/proc/self/limits", "r")
  local text = f and f:read("a") or ""
  if f then f:close() end
  return text:match("Max open files%s+(%S+)") or "?"
end

-- A few fds kept aside: once the sessions took every other one (the fd limit), closing these
-- lets the measuring below (/proc reads, a pipe) still work.
local reserve = {}
for i = 1, 8 do reserve[i] = assert(io.open("/dev/null", "r")) end
collectgarbage()
local base, base_fds, base_threads = status("VmRSS"), count_fds() - #reserve, status("Threads")
local clients, lost, first_error = {}, 0, nil
local t0 = core.monotonic()
for i = 1, N do
  local zk
  local ok, err = pcall(function()
    zk = zklua.client{ hosts = hosts, timeout = SESSION }
    zk:start(30)
  end)
  if not ok then
    first_error = string.format("session %d: %s", i, tostring(err))
    if zk then pcall(zk.close, zk) end
    break
  end
  zk:add_listener(function(state) if state == "LOST" then lost = lost + 1 end end)
  clients[i] = zk
end
local connect_s = core.monotonic() - t0
for _, f in ipairs(reserve) do f:close() end
collectgarbage()
local rss, threads, fds = status("VmRSS"), status("Threads"), count_fds()
blocking.sleep(HOLD)
local lost_held = lost -- (closing makes the listeners hear LOST: not counted)
local t1 = core.monotonic()
for _, zk in ipairs(clients) do zk:close() end
local close_s = core.monotonic() - t1
print(string.format("RESULT sessions n=%d connected=%d connect_s=%.3f close_s=%.3f base_kb=%d " ..
                    "rss_kb=%d threads=%d fds=%d base_threads=%d base_fds=%d lost=%d nofile=%s " ..
                    "error=%s", N, #clients, connect_s, close_s, base, rss, threads, fds,
                    base_threads, base_fds, lost_held, nofile(),
                    first_error and first_error:gsub("%s+", " "):sub(1, 160) or "-"))
