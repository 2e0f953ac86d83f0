--- zklua.watchers — kazoo's DataWatch and ChildrenWatch.
--
-- DataWatch(path, fn): fn(data, stat, event) is called at once (data and stat nil when the
-- node does not exist), then every time the node's data changes or it is created or deleted.
-- ChildrenWatch(path, fn, {send_event, allow_session_lost}): fn(children) (with send_event,
-- fn(children, event)) at once and on every change of the children; it stops when the node is
-- deleted.  Either stops for good when fn returns false.
--
-- Connection loss (SUSPENDED): the watches survive (the library re-registers them when it
-- reconnects), and changes made meanwhile are reported once reconnected.  Session expiry
-- (LOST): the server dropped the watches; both re-read and re-arm as soon as the new session
-- is CONNECTED, calling fn if something changed.  ChildrenWatch with
-- allow_session_lost = false stops at LOST instead.  Both can be used as decorators:
-- zk:DataWatch(path)(fn).
--
-- fn sees the node's states in order, never an older one after a newer one.  A fetch waits
-- for its read, and that wait runs the event loop (or, under a coroutine handler, other
-- coroutines), so a watch firing meanwhile starts a newer fetch, which reads later and may
-- report first; the older fetch then drops what it read (kazoo serialises its fetches with a
-- lock instead, which a fetch nested in another's wait could never take).
local errors = require "zklua.errors"
local check = require "zklua.check"

local watchers = {}

local function call_func(client, watch, ...)
  -- a fetch may finish after the watch stopped (fn returned false meanwhile): stay silent
  if watch.stopped or not watch.func then return end
  local ok, result = pcall(watch.func, ...)
  if not ok then
    client:_log("ERROR", "error in " .. watch.kind .. " function: " .. tostring(result))
    return
  end
  if result == false then watch:_stop() end
end

-- Starts a fetch of watch; overtaken(watch, ticket) then tells whether a newer fetch began
-- since.  The newer one reads later, so it reports the node as new as this one read it or
-- newer (or, failing, re-arms on the next CONNECTED): this one's result is dropped.
local function begin_fetch(watch)
  watch.fetches = watch.fetches + 1
  return watch.fetches
end

local function overtaken(watch, ticket)
  return watch.fetches ~= ticket
end

-- ---------------------------------------------------------------- DataWatch

-- What every DataWatch starts with lives here, not in each one: a watch's own table holds at
-- most 8 fields (client, path, func, _listener, _on_change, armed, fetches, version), one hash
-- part of 8 slots; with the 11 it had, a watch took 16 (100k DataWatches: the Lua heap went
-- from 76.6 to 56.8 MB).  version stays nil until the first report.
local DataWatch = { kind = "DataWatch", stopped = false, armed = false, fetches = 0 }
DataWatch.__index = DataWatch

function DataWatch:_stop()
  self.stopped = true
  self.func = nil
  self.client:remove_listener(self._listener)
end

-- Calls func with what a fetch read, if it changed; the watch is armed again.
function DataWatch:_report(data, stat, event)
  self.armed = true
  local version = stat and stat.mzxid or false
  if self.version == nil or version ~= self.version then
    self.version = version
    call_func(self.client, self, data, stat, event)
  end
end

-- The watch function of every read: a change starts a fetch that does not wait (NONE: the
-- session expired, CONNECTED will re-arm).
local function on_change_of(watch)
  return function(ev)
    if ev.type ~= "NONE" then watch:_refetch(ev) end
  end
end

-- What a refetch read, handled as a user callback: anything but a plain answer (no node, a
-- lost connection) is left to the waiting fetch, which retries, or re-arms on CONNECTED.
local function refetched(watch, ticket, rc, data, stat, event)
  if overtaken(watch, ticket) then return end
  if rc ~= 0 then return watch:_fetch(event) end
  watch:_report(data, stat, event)
end

-- The pending read of a refetch, {watch, ticket, event}: all it holds while in flight (a
-- future with a rawlink held four tables and closures; 100k at once in a burst).
local Refetch = {}
Refetch.__index = Refetch

function Refetch:_complete(rc, data, stat)
  local watch = self[1]
  watch.client:_callback(refetched, watch, self[2], rc, data, stat, self[3])
end

--- A fetch on a change event: the read goes out at once and its answer is handled as a
-- callback of its own, so a burst of N events costs N reads in flight (the session's window
-- paces them), not N round trips one after another.
function DataWatch:_refetch(event)
  if self.stopped then return end
  local client = self.client
  local sink = setmetatable({ self, begin_fetch(self), event }, Refetch)
  if not pcall(client._get_into, client, sink, self.path, self._on_change) then
    return self:_fetch(event)
  end
end

--- Reads the node with a watch (waiting, retried) and calls func if it changed; event is what
-- triggered it.
function DataWatch:_fetch(event)
  if self.stopped then return end
  local client, path = self.client, self.path
  local ticket = begin_fetch(self)
  local on_change = self._on_change
  local ok, data, stat = pcall(client.retry, client, client.get, client, path, on_change)
  if overtaken(self, ticket) then return end
  if not ok and errors.is(data, errors.NoNodeError) then
    ok, stat = pcall(client.retry, client, client.exists, client, path, on_change)
    data = nil
    if overtaken(self, ticket) then return end
    if ok and stat then return self:_fetch(event) end -- created in between: read it
  end
  if not ok then
    -- the connection went away: re-armed once CONNECTED again
    self.armed = false
    if not errors.is(data, errors.ConnectionClosedError) then
      client:_log("WARN", "DataWatch " .. path .. ": " .. tostring(data))
    end
    return
  end
  self:_report(data, stat, event)
end

-- A state listener: the fetch waits, so it runs as a user callback (kazoo spawns it).
function DataWatch:_on_state(state)
  if state == "LOST" then
    self.armed = false
  elseif state == "CONNECTED" and not self.armed and not self.stopped then
    self.client:_callback(self._fetch, self, nil)
  end
end

function DataWatch:_start(func)
  if self.func then
    errors.raise(errors.KazooException, "a function is already associated with this DataWatch")
  end
  if not check.callable(func) then
    check.fail("DataWatch", "func", "func must be a function or a callable table")
  end
  self.func = func
  local watch = self
  self._listener = function(state) watch:_on_state(state) end
  self.client:add_listener(self._listener)
  self:_fetch(nil)
  return func
end

function DataWatch.__call(watch, func)
  return watch:_start(func)
end

function watchers.DataWatch(client, path, func, opts)
  path = check.kazoo_path("DataWatch", path)
  check.options("DataWatch", opts, {})
  local watch = setmetatable({ client = client, path = path }, DataWatch)
  watch._on_change = on_change_of(watch)
  if func ~= nil then watch:_start(func) end
  return watch
end

-- ---------------------------------------------------------------- ChildrenWatch

local ChildrenWatch = {}
ChildrenWatch.__index = ChildrenWatch

function ChildrenWatch:_stop()
  self.stopped = true
  self.func = nil
  if self._listener then self.client:remove_listener(self._listener) end
end

local function same_list(a, b)
  if not a or #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

function ChildrenWatch:_fetch(event)
  if self.stopped then return end
  local client, watch = self.client, self
  local ticket = begin_fetch(self)
  local on_change = function(ev)
    if ev.type ~= "NONE" then watch:_fetch(ev) end
  end
  local ok, children = pcall(client.retry, client, client.get_children, client, self.path,
                             on_change)
  if overtaken(self, ticket) then return end
  if not ok then
    if errors.is(children, errors.NoNodeError) then
      self:_stop() -- the node is gone: kazoo stops watching
    else
      self.armed = false
      if not errors.is(children, errors.ConnectionClosedError) then
        client:_log("WARN", "ChildrenWatch " .. self.path .. ": " .. tostring(children))
      end
    end
    return
  end
  local rearmed = not self.armed
  self.armed = true
  if rearmed and same_list(self.prior, children) then return end
  self.prior = children
  if self.send_event then
    call_func(client, self, children, event)
  else
    call_func(client, self, children)
  end
end

function ChildrenWatch:_on_state(state)
  if state == "LOST" or state == "SUSPENDED" then
    if state == "LOST" then self.armed = false end
  elseif state == "CONNECTED" and not self.armed and not self.stopped then
    self.client:_callback(self._fetch, self, nil) -- it waits (see DataWatch:_on_state)
  end
end

function ChildrenWatch:_start(func)
  if self.func then
    errors.raise(errors.KazooException,
                 "a function is already associated with this ChildrenWatch")
  end
  if not check.callable(func) then
    check.fail("ChildrenWatch", "func", "func must be a function or a callable table")
  end
  self.func = func
  local watch = self
  if self.allow_session_lost then
    self._listener = function(state) watch:_on_state(state) end
    self.client:add_listener(self._listener)
  else
    self._listener = function(state)
      if state == "LOST" then watch:_stop() end
    end
    self.client:add_listener(self._listener)
  end
  self:_fetch(nil)
  return func
end

function ChildrenWatch.__call(watch, func)
  return watch:_start(func)
end

function watchers.ChildrenWatch(client, path, func, opts)
  path = check.kazoo_path("ChildrenWatch", path)
  opts = check.options("ChildrenWatch", opts, { send_event = "boolean",
                                               allow_session_lost = "boolean" })
  local watch = setmetatable({
    client = client, path = path, kind = "ChildrenWatch", stopped = false, armed = false,
    fetches = 0,
    send_event = opts.send_event == true, allow_session_lost = opts.allow_session_lost ~= false,
  }, ChildrenWatch)
  if func ~= nil then watch:_start(func) end
  return watch
end

return watchers
