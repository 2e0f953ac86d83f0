-- Counter{layout = "curator-atomic-long"} and Curator 5.4's DistributedAtomicLong (Debian's
-- libcurator-recipes-java, spec/fixtures/java/CuratorAtomicLong.java in its own JVM): the same
-- 8 bytes both ways, concurrent adds from both sides summing exactly (one object shared by
-- coroutines too), an add whose set reply was lost (SUSPENDED) applied once, an expiry (LOST)
-- losing nothing, and bad input refused before anything is sent.
-- zk:AtomicLong (Curator's DistributedAtomicLong API) and a Java DistributedAtomicLong with
-- PromotedToLock contend on one node and one lock path; its SUSPENDED, LOST, sharing among
-- coroutines, promoted-lock timeout and bad input are here too.
-- Every wait is for an event: a line the Java program prints, or a call's return.
local zklua = require "zklua"
local errors = require "zklua.errors"
local helpers = require "support.helpers"
local testing = require "zklua.testing"
local interop = require "support.curator"

local SESSION_MS = 8000
local LAYOUT = { layout = "curator-atomic-long" }

-- The 8 big-endian bytes of n (an integer that Lua represents exactly).
local function bytes_of(n)
  local out = {}
  local neg = n < 0
  if neg then n = -n - 1 end -- two's complement: ~n
  for i = 8, 1, -1 do
    local b = n % 256
    n = (n - b) / 256
    out[i] = string.char(neg and 255 - b or b)
  end
  return table.concat(out)
end

describe("Counter{layout = 'curator-atomic-long'} and DistributedAtomicLong", function()
  local server, zk, path
  local s = interop.scaffold("/atomiclong", function(t) server, zk, path = t.server, t.zk, t.path end)
  setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)

  local function start(...)
    return s:start("CuratorAtomicLong", ...)
  end

  local function raw(p)
    return (zk:get(p))
  end

  it("the same 8 big-endian bytes both ways", function()
    local c = zk:Counter(path, 0, LAYOUT)
    assert.equals("curator-atomic-long", c.layout)
    assert.equals(0, c:get()) -- makes the node: 8 zero bytes, the default
    assert.equals(bytes_of(0), raw(path))
    local curator = start(server.hosts, path, SESSION_MS)
    curator:send("get")
    curator:expect("^value 0$")
    local _, pre, post = c:add(5)
    assert.same({ 0, 5 }, { pre, post })
    assert.equals("\0\0\0\0\0\0\0\5", raw(path))
    curator:send("get")
    curator:expect("^value 5$")
    curator:send("add -12")
    curator:expect("^added 5 %-7$")
    assert.equals("\255\255\255\255\255\255\255\249", raw(path))
    assert.equals(-7, c:get())
    curator:send("set 1099511627776") -- 2^40: past 32 bits
    curator:expect("^set 1099511627776$")
    assert.equals(1099511627776, c:get())
    c:add(1099511627776)
    assert.equals(bytes_of(2199023255552), raw(path))
    curator:send("get")
    curator:expect("^value 2199023255552$")
    if not helpers.LUAJIT then -- the int64 edge (LuaJIT's numbers stop being exact at 2^53)
      curator:send("set 9223372036854775806")
      curator:expect("^set 9223372036854775806$")
      assert.equals(math.maxinteger - 1, c:get())
      local _, _, top = c:add(1)
      assert.equals(math.maxinteger, top)
      -- Curator's long wraps around; zklua refuses the sum and writes nothing
      local err = helpers.raises(errors.BadArgumentsError, c.add, c, 1)
      assert.matches("does not fit in a 64%-bit integer", tostring(err))
      curator:send("get")
      curator:expect("^value 9223372036854775807$")
    end
  end)

  it("a default is the seed Curator reads; empty data reads as 0 on both sides", function()
    local seeded = zk:Counter(path .. "/seeded", -4, LAYOUT)
    assert.equals(-4, seeded:get())
    assert.equals(bytes_of(-4), raw(path .. "/seeded"))
    local curator = start(server.hosts, path .. "/seeded", SESSION_MS)
    curator:send("get")
    curator:expect("^value %-4$")
    zk:create(path .. "/empty", "")
    assert.equals(0, zk:Counter(path .. "/empty", 7, LAYOUT):get()) -- Curator's 0, not 7
    local other = start(server.hosts, path .. "/empty", SESSION_MS)
    other:send("get")
    other:expect("^value 0$")
    -- a SharedCount's 4 bytes are no DistributedAtomicLong value, on either side
    zk:create(path .. "/shared", "\0\0\0\3")
    local err = helpers.raises(errors.KazooException, function()
      return zk:Counter(path .. "/shared", 0, LAYOUT):get()
    end)
    assert.matches("is not a value of this curator_long counter", tostring(err))
    local third = start(server.hosts, path .. "/shared", SESSION_MS)
    third:send("get")
    third:expect("^error get RuntimeException Corrupted data")
    assert.equals("\0\0\0\3", raw(path .. "/shared"))
  end)

  it("Curator and coroutines sharing one zklua counter add at once: the sum is exact", function()
    local cq_handler = require "zklua.handlers.cqueues"
    local curator = start(server.hosts, path, SESSION_MS)
    local per, n = 40, 3
    local done, posts = 0, {}
    interop.in_cqueues(function(cq)
      local member = zklua.client{ hosts = server.hosts, handler = cq_handler.new(cq) }
      member:start()
      local c = member:Counter(path, 0, LAYOUT)
      c:get()
      curator:send("adds " .. per * n)
      for _ = 1, n do
        cq:wrap(function()
          for _ = 1, per do
            local _, pre, post = c:add(1, 60)
            assert(post == pre + 1)
            posts[#posts + 1] = post
          end
          done = done + 1
        end)
      end
      assert.is_true(member.handler.wait(function() return done == n end, 120))
      member:close()
    end, 180)
    curator:expect("^adds 120 done$", 120)
    assert.equals(2 * per * n, zk:Counter(path, 0, LAYOUT):get())
    -- each zklua add saw a value of its own: no two of them were applied on one version
    local seen = {}
    for _, post in ipairs(posts) do
      assert.is_nil(seen[post])
      seen[post] = true
    end
    assert.equals(per * n, #posts)
    curator:send("get")
    curator:expect("^value 240$")
  end)

  it("SUSPENDED: an add whose set reply was lost applies once", function()
    local member, proxy, states = helpers.client_losing_reply(server:node(1), SESSION_MS / 1000)
    local c = member:Counter(path, 0, LAYOUT)
    c:add(10)
    proxy:cut_reply("set")
    c:add(1) -- the set reaches the server; the client gives up on the connection, reconnects
    assert.is_true(proxy:status().cut, "the add sent no set")
    assert.equals("SUSPENDED", states[1])
    assert.equals(11, c.post_value)
    assert.equals(bytes_of(11), raw(path))
    local curator = start(server.hosts, path, SESSION_MS)
    curator:send("get")
    curator:expect("^value 11$")
    member:close()
    proxy:stop()
  end)

  it("LOST: the value survives an expiry, and the counter goes on on the new session",
     function()
    local member = helpers.client(server.hosts)
    local c = member:Counter(path, 0, LAYOUT)
    c:add(5)
    helpers.expire(member)
    c:add(1)
    assert.equals(6, c:get())
    local curator = start(server.hosts, path, SESSION_MS)
    curator:send("add 1")
    curator:expect("^added 6 7$")
    assert.equals(7, c:get())
    member:close()
  end)

  it("bad input is refused before anything is sent", function()
    local raises = helpers.raises
    local err = raises(errors.BadArgumentsError, zk.Counter, zk, path, 0, { layout = "curator" })
    assert.matches("option 'layout' must be \"kazoo\" or \"curator%-atomic%-long\"", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Counter, zk, path, 1.5, LAYOUT)
    assert.matches("default must be an integer", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Counter, zk, path, 0,
                 { layout = "curator-atomic-long", float = true })
    assert.matches("default must be an integer", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Counter, zk, path, 0,
                 { layout = "curator-atomic-long", support_curator = true })
    assert.matches("are two layouts: take one", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Counter, zk, path, 0, { layout = 8 })
    assert.matches("option 'layout' must be a string", tostring(err))
    local c = zk:Counter(path, 0, LAYOUT) -- made, nothing sent yet
    err = raises(errors.BadArgumentsError, c.add, c, 1.5)
    assert.matches("must be an integer", tostring(err))
    assert.is_nil(zk:exists(path))
  end)

  -- ---------------------------------------------------------------- zk:AtomicLong

  it("AtomicLong and Curator's PromotedToLock contend on one node and one lock path", function()
    local cq_handler = require "zklua.handlers.cqueues"
    local lock_path = path .. "-lock"
    -- one optimistic try, one promoted try: contention promotes often, on both sides
    local curator = start(server.hosts, path, SESSION_MS, lock_path, 0)
    local per, n = 40, 3
    local done, posts, tries = 0, {}, { optimistic = 0, promoted = 0 }
    interop.in_cqueues(function(cq)
      local member = zklua.client{ hosts = server.hosts, handler = cq_handler.new(cq) }
      member:start()
      local al = member:AtomicLong(path, { retries = 0, timeout = 60,
                                          promoted_to_lock = { path = lock_path, retries = 0 } })
      curator:send("adds " .. per * n)
      for _ = 1, n do -- coroutines sharing one AtomicLong
        cq:wrap(function()
          for _ = 1, per do
            local v
            repeat -- Curator's rule: check succeeded, try again
              v = al:increment()
              tries.optimistic = tries.optimistic + v.stats.optimistic_tries
              tries.promoted = tries.promoted + v.stats.promoted_lock_tries
            until v.succeeded
            assert(v.post_value == v.pre_value + 1)
            posts[#posts + 1] = v.post_value
          end
          done = done + 1
        end)
      end
      assert.is_true(member.handler.wait(function() return done == n end, 120))
      member:close()
    end, 180)
    local line = curator:expect("^adds 120 done optimistic %d+ promoted %d+$", 120)
    local java_promoted = tonumber(line:match("promoted (%d+)$"))
    print(string.format("zklua: %d optimistic, %d promoted tries; Curator: %s", tries.optimistic,
                        tries.promoted, line))
    assert.is_true(tries.promoted + java_promoted > 0, "no side was ever promoted")
    local al = zk:AtomicLong(path)
    assert.equals(2 * per * n, al:get().post_value)
    local seen = {}
    for _, post in ipairs(posts) do
      assert.is_nil(seen[post])
      seen[post] = true
    end
    -- compare_and_set from each side sees the other's value
    curator:send("cas 240 300")
    curator:expect("^cas true 240 300$")
    local v = al:compare_and_set(240, 1)
    assert.is_false(v.succeeded)
    assert.same({ 300, 0 }, { v.pre_value, v.post_value })
    v = al:compare_and_set(300, 42)
    assert.is_true(v.succeeded)
    assert.same({ 300, 42 }, { v.pre_value, v.post_value })
    curator:send("cas 300 0")
    curator:expect("^cas false 42 0$")
    assert.equals(bytes_of(42), raw(path))
    -- no holder left (a reaped container counts as none, as below)
    local listed, kids = pcall(zk.get_children, zk, lock_path)
    if not listed then assert.is_true(errors.is(kids, errors.NoNodeError), tostring(kids)) end
    assert.same({}, listed and kids or {})
  end)

  it("AtomicLong: initialize, try_set, force_set, get of a missing node, as Curator's", function()
    local al = zk:AtomicLong(path .. "/a/b")
    assert.same({ true, 0, 0 }, { al:get().succeeded, al:get().pre_value, al:get().post_value })
    assert.is_nil(zk:exists(path .. "/a/b")) -- get creates nothing (Curator's)
    local curator = start(server.hosts, path .. "/a/b", SESSION_MS)
    curator:send("get")
    curator:expect("^value 0$")
    assert.is_nil(zk:exists(path .. "/a/b"))
    assert.is_true(al:initialize(-3))
    assert.is_false(al:initialize(9))
    curator:send("get")
    curator:expect("^value %-3$")
    local v = al:try_set(17)
    assert.same({ true, -3, 17, 1, 0 }, { v.succeeded, v.pre_value, v.post_value,
                                         v.stats.optimistic_tries, v.stats.promoted_lock_tries })
    al:force_set(-1)
    assert.equals(bytes_of(-1), raw(path .. "/a/b"))
    curator:send("add 2")
    curator:expect("^added %-1 1$")
    zk:delete(path .. "/a/b")
    al:force_set(8) -- creates the node again
    assert.equals(8, al:get().post_value)
    assert.equals(9, al:increment().post_value)
    zk:delete(path .. "/a/b")
    v = al:add(5) -- an update of a missing node creates it holding the new value
    assert.same({ true, 0, 5 }, { v.succeeded, v.pre_value, v.post_value })
    assert.equals(bytes_of(5), raw(path .. "/a/b"))
  end)

  it("AtomicLong: failed optimistic tries are promoted; a lock not had in time fails", function()
    local cq_handler = require "zklua.handlers.cqueues"
    local proxy = testing.proxy(server:node(1))
    local lock_path = path .. "-lock"
    local holder = helpers.client(server.hosts)
    local lock = holder:Lock(lock_path, "holder", { layout = "curator" })
    assert.is_true(lock:acquire(true, 30))
    interop.in_cqueues(function(cq)
      local handler = cq_handler.new(cq)
      local member = zklua.client{ hosts = proxy.hosts, handler = handler, timeout = 30 }
      member:start()
      local al = member:AtomicLong(path, { retries = 0, promoted_to_lock = {
        path = lock_path, timeout = 0.5, retries = 0 } })
      assert.is_true(al:initialize(5))
      -- the optimistic try's read goes up and its reply is held; an increment's versioned set
      -- goes up behind it on the same session (handled in order); then the replies go on
      -- and the try's set meets the newer version
      local function contended_increment()
        local value, stat = member:get(path)
        local n = 0
        for i = 1, 8 do n = n * 256 + value:byte(i) end
        proxy:cut_reply("get")
        local result, done
        cq:wrap(function()
          result = al:increment(60)
          done = true
        end)
        assert.is_true(handler.wait(function() return proxy:status().cut end, 30))
        local rival_set = member:set_async(path, bytes_of(n + 1), stat.version)
        proxy:resume()
        assert.equals(stat.version + 1, rival_set:get(60).version)
        assert.is_true(handler.wait(function() return done end, 60))
        return result
      end
      -- the lock is held elsewhere: not had within promoted_to_lock.timeout, not succeeded
      local v = contended_increment()
      assert.same({ false, 5, 0, 1, 0 }, { v.succeeded, v.pre_value, v.post_value,
                                          v.stats.optimistic_tries, v.stats.promoted_lock_tries })
      assert.is_true(v.stats.promoted_time_ms >= 0 and v.stats.optimistic_time_ms >= 0)
      assert.equals(6, al:get().post_value)
      lock:release()
      -- the lock is free: the promoted try under it succeeds
      v = contended_increment()
      assert.same({ true, 7, 8, 1, 1 }, { v.succeeded, v.pre_value, v.post_value,
                                         v.stats.optimistic_tries, v.stats.promoted_lock_tries })
      -- released: no children (the harness reaps an emptied container every 500 ms, so the
      -- lock's node may be gone already: NoNodeError counts as none)
      local listed, kids = pcall(member.get_children, member, lock_path)
      if not listed then assert.is_true(errors.is(kids, errors.NoNodeError), tostring(kids)) end
      assert.same({}, listed and kids or {})
      member:close()
    end, 180)
    holder:close()
    proxy:stop()
  end)

  it("AtomicLong: the whole 64-bit range both ways (LuaJIT: int64 cdata, exact)", function()
    local compat = require "zklua.compat"
    local al = zk:AtomicLong(path)
    local curator = start(server.hosts, path, SESSION_MS)
    curator:send("set 9223372036854775806")
    curator:expect("^set 9223372036854775806$")
    local v = al:get().post_value
    assert.equals("9223372036854775806", compat.id_string(v))
    local c = al:compare_and_set(v, v + 1) -- handed back as read: exact
    assert.is_true(c.succeeded)
    assert.equals("9223372036854775807", compat.id_string(c.post_value))
    curator:send("get")
    curator:expect("^value 9223372036854775807$")
    helpers.raises(errors.BadArgumentsError, al.increment, al) -- beyond: nothing written
    assert.equals(1, al:subtract(v).post_value)
    al:force_set(-v - 2)
    curator:send("get")
    curator:expect("^value %-9223372036854775808$")
    helpers.raises(errors.BadArgumentsError, al.decrement, al)
    helpers.raises(errors.BadArgumentsError, al.subtract, al, -v - 2) -- cannot be negated
    assert.equals("-9223372036854775808", compat.id_string(al:get().pre_value))
  end)

  it("AtomicLong, SUSPENDED: an increment whose set reply was lost applies once", function()
    local member, proxy, states = helpers.client_losing_reply(server:node(1), SESSION_MS / 1000)
    local al = member:AtomicLong(path)
    al:add(10)
    proxy:cut_reply("set")
    local v = al:increment() -- the set reaches the server; the client reconnects
    assert.is_true(proxy:status().cut, "the increment sent no set")
    assert.equals("SUSPENDED", states[1])
    -- the lost reply is no failed try: the node shows the set, it counts as applied
    assert.same({ true, 10, 11, 1 }, { v.succeeded, v.pre_value, v.post_value,
                                      v.stats.optimistic_tries })
    assert.equals(bytes_of(11), raw(path))
    local curator = start(server.hosts, path, SESSION_MS)
    curator:send("get")
    curator:expect("^value 11$")
    member:close()
    proxy:stop()
  end)

  it("AtomicLong, LOST: the value survives an expiry; calls go on on the new session", function()
    local member = helpers.client(server.hosts)
    local al = member:AtomicLong(path, { promoted_to_lock = { path = path .. "-lock" } })
    al:add(5)
    helpers.expire(member)
    assert.equals(6, al:increment().post_value)
    assert.is_false(al:initialize(0))
    local curator = start(server.hosts, path, SESSION_MS)
    curator:send("add 1")
    curator:expect("^added 6 7$")
    assert.equals(7, al:get().post_value)
    member:close()
  end)

  it("AtomicLong: every call ends by its timeout; a timed-out update goes on", function()
    local proxy = testing.proxy(server:node(1))
    local member = zklua.client{ hosts = proxy.hosts, timeout = 30 }
    member:start()
    local al = member:AtomicLong(path, { timeout = 0.3 })
    al:get()
    proxy:silence("both")
    local err = helpers.raises(errors.TimeoutError, al.increment, al, 0.2)
    assert.matches("may still be applied", tostring(err))
    helpers.raises(errors.TimeoutError, al.get, al) -- opts.timeout
    proxy:resume()
    assert.equals(1, al:get(30).post_value) -- it waited for the increment, which went on
    member:close()
    proxy:stop()
  end)

  it("AtomicLong: bad input is refused before anything is sent", function()
    local raises = helpers.raises
    local B = errors.BadArgumentsError
    local function bad(pattern, fn, ...)
      assert.matches(pattern, tostring(raises(B, fn, ...)))
    end
    bad("unknown option 'retry'", zk.AtomicLong, zk, path, { retry = 1 })
    bad("retries must be an integer", zk.AtomicLong, zk, path, { retries = -1 })
    bad("retries must be an integer", zk.AtomicLong, zk, path, { retries = 1.5 })
    bad("retry_sleep must be a number of seconds", zk.AtomicLong, zk, path, { retry_sleep = 0 })
    bad("timeout must be a number", zk.AtomicLong, zk, path, { timeout = -1 })
    bad("promoted_to_lock needs a path", zk.AtomicLong, zk, path, { promoted_to_lock = {} })
    bad("unknown option 'max_lock_time'", zk.AtomicLong, zk, path,
        { promoted_to_lock = { path = "/l", max_lock_time = 1 } })
    bad("option 'promoted_to_lock' must be a table", zk.AtomicLong, zk, path, { promoted_to_lock = "/l" })
    bad("path", zk.AtomicLong, zk, 42)
    local al = zk:AtomicLong(path)
    bad("delta must be an integer", al.add, al, 1.5)
    bad("delta must be an integer", al.add, al, "1")
    bad("delta must be an integer", al.subtract, al, nil)
    bad("value must be an integer", al.try_set, al, 0 / 0)
    bad("value must be an integer", al.force_set, al, math.huge)
    bad("expected must be an integer", al.compare_and_set, al, 0.5, 1)
    bad("value must be an integer", al.compare_and_set, al, 0, {})
    bad("seed must be an integer", al.initialize, al, false)
    -- 2^64: a float under Lua 5.4, an integral number beyond the range under LuaJIT
    bad(helpers.LUAJIT and "is beyond the 64%-bit range" or "value must be an integer",
        al.try_set, al, 2 ^ 64)
    bad("timeout must be a number", al.increment, al, -1)
    bad("timeout must be a number", al.get, al, "1")
    if helpers.LUAJIT then
      bad("is beyond the 64%-bit range", al.add, al, 2 ^ 63)
    else
      bad("delta is too small to negate", al.subtract, al, math.mininteger)
      -- a sum beyond the range: refused, nothing written (Curator's long wraps around)
      al:force_set(math.maxinteger)
      bad("does not fit in a 64%-bit integer", al.increment, al)
      assert.equals(math.maxinteger, al:get().post_value)
      zk:delete(path)
    end
    assert.is_nil(zk:exists(path))
  end)
end)
