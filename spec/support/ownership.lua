--- spec/support/ownership.lua — checks the ownership logs of allocator members
-- (spec/fixtures/allocator_child.lua writes them): never two owners of an item at once,
-- fencing tokens that grow with every owner, and every item owned once at the end.
--
--   local ownership = require "support.ownership"
--   local events = ownership.read({ "/tmp/a.log", "/tmp/b.log" })
--   local report = ownership.check(events, {
--     ended = { [pid] = t },        -- a process killed (or gone) at time t: its items end then
--     window = { [ident] = true },  -- idents whose session a test expired (see below)
--   })
--   ownership.assert_safe(report)                  -- raises with the details on a violation
--   ownership.assert_cover(report, items)          -- every item owned exactly once at the end
--
-- An ownership interval is one member process's acquire of an item until its release, its
-- "lost", or the end time of its process.  Intervals of one item must not overlap, and their
-- tokens must grow in start order.  The one overlap the allocator documents: a member whose
-- session the server expired learns it (and logs "lost") only when it reconnects, while the
-- others may already own its items; such overlaps are allowed only for idents in `window`
-- and only on intervals that ended with "lost" (they are listed in report.windows).
local core = require "zklua.core"

local ownership = {}

--- Reads log files into a list of events {t, event, ident, pid, item, token}, sorted by t.
-- The files are read one after the other while the members go on writing, so only events
-- up to the moment the reading began are kept: a later one (an acquire in a file read last)
-- may follow a release that a file read first did not have yet.  Up to that moment the
-- snapshot is whole: a member logs (and flushes) a release before its claim goes, so every
-- acquire of the item by another member that is timed before the cut-off comes after a
-- release already in its file when the reading began.
function ownership.read(files)
  local events = {}
  local cutoff = core.monotonic()
  for _, file in ipairs(files) do
    local f = io.open(file, "r")
    if f then
      for line in f:lines() do
        local t, event, ident, pid, item, token = line:match("^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$")
        if t and tonumber(t) <= cutoff then
          events[#events + 1] = { t = tonumber(t), event = event, ident = ident, pid = pid,
                                  item = item, token = tonumber(token) }
        end
      end
      f:close()
    end
  end
  table.sort(events, function(a, b) return a.t < b.t end)
  return events
end

local function describe_interval(i)
  return string.format("%s(pid %s, token %s) [%.3f, %s%s]", i.ident, i.pid, tostring(i.token),
                       i.start, i.stop and string.format("%.3f", i.stop) or "open",
                       i.how and (" " .. i.how) or "")
end
ownership.describe = describe_interval

--- Builds the intervals and checks them; returns a report: problems (violations, strings),
-- windows (allowed expiry overlaps), intervals (item -> list), owners (item -> list of the
-- intervals still open at the end), acquisitions (count).
function ownership.check(events, opts)
  opts = opts or {}
  local ended, window = opts.ended or {}, opts.window or {}
  local report = { problems = {}, windows = {}, intervals = {}, owners = {}, acquisitions = 0 }
  local open = {} -- pid .. "\0" .. item -> interval
  local function problem(fmt, ...) report.problems[#report.problems + 1] = string.format(fmt, ...) end
  for _, e in ipairs(events) do
    local key = e.pid .. "\0" .. e.item
    if e.event == "acquire" then
      report.acquisitions = report.acquisitions + 1
      if open[key] then problem("%s acquired %s twice without a release", e.ident, e.item) end
      local interval = { ident = e.ident, pid = e.pid, item = e.item, token = e.token,
                         start = e.t }
      open[key] = interval
      local list = report.intervals[e.item] or {}
      list[#list + 1] = interval
      report.intervals[e.item] = list
    elseif e.event == "release" or e.event == "lost" then
      local interval = open[key]
      if not interval then
        problem("%s logged %s of %s, which it did not own", e.ident, e.event, e.item)
      else
        interval.stop, interval.how = e.t, e.event
        open[key] = nil
      end
    end
  end
  for _, interval in pairs(open) do
    local t = ended[interval.pid]
    if t then
      interval.stop, interval.how = math.max(t, interval.start), "ended"
    else
      local list = report.owners[interval.item] or {}
      list[#list + 1] = interval
      report.owners[interval.item] = list
    end
  end
  for item, list in pairs(report.intervals) do
    table.sort(list, function(a, b) return a.start < b.start end)
    local seen_tokens = {}
    for j, b in ipairs(list) do
      if seen_tokens[b.token] then problem("%s: token %s given twice", item, tostring(b.token)) end
      seen_tokens[b.token] = true
      for i = 1, j - 1 do
        local a = list[i]
        if (a.stop == nil or a.stop > b.start) then
          if a.how == "lost" and window[a.ident] then
            report.windows[#report.windows + 1] = item .. ": " .. describe_interval(a) ..
                                                  " / " .. describe_interval(b)
          else
            problem("%s owned twice at once: %s and %s", item, describe_interval(a),
                    describe_interval(b))
          end
        end
        if a.token and b.token and a.token >= b.token then
          problem("%s: token did not grow: %s then %s", item, describe_interval(a),
                  describe_interval(b))
        end
      end
    end
  end
  return report
end

--- Raises with every violation found.
function ownership.assert_safe(report)
  if #report.problems > 0 then
    error("ownership violated:\n  " .. table.concat(report.problems, "\n  "), 2)
  end
end

--- Raises unless each of items is owned (open at the end) by exactly one member, and
-- nothing else is owned.
function ownership.assert_cover(report, items)
  local wanted, faults = {}, {}
  for _, item in ipairs(items) do
    wanted[item] = true
    local n = report.owners[item] and #report.owners[item] or 0
    if n ~= 1 then faults[#faults + 1] = item .. " owned by " .. n .. " members" end
  end
  for item in pairs(report.owners) do
    if not wanted[item] then faults[#faults + 1] = item .. " owned but not in the set" end
  end
  if #faults > 0 then
    table.sort(faults)
    error("cover wrong:\n  " .. table.concat(faults, "\n  "), 2)
  end
end

--- item -> ident of its owner at the end (for items with exactly one owner).
function ownership.final_owners(report)
  local owners = {}
  for item, list in pairs(report.owners) do
    if #list == 1 then owners[item] = list[1].ident end
  end
  return owners
end

return ownership
