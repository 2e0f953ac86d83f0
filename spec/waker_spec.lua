-- core.waker (src/core/waker.h): the wake-up socket zklua.handlers.ngx reads.  A host socket
-- connected to the waker becomes readable when an attached session has events for its owner,
-- and stays quiet otherwise; the listening path exists only until the connection is taken.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local unix = require "socket.unix"

-- Reads what the host side has within timeout s: the bytes, or nil.
local function read_bytes(sock, timeout)
  sock:settimeout(timeout)
  local data, err, partial = sock:receive(4096)
  if data then return data end
  if partial and #partial > 0 then return partial end
  assert(err == "timeout", err)
  return nil
end

local function exists(path)
  return io.popen("test -e " .. path .. " && echo yes"):read("l") == "yes"
end

describe("core.waker", function()
  local server
  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  local function connected_waker()
    local waker = core.waker("/tmp")
    local path = waker:path()
    assert.is_true(exists(path))
    local mode = io.popen("stat -c %a " .. path):read("l")
    assert.are.equal("700", mode) -- its owner only
    local sock = assert(unix.stream())
    assert(sock:connect(path))
    assert.is_true(waker:accept())
    assert.is_false(exists(path), "the path outlived the accept")
    assert.is_nil(waker:path())
    return waker, sock
  end

  it("makes the host's socket readable when an attached session has events", function()
    local waker, sock = connected_waker()
    local zk = zklua.client{ hosts = server.hosts }
    zk:start()
    zk:ensure_path("/waker")
    zk:dispatch(0) -- nothing waits now
    waker:attach(zk._session)
    assert.is_nil(read_bytes(sock, 0.2), "a byte came with no event")
    local f = zk:get_async("/waker")
    zk._session:flush()
    assert.is_truthy(read_bytes(sock, 10), "no byte for the reply")
    assert.are.equal("", f:get())
    zk:dispatch(0)
    -- detached: events no longer write
    waker:detach(zk._session)
    local g = zk:get_async("/waker")
    zk._session:flush()
    assert.are.equal("", g:get())
    assert.is_nil(read_bytes(sock, 0.2))
    -- attaching while events wait writes at once
    local h = zk:exists_async("/waker")
    zk._session:flush()
    local deadline = core.monotonic() + 10 -- no dispatch meanwhile: the reply stays queued
    while zk._session:pending() > 0 and core.monotonic() < deadline do core.sleep(0.01) end
    waker:attach(zk._session)
    assert.is_truthy(read_bytes(sock, 1), "no byte for the events already waiting")
    assert.is_truthy(h:get())
    zk:close()
    waker:close()
    sock:close()
  end)

  it("signal() writes a byte; a closed host socket is no error", function()
    local waker, sock = connected_waker()
    waker:signal()
    assert.are.equal("!", read_bytes(sock, 1))
    sock:close()
    waker:signal() -- no SIGPIPE, no error
    waker:close()
    waker:close() -- idempotent
    assert.has_error(function() waker:signal() end, "the waker is closed")
  end)

  it("accept() without a connection says so; close() removes the path", function()
    local waker = core.waker("/tmp")
    local path = waker:path()
    local ok, why = waker:accept()
    assert.is_false(ok)
    assert.is_string(why)
    assert.has_error(function() waker:attach(zklua.client{ hosts = server.hosts }._session) end,
                     "waker:attach: no connection accepted yet")
    waker:close()
    assert.is_false(exists(path))
  end)

  it("refuses a directory it cannot listen in", function()
    assert.has_error(function() core.waker("/nonexistent-dir-for-zklua") end)
    assert.has_error(function() core.waker(string.rep("d", 200)) end)
  end)
end)
