-- The acknowledged-write ledger of the fault specs: writes issued through a client's futures
-- (creates of new nodes, sets of a number that only grows) enter it only once the server
-- acknowledged them.  A write that failed is counted by its error's name: it may or may not
-- have been applied, so it is neither acknowledged nor lost.  Every wait is bounded: settle()
-- counts the writes whose future never ended, and check() reads every acknowledged write back
-- through a client (of one server) and names those it does not see.
--
--   local L = ledger.new("writer-1")
--   L:create(zk, "/w/e1", "v1"); L:set(zk, "/w/n", 7)    -- futures, entered when acknowledged
--   L:collect()                                         -- enters the ones that ended
--   assert(L:settle(60) == 0); assert.same({}, L:check(reader, "node 1"))
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"

local ledger = {}
local Ledger = {}
Ledger.__index = Ledger

function ledger.new(name)
  return setmetatable({ name = name, pending = {}, creates = {}, sets = {}, acked = 0,
                        acks = {}, failed = {}, issued = 0 }, Ledger)
end

local function issue(self, kind, path, value, future)
  self.issued = self.issued + 1
  self.pending[#self.pending + 1] = { kind = kind, path = path, value = value, future = future,
                                      at = core.monotonic() }
  return future
end

--- Creates path holding value with zk (a future); entered once acknowledged.
function Ledger:create(zk, path, value)
  return issue(self, "create", path, value, zk:create_async(path, value))
end

--- Sets path to the number n with zk (a future); n must grow from one set of path to the next.
function Ledger:set(zk, path, n)
  return issue(self, "set", path, n, zk:set_async(path, tostring(n)))
end

--- How many writes have not ended yet.
function Ledger:outstanding()
  return #self.pending
end

--- Enters the writes that ended (acknowledged, or failed: counted by error name); returns how
-- many were acknowledged now.
function Ledger:collect()
  local now, left, acked = core.monotonic(), {}, 0
  for _, w in ipairs(self.pending) do
    if not w.future:ready() then
      left[#left + 1] = w
    elseif w.future:successful() then
      acked = acked + 1
      self.acked = self.acked + 1
      self.acks[#self.acks + 1] = { issued = w.at, at = now }
      if w.kind == "create" then
        self.creates[w.path] = w.value
      else
        self.creates[w.path] = nil -- a set supersedes the data a create gave the node
        if not self.sets[w.path] or self.sets[w.path] < w.value then self.sets[w.path] = w.value end
      end
    else
      local e = w.future.exception
      local name = type(e) == "table" and e.name or tostring(e)
      self.failed[name] = (self.failed[name] or 0) + 1
    end
  end
  self.pending = left
  return acked
end

--- The first acknowledgment of a write issued at or after t (core.monotonic()), or nil.
function Ledger:first_ack_since(t)
  for _, a in ipairs(self.acks) do
    if a.issued >= t then return a.at end
  end
  return nil
end

--- Waits (at most bound seconds in all) for every write to end and enters them; returns how
-- many never ended.
function Ledger:settle(bound)
  pcall(testing.wait_for, function()
    for _, w in ipairs(self.pending) do
      if not w.future:ready() then return false end
    end
    return true
  end, bound, self.name .. "'s writes")
  self:collect()
  return #self.pending
end

--- The names of the errors the failed writes got, and how many of each, as "Name n, ...".
function Ledger:failures()
  local list = {}
  for name, n in pairs(self.failed) do list[#list + 1] = name .. " " .. n end
  table.sort(list)
  return table.concat(list, ", ")
end

--- Reads every acknowledged write back through zk (after a sync); returns the list of those
-- it does not see, each "path: why" (where says through which server).  A read whose
-- connection dropped (a server that rejoined may drop its clients) is made again, as a user
-- would (kazoo's retry: connection loss, never an answer such as NoNodeError).
function Ledger:check(zk, where, bound)
  bound = bound or 60
  local patient = zklua.retry{ max_tries = -1, delay = 0.1, deadline = bound }
  patient(zk.sync, zk, "/")
  local reads = {}
  for path, value in pairs(self.creates) do
    reads[#reads + 1] = { path = path, kind = "create", value = value, future = zk:get_async(path) }
  end
  for path, n in pairs(self.sets) do
    reads[#reads + 1] = { path = path, kind = "set", value = n, future = zk:get_async(path) }
  end
  local lost = {}
  for _, r in ipairs(reads) do
    local why, data
    if not r.future:wait(bound) then
      why = "no answer"
    elseif r.future:successful() then
      data = r.future:get(0)
    else
      local ok, err = pcall(patient, zk.get, zk, r.path)
      if ok then data = err else why = tostring(type(err) == "table" and err.name or err) end
    end
    if not why then
      if r.kind == "create" and data ~= r.value then
        why = "holds " .. tostring(data) .. ", acknowledged " .. r.value
      elseif r.kind == "set" and (tonumber(data) or -1) < r.value then
        why = "holds " .. tostring(data) .. ", acknowledged " .. r.value
      end
    end
    if why then lost[#lost + 1] = self.name .. " " .. r.path .. " through " .. where .. ": " .. why end
  end
  return lost
end

return ledger
