--- zklua.future — the result of an asynchronous call (kazoo's IAsyncResult).
--
-- `f:get(timeout)` returns what the synchronous call returns, or raises its error;
-- `f:wait(timeout)` waits without raising; `f:ready()`, `f:successful()`, `f.value`,
-- `f.exception`.  `f:rawlink(fn)` calls fn(f) once the result is in (at once if it already
-- is); `f:unlink(fn)` takes it back.  Waiting runs the client's event loop through its
-- handler, so watch callbacks and other futures progress meanwhile.  A future is resolved
-- exactly once; the client guarantees every future of an op is resolved, even across a
-- session expiry or stop().
local errors = require "zklua.errors"
local check = require "zklua.check"

local Future = {}
Future.__index = Future

--- A new, unresolved future waited on through handler (zklua.handlers.*); path (optional)
-- names the node its errors are about.  The fields a future gets later are named here (as
-- nil) so that the table is made with room for them: adding them would resize it.
function Future.new(handler, path)
  return setmetatable({ _handler = handler, done = false, _path = path, value = nil,
                        _second = nil, exception = nil }, Future)
end

local function report(future, err)
  local log = future._handler and future._handler.log_callback_error
  if log then log("rawlink callback", err) else io.stderr:write(tostring(err), "\n") end
end

-- A link of zklua's own (Future:_chain): a step that settles another future and never waits.
-- Kept in _links beside the user's rawlinks, marked by this metatable.
local Step = {}

-- Resolving a future runs its links; a step may resolve another future, whose steps may
-- resolve a third: a chain as long as a path is deep (create with makepath 2000 levels
-- down).  So steps run here, in a loop over the futures resolved meanwhile (FIFO), never one
-- inside another; the user's rawlinks run once the loop is done, as user callbacks
-- (Client:_callback: under the blocking handler never one inside another's wait).
local settling = false
local resolved, first, last = {}, 1, 0

local function call_link(future, fn)
  local ok, err = pcall(fn, future)
  if not ok then report(future, err) end
end

local function run_links(future)
  last = last + 1
  resolved[last] = future
  if settling then return end
  settling = true
  local callbacks, n = nil, 0 -- {future, fn} pairs, in order
  while first <= last do
    local f = resolved[first]
    resolved[first] = nil
    first = first + 1
    local links = f._links
    f._links = nil
    for i = 1, links and #links or 0 do
      local link = links[i]
      if getmetatable(link) == Step then
        call_link(f, link[1])
      else
        callbacks = callbacks or {}
        callbacks[n + 1], callbacks[n + 2] = f, link
        n = n + 2
      end
    end
  end
  first, last = 1, 0
  settling = false
  for i = 1, n, 2 do
    local f = callbacks[i]
    local run = f._handler and f._handler.run_callback
    if run then run(call_link, f, callbacks[i + 1]) else call_link(f, callbacks[i + 1]) end
  end
end

--- Resolves with up to two values (what the synchronous call returns).
function Future:set(value, second)
  if self.done then return end
  self.value, self._second, self.done = value, second, true
  if self._links then run_links(self) end
end

--- Resolves with an error object.
function Future:set_exception(err)
  if self.done then return end
  self.exception, self.done = err, true
  if self._links then run_links(self) end
end

function Future:ready()
  return self.done
end

function Future:successful()
  return self.done and self.exception == nil
end

--- Waits at most timeout seconds (nil: no limit); true when resolved.
-- (A timeout that passes is not handed to check.timeout: a call per get costs more than the
-- test.  NaN fails timeout >= 0.)
function Future:wait(timeout)
  if timeout ~= nil and not (type(timeout) == "number" and timeout >= 0) then
    check.timeout("wait", timeout)
  end
  if self.done then return true end
  local future = self
  return self._handler.wait(function() return future.done end, timeout)
end

--- The result, or raises the error; raises TimeoutError if not resolved within timeout.
function Future:get(timeout)
  if timeout ~= nil and not (type(timeout) == "number" and timeout >= 0) then
    check.timeout("get", timeout)
  end
  if not self.done and not self:wait(timeout) then
    errors.raise(errors.TimeoutError, "no result within " .. tostring(timeout) .. " s")
  end
  if self.exception ~= nil then error(self.exception, 0) end
  if self._second == nil then return self.value end
  return self.value, self._second
end

--- Like get, but never waits: raises TimeoutError if not resolved.
function Future:get_nowait()
  return self:get(0)
end

function Future:rawlink(fn)
  if type(fn) ~= "function" and not check.callable(fn) then
    errors.raise(errors.BadArgumentsError, "rawlink: callback must be a function or a callable table")
  end
  if self.done then
    fn(self)
    return
  end
  self._links = self._links or {}
  self._links[#self._links + 1] = fn
end

function Future:unlink(fn)
  local links = self._links
  if not links then return end
  for i = #links, 1, -1 do
    if links[i] == fn then table.remove(links, i) end
  end
end

--- A future resolved from another: when source resolves, fn(source) decides this one.
-- fn is a step (it may submit ops, never wait): it runs in the loop of run_links.
function Future:_chain(source, fn)
  local target = self
  local step = function(src)
    local ok, err = pcall(fn, src, target)
    if not ok then target:set_exception(err) end
  end
  source._links = source._links or {}
  source._links[#source._links + 1] = setmetatable({ step }, Step)
  if source.done then run_links(source) end -- in the loop too, if one runs
  return self
end

return Future
