--- zklua.recipes.lost — the on_lost callbacks of recipe objects whose C state machine reports a
-- lost session (Lock, Party, DoubleBarrier).
--
-- lost.install(Class, "lock") gives Class `on_lost(fn)` and `_notified(code)`: when the C
-- recipe sends its LOST notify (through the client's dispatch), every fn(object) registered
-- runs, from Lua, in order, as one user callback (Client:_callback: never nested in another
-- callback's wait); an error in one is logged and the others still run.  Objects keep
-- their callbacks in `_lost_callbacks`.
local check = require "zklua.check"
local core = require "zklua.core"

local lost = {}

lost.NOTIFY_LOST = core.notify.LOST -- the code every C recipe sends (ZKL_LOCK_NOTIFY_LOST, ...)

function lost.install(class, what)
  --- fn(object) runs when the session expired (or stopped) and the object lost what it held.
  function class:on_lost(fn)
    if not check.callable(fn) then
      check.fail("on_lost", "fn", "fn must be a function or a callable table (got " ..
                 type(fn) .. ")")
    end
    self._lost_callbacks[#self._lost_callbacks + 1] = fn
    return fn
  end

  function class:_notified(code)
    if code ~= lost.NOTIFY_LOST then return end
    local object = self
    self.client:_callback(function() -- user code: never nested (Client:_callback)
      for _, fn in ipairs(object._lost_callbacks) do
        local ok, err = pcall(fn, object)
        if not ok then
          object.client:_log("ERROR", "error in " .. what .. " on_lost callback: " ..
                             tostring(err))
        end
      end
    end)
  end
end

return lost
