--- write_rate.lua — how many writes a second the server commits, with many in flight: the
-- floor under any recipe whose event is a number of writes (bench/scale.lua: a SetPartitioner
-- leave or join at 30 × 100k releases and acquires every item, a delete and a create each).
--
--   ./zklua bench/write_rate.lua HOSTS [N=100000] [CLIENTS=10] [WINDOW=1000]
--
-- CLIENTS sessions of this process create N nodes in all (N / CLIENTS each, WINDOW in flight
-- per session, under one parent per session, as a partitioner's members create their locks),
-- then delete them the same way.  Prints one line:
--   RESULT write_rate creates_per_s=<n> deletes_per_s=<n> n=<N> clients=<CLIENTS>
-- Both phases are timed from the first op sent to the last reply, on the wall clock.
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local zklua = require "zklua"
local core = require "zklua.core"
local blocking = require "zklua.handlers.blocking"

local hosts = assert(arg[1], "usage: write_rate.lua HOSTS [N] [CLIENTS] [WINDOW]")
local N = tonumber(arg[2] or "100000")
local CLIENTS = tonumber(arg[3] or "10")
local WINDOW = tonumber(arg[4] or "1000")
assert(N and CLIENTS and WINDOW and N >= CLIENTS and CLIENTS >= 1 and WINDOW >= 1,
       "N >= CLIENTS >= 1 and WINDOW >= 1")

local root = string.format("/write-rate-%d-%d", os.time(), math.random(1e9))
local clients = {}
for i = 1, CLIENTS do
  clients[i] = zklua.client{ hosts = hosts, timeout = 30 }
  clients[i]:start(60)
  clients[i]:ensure_path(root .. "/c" .. i)
end

-- Every client submits its share of op(client, path) with at most WINDOW unanswered; all
-- clients at once (each submits its next op as soon as a reply frees a slot).  Returns the
-- seconds from the first submit to the last reply.
local function phase(op)
  local per = math.ceil(N / CLIENTS)
  local state = {}
  for i = 1, CLIENTS do state[i] = { next = 1, last = math.min(per, N - per * (i - 1)),
                                     inflight = 0, done = 0 } end
  local failures = {}
  local function pump(i)
    local st, zk = state[i], clients[i]
    while st.inflight < WINDOW and st.next <= st.last do
      local path = string.format("%s/c%d/n%d", root, i, st.next)
      st.next = st.next + 1
      st.inflight = st.inflight + 1
      op(zk, path):rawlink(function(f)
        st.inflight = st.inflight - 1
        st.done = st.done + 1
        local ok, err = pcall(f.get, f, 0)
        if not ok then failures[#failures + 1] = tostring(err) end
        pump(i)
      end)
    end
  end
  local t0 = core.monotonic()
  for i = 1, CLIENTS do pump(i) end
  assert(blocking.wait(function()
    for i = 1, CLIENTS do if state[i].done < state[i].last then return false end end
    return true
  end, 600), "the writes did not finish in 600 s")
  assert(#failures == 0, "a write failed: " .. tostring(failures[1]))
  return core.monotonic() - t0
end

local create_s = phase(function(zk, path) return zk:create_async(path, "") end)
local delete_s = phase(function(zk, path) return zk:delete_async(path) end)
for i = 1, CLIENTS do
  clients[i]:delete(root .. "/c" .. i)
end
clients[1]:delete(root)
for _, zk in ipairs(clients) do zk:stop() end
print(string.format("RESULT write_rate creates_per_s=%.0f deletes_per_s=%.0f n=%d clients=%d",
                    N / create_s, N / delete_s, N, CLIENTS))
