--- zklua.recipes.partitioning.allocator — PartitionAllocator: divide a shared, changing set of items among
-- the live members of a group (kiel's API, made safe).
--
--   local a = zk:PartitionAllocator{ path = "/app/work", identifier = "worker-1",
--     strategy = "sticky",                         -- or allocator_fn = function(m, i, ctx)
--     on_acquire = function(item, token) ... end,  -- this member now owns item
--     on_release = function(item) ... end,         -- finish with item: it is handed over next
--     on_rebalance = function(new, old, info) ... end }
--   a:start({"q1", "q2", "q3"})                    -- the seed, used if the set is new
--   for _, item in ipairs(a.allocation) do ... a:fencing_token(item) ... end
--   a:add_partitions({"q4"}); a:remove_partitions({"q1"})
--   a:stop()
--
-- The allocator is the C state machine of src/recipes/partitioning/allocator.c.  Its contract — layout,
-- leader, claims, no two live members ever owning one item (owning it IS holding its
-- EPHEMERAL owner node), fencing tokens, and what SUSPENDED (no new claims, owned items stay
-- owned; a stale allocation is what the tokens are for) and LOST (every item reported lost;
-- rejoin or stop) do — is stated once, in src/recipes/partitioning/allocator.h.  What this layer adds:
--
-- * The leader computes the assignment with ITS strategy (zklua.strategies; allocator_fn
--   returns {member -> items}).  A strategy that raises, runs over strategy_timeout, or
--   returns an invalid assignment (an item missing or twice, an unknown member or item) is
--   logged and round_robin is used instead, so every item stays covered.
-- * Hooks and strategies run from Lua (from the event loop, never inside a C call).  A member
--   runs on_acquire(item, token) only once it created the item's node, and the node is
--   deleted only after on_release(item) returned.  Each on_release/on_acquire call is bounded
--   by max_reaction_time: a hook still running then is stopped with an error (zklua.bounded)
--   and the item is handed over anyway.
-- * On LOST: allocation is empty and on_rebalance(new = {}, old, info) runs with everything in
--   info.lost and info.session_lost = true (on_release does not run: the nodes are gone
--   already).  With rejoin = true (default) the member joins again; otherwise it stops
--   (state "idle", allocator.error = SessionExpiredError).  zk:stop() is a LOST that always
--   stops.
-- * The set is one JSON array in <path>/partitions, changed by compare-and-set, so concurrent
--   add/remove from many members never lose an update.  A set (or an assignment) too big for
--   one znode (about 1 MiB of JSON, core.allocator_max_node) is chunked (format 2,
--   src/recipes/partitioning/allocator_chunks.c): its chunks are written first, then the header by
--   compare-and-set, so readers never see a torn set; only when every live member reads
--   format 2 (else a KazooException names the members to upgrade, before anything is
--   written).  A set that fits again is written as one znode again.
-- * settle (seconds, default 0.1; 0: none): the leader assigns once the members have been
--   still that long, or twice the longest gap between two changes of the burst when that is
--   longer (re-armed by each change, for at most 50 * settle), so members joining or leaving in
--   a burst cost one assignment, and an item changes owner about once.
-- * Timeouts: start(seed, timeout), wait_settled(timeout) and stop(timeout) wait at
--   most timeout seconds (default: the client's timeout): start and stop then raise
--   TimeoutError (the leave goes on in the background), wait_settled returns false.  Every
--   wait ends with ConnectionClosedError on zk:stop()/close() and AuthFailedError on
--   AUTH_FAILED (stop() returns then: the nodes go with the session).
-- * Sharing: no turn is needed.  start() checks and moves the C phase before it yields (a
--   second start raises KazooException at once), stop() asks for an idempotent leave, and
--   wait_settled only waits for a state every waiter sees; the rounds that run hooks are
--   serialised by the object itself (one _process at a time, the others ask it to run again),
--   so coroutines sharing one allocator never run a hook twice for one change.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local bounded = require "zklua.bounded"
local paths = require "zklua.paths"
local Retry = require "zklua.retry"
local waits = require "zklua.recipes.waits"
local base = require "zklua.recipes.base"

local recipes = {}

local Allocator = { __name = "zklua.PartitionAllocator" }

local OPTIONS = {
  path = "string", identifier = "string", allocator_fn = "function", strategy = "any",
  on_rebalance = "function", on_acquire = "function", on_release = "function",
  max_reaction_time = "number", weight = "number", rejoin = "boolean",
  strategy_timeout = "number", settle = "number",
}

local NAME = "PartitionAllocator"
local ZCLOSING = core.codes.ZCLOSING

local function strategies()
  return require "zklua.recipes.partitioning.strategies"
end

-- ---------------------------------------------------------------- fields

local function sorted_keys(set)
  local list = {}
  for k in pairs(set) do list[#list + 1] = k end
  table.sort(list)
  return list
end

local fields = {
  allocation = function(self) return sorted_keys(self._owned) end,
  state = function(self) return self._ud:phase() end,
  is_leader = function(self) return self._ud:is_leader() end,
  generation = function(self) return self._ud:generation() end,
}

function Allocator.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return Allocator[key]
end

function Allocator.__tostring(self)
  return string.format("zklua.PartitionAllocator(%s, %s, %s)", self.path, self.identifier,
                       self._ud:phase())
end

-- ---------------------------------------------------------------- checks

-- Checks items (a list of non-empty UTF-8 strings without NUL) and returns the set as stored
-- (sorted, without repeats) and its JSON text.
local function check_items(fname, items, argument)
  if type(items) ~= "table" then
    check.fail(fname, argument, argument .. " must be a list of strings (got " ..
               type(items) .. ")")
  end
  local n = 0
  for _ in pairs(items) do n = n + 1 end
  if n ~= #items then
    check.fail(fname, argument, argument .. " must be a list (keys 1..n) of strings")
  end
  local list, json = core.allocator_canonical_items(items)
  if not list then
    local bad = json
    check.fail(fname, argument, string.format("%s[%d] must be a non-empty UTF-8 string " ..
               "without NUL (got %s)", argument, bad, type(items[bad]) == "string" and
               string.format("%q", items[bad]:sub(1, 40)) or type(items[bad])))
  end
  return list, json
end

local function resolve_strategy(fname, strategy, argument)
  if type(strategy) == "function" then return strategy end
  if type(strategy) == "string" or type(strategy) == "table" then
    local ok, fn = pcall(strategies().get, strategy)
    if ok and type(fn) == "function" then return fn end
    check.fail(fname, argument, argument .. ": " .. tostring(fn))
  end
  check.fail(fname, argument, argument .. " must be a strategy name, a function or a " ..
             "loaded strategy (got " .. type(strategy) .. ")")
end

local function number_option(fname, value, name, default, min_exclusive)
  if value == nil then return default end
  if value ~= value or value == math.huge or value < 0 or (min_exclusive and value == 0) then
    check.fail(fname, name, name .. " must be a finite number " ..
               (min_exclusive and "> 0" or ">= 0") .. " (got " .. tostring(value) .. ")")
  end
  return value
end

local instance = 0

local function default_identifier()
  local f = io.open("/proc/sys/kernel/hostname", "r")
  local host = f and f:read("l") or os.getenv("HOSTNAME") or "localhost"
  if f then f:close() end
  local s = io.open("/proc/self/stat", "r")
  local pid = s and s:read("l"):match("^%d+") or tostring(os.time())
  if s then s:close() end
  instance = instance + 1
  return host .. "-" .. pid .. "-" .. instance
end

-- ---------------------------------------------------------------- the loop

local function log(self, level, message)
  self.client:_log(level, "PartitionAllocator " .. self.path .. " (" .. self.identifier ..
                   "): " .. message)
end

-- Runs a user hook bounded by max_reaction_time; errors and overruns are logged.
local function run_hook(self, name, fn, ...)
  if not fn then return end
  local ok, err = bounded.call(self.max_reaction_time, fn, ...)
  if not ok then
    log(self, "ERROR", name .. "(" .. tostring((...)) .. ") " ..
        (err == bounded.TIMEOUT and "ran over max_reaction_time (" ..
         self.max_reaction_time .. " s): stopped, the item is handed over" or
         "raised: " .. tostring(err)))
  end
end

local function copy_list(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end


-- The leader's computation: this member's strategy over the live members and the set.
function Allocator:_compute(epoch)
  local ud = self._ud
  local members, weights = ud:members()
  local items = ud:partitions()
  local _, assignment = ud:assignment()
  local live, in_set, current = {}, {}, {}
  for _, m in ipairs(members) do live[m] = true end
  for _, item in ipairs(items) do in_set[item] = true end
  for member, owned in pairs(assignment or {}) do
    if live[member] then
      for _, item in ipairs(owned) do
        if in_set[item] then current[item] = member end
      end
    end
  end
  local ctx = { current = current, weights = weights, identifier = self.identifier }
  local ok, result = bounded.call(self.strategy_timeout, self._strategy, copy_list(members),
                                  copy_list(items), ctx)
  local valid, why = ok, result
  if ok and not strategies().is_builtin(self._strategy) then -- (1M items: 1 s to check)
    local checked, v, w = pcall(strategies().validate, result, members, items)
    valid, why = checked and v, checked and w or v
  end
  if not valid then
    why = result == bounded.TIMEOUT and "ran over strategy_timeout" or tostring(why)
    self.strategy_error = why
    log(self, "ERROR", "the strategy failed (" .. why .. "): round_robin is used instead")
    result = strategies().round_robin(members, items, ctx)
  else
    self.strategy_error = nil
  end
  local published, err = ud:publish(epoch, result)
  if published == nil and err ~= "stale" then
    self.error = errors.KazooException("cannot publish the assignment: " .. tostring(err),
                                       self.path)
    log(self, "ERROR", tostring(self.error))
  end
end

function Allocator:_rebalanced(old, gained, lost, session_lost)
  local ud = self._ud
  local generation = ud:generation()
  local moved = {}
  if generation ~= self._last_generation then
    moved = ud:moved() -- (in C: O(items) once per generation, not a Lua walk)
    table.sort(moved)
    self._last_generation = generation
  end
  table.sort(gained)
  table.sort(lost)
  local info = { gained = gained, lost = lost, moved = moved, generation = generation,
                 session_lost = session_lost }
  local ok, err = pcall(self.on_rebalance, self.allocation, old, info)
  if not ok then log(self, "ERROR", "on_rebalance raised: " .. tostring(err)) end
end

-- One round: what C says changed, the hooks, on_rebalance.  Returns whether news came.
function Allocator:_round()
  local ud = self._ud
  local items, tokens, release, lost, compute = ud:take()
  if compute then self:_compute(compute) end
  if #items + #release + #lost == 0 then return compute ~= nil end
  -- (the lists on_rebalance gets cost O(share) to build: only when there is one)
  local old = self.on_rebalance and self.allocation
  local gained, gone, session_lost = {}, {}, false
  for _, item in ipairs(lost) do
    if self._owned[item] then
      self._owned[item] = nil
      gone[#gone + 1] = item
      session_lost = true
    end
  end
  for _, item in ipairs(release) do
    if self._owned[item] then
      run_hook(self, "on_release", self.on_release, item)
      self._owned[item] = nil -- after its hook: it owned the item while finishing
      gone[#gone + 1] = item
    end
    ud:released(item)
  end
  for i, item in ipairs(items) do
    self._owned[item] = tokens[i]
    gained[#gained + 1] = item
    run_hook(self, "on_acquire", self.on_acquire, item, tokens[i])
  end
  if #gained + #gone > 0 and self.on_rebalance then
    self:_rebalanced(old, gained, gone, session_lost)
  end
  return true
end

-- Runs rounds until C has no more news; re-entered calls (a hook that waits runs the event
-- loop) only ask for one more round.
function Allocator:_process()
  if self._busy then
    self._again = true
    return
  end
  self._busy = true
  local ok, err = pcall(function()
    repeat
      self._again = false
      local news = self:_round()
    until not (news or self._again)
  end)
  self._busy = false
  local ud = self._ud
  if ud:phase() == "idle" and self._registered then self:_unregister() end
  if not ok then log(self, "ERROR", "handling news failed: " .. tostring(err)) end
end

local function not_from_a_hook(self, fname)
  if self._busy then
    errors.raise(errors.KazooException, fname .. ": cannot wait inside this allocator's own " ..
                 "hook or strategy (its news are handled after it returns)", self.path)
  end
end

-- News from C: a round runs the hooks, user code, so it runs as a user callback
-- (Client:_callback: never nested in another callback's wait); the allocator's own waits run
-- rounds themselves.
function Allocator:_notified()
  self.client:_callback(self._process, self)
end

-- ---------------------------------------------------------------- registry

local function registry(client)
  client._allocators = client._allocators or {}
  return client._allocators
end

function Allocator:_register()
  local reg = registry(self.client)
  local other = reg[self.path]
  if other and other ~= self then
    errors.raise(errors.KazooException, "start: another PartitionAllocator of this client " ..
                 "runs on " .. self.path .. " (one member per client and path)", self.path)
  end
  reg[self.path] = self -- also keeps a running allocator alive
  self._registered = true
end

function Allocator:_unregister()
  local reg = registry(self.client)
  if reg[self.path] == self then reg[self.path] = nil end
  self._registered = false
  local rc = self._ud:rc()
  if rc == core.codes.ZUNIMPLEMENTED and not self.error then
    self.error = errors.KazooException("the set or assignment under " .. self.path .. " is " ..
                                       "in a chunked format newer than this zklua reads (2): " ..
                                       "upgrade zklua", self.path)
  elseif rc == core.codes.ZMARSHALLINGERROR and not self.error then
    self.error = errors.KazooException("the set or assignment under " .. self.path .. " is " ..
                                       "a chunked value that cannot be read", self.path)
  elseif rc ~= 0 and rc ~= ZCLOSING and not self.error then
    self.error = errors.from_code(rc, self.path)
  end
end

-- ---------------------------------------------------------------- the API

local function usable(client, fname)
  return client:_usable_session(fname)
end

-- The retry of every write of the set (start's chunked seed, add/remove_partitions): through
-- connection losses, for at most `seconds` (nil: until the client stops).  A write whose
-- reply was lost shows as done (or as changed by someone) when the set is read again, and the
-- chunks of a write that did not commit are deleted by the next one (allocator_chunk_stale).
local function set_retry(client, seconds)
  return Retry.new({ max_tries = -1, delay = 0.05, max_delay = 1, deadline = seconds },
                   client.handler.sleep)
end

--- start(seed_partitions = {}, timeout = the client's): joins the group.  seed_partitions becomes the
-- set only when <path>/partitions does not exist yet.  Returns once this member's node exists
-- and members, set and assignment were read (items are claimed from then on), or once a stop()
-- made meanwhile (from a hook) took over; raises the
-- ZooKeeper error that stopped it, TimeoutError after timeout seconds (then it leaves in the
-- background), ConnectionClosedError or AuthFailedError when the client ends first.
function Allocator:start(seed, timeout)
  local client = self.client
  usable(client, "start")
  not_from_a_hook(self, "start")
  local list, json = check_items("start", seed == nil and {} or seed, "seed_partitions")
  timeout = check.timeout("start", timeout)
  local ud = self._ud
  if ud:phase() ~= "idle" then
    errors.raise(errors.KazooException, "start: this allocator is already " .. ud:phase(),
                 self.path)
  end
  if #json > core.allocator_max_node(self._partitions_path) then
    -- chunked: written here, only if there is no set yet (C seeds with one node only);
    -- retried through connection losses within start's timeout
    local node = self._partitions_path
    local seconds = timeout or client._timeout
    local ok, err = pcall(set_retry(client, seconds), function()
      if not client:exists(node) then self:_write_set("start", list, nil, false, "seed_partitions") end
    end)
    if not ok and errors.is(err, errors.RetryFailedError) then
      errors.raise(errors.TimeoutError, "start: the set was not written within " ..
                   tostring(seconds) .. " s (" .. tostring(err.cause or err) .. ")", node)
    end
    if not ok then error(err, 0) end
    json = "[]"
  end
  self:_register()
  self.error = nil
  self._stop_asked = false
  local started, why = ud:start(json)
  if not started then
    self:_unregister()
    errors.raise(errors.ConnectionClosedError, "start: cannot join (" .. tostring(why) .. ")",
                 self.path)
  end
  if timeout == nil then timeout = client._timeout end
  local state = base.wait(self, function()
    return ud:ready() or ud:phase() == "idle"
  end, base.deadline(timeout))
  self:_process()
  if self._stop_asked and client._session and state ~= "closed" and state ~= "auth_failed" then
    -- stop() was called meanwhile (from one of its hooks): start's part is over, and the
    -- leave goes on (or is done) as stop() says; raising would report a stop as a failure
    return true
  end
  if ud:phase() == "idle" or not client._session or state == "closed" then
    self:_unregister()
    if state == "closed" then base.raise_closed("start", self.path) end
    error(self.error or errors.from_code(ud:rc() ~= 0 and ud:rc() or ZCLOSING, self.path), 0)
  end
  if state == "auth_failed" then
    self:stop(0)
    base.raise_auth_failed("start", self.path)
  end
  if state == "timeout" then
    pcall(self.stop, self, 0) -- the leave goes on in the background
    errors.raise(errors.TimeoutError, "start: not joined within " .. tostring(timeout) .. " s",
                 self.path)
  end
  return true
end

--- stop(timeout = the client's): leaves the group.  Every owned item is released (on_release, then its node is
-- deleted) and the member node deleted; returns once done, or after a session timeout without
-- a connection (the nodes then go in the background, or with the session).  Returns true if
-- it was running.  Called from one of its own hooks, it starts the leave and returns at once
-- (the releases run when the hook has returned).
function Allocator:stop(timeout)
  timeout = check.timeout("stop", timeout)
  local ud, client = self._ud, self.client
  local phase = ud:phase()
  if phase == "idle" then return false end
  self._stop_asked = true -- a start() still waiting returns instead of failing
  if phase ~= "leaving" then ud:leave() end
  if self._busy then -- from one of its own hooks: the leave goes on once the hook returns
    self._again = true
    return true
  end
  self:_process()
  if timeout == nil then timeout = client._timeout end
  -- false: finishes in the background once reconnected (or with the session)
  local _, why = waits.while_reachable(client, function() return ud:phase() == "idle" end,
                                       base.deadline(timeout))
  self:_process()
  if ud:phase() == "idle" or not client._session then self:_unregister() end
  if why == "timeout" and timeout > 0 then
    base.raise_timeout(errors.TimeoutError, "stop", self.path, timeout, "the leave")
  end
  return true
end

--- The shared set: add items (kept once each).  Returns true if the set changed.
function Allocator:add_partitions(items)
  return self:_change_set("add_partitions", items, true)
end

--- The shared set: remove items.  Returns true if the set changed.
function Allocator:remove_partitions(items)
  return self:_change_set("remove_partitions", items, false)
end

local function unname(name)
  return (name:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function chunk_path(chunks, tag, i)
  return string.format("%s/%s-%05d", chunks, tag, i)
end

local function raise_format(node, kind, format)
  if kind == "newer" then
    errors.raise(errors.KazooException, "the value at " .. node .. " is in chunked format " ..
                 tostring(format) .. ", newer than this zklua reads (2): upgrade zklua", node)
  end
  errors.raise(errors.KazooException, "the value at " .. node .. " is a chunked header " ..
               "that cannot be read", node)
end

-- The set at node: its items (as stored), the header's stat (nil: no set), and its chunk tag
-- when chunked.  A chunk gone means the header was replaced meanwhile: read again.
local function read_set(client, node)
  for _ = 1, 100 do
    local ok, data, stat = pcall(client.get, client, node)
    if not ok then
      if errors.is(data, errors.NoNodeError) then return {}, nil end
      error(data, 0)
    end
    if data == nil or data == "" then return {}, stat end
    local kind, tag, n, format = core.allocator_chunk_header(data)
    if kind == "none" then
      local list, why = core.allocator_decode_items(data)
      if not list then
        errors.raise(errors.KazooException, "the set at " .. node .. " is not a JSON array " ..
                     "of strings (" .. tostring(why) .. ")", node)
      end
      return list, stat
    elseif kind ~= "chunked" then
      raise_format(node, kind, format)
    end
    local list, whole = {}, true
    for i = 0, n - 1 do
      local got, chunk = pcall(client.get, client, chunk_path(node .. "-chunks", tag, i))
      if not got then
        if not errors.is(chunk, errors.NoNodeError) then error(chunk, 0) end
        whole = false -- replaced meanwhile
        break
      end
      local part, why = core.allocator_decode_items(chunk)
      if not part then
        errors.raise(errors.KazooException, "chunk " .. i .. " of the set at " .. node ..
                     " is not a JSON array of strings (" .. tostring(why) .. ")", node)
      end
      for _, item in ipairs(part) do list[#list + 1] = item end
    end
    if whole then return list, stat, tag end
  end
  errors.raise(errors.KazooException, "the set at " .. node .. " kept changing while read", node)
end

-- Members whose node does not say they read chunked values (zklua before format 2).
local function old_readers(client, members_path)
  local ok, names = pcall(client.get_children, client, members_path)
  if not ok then
    if errors.is(names, errors.NoNodeError) then return {} end
    error(names, 0)
  end
  local old = {}
  for _, name in ipairs(names) do
    local got, data = pcall(client.get, client, members_path .. "/" .. name)
    if got and not (data or ""):find('"chunked":%s*[2-9]') then old[#old + 1] = unname(name) end
  end
  table.sort(old)
  return old
end

-- Deletes the chunks that the header committed with tag made unreachable (and chunks of
-- writers that died before their header went in).
local function collect_chunks(client, chunks, tag)
  local ok, names = pcall(client.get_children, client, chunks)
  if not ok then return end
  for _, name in ipairs(names) do
    if core.allocator_chunk_stale(name, tag) then
      pcall(client.delete, client, chunks .. "/" .. name)
    end
  end
end

-- Writes list (sorted, without repeats) as the set, replacing the header of stat (nil:
-- creating it): one node when it fits, else chunks then the header.  Returns true, or false
-- when someone else changed the set first (read it again).  Raises when the set needs chunks
-- and a live member reads only one node.
function Allocator:_write_set(fname, list, stat, was_chunked, argument)
  local client, node = self.client, self._partitions_path
  local chunks = node .. "-chunks"
  local json = core.allocator_encode_items(list)
  local version = stat and stat.version or -1
  local tag, header
  if #json <= core.allocator_max_node(node) then
    header = json
  else
    local old = old_readers(client, self._members_path)
    if #old > 0 then
      errors.raise(errors.KazooException, string.format("%s: %s would be %d bytes, over one " ..
                   "znode, and these live members read only one-znode sets (zklua before " ..
                   "chunked sets): %s; upgrade them first", fname, argument, #json,
                   table.concat(old, ", ")), node)
    end
    tag = core.allocator_new_tag(version)
    local texts = core.allocator_cut_items(list,
                                           core.allocator_max_node(chunk_path(chunks, tag, 0)))
    client:ensure_path(chunks)
    local futures = {}
    for i, text in ipairs(texts) do
      futures[i] = client:create_async(chunk_path(chunks, tag, i - 1), text)
    end
    for _, f in ipairs(futures) do f:get() end
    header = string.format('{"zklua_chunked":2,"tag":"%s","chunks":%d,"count":%d}', tag,
                           #texts, #list)
  end
  local ok, err
  if stat then
    ok, err = pcall(client.set, client, node, header, version)
  else
    ok, err = pcall(client.create, client, node, header, { makepath = true })
  end
  if not ok then
    if not (errors.is(err, errors.BadVersionError) or errors.is(err, errors.NodeExistsError)
            or errors.is(err, errors.NoNodeError)) then
      error(err, 0)
    end
    return false -- our chunks, if any, are named by no header: the next writer deletes them
  end
  if tag or was_chunked then
    collect_chunks(client, chunks, tag or string.format("%010d-", version + 1))
  end
  return true
end

function Allocator:_change_set(fname, items, add)
  check_items(fname, items, "items")
  local client = self.client
  usable(client, fname)
  local node = self._partitions_path
  local retry = set_retry(client, math.max(client._timeout, client:session_timeout()) * 2)
  return retry(function()
    while true do
      local current, stat, tag = read_set(client, node)
      local set, changed = {}, false
      for _, item in ipairs(current) do set[item] = true end
      for _, item in ipairs(items) do
        if (set[item] ~= nil) ~= add then changed = true end
        set[item] = add or nil
      end
      if not changed then return false end
      if self:_write_set(fname, sorted_keys(set), stat, tag ~= nil, "items") then return true end
      -- someone else changed it meanwhile: read it again
    end
  end)
end

--- The live members' identifiers, sorted (what this member last read while running; read
-- from ZooKeeper otherwise).
function Allocator:members()
  if self._ud:phase() == "running" then return (self._ud:members()) end
  local client = self.client
  usable(client, "members")
  local ok, names = pcall(client.get_children, client, self._members_path)
  if not ok then
    if errors.is(names, errors.NoNodeError) then return {} end
    error(names, 0)
  end
  local ids = {}
  for i, name in ipairs(names) do ids[i] = unname(name) end
  table.sort(ids)
  return ids
end

--- The shared set, sorted (as last read while running; read from ZooKeeper otherwise).
function Allocator:partitions()
  if self._ud:phase() == "running" then return self._ud:partitions() end
  usable(self.client, "partitions")
  local list, bad = core.allocator_canonical_items((read_set(self.client, self._partitions_path)))
  if not list then
    errors.raise(errors.KazooException, string.format("the set at %s holds an item that is " ..
                 "not a non-empty UTF-8 string without NUL (item %d)", self._partitions_path,
                 bad), self._partitions_path)
  end
  return list
end

--- The fencing token of an owned item (its owner node's czxid), or nil when not owned.
function Allocator:fencing_token(item)
  if type(item) ~= "string" then
    check.fail("fencing_token", "item", "item must be a string (got " .. type(item) .. ")")
  end
  return self._owned[item]
end

--- Whether this member owns item now.
function Allocator:owns(item)
  return self._owned[item] ~= nil
end

--- set_strategy(name | function | loaded strategy): the strategy this member uses when it
-- leads; a leader re-divides with it at once (on another member it applies when it leads).
function Allocator:set_strategy(strategy)
  self._strategy = resolve_strategy("set_strategy", strategy, "strategy")
  self._ud:touch()
  if self._ud:phase() ~= "idle" then self:_process() end
end

-- Whether the assignment (as read) was computed for these members and this set, and this
-- member owns exactly its share (C keeps the counts: O(1) per call, not O(items)).
local function settled(self)
  return not self._busy and self._ud:settled()
end

--- Waits (running the event loop) until, as far as this member knows after a round trip to
-- the server, the assignment covers the live members and the whole set and this member owns
-- exactly its share: true, or false after timeout seconds (nil: the client's timeout;
-- math.huge: no limit).  Raises ConnectionClosedError / AuthFailedError when the client is
-- stopped or closed / AUTH_FAILED first.
function Allocator:wait_settled(timeout)
  timeout = check.timeout("wait_settled", timeout)
  not_from_a_hook(self, "wait_settled")
  local client = self.client
  if timeout == nil then timeout = client._timeout end
  local deadline = base.deadline(timeout)
  if client.state == "CONNECTED" then -- watches for earlier changes arrive before its reply
    local sync = client:exists_async(self.path)
    pcall(sync.get, sync, base.remaining(deadline))
  end
  local state = base.wait(self, function()
    self:_process()
    return settled(self)
  end, deadline)
  if state == "timeout" then return false end
  base.check_wait(state, errors.TimeoutError, "wait_settled", self.path, timeout)
  return true
end

function recipes.PartitionAllocator(client, opts)
  if type(opts) ~= "table" then
    check.fail(NAME, "options", "options must be a table {path = ..., ...} (got " ..
               type(opts) .. ")")
  end
  check.options(NAME, opts, OPTIONS)
  local path = check.kazoo_path(NAME, opts.path)
  if opts.allocator_fn ~= nil and opts.strategy ~= nil then
    check.fail(NAME, "strategy", "give allocator_fn or strategy, not both")
  end
  local identifier = opts.identifier or default_identifier()
  local _, bad = core.allocator_encode_items({ identifier })
  if bad then
    check.fail(NAME, "identifier", "identifier must be a non-empty UTF-8 string without NUL")
  end
  local strategy = opts.allocator_fn or resolve_strategy(NAME, opts.strategy or "round_robin",
                                                         "strategy")
  local max_reaction_time = number_option(NAME, opts.max_reaction_time, "max_reaction_time", 1)
  local weight = number_option(NAME, opts.weight, "weight", 1, true)
  local strategy_timeout = number_option(NAME, opts.strategy_timeout, "strategy_timeout", 10,
                                         true)
  local settle = number_option(NAME, opts.settle, "settle", 0.1)
  if settle > 3600 then
    check.fail(NAME, "settle", "settle must be at most 3600 seconds (got " .. settle .. ")")
  end
  local session = usable(client, NAME)
  local ud = core.allocator(session, path, identifier, weight, opts.rejoin ~= false,
                            client:_acl())
  ud:set_settle(math.floor(settle * 1000 + 0.5))
  local self = setmetatable({
    client = client, path = path, identifier = identifier, weight = weight,
    rejoin = opts.rejoin ~= false, max_reaction_time = max_reaction_time, settle = settle,
    strategy_timeout = strategy_timeout, on_rebalance = opts.on_rebalance,
    on_acquire = opts.on_acquire, on_release = opts.on_release,
    _strategy = strategy, _ud = ud, _owned = {},
    _members_path = paths.join(path, "members"),
    _partitions_path = paths.join(path, "partitions"),
  }, Allocator)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.class = Allocator

return recipes
