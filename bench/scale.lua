--- bench/scale.lua — `make bench-scale`: issue 20's grid, zklua against kazoo at ten times the
-- tested sizes, every point measured in this one run on throwaway ZooKeeper servers
-- (zklua.testing), written to docs/scale.md with a chart per workload (docs/scale/*.svg,
-- gnuplot) and the machine's load during the run.
--
--   ./zklua bench/scale.lua            (make bench-scale; SIZE=small make bench-scale)
--
-- Sections (in this order; SCALE_ONLY=a,b picks some, in the order given):
--   sessions   N clients in one process (bench/sessions_bench.lua, kazoo_sessions_bench.py)
--   watches    N DataWatches on one client, another process sets the N nodes
--              (spec/fixtures/watch_burst.lua blocking process, bench/kazoo_watch_burst.py)
--   sp         SetPartitioner members x items, leave / join / crash
--              (bench/partitioner_bench.lua, KIND zklua or kazoo)
--   alloc      PartitionAllocator members x items, start / join / leave / closed (zklua only:
--              kazoo has no allocator) (bench/allocator_bench.lua)
--   tree       TreeCache of N nodes (bench/tree_cache_bench.lua, kazoo_tree_cache_bench.py)
--   load       the sp and alloc points again beside one CPU hog per core, 10 s sessions
-- zklua and kazoo take turns on every point (the first to run alternates from point to
-- point).  Sessions are 2 s unless stated.  Each section runs on a server of its own
-- (the watch and tree points on one each), stopped by its PID when it ends.
--
-- Knobs (environment):
--   SIZE            full (default) or small: every size a tenth (members stay), for checking
--                   this driver in a few minutes; the report then goes to build/scale-small/
--   SCALE_CAP       seconds a measurement may take before it is "did not finish in N s" (120)
--   SCALE_KAZOO_CAP the same for kazoo's runs (default SCALE_CAP)
--   SCALE_DEADLINE  UTC "HH:MM" (today) or epoch seconds: no run starts after it and a run
--                   still going then is stopped; the points left are "not run in this
--                   session" in the report (none by default)
--   SCALE_ONLY      comma list of sections, in the order to run them
--   SCALE_LOAD_KAZOO  1: kazoo's runs under load too (default: zklua's only)
--   SCALE_DOC       the report (docs/scale.md; build/scale-small/scale.md with SIZE=small)
package.path = "spec/?.lua;" .. package.path -- fixtures.child: processes handled by PID
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local child = require "fixtures.child"

local SMALL = os.getenv("SIZE") == "small"
local DIV = SMALL and 10 or 1
local CAP = tonumber(os.getenv("SCALE_CAP") or "") or 120
-- kazoo's cap (default the same): its runs are the long ones, and where a session has little
-- time, a shorter one still shows whether zklua is faster (SCALE_KAZOO_CAP)
local KAZOO_CAP = tonumber(os.getenv("SCALE_KAZOO_CAP") or "") or CAP
local function cap_of(client) return client == "kazoo" and KAZOO_CAP or CAP end
local LOAD_KAZOO = os.getenv("SCALE_LOAD_KAZOO") == "1"
local TREE_CAP_ZKLUA = 2 * CAP -- its million-node load is a target: room on a slow machine
-- The allocator's largest start beside the CPU hogs: its target is that it settles with no
-- session lost, not a time, so it gets the same room
local ALLOC_LOAD_CAP_LARGEST = 2 * CAP
local DOC = os.getenv("SCALE_DOC") or (SMALL and "build/scale-small/scale.md" or "docs/scale.md")
local SVG_DIR = DOC:gsub("[^/]*$", "") .. "scale"
local SVG_REL = "scale" -- the charts as the report links them
local LUA = arg[-1] or "./zklua"
local PYTHON = "/usr/bin/python3"
local SERVER_HEAP = "3g" -- a million-node tree needs more than the harness's 256m

local function shell(cmd)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("a")
  pipe:close()
  return out
end

local function first_line(cmd) return (shell(cmd):match("[^\n]*"):gsub("^%s+", "")) end

local function log(fmt, ...)
  io.stderr:write(os.date("!%H:%M:%S "), string.format(fmt, ...), "\n")
  io.stderr:flush()
end

-- ---------------------------------------------------------------- deadline

local DEADLINE -- epoch seconds, or nil
do
  local text = os.getenv("SCALE_DEADLINE")
  if text and text ~= "" then
    local h, m = text:match("^(%d+):(%d+)$")
    if h then
      local now = os.time()
      local t = os.date("!*t", now)
      DEADLINE = now - (t.hour * 3600 + t.min * 60 + t.sec) + tonumber(h) * 3600 + tonumber(m) * 60
    else
      DEADLINE = assert(tonumber(text), "SCALE_DEADLINE: HH:MM (UTC) or epoch seconds")
    end
  end
end

local function time_left()
  if not DEADLINE then return math.huge end
  return DEADLINE - os.time()
end

-- ---------------------------------------------------------------- the machine

local function loadavg() return first_line("cut -d' ' -f1-3 /proc/loadavg") end

local MACHINE = {
  cpu = first_line("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
  cores = first_line("nproc"),
  mem = first_line("awk '/MemTotal/ {printf \"%.1f GiB\", $2 / 1048576}' /proc/meminfo"),
  kernel = first_line("uname -r"),
  zookeeper = first_line("dpkg-query -W -f='${Version}' zookeeper 2>/dev/null"),
  kazoo = first_line("dpkg-query -W -f='${Version}' python3-kazoo 2>/dev/null"),
  lua = _VERSION,
  commit = first_line("git log -1 --format='%h %s' 2>/dev/null"),
  nofile = first_line("ulimit -n") .. " soft, " .. first_line("ulimit -Hn") .. " hard",
  started = os.date("!%Y-%m-%d %H:%M:%S UTC"),
  load_start = loadavg(),
}

-- ---------------------------------------------------------------- processes

local function children_of(pid)
  local list = {}
  local dir = io.open("/proc/" .. pid .. "/task")
  if not dir then return list end
  dir:close()
  for tid in shell("ls /proc/" .. pid .. "/task 2>/dev/null"):gmatch("%d+") do
    local f = io.open("/proc/" .. pid .. "/task/" .. tid .. "/children")
    if f then
      for p in f:read("a"):gmatch("%d+") do list[#list + 1] = tonumber(p) end
      f:close()
    end
  end
  return list
end

-- Every descendant of pid (children first found, their children after), by PID.
local function descendants(pid)
  local all, queue = {}, { pid }
  while #queue > 0 do
    local p = table.remove(queue, 1)
    for _, c in ipairs(children_of(p)) do
      all[#all + 1] = c
      queue[#queue + 1] = c
    end
  end
  return all
end

-- Kills a child's program and everything it started (member processes, writers), by PID.
local function kill_tree(kid)
  local pids = descendants(kid.pid)
  if #pids > 0 then
    local words = {}
    for i, p in ipairs(pids) do words[i] = tostring(p) end
    os.execute("kill -KILL " .. table.concat(words, " ") .. " 2>/dev/null")
  end
  kid:wait_exit(10)
  kid:cleanup()
end

local function parse_results(out)
  local results = {}
  for name, fields in out:gmatch("RESULT (%S+) ([^\n]*)") do
    local r = {}
    local e = fields:match(" error=(.*)$") -- the message, to the line's end
    if e then fields = fields:sub(1, #fields - #e - 7) end
    for k, v in fields:gmatch("([%w_]+)=(%S+)") do r[k] = tonumber(v) or v end
    if e and e ~= "-" then r.error = e end
    results[name] = r
  end
  return results
end

local function error_line(text)
  local found
  for line in text:gmatch("[^\n]+") do
    if line == "stack traceback:" or line:match("^Traceback") then
      if found then break end
    elseif not line:match("^%s") and not line:match("^RESULT ") and
           not line:match("^partitioner round") then
      found = line
    end
  end
  return (found or "no output"):sub(1, 200)
end

-- Runs argv for at most wall seconds (less if the deadline comes first); returns
-- { out, err, seconds, status, killed = "wall" | "deadline" | nil, load0, load1 }.
local function run(argv, wall, env)
  local limit, why = wall, "wall"
  if time_left() < limit then limit, why = math.max(time_left(), 0), "deadline" end
  local r = { load0 = loadavg() }
  local t0 = core.monotonic()
  local kid = child.spawn(argv, env)
  local done = child.poll_until(function() return kid:exited() end, limit)
  r.seconds = core.monotonic() - t0
  r.out, r.err = kid:stdout(), kid:stderr()
  if done then
    r.status = kid.status
    kid:cleanup()
  else
    r.killed = why
    kill_tree(kid)
  end
  r.load1 = loadavg()
  return r
end

-- ---------------------------------------------------------------- results

-- A measurement: { status = "ok" | "dnf" | "error" | "cut" | "not_run", ... }.
--   dnf: did not finish within cap; cut: stopped by the session's deadline; error: text.
local sections = {} -- in the order run: { id, title, points = { {key, label, runs = {}} } }
local by_id = {}

local function section(id, title, intro)
  local s = { id = id, title = title, intro = intro, points = {}, notes = {} }
  sections[#sections + 1] = s
  by_id[id] = s
  return s
end

local function point(s, key, label, extra)
  local p = { key = key, label = label, runs = {} }
  for k, v in pairs(extra or {}) do p[k] = v end
  s.points[#s.points + 1] = p
  s.points[key] = p
  return p
end

-- ---------------------------------------------------------------- formatting

local function fmt_s(x)
  if x == nil then return "" end
  if x >= 100 then return string.format("%.0f s", x) end
  if x >= 10 then return string.format("%.1f s", x) end
  if x >= 1 then return string.format("%.2f s", x) end
  return string.format("%.3f s", x)
end

local function fmt_kb(kb)
  if kb == nil then return "" end
  if kb >= 1048576 then return string.format("%.2f GB", kb / 1048576) end
  if kb >= 1024 then return string.format("%.0f MB", kb / 1024) end
  return string.format("%d KB", kb)
end

local function fmt_n(n)
  if n >= 1000000 and n % 1000000 == 0 then return (n // 1000000) .. "M" end
  if n >= 1000 and n % 1000 == 0 then return (n // 1000) .. "k" end
  return tostring(n)
end

local function fmt_bytes(b)
  if b == nil then return "" end
  if b >= 10240 then return string.format("%.0f KB", b / 1024) end
  if b >= 1024 then return string.format("%.1f KB", b / 1024) end
  return string.format("%.0f B", b)
end

-- The cell of a run that gave no figure (nil when it gave one).
local function status_cell(r)
  if r == nil or r.status == "not_run" then return "not run in this session" end
  if r.status == "dnf" then return string.format("did not finish in %g s%s", r.cap, r.what or "") end
  if r.status == "cut" then
    return string.format("stopped at the session's deadline after %.0f s", r.seconds or 0)
  end
  if r.status == "error" then return "failed: " .. (r.error or "?"):gsub("|", "/") end
  return nil
end

-- Growth per 10x from (n1, v1) to (n2, v2): (v2 / v1) ^ (1 / log10(n2 / n1)).
local function growth(n1, v1, n2, v2)
  if not (v1 and v2) or v1 <= 0 then return nil end
  return (v2 / v1) ^ (1 / math.log(n2 / n1, 10))
end

local function fmt_growth(g)
  if not g then return "—" end
  return string.format("%.1f×", g)
end

-- ---------------------------------------------------------------- charts

local function have_gnuplot() return shell("command -v gnuplot"):match("%S") ~= nil end

-- A chart: x = the points' labels (categories), y (log) = one line per series; a missing
-- figure (did not finish, not run) is a gap.  series = { {title, values[i] or nil} }; dnf[i]:
-- the cap, where some series did not finish at point i (drawn as a circle at the cap).
local function chart(name, title, ylabel, labels, series, dnf)
  if not have_gnuplot() then return nil end
  os.execute("mkdir -p '" .. SVG_DIR .. "'")
  local data = SVG_DIR .. "/" .. name .. ".dat"
  local f = assert(io.open(data, "w"))
  local any_dnf = false
  for i, label in ipairs(labels) do
    local row = { '"' .. label .. '"' }
    for _, s in ipairs(series) do
      local v = s[2][i]
      row[#row + 1] = v and string.format("%.6g", v) or "NaN" -- (NaN: a gap in the line)
    end
    row[#row + 1] = dnf and dnf[i] and string.format("%.6g", dnf[i]) or "NaN"
    if dnf and dnf[i] then any_dnf = true end
    f:write(table.concat(row, " "), "\n")
  end
  f:close()
  local plots = {}
  for j, s in ipairs(series) do
    plots[#plots + 1] = string.format("'%s' using 0:%d:xtic(1) with linespoints title '%s'", data,
                                      j + 1, s[1]:gsub("'", ""))
  end
  if any_dnf then
    plots[#plots + 1] = string.format("'%s' using 0:%d with points pt 6 ps 1.5 lc rgb 'red' " ..
                                      "title 'did not finish (drawn at the cap)'", data, #series + 2)
  end
  local any = false
  for _, s in ipairs(series) do
    for i = 1, #labels do if s[2][i] and s[2][i] > 0 then any = true end end
  end
  if not any then os.remove(data); return nil end
  local script = table.concat({
    "set terminal svg size 800,420 dynamic font 'sans,11'",
    "set output '" .. SVG_DIR .. "/" .. name .. ".svg'",
    "set title '" .. title:gsub("'", "") .. "'",
    "set ylabel '" .. ylabel .. "'",
    "set logscale y", "set grid ytics", "set key outside right top",
    "set xtics rotate by -25",
    "set offsets 0.3, 0.3, 0, 0",
    "plot " .. table.concat(plots, ", "),
  }, "\n")
  local p = assert(io.popen("gnuplot 2>&1", "w"))
  p:write(script, "\n")
  p:close()
  os.remove(data)
  return SVG_REL .. "/" .. name .. ".svg"
end

-- ---------------------------------------------------------------- the sizes

local function n(x) return math.max(1, x // DIV) end

local GRID = {
  sessions = { 1000, 5000 },
  watches = { n(10000), n(100000) },
  sp = { { 10, n(10000) }, { 30, n(10000) }, { 100, n(10000) }, { 30, n(100000) } },
  alloc = { { 10, n(10000), "sticky" }, { 50, n(10000), "sticky" }, { 100, n(10000), "sticky" },
            { 50, n(10000), "round_robin" }, { 50, n(100000), "sticky" },
            { 10, n(1000000), "sticky" } },
  tree = { n(10000), n(100000), n(1000000) },
}
if SMALL then GRID.sessions = { 100, 500 } end

local function spkey(m, i) return m .. "x" .. fmt_n(i) end
local function allockey(m, i, s) return s .. " " .. m .. "x" .. fmt_n(i) end

-- ---------------------------------------------------------------- the sections

local function new_server()
  -- maxClientCnxns=0: no limit on the connections from one address (the default, 60, would
  -- refuse the sessions section's clients, all on 127.0.0.1)
  return testing.server({ heap = SERVER_HEAP, config = { "maxClientCnxns=0" } })
end

local order_flip = false -- alternates which client runs first, point by point
local function clients_in_turn(list)
  order_flip = not order_flip
  if order_flip then return list end
  local r = {}
  for i = #list, 1, -1 do r[#r + 1] = list[i] end
  return r
end

local function not_run(p, clients)
  for _, c in ipairs(clients) do p.runs[c] = p.runs[c] or { status = "not_run" } end
end

-- Whether a run may start: time is left before the deadline (at least min_s).
local function may_start(min_s) return time_left() > (min_s or 20) end

local function base_result(r, cap)
  local m = { cap = cap, seconds = r.seconds, load0 = r.load0, load1 = r.load1 }
  if r.killed == "deadline" then
    m.status = "cut"
  elseif r.killed == "wall" then
    m.status = "dnf"
  elseif r.status ~= 0 then
    m.status, m.error = "error", error_line(r.err .. "\n" .. r.out)
  else
    m.status = "ok"
  end
  return m
end

-- sessions
local function run_sessions(s)
  for _, count in ipairs(GRID.sessions) do
    local p = point(s, tostring(count), fmt_n(count) .. " sessions", { n = count })
    for _, c in ipairs(clients_in_turn({ "zklua", "kazoo" })) do
      if not may_start(30) then not_run(p, { c }) else
        local server = new_server()
        log("sessions %d: %s", count, c)
        local argv
        if c == "zklua" then
          argv = { "sh", "-c", 'ulimit -n "$(ulimit -Hn)" && exec "$@"', "sh", LUA,
                   "bench/sessions_bench.lua", server.hosts, tostring(count), "2", "6" }
        else
          argv = { PYTHON, "bench/kazoo_sessions_bench.py", server.hosts, tostring(count), "2", "6" }
        end
        local r = run(argv, CAP + 30)
        local m = base_result(r, CAP + 30)
        local res = parse_results(r.out).sessions
        if m.status == "ok" and not res then m.status, m.error = "error", error_line(r.err) end
        if res then
          for k, v in pairs(res) do m[k] = v end
          if res.connected < count then
            m.status = "error"
            m.error = string.format("%d of %d connected: %s", res.connected, count,
                                    tostring(res.error))
          end
        end
        p.runs[c] = m
        server:stop()
      end
    end
  end
end

-- watches
local function run_watches(s)
  for _, count in ipairs(GRID.watches) do
    local p = point(s, tostring(count), fmt_n(count) .. " watches", { n = count })
    for _, c in ipairs(clients_in_turn({ "zklua", "kazoo" })) do
      if not may_start(30) then not_run(p, { c }) else
        local server = new_server()
        local root = "/burst-" .. c
        log("watches %d: %s", count, c)
        local argv
        if c == "zklua" then
          argv = { LUA, "spec/fixtures/watch_burst.lua", server.hosts, root, tostring(count),
                   "blocking", "process", tostring(cap_of(c)) }
        else
          argv = { PYTHON, "bench/kazoo_watch_burst.py", server.hosts, root, tostring(count),
                   tostring(cap_of(c)), LUA, "spec/fixtures/watch_burst.lua", "write", server.hosts,
                   root, tostring(count) }
        end
        -- the cap bounds the burst; making N nodes and N watches gets as long again
        local r = run(argv, 2 * cap_of(c) + 30)
        local m = base_result(r, cap_of(c))
        local d, total, depth, secs, rss, peak, setup = r.out:match(
          "delivered (%d+) of (%d+) depth (%d+) seconds (%S+) rss_kb (%d+) peak_kb (%d+) setup_s (%S+)")
        if d then
          m.delivered, m.total, m.depth = tonumber(d), tonumber(total), tonumber(depth)
          m.burst_s, m.rss_kb, m.peak_kb, m.setup_s = tonumber(secs), tonumber(rss),
                                                       tonumber(peak), tonumber(setup)
          if m.delivered < m.total and m.burst_s >= cap_of(c) - 1 then m.status = "dnf" end
        elseif m.status == "ok" then
          m.status, m.error = "error", error_line(r.err .. "\n" .. r.out)
        elseif m.status == "dnf" then
          m.cap, m.what = 2 * cap_of(c) + 30, " (making the nodes and watches included)"
        end
        p.runs[c] = m
        server:stop()
      end
    end
  end
end

-- sp (and under load)
local SP_EVENTS = { "build", "leave", "join", "crash" }
-- A point's first cover is the median of this many (partitioner_bench's BUILDS): one cover
-- on a shared machine swung the growth per 10× items from 8.3× to 10.1× between two runs.
local SP_BUILDS = 3

-- The server's write rate with many writes in flight (bench/write_rate.lua, as many items as
-- the section's largest point, 10 sessions, one write a request): what a leave or a join,
-- each of which releases and acquires every item (kazoo's protocol), a delete and a create
-- per item, would take the server without batched writes (zklua's members send multis).
local function measure_write_rate(s, server)
  local most = 0
  for _, mi in ipairs(GRID.sp) do most = math.max(most, mi[2]) end
  local r = run({ LUA, "bench/write_rate.lua", server.hosts, tostring(most), "10" }, CAP + 30)
  local res = parse_results(r.out).write_rate
  if res and res.creates_per_s and res.deletes_per_s then
    s.write_rate = { creates = res.creates_per_s, deletes = res.deletes_per_s }
    s.notes[#s.notes + 1] = string.format("The server's write rate (bench/write_rate.lua: %s " ..
      "creates, then as many deletes, from 10 sessions with 1000 in flight each, run once " ..
      "on this section's server before its points; load %s → %s): %d creates/s, %d deletes/s.",
      fmt_n(most), r.load0:match("^%S+"), r.load1:match("^%S+"), res.creates_per_s,
      res.deletes_per_s)
  else
    s.notes[#s.notes + 1] = "The server's write rate was not measured: " ..
                            error_line(r.err .. "\n" .. r.out)
  end
end

local function run_sp(s, session, clients)
  local server -- started with the first run that may start
  for _, mi in ipairs(GRID.sp) do
    local members, items = mi[1], mi[2]
    local p = point(s, spkey(members, items), members .. " × " .. fmt_n(items),
                    { members = members, items = items })
    for _, c in ipairs(clients_in_turn(clients)) do
      if not may_start(60) then not_run(p, { c }) else
        log("%s %s: %s", s.id, p.key, c)
        if not server then
          server = new_server()
          measure_write_rate(s, server)
        end
        local argv = { LUA, "bench/partitioner_bench.lua", server.hosts, "1", tostring(members),
                       tostring(items), "0.1", tostring(session), c, tostring(cap_of(c)),
                       "leave,join,crash", tostring(SP_BUILDS) }
        -- the builds and three events, each capped; starting the members on top
        local wall = (SP_BUILDS + 3) * cap_of(c) + 30 * SP_BUILDS + 60
        local r = run(argv, wall)
        local m = base_result(r, cap_of(c))
        local res = parse_results(r.out)
        m.events = {}
        for _, e in ipairs(SP_EVENTS) do
          local x = res["sp_" .. e]
          if x then
            m.events[e] = x.ms and { status = "ok", seconds = x.ms / 1000 } or
                          x.dnf_s and { status = "dnf", cap = x.dnf_s } or { status = "not_run" }
          end
        end
        local build = res.sp_build
        if build then
          m.lost, m.suspended, m.failed = build.lost, build.suspended, build.failed
          m.failed_why = build.failed_why ~= "-" and build.failed_why or nil
          m.status = "ok"
        elseif m.status == "ok" then
          m.status, m.error = "error", error_line(r.err .. "\n" .. r.out)
        elseif m.status == "dnf" then
          m.cap = wall
        end
        p.runs[c] = m
      end
    end
  end
  if server then server:stop() end
end

-- alloc (and under load)
local ALLOC_STEPS = { "start", "join", "leave", "closed" }
local function run_alloc(s, session)
  local server -- started with the first run that may start
  local largest = 0
  for _, mis in ipairs(GRID.alloc) do largest = math.max(largest, mis[2]) end
  for _, mis in ipairs(GRID.alloc) do
    local members, items, strategy = mis[1], mis[2], mis[3]
    local p = point(s, allockey(members, items, strategy),
                    strategy .. " " .. members .. " × " .. fmt_n(items),
                    { members = members, items = items, strategy = strategy })
    if not may_start(60) then not_run(p, { "zklua" }) else
      log("%s %s", s.id, p.key)
      server = server or new_server()
      local cap = (s.id == "load_alloc" and items == largest) and ALLOC_LOAD_CAP_LARGEST or CAP
      local argv = { LUA, "bench/allocator_bench.lua", "members=" .. members, "items=" .. items,
                     "strategy=" .. strategy, "hosts=" .. server.hosts, "session=" .. session,
                     "cap=" .. cap }
      local wall = 4 * cap + 60
      local r = run(argv, wall)
      local m = base_result(r, cap)
      local res = parse_results(r.out)
      m.steps = {}
      for _, step in ipairs(ALLOC_STEPS) do
        local x = res["alloc_" .. step]
        if x then
          m.steps[step] = x.ms and { status = "ok", seconds = x.ms / 1000, moved = x.moved } or
                          x.dnf_s and { status = "dnf", cap = x.dnf_s } or
                          x.error and { status = "error", error = x.error } or
                          { status = "not_run" }
        end
      end
      if res.alloc_sessions then
        m.lost, m.suspended = res.alloc_sessions.lost, res.alloc_sessions.suspended
        m.status = "ok"
      elseif m.status == "ok" then
        m.status, m.error = "error", error_line(r.err .. "\n" .. r.out)
      elseif m.status == "dnf" then
        m.cap = wall
      end
      p.runs.zklua = m
    end
  end
  if server then server:stop() end
end

-- tree
local function make_tree(hosts, root, nodes)
  -- root, then nodes // 1000 directories d001.. of 999 nodes n001..n999: 1 + nodes in all
  local dirs = math.max(1, nodes // 1000)
  local zk = zklua.client{ hosts = hosts, timeout = 30 }
  zk:start()
  zk:ensure_path(root)
  local value = string.rep("v", 32)
  local futures, i = {}, 0
  local function submit(path)
    i = i + 1
    futures[i] = zk:create_async(path, value)
    if i > 1000 then futures[i - 1000]:get(60); futures[i - 1000] = nil end
  end
  for d = 1, dirs do
    local dir = string.format("%s/d%03d", root, d)
    submit(dir)
    for k = 1, 999 do submit(string.format("%s/n%03d", dir, k)) end
  end
  for j = math.max(1, i - 999), i do if futures[j] then futures[j]:get(60) end end
  zk:close()
  return 1 + dirs * 1000
end

local function run_tree(s)
  for _, count in ipairs(GRID.tree) do
    local p = point(s, tostring(count), fmt_n(count) .. " nodes", { n = count })
    if not may_start(60) then not_run(p, { "zklua", "kazoo" }) else
      local server = new_server()
      log("tree %d: making the tree", count)
      local t0 = core.monotonic()
      local ok, total = pcall(make_tree, server.hosts, "/tree", count)
      p.make_s = core.monotonic() - t0
      if not ok then
        p.error = "making the tree failed: " .. tostring(total)
        not_run(p, { "zklua", "kazoo" })
      else
        p.nodes = total
        for _, c in ipairs(clients_in_turn({ "zklua", "kazoo" })) do
          if not may_start(30) then not_run(p, { c }) else
            log("tree %d: %s", count, c)
            local argv = c == "zklua" and { LUA, "bench/tree_cache_bench.lua", server.hosts, "/tree" }
                         or { PYTHON, "bench/kazoo_tree_cache_bench.py", server.hosts, "/tree" }
            -- kazoo gets the cap; zklua twice as long, so that its million-node load (a
            -- target) gives a figure even on a slow machine
            local cap = c == "zklua" and TREE_CAP_ZKLUA or KAZOO_CAP
            local r = run(argv, cap)
            local m = base_result(r, cap)
            local res = parse_results(r.out).tree_cache
            if res then
              m.tree_s, m.cpu_s, m.nodes = res.seconds, res.cpu_s, res.nodes
              m.base_kb, m.rss_kb, m.peak_kb = res.base_kb, res.rss_kb, res.peak_kb
              m.per_node = (res.rss_kb - res.base_kb) * 1024 / res.nodes
            elseif m.status == "ok" then
              m.status, m.error = "error", error_line(r.err .. "\n" .. r.out)
            end
            p.runs[c] = m
          end
        end
      end
      server:stop()
    end
  end
end

-- load: one CPU hog per core for the whole section
local function with_hogs(s, fn)
  local hogs = {}
  for _ = 1, tonumber(MACHINE.cores) or 2 do
    hogs[#hogs + 1] = child.spawn({ "nice", "-n", "0", "sh", "-c", "while :; do :; done" })
  end
  local pids = {}
  for _, h in ipairs(hogs) do pids[#pids + 1] = tostring(h:program_pid() or "?") end
  s.notes[#s.notes + 1] = string.format("%d CPU hogs (a shell busy loop each, nice 0, pids %s) " ..
                                        "ran through the whole section.", #hogs,
                                        table.concat(pids, " "))
  local ok, err = pcall(fn)
  for _, h in ipairs(hogs) do kill_tree(h) end
  if not ok then error(err, 0) end
end

-- ---------------------------------------------------------------- the report

local function per_session_kb(m)
  if not (m and m.rss_kb and m.connected and m.connected > 0) then return nil end
  return (m.rss_kb - m.base_kb) / m.connected
end

local function load_cell(m)
  if not m or not m.load0 then return "" end
  return m.load0:match("^%S+") .. " → " .. m.load1:match("^%S+")
end

local out -- the report's lines
local function w(...) out[#out + 1] = table.concat({ ... }) end

local function report_sessions(s)
  w("| sessions | client | connected | connect | per session | memory per session | threads | fds | lost | " ..
    "fd limit | load (1 min) |")
  w("|---|---|---|---|---|---|---|---|---|---|---|")
  for _, p in ipairs(s.points) do
    for _, c in ipairs({ "zklua", "kazoo" }) do
      local m = p.runs[c]
      local bad = status_cell(m)
      if bad and not (m and m.connected) then
        w("| ", p.label, " | ", c, " | ", bad, " | | | | | | | | ", load_cell(m), " |")
      else
        local k = math.max(m.connected, 1)
        w(string.format("| %s | %s | %d of %d%s | %s | %.2f ms | %.1f KB | %d (%.1f per session) | " ..
          "%d (%.1f per session) | %d | %s | %s |",
          p.label, c, m.connected, p.n, bad and " (" .. bad .. ")" or "", fmt_s(m.connect_s),
          m.connect_s / k * 1000, per_session_kb(m) or 0, m.threads,
          (m.threads - (m.base_threads or 0)) / k, m.fds, (m.fds - (m.base_fds or 0)) / k, m.lost,
          tostring(m.nofile), load_cell(m)))
      end
    end
  end
  w("")
  local a, b = s.points[1], s.points[2]
  if a and b then
    w("Growth per 10× sessions (", fmt_n(a.n), " → ", fmt_n(b.n), ", ",
      string.format("%g", b.n / a.n), "×, as (b/a)^(1/log10(", string.format("%g", b.n / a.n),
      "))): connect time zklua ",
      fmt_growth(growth(a.n, a.runs.zklua and a.runs.zklua.status == "ok" and a.runs.zklua.connect_s,
                        b.n, b.runs.zklua and b.runs.zklua.status == "ok" and b.runs.zklua.connect_s)),
      ", kazoo ",
      fmt_growth(growth(a.n, a.runs.kazoo and a.runs.kazoo.status == "ok" and a.runs.kazoo.connect_s,
                        b.n, b.runs.kazoo and b.runs.kazoo.status == "ok" and b.runs.kazoo.connect_s)),
      " (10× is linear).")
    w("")
  end
  local labels, zs, ks = {}, {}, {}
  for i, p in ipairs(s.points) do
    labels[i] = p.label
    zs[i] = p.runs.zklua and p.runs.zklua.status == "ok" and p.runs.zklua.connect_s or nil
    ks[i] = p.runs.kazoo and p.runs.kazoo.status == "ok" and p.runs.kazoo.connect_s or nil
  end
  local svg = chart("sessions", "Sessions in one process: time to connect them all",
                    "seconds", labels, { { "zklua", zs }, { "kazoo", ks } })
  if svg then w("![sessions](", svg, ")"); w("") end
end

local function ok_field(m, field)
  return m and m.status == "ok" and m[field] or nil
end

local function report_watches(s)
  w("| watches | client | delivered | burst (set → last callback) | making nodes + watches | RSS after | " ..
    "peak RSS | callback depth | load (1 min) |")
  w("|---|---|---|---|---|---|---|---|---|")
  for _, p in ipairs(s.points) do
    for _, c in ipairs({ "zklua", "kazoo" }) do
      local m = p.runs[c]
      if m and m.delivered then
        local burst = m.delivered == m.total and fmt_s(m.burst_s) or
                      string.format("did not finish in %g s", m.cap)
        w(string.format("| %s | %s | %d of %d | %s | %s | %s | %s | %s | %s |", p.label, c,
          m.delivered, m.total, burst, fmt_s(m.setup_s), fmt_kb(m.rss_kb), fmt_kb(m.peak_kb),
          c == "kazoo" and "n/a" or tostring(m.depth), load_cell(m)))
      else
        w("| ", p.label, " | ", c, " | ", status_cell(m) or "?", " | | | | | | ", load_cell(m), " |")
      end
    end
  end
  w("")
  local a, b = s.points[1], s.points[2]
  if a and b then
    local parts = {}
    for _, c in ipairs({ "zklua", "kazoo" }) do
      local ma, mb = a.runs[c], b.runs[c]
      local full = function(m) return m and m.delivered and m.delivered == m.total end
      parts[#parts + 1] = string.format("%s burst %s, peak RSS %s", c,
        fmt_growth(full(ma) and full(mb) and growth(a.n, ma.burst_s, b.n, mb.burst_s)),
        fmt_growth(ma and mb and ma.peak_kb and mb.peak_kb and growth(a.n, ma.peak_kb, b.n, mb.peak_kb)))
    end
    w("Growth per 10× watches (", fmt_n(a.n), " → ", fmt_n(b.n), "): ", table.concat(parts, "; "), ".")
    w("")
  end
  local labels, zs, ks, dnf = {}, {}, {}, {}
  for i, p in ipairs(s.points) do
    labels[i] = p.label
    local z, k = p.runs.zklua, p.runs.kazoo
    zs[i] = z and z.delivered and z.delivered == z.total and z.burst_s or nil
    ks[i] = k and k.delivered and k.delivered == k.total and k.burst_s or nil
    for _, m in ipairs({ z or {}, k or {} }) do
      if m.status == "dnf" or (m.delivered and m.delivered < m.total) then dnf[i] = m.cap end
    end
  end
  local svg = chart("watches", "Watch burst: N DataWatches fired at once, set to last callback",
                    "seconds", labels, { { "zklua", zs }, { "kazoo", ks } }, dnf)
  if svg then w("![watches](", svg, ")"); w("") end
end

-- How many SetPartitioner members failed, and why: "1 (LockTimeout)".
local function failed_text(m)
  if not m.failed then return "?" end
  return m.failed_why and string.format("%d (%s)", m.failed, m.failed_why) or tostring(m.failed)
end

local function event_cell(m, e)
  local bad = status_cell(m)
  if bad and not (m and m.events) then return bad end
  local x = m.events and m.events[e]
  if not x then return "not run in this session" end
  if x.status == "ok" then return fmt_s(x.seconds) end
  if x.status == "dnf" then return string.format("did not finish in %g s", x.cap) end
  return "not reached"
end

local function event_seconds(m, e)
  local x = m and m.events and m.events[e]
  return x and x.status == "ok" and x.seconds or nil
end

local function report_sp(s, clients, tag)
  w("| members × items | client | first cover | leave | join | crash | members LOST | members failed | " ..
    "members SUSPENDED | load (1 min) |")
  w("|---|---|---|---|---|---|---|---|---|---|")
  for _, p in ipairs(s.points) do
    for _, c in ipairs(clients) do
      local m = p.runs[c]
      w(string.format("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", p.label, c,
        event_cell(m, "build"), event_cell(m, "leave"), event_cell(m, "join"),
        event_cell(m, "crash"), m and m.lost and tostring(m.lost) or "",
        m and m.failed and failed_text(m) or "", m and m.suspended and tostring(m.suspended) or "",
        load_cell(m)))
    end
  end
  w("")
  -- growth: members 10 -> 100 at the smaller item count, items 10k -> 100k at 30 members
  local pairs_ = {
    { "members 10 → 100 (" .. fmt_n(GRID.sp[1][2]) .. " items)", spkey(10, GRID.sp[1][2]),
      spkey(100, GRID.sp[1][2]), 10 },
    { "items " .. fmt_n(GRID.sp[2][2]) .. " → " .. fmt_n(GRID.sp[4][2]) .. " (30 members)",
      spkey(30, GRID.sp[2][2]), spkey(30, GRID.sp[4][2]), 10 },
  }
  w("| growth per 10× | client | first cover | leave | join | crash |")
  w("|---|---|---|---|---|---|")
  for _, g in ipairs(pairs_) do
    local a, b = s.points[g[2]], s.points[g[3]]
    for _, c in ipairs(clients) do
      local cells = {}
      for _, e in ipairs(SP_EVENTS) do
        cells[#cells + 1] = fmt_growth(a and b and growth(1, event_seconds(a.runs[c], e), g[4],
                                                          event_seconds(b.runs[c], e)))
      end
      w("| ", g[1], " | ", c, " | ", table.concat(cells, " | "), " |")
    end
  end
  w("")
  local labels, series = {}, {}
  for _, c in ipairs(clients) do
    for _, e in ipairs({ "leave", "join", "crash" }) do
      series[#series + 1] = { c .. " " .. e, {} }
    end
  end
  local dnf = {}
  for i, p in ipairs(s.points) do
    labels[i] = p.label:gsub(" × ", "x")
    local j = 0
    for _, c in ipairs(clients) do
      for _, e in ipairs({ "leave", "join", "crash" }) do
        j = j + 1
        series[j][2][i] = event_seconds(p.runs[c], e)
      end
      local m = p.runs[c]
      for _, e in ipairs(SP_EVENTS) do
        local x = m and m.events and m.events[e]
        if x and x.status == "dnf" then dnf[i] = x.cap end
      end
    end
  end
  local svg = chart("setpartitioner" .. tag, "SetPartitioner: event to the set covered again" ..
                    (tag ~= "" and " (under load)" or ""), "seconds", labels, series, dnf)
  if svg then w("![setpartitioner", tag, "](", svg, ")"); w("") end
end

local function step_cell(m, step)
  local bad = status_cell(m)
  if bad and not (m and m.steps) then return bad end
  local x = m.steps and m.steps[step]
  if not x then return "not run in this session" end
  if x.status == "ok" then return fmt_s(x.seconds) .. " (" .. x.moved .. " moved)" end
  if x.status == "dnf" then return string.format("did not settle in %g s", x.cap) end
  if x.status == "error" then return "failed: " .. x.error:gsub("|", "/") end
  return "not reached"
end

local function step_seconds(m, step)
  local x = m and m.steps and m.steps[step]
  return x and x.status == "ok" and x.seconds or nil
end

local function report_alloc(s, tag)
  w("| strategy members × items | start | join | leave | closed | sessions lost | SUSPENDED | load (1 min) |")
  w("|---|---|---|---|---|---|---|---|")
  for _, p in ipairs(s.points) do
    local m = p.runs.zklua
    w(string.format("| %s | %s | %s | %s | %s | %s | %s | %s |", p.label, step_cell(m, "start"),
      step_cell(m, "join"), step_cell(m, "leave"), step_cell(m, "closed"),
      m and m.lost and tostring(m.lost) or "", m and m.suspended and tostring(m.suspended) or "",
      load_cell(m)))
  end
  w("")
  local i10 = GRID.alloc[1][2]
  local pairs_ = {
    { "members 10 → 100 (sticky, " .. fmt_n(i10) .. " items)", allockey(10, i10, "sticky"),
      allockey(100, i10, "sticky") },
    { "items " .. fmt_n(i10) .. " → " .. fmt_n(GRID.alloc[5][2]) .. " (sticky, 50 members)",
      allockey(50, i10, "sticky"), allockey(50, GRID.alloc[5][2], "sticky") },
  }
  w("| growth per 10× (zklua) | start | join | leave | closed |")
  w("|---|---|---|---|---|")
  for _, g in ipairs(pairs_) do
    local a, b = s.points[g[2]], s.points[g[3]]
    local cells = {}
    for _, step in ipairs(ALLOC_STEPS) do
      cells[#cells + 1] = fmt_growth(a and b and growth(1, step_seconds(a.runs.zklua, step), 10,
                                                        step_seconds(b.runs.zklua, step)))
    end
    w("| ", g[1], " | ", table.concat(cells, " | "), " |")
  end
  w("")
  local labels, series = {}, {}
  for _, step in ipairs(ALLOC_STEPS) do series[#series + 1] = { step, {} } end
  local dnf = {}
  for i, p in ipairs(s.points) do
    labels[i] = p.label:gsub("round_robin", "rr"):gsub(" × ", "x")
    for j, step in ipairs(ALLOC_STEPS) do
      series[j][2][i] = step_seconds(p.runs.zklua, step)
      local x = p.runs.zklua and p.runs.zklua.steps and p.runs.zklua.steps[step]
      if x and x.status == "dnf" then dnf[i] = x.cap end
    end
  end
  local svg = chart("allocator" .. tag, "PartitionAllocator (zklua): step to every member settled" ..
                    (tag ~= "" and " (under load)" or ""), "seconds", labels, series, dnf)
  if svg then w("![allocator", tag, "](", svg, ")"); w("") end
end

local function report_tree(s)
  w("| nodes | client | load to INITIALIZED | CPU | RSS added | per node | peak RSS | load (1 min) |")
  w("|---|---|---|---|---|---|---|---|")
  for _, p in ipairs(s.points) do
    for _, c in ipairs({ "zklua", "kazoo" }) do
      local m = p.runs[c]
      local bad = status_cell(m)
      if bad then
        w("| ", p.label, " | ", c, " | ", p.error and p.error:gsub("|", "/") or bad,
          " | | | | | ", load_cell(m), " |")
      else
        w(string.format("| %s | %s | %s | %s | %s | %s | %s | %s |", p.label, c, fmt_s(m.tree_s),
          fmt_s(m.cpu_s), fmt_kb(m.rss_kb - m.base_kb), fmt_bytes(m.per_node), fmt_kb(m.peak_kb),
          load_cell(m)))
      end
    end
  end
  w("")
  local made = {}
  for _, p in ipairs(s.points) do
    if p.make_s and p.nodes then
      made[#made + 1] = string.format("%s nodes in %s", fmt_n(p.nodes - 1), fmt_s(p.make_s))
    end
  end
  if #made > 0 then
    w("Making the trees (zklua, 1000 creates in flight; not timed against kazoo): ",
      table.concat(made, ", "), ".")
    w("")
  end
  w("| growth per 10× | client | time | RSS added |")
  w("|---|---|---|---|")
  for i = 1, #s.points - 1 do
    local a, b = s.points[i], s.points[i + 1]
    for _, c in ipairs({ "zklua", "kazoo" }) do
      local ma, mb = a.runs[c], b.runs[c]
      w("| ", fmt_n(a.n), " → ", fmt_n(b.n), " | ", c, " | ",
        fmt_growth(growth(a.n, ok_field(ma, "tree_s"), b.n, ok_field(mb, "tree_s"))), " | ",
        fmt_growth(ok_field(ma, "rss_kb") and ok_field(mb, "rss_kb") and
                   growth(a.n, ma.rss_kb - ma.base_kb, b.n, mb.rss_kb - mb.base_kb)), " |")
    end
  end
  w("")
  local labels, zs, ks, zb, kb, dnf = {}, {}, {}, {}, {}, {}
  for i, p in ipairs(s.points) do
    labels[i] = p.label
    zs[i], ks[i] = ok_field(p.runs.zklua, "tree_s"), ok_field(p.runs.kazoo, "tree_s")
    zb[i], kb[i] = ok_field(p.runs.zklua, "per_node"), ok_field(p.runs.kazoo, "per_node")
    for _, c in ipairs({ "zklua", "kazoo" }) do
      if p.runs[c] and p.runs[c].status == "dnf" then dnf[i] = p.runs[c].cap end
    end
  end
  local svg = chart("treecache", "TreeCache: start() to INITIALIZED", "seconds", labels,
                    { { "zklua", zs }, { "kazoo", ks } }, dnf)
  if svg then w("![treecache](", svg, ")"); w("") end
  svg = chart("treecache-memory", "TreeCache: RSS added per node", "bytes per node", labels,
              { { "zklua", zb }, { "kazoo", kb } })
  if svg then w("![treecache memory](", svg, ")"); w("") end
end

-- ---------------------------------------------------------------- targets

local function verdict(ok, text)
  if ok == nil then return "| not run in this session | " .. text .. " |" end
  return "| " .. (ok and "met" or "**not met**") .. " | " .. text .. " |"
end

local function targets()
  local rows = {}
  local function row(ok, what, text) rows[#rows + 1] = verdict(ok, "**" .. what .. "** " .. text) end
  -- watches
  local ws = by_id.watches
  if ws then
    for _, p in ipairs(ws.points) do
      local z, k = p.runs.zklua, p.runs.kazoo
      if not (z and z.delivered) then
        local ran = z and z.status ~= "not_run" and z.status ~= "cut"
        if ran then row(false, "watches " .. fmt_n(p.n) .. ":", "zklua " .. (status_cell(z) or "?"))
        else row(nil, "watches " .. fmt_n(p.n) .. ":", "100% delivered, time and RSS ≤ kazoo's") end
      else
        local all = z.delivered == z.total
        local kt = k and k.delivered and k.delivered == k.total and k.burst_s
        local time_ok = all and (not kt and k and k.delivered or kt and z.burst_s <= kt)
        local rss_ok = k and k.peak_kb and z.peak_kb <= k.peak_kb
        local text = string.format("100%% delivered, time and RSS ≤ kazoo's: zklua %d of %d in %s, peak %s; kazoo %s",
          z.delivered, z.total, all and fmt_s(z.burst_s) or "—", fmt_kb(z.peak_kb),
          k and k.delivered and string.format("%d of %d in %s, peak %s", k.delivered, k.total,
            k.delivered == k.total and fmt_s(k.burst_s) or string.format("(did not finish in %g s)", k.cap),
            fmt_kb(k.peak_kb)) or status_cell(k) or "?")
        local verdict_ok = all and time_ok and rss_ok or false
        if all and not (k and k.peak_kb) then verdict_ok = nil end -- no kazoo figure to compare
        if all and not time_ok and kt then
          text = text .. ". Cause (from the code): each DataWatch re-reads its node with a " ..
            "synchronous get inside its callback (lua/zklua/watchers.lua, DataWatch:_fetch), so " ..
            "N events cost N round trips one after the other; kazoo's DataWatch does the same on " ..
            string.format("its callback thread (zklua took %.2f× kazoo's time)", z.burst_s / kt)
        end
        row(verdict_ok, "watches " .. fmt_n(p.n) .. ":", text)
      end
    end
  end
  -- sp
  local function sp_target(s, key, label, session_text)
    local p = s and s.points[key]
    local m = p and p.runs.zklua
    if not m or m.status == "not_run" or m.status == "cut" then
      row(nil, label, "leave, join and crash complete with no session lost" .. session_text)
      return p, m
    end
    local done = true
    for _, e in ipairs(SP_EVENTS) do if not event_seconds(m, e) then done = false end end
    row(done and m.lost == 0 and m.failed == 0, label, string.format(
      "leave, join and crash complete with no session lost%s: first cover %s, leave %s, join %s, " ..
      "crash %s; members that heard LOST %s, failed %s", session_text, event_cell(m, "build"),
      event_cell(m, "leave"), event_cell(m, "join"), event_cell(m, "crash"), tostring(m.lost or "?"),
      failed_text(m)))
    return p, m
  end
  local sps = by_id.sp
  local i1, i2 = GRID.sp[1][2], GRID.sp[4][2]
  sp_target(sps, spkey(100, i1), "SetPartitioner 100 × " .. fmt_n(i1) .. ":", "")
  local _, m30 = sp_target(sps, spkey(30, i2), "SetPartitioner 30 × " .. fmt_n(i2) .. ":", "")
  if m30 and m30.events then
    local l, j = event_seconds(m30, "leave"), event_seconds(m30, "join")
    local k = sps.points[spkey(30, i2)].runs.kazoo
    local floor = ""
    local wr = sps.write_rate
    if wr then -- every item released (a delete) and acquired (a create), plus a listing
      floor = string.format("; one write a request, %s deletes and %s creates would take " ..
                            "this server %.1f s: zklua sends them in multis of 50, and each " ..
                            "item lock's listing of its contenders (kazoo's protocol) in " ..
                            "multiReads of 50", fmt_n(i2), fmt_n(i2),
                            i2 / wr.deletes + i2 / wr.creates)
    end
    row(l and j and l <= 5 and j <= 5 or false, "SetPartitioner 30 × " .. fmt_n(i2) .. ":",
        string.format("leave/join ≤ 5 s: leave %s, join %s (kazoo: leave %s, join %s)%s",
                      event_cell(m30, "leave"), event_cell(m30, "join"), event_cell(k, "leave"),
                      event_cell(k, "join"), floor))
  else
    row(nil, "SetPartitioner 30 × " .. fmt_n(i2) .. ":", "leave/join ≤ 5 s")
  end
  if sps then
    local a, b = sps.points[spkey(30, i1)], sps.points[spkey(30, i2)]
    local gs, all, any = {}, true, false
    for _, e in ipairs(SP_EVENTS) do
      local g = a and b and growth(1, event_seconds(a.runs.zklua, e), 10, event_seconds(b.runs.zklua, e))
      gs[#gs + 1] = e .. " " .. fmt_growth(g)
      if g then any = true; if g > 10 then all = false end else all = false end
    end
    local v = nil
    if any then v = all end
    row(v, "SetPartitioner growth:",
        "per 10× items (30 members, " .. fmt_n(i1) .. " → " .. fmt_n(i2) .. ") ≤ 10×: " ..
        table.concat(gs, ", "))
  end
  -- alloc
  local function alloc_point(s, key) return s and s.points[key] and s.points[key].runs.zklua end
  local as = by_id.alloc
  local a10 = GRID.alloc[1][2]
  local start100 = alloc_point(as, allockey(100, a10, "sticky"))
  if not start100 or start100.status == "not_run" then
    row(nil, "Allocator 100 × " .. fmt_n(a10) .. ":", "start ≤ 5 s")
  else
    local t = step_seconds(start100, "start")
    row(t ~= nil and t <= 5, "Allocator 100 × " .. fmt_n(a10) .. ":",
        "start ≤ 5 s: " .. step_cell(start100, "start"))
  end
  local function all_steps(label, m, what)
    if not m or m.status == "not_run" or m.status == "cut" then row(nil, label, what); return end
    local cells, ok = {}, true
    for _, step in ipairs(ALLOC_STEPS) do
      cells[#cells + 1] = step .. " " .. step_cell(m, step)
      if not step_seconds(m, step) then ok = false end
    end
    ok = ok and (m.lost or 0) == 0
    row(ok, label, what .. ": " .. table.concat(cells, ", ") ..
        (m.lost and ", " .. m.lost .. " sessions lost" or ""))
  end
  all_steps("Allocator round_robin 50 × " .. fmt_n(a10) .. ":",
            alloc_point(as, allockey(50, a10, "round_robin")), "settles")
  all_steps("Allocator 50 × " .. fmt_n(GRID.alloc[5][2]) .. ":",
            alloc_point(as, allockey(50, GRID.alloc[5][2], "sticky")), "works")
  all_steps("Allocator 10 × " .. fmt_n(GRID.alloc[6][2]) .. ":",
            alloc_point(as, allockey(10, GRID.alloc[6][2], "sticky")), "works")
  do
    local a, b = alloc_point(as, allockey(10, a10, "sticky")), start100
    local gs, all, any = {}, true, false
    for _, step in ipairs(ALLOC_STEPS) do
      local g = growth(1, step_seconds(a, step), 10, step_seconds(b, step))
      gs[#gs + 1] = step .. " " .. fmt_growth(g)
      if g then any = true; if g > 10 then all = false end else all = false end
    end
    local v = nil
    if any then v = all end
    row(v, "Allocator growth:",
        "per 10× members (10 → 100, sticky, " .. fmt_n(a10) .. " items) ≤ 10×: " .. table.concat(gs, ", "))
  end
  -- tree
  local ts = by_id.tree
  local big = ts and ts.points[tostring(GRID.tree[3])]
  local tz = big and big.runs.zklua
  if not tz or tz.status == "not_run" or tz.status == "cut" then
    row(nil, "TreeCache " .. fmt_n(GRID.tree[3]) .. ":", "≤ 1 KB per node, time linear")
  else
    local ok = tz.status == "ok" and tz.per_node <= 1024
    row(ok, "TreeCache " .. fmt_n(GRID.tree[3]) .. ":", "≤ 1 KB per node: " ..
        (tz.status == "ok" and string.format("%s per node, loaded in %s", fmt_bytes(tz.per_node),
                                             fmt_s(tz.tree_s)) or status_cell(tz)))
    local gs, all = {}, true
    for i = 1, 2 do
      local a, b = ts.points[tostring(GRID.tree[i])], ts.points[tostring(GRID.tree[i + 1])]
      local g = a and b and growth(a.n, ok_field(a.runs.zklua, "tree_s"), b.n, ok_field(b.runs.zklua, "tree_s"))
      gs[#gs + 1] = fmt_n(GRID.tree[i]) .. " → " .. fmt_n(GRID.tree[i + 1]) .. " " .. fmt_growth(g)
      if not g or g > 12 then all = false end
    end
    row(all, "TreeCache time:", "linear (per 10× nodes ≤ 12×, 10× and a 20 % allowance for noise): " ..
        table.concat(gs, ", "))
  end
  -- sessions
  local ss = by_id.sessions
  local sp5 = ss and ss.points[tostring(GRID.sessions[2])]
  local sz = sp5 and sp5.runs.zklua
  -- why a client stopped short of N sessions, when its fds say so
  local function fd_cause(m, count)
    if not (m and m.connected and m.connected < count and m.base_fds and m.connected > 0) then
      return ""
    end
    local per = (m.fds - m.base_fds) / m.connected
    local limit = tonumber(m.nofile)
    if limit and m.base_fds + (m.connected + 1) * per > limit - 8 then
      return string.format("; cause: the fd limit: %.1f fds per session, %d of %d fds in use " ..
                           "(the hard limit) when session %d failed", per, m.fds + 8, limit,
                           m.connected + 1)
    end
    return ""
  end
  if not sz or sz.status == "not_run" or sz.status == "cut" then
    row(nil, "Sessions " .. fmt_n(GRID.sessions[2]) .. ":", "in one process")
  else
    row(sz.status == "ok" and sz.lost == 0, "Sessions " .. fmt_n(GRID.sessions[2]) .. ":",
        sz.connected and string.format("in one process: %d of %d connected in %s, %.1f KB each, " ..
          "%d threads, %d fds, %d lost (fd soft limit raised to the hard limit, %s)%s%s",
          sz.connected, GRID.sessions[2], fmt_s(sz.connect_s), per_session_kb(sz) or 0, sz.threads,
          sz.fds, sz.lost, tostring(sz.nofile),
          sz.connected < GRID.sessions[2] and "; " .. (sz.error or "") or "",
          fd_cause(sz, GRID.sessions[2])) or status_cell(sz))
  end
  -- load
  local ls = by_id.load_sp
  if ls then
    for _, p in ipairs(ls.points) do
      local mm = p.runs.zklua
      if not mm or mm.status == "not_run" or mm.status == "cut" then
        row(nil, "Under load, SetPartitioner " .. p.label .. ":", "no session lost")
      else
        local done = true
        for _, e in ipairs(SP_EVENTS) do if not event_seconds(mm, e) then done = false end end
        row(done and mm.lost == 0 and mm.failed == 0, "Under load, SetPartitioner " .. p.label .. ":",
            string.format("every event completes, no session lost: members that heard LOST %s, " ..
                          "failed %s; first cover %s, leave %s, join %s, crash %s",
                          tostring(mm.lost or "?"), failed_text(mm),
                          event_cell(mm, "build"), event_cell(mm, "leave"),
                          event_cell(mm, "join"), event_cell(mm, "crash")))
      end
    end
  end
  local la = by_id.load_alloc
  if la then
    for _, p in ipairs(la.points) do
      all_steps("Under load, allocator " .. p.label .. ":", p.runs.zklua,
                "every step settles, no session lost")
    end
  end
  return rows
end

local function write_report(final)
  out = {}
  w("# Scale: zklua and kazoo at ten times the tested size")
  w("")
  w("Issue 20's grid, measured by `", SMALL and "SIZE=small " or "", "make bench-scale` (bench/scale.lua) in one run: ",
    "zklua (Lua 5.4) and kazoo ", MACHINE.kazoo, " take turns on every point (the one to go first alternates), ",
    "each section on a throwaway ZooKeeper ", MACHINE.zookeeper, " (zklua.testing: standalone, loopback, ",
    "tickTime 200 ms, maxClientCnxns=0, JVM -Xmx", SERVER_HEAP, "). Session timeout 2 s unless stated. ",
    "A measurement that takes longer than its cap (", CAP, " s for zklua, ", KAZOO_CAP, " s for kazoo, ",
    "unless a section says otherwise) is \"did not finish in N s\"; ",
    "nothing here is extrapolated.", SMALL and " **SIZE=small: every size a tenth of the issue's " ..
    "(members as given), to check the driver; these are not the issue's points.**" or "")
  w("")
  w("- Machine: ", MACHINE.cpu, ", ", MACHINE.cores, " cores, ", MACHINE.mem, ", Linux ", MACHINE.kernel, ".")
  w("- Code: ", MACHINE.commit, ".")
  w("- Run: started ", MACHINE.started, ", load average (1/5/15 min) ", MACHINE.load_start,
    final and (" at the start, " .. loadavg() .. " at the end (" .. os.date("!%H:%M:%S UTC") .. ")") or
    " at the start (the run is still going)", ". Each table gives the 1-minute load average ",
    "when each run started and ended: the machine is shared, and other work ran beside this one.")
  w("- File descriptors: this run had ", MACHINE.nofile, "; the zklua sessions process runs under ",
    "`ulimit -n $(ulimit -Hn)` and the kazoo one raises its soft limit to the hard limit itself ",
    "(the `fd limit` column).")
  if DEADLINE then
    w("- Deadline: no run started after ", os.date("!%H:%M UTC", DEADLINE),
      " (the session's end); points left then are \"not run in this session\".")
  end
  w("")
  w("## Targets")
  w("")
  w("| verdict | target and figures |")
  w("|---|---|")
  for _, r in ipairs(targets()) do w(r) end
  w("")
  for _, s in ipairs(sections) do
    w("## ", s.title)
    w("")
    if s.intro then w(s.intro); w("") end
    for _, note in ipairs(s.notes) do w(note); w("") end
    if s.id == "sessions" then report_sessions(s)
    elseif s.id == "watches" then report_watches(s)
    elseif s.id == "sp" then report_sp(s, { "zklua", "kazoo" }, "")
    elseif s.id == "load_sp" then report_sp(s, LOAD_KAZOO and { "zklua", "kazoo" } or { "zklua" }, "-load")
    elseif s.id == "alloc" then report_alloc(s, "")
    elseif s.id == "load_alloc" then report_alloc(s, "-load")
    elseif s.id == "tree" then report_tree(s)
    end
  end
  os.execute("mkdir -p '" .. DOC:gsub("[^/]*$", "") .. "'")
  local f = assert(io.open(DOC, "w"))
  f:write(table.concat(out, "\n"), "\n")
  f:close()
end

-- ---------------------------------------------------------------- main

local CAPS = KAZOO_CAP == CAP and string.format(" at %g s", CAP) or
  string.format(" at %g s for zklua, %g s for kazoo", CAP, KAZOO_CAP)
local INTRO = {
  sessions = "N clients started one after the other in one process (`zk:start()` / `KazooClient.start()`), " ..
    "held connected 6 s (3 session timeouts: the server must hear every session's pings), then closed. " ..
    "Memory per session: RSS with all connected less RSS before the first, over N.",
  watches = "One client makes N nodes and a DataWatch on each; another process (zklua's writer for both) " ..
    "sets all N nodes at once (1000 sets in flight); the burst is from the writer's start to the last " ..
    "callback reporting the new value, capped" .. CAPS .. ". zklua: spec/fixtures/watch_burst.lua " ..
    "(blocking handler; depth: the deepest Lua stack a callback ran at), kazoo: bench/kazoo_watch_burst.py.",
  sp = "bench/partitioner_bench.lua: MEMBERS processes (one session each, 2 s) split ITEMS items " ..
    "(time_boundary 0.1 s); first cover: from starting the members to every item owned, the median of " ..
    SP_BUILDS .. " (each by new members on a new path, the ones before leaving first); then one member " ..
    "leaves (finish()), one joins, one is killed (SIGKILL: the crash time includes the 2 s session expiry), " ..
    "each timed until every item is owned again. Each capped" .. CAPS .. "; a member's LOST (or a member " ..
    "that failed) counts as a session lost.",
  alloc = "bench/allocator_bench.lua: MEMBERS PartitionAllocators (each its own client, 2 s session, all in " ..
    "one process) share ITEMS items; start, one joins, one leaves, one session closed without leaving, " ..
    "each timed until every member settled (capped at " .. CAP .. " s). kazoo has no allocator: zklua only.",
  tree = "A tree of N nodes (directories of 999 children, 32-byte values) made beforehand; " ..
    "bench/tree_cache_bench.lua and bench/kazoo_tree_cache_bench.py time start() to INITIALIZED " ..
    "(capped at " .. KAZOO_CAP .. " s for kazoo, " .. TREE_CAP_ZKLUA .. " s for zklua, whose million-node " ..
    "load is a target) and the RSS it added (after a full collection).",
}

local ALL = { "sessions", "watches", "sp", "alloc", "tree", "load" }
local only = {}
for name in (os.getenv("SCALE_ONLY") or table.concat(ALL, ",")):gmatch("[^,]+") do
  only[#only + 1] = name
end

log("bench-scale: %s, cap %g s (kazoo %g s)%s; report %s", SMALL and "SIZE=small" or "full grid", CAP,
    KAZOO_CAP,
    DEADLINE and (", deadline " .. os.date("!%H:%M UTC", DEADLINE)) or "", DOC)
local failure
for _, name in ipairs(only) do
  local ok, err = pcall(function()
    if name == "sessions" then
      run_sessions(section("sessions", "Sessions in one process", INTRO.sessions))
    elseif name == "watches" then
      run_watches(section("watches", "Watch bursts", INTRO.watches))
    elseif name == "sp" then
      run_sp(section("sp", "SetPartitioner", INTRO.sp), 2, { "zklua", "kazoo" })
    elseif name == "alloc" then
      run_alloc(section("alloc", "PartitionAllocator", INTRO.alloc), 2)
    elseif name == "tree" then
      run_tree(section("tree", "TreeCache", INTRO.tree))
    elseif name == "load" then
      local s = section("load_sp", "Under load: SetPartitioner, 10 s sessions",
                        "The SetPartitioner points again, with one CPU hog per core running beside " ..
                        "them and 10 s sessions (the crash time includes the 10 s expiry)." ..
                        (LOAD_KAZOO and "" or " zklua only (kazoo's runs under load: SCALE_LOAD_KAZOO=1)."))
      write_report(false)
      with_hogs(s, function() run_sp(s, 10, LOAD_KAZOO and { "zklua", "kazoo" } or { "zklua" }) end)
      write_report(false)
      local a = section("load_alloc", "Under load: PartitionAllocator, 10 s sessions",
                        "The allocator points again, with one CPU hog per core beside them and 10 s " ..
                        "sessions; the largest start is capped at " .. ALLOC_LOAD_CAP_LARGEST ..
                        " s (its target: it settles, no session lost).")
      with_hogs(a, function() run_alloc(a, 10) end)
    else
      error("unknown section " .. name .. " (" .. table.concat(ALL, ", ") .. ")")
    end
  end)
  if not ok then
    failure = failure or err
    log("section %s failed: %s", name, tostring(err))
    if by_id[name] then
      by_id[name].notes[#by_id[name].notes + 1] = "The driver failed in this section: " .. tostring(err)
    end
  end
  write_report(false)
end
-- a run never started (the deadline) is "not run in this session"
for _, s in ipairs(sections) do
  for _, p in ipairs(s.points) do
    for _, c in ipairs({ "zklua", "kazoo" }) do
      if p.runs[c] == nil and (c == "zklua" or (s.id ~= "alloc" and s.id ~= "load_alloc")) then
        p.runs[c] = { status = "not_run" }
      end
    end
  end
end
write_report(true)
log("bench-scale: wrote %s", DOC)
if failure then error(failure, 0) end
