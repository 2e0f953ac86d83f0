-- Counter{layout = "curator-atomic-long"} and Curator 5.4's DistributedAtomicLong (Debian's
-- libcurator-recipes-java, spec/fixtures/java/CuratorAtomicLong.java in its own JVM): the same
-- 8 bytes both ways, concurrent adds from both sides summing exactly (one object shared by
-- coroutines too), an add whose set reply was lost (SUSPENDED) applied once, an expiry (LOST)
-- losing nothing, and bad input refused before anything is sent.
-- Every wait is for an event: a line the Java program prints, or a call's return.
local zklua = require "zklua"
local errors = require "zklua.errors"
local helpers = require "support.helpers"
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
end)
