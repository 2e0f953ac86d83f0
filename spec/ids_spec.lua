-- 64-bit ids stay exact in both ABIs (src/lua/convert.c zkl_push_int64, zklua.compat):
-- zxids (czxid, mzxid, pzxid), fencing tokens and a stat's ephemeralOwner are integers under
-- Lua 5.4; under LuaJIT numbers while they fit in 53 bits and int64 cdata beyond.  Session
-- ids are "0x..." strings everywhere.  A real server started past epoch 2^21 (the zxid's high
-- 32 bits) hands out zxids beyond 2^53; kazoo (Python's exact integers) reads the same nodes.
local compat = require "zklua.compat"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local EPOCH = 0x300000 -- zxids from 0x30000100000000 on: beyond 2^53 = 0x20000000000000

local dec = compat.id_string

describe("64-bit ids", function()
  local kids = helpers.kids()
  after_each(function() kids:cleanup() end)

  -- What kazoo reads for paths: path -> {czxid, mzxid, pzxid, ephemeralOwner} (decimal).
  local function kazoo_stats(hosts, ...)
    local kid = kids:kazoo("spec/fixtures/kazoo_stat.py", hosts, ...)
    assert.is_true(kid:wait_exit(60), "kazoo did not finish")
    assert.are.equal(0, kid.status, kid:stderr())
    local stats = {}
    for path, c, m, p, e in kid:stdout():gmatch("stat (%S+) (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)") do
      stats[path] = { czxid = c, mzxid = m, pzxid = p, ephemeralOwner = e }
    end
    return stats
  end

  describe("on a server whose zxids exceed 2^53", function()
    local server, zk

    setup(function()
      server = testing.server{ epoch = EPOCH }
      zk = helpers.client(server.hosts)
    end)
    teardown(function()
      if zk then zk:close() end
      if server then server:stop() end
    end)

    it("stat fields are exact: the same as kazoo reads, and exact arithmetic", function()
      zk:create("/eph", "a", { ephemeral = true })
      zk:create("/parent", "")
      zk:create("/parent/kid", "")
      local set_stat = zk:set("/eph", "b")
      local _, eph = zk:get("/eph")
      local _, parent = zk:get("/parent")
      local kid = zk:exists("/parent/kid")
      for _, v in ipairs({ eph.czxid, eph.mzxid, parent.pzxid, eph.ephemeralOwner }) do
        assert.is_true(compat.is_id(v), tostring(v))
        assert.is_true(v > 2 ^ 53, dec(v) .. " is not beyond 2^53: the test proves nothing")
        if helpers.LUAJIT then assert.are.equal("cdata", type(v)) end
      end
      -- the epoch is the zxid's high half
      assert.are.equal(string.format("0x%x", EPOCH + 1), string.format("0x%x", eph.czxid):sub(1, -9))
      local k = kazoo_stats(server.hosts, "/eph", "/parent", "/parent/kid")
      -- differences of a few transactions are exact (doubles beyond 2^53 cannot tell
      -- neighbours apart): the same as kazoo's decimal strings give.  Not exactly 3 and 2: the
      -- server may log another session's transaction (a create or a close) in between.
      local function small_diff(a, b) -- a - b for decimal strings whose high digits agree
        return (tonumber(a:sub(-12)) - tonumber(b:sub(-12))) % 10 ^ 12
      end
      local eph_diff = eph.mzxid - eph.czxid
      assert.is_true(eph_diff >= 3 and eph_diff < 100, dec(eph_diff))
      assert.are.equal(small_diff(k["/eph"].mzxid, k["/eph"].czxid), tonumber(dec(eph_diff)))
      local kid_diff = kid.czxid - eph.czxid
      assert.is_true(kid_diff >= 2 and kid_diff < eph_diff, dec(kid_diff))
      assert.are.equal(small_diff(k["/parent/kid"].czxid, k["/eph"].czxid), tonumber(dec(kid_diff)))
      assert.is_true(parent.pzxid == kid.czxid)
      assert.is_true(set_stat.mzxid == eph.mzxid)
      assert.is_true(zk:client_id() == eph.ephemeralOwner)
      assert.is_true(zk:client_id() == eph.owner_session_id)
      assert.are.same({ czxid = dec(eph.czxid), mzxid = dec(eph.mzxid), pzxid = dec(eph.pzxid),
                        ephemeralOwner = dec(eph.ephemeralOwner) }, k["/eph"])
      assert.are.equal(dec(parent.pzxid), k["/parent"].pzxid)
      -- the server's own count agrees
      local srvr = core.four_letter("127.0.0.1", server:node(1).port, "srvr", 5)
      local last = srvr and srvr:match("Zxid: 0x(%x+)")
      assert.is_truthy(last, srvr)
      assert.is_true(#last == 14 and last >= string.format("%x", eph.mzxid), last)
    end)

    it("fencing tokens are exact and grow with every holder", function()
      local other = helpers.client(server.hosts)
      local ok, err = pcall(function()
        local tokens, nodes = {}, {}
        for i, c in ipairs({ zk, other, zk }) do
          local lock = c:Lock("/lock", "holder-" .. i)
          assert.is_true(lock:acquire())
          tokens[i], nodes[i] = lock.fencing_token, "/lock/" .. lock.node
          assert.is_true(compat.is_id(tokens[i]))
          assert.is_true(tokens[i] > 2 ^ 53)
          assert.are.equal(dec(zk:exists(nodes[i]).czxid), dec(tokens[i]))
          if i < 3 then
            -- kazoo reads the holder's node while it is held
            assert.are.equal(dec(tokens[i]), kazoo_stats(server.hosts, nodes[i])[nodes[i]].czxid)
          end
          assert.is_true(lock:release())
        end
        assert.is_true(tokens[1] < tokens[2] and tokens[2] < tokens[3])
        -- sorting and differences work on them as on numbers
        local shuffled = { tokens[3], tokens[1], tokens[2] }
        table.sort(shuffled)
        for i = 1, 3 do assert.is_true(shuffled[i] == tokens[i]) end
        assert.is_true(tokens[2] - tokens[1] >= 1)
      end)
      other:close()
      assert(ok, err)
    end)
  end)

  it("on an ordinary server zxids are plain numbers in both ABIs; session ids strings", function()
    local server = testing.server()
    local zk = helpers.client(server.hosts)
    local ok, err = pcall(function()
      zk:create("/eph", "", { ephemeral = true })
      local stat = zk:exists("/eph")
      for _, name in ipairs({ "czxid", "mzxid", "pzxid", "ctime", "mtime" }) do
        assert.are.equal("number", type(stat[name]), name)
        assert.is_true(helpers.is_integer(stat[name]), name)
      end
      assert.is_true(stat.czxid < 2 ^ 53)
      -- a session id always exceeds 2^53: exact, one value for the client's id, the stat's
      -- ephemeralOwner and owner_session_id (kazoo's: they compare equal)
      local id = zk:client_id()
      assert.is_true(compat.is_id(id))
      assert.is_true(id == stat.owner_session_id)
      assert.is_true(id == stat.ephemeralOwner)
      assert.are.equal(dec(stat.ephemeralOwner),
                       kazoo_stats(server.hosts, "/eph")["/eph"].ephemeralOwner)
    end)
    zk:close()
    server:stop()
    assert(ok, err)
  end)
end)
