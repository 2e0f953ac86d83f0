--- zklua.testing.proxy_process — the loopback TCP proxy process that zklua.testing.proxy starts
-- (run by lua5.4 with luasocket; never loaded into a test's own Lua state).
--
--   lua5.4 proxy_process.lua OWNER_PID LISTEN_PORT CONTROL_PORT TARGET_HOST TARGET_PORT
--
-- Every connection accepted on LISTEN_PORT gets its own connection to the target, and bytes
-- are forwarded both ways: "up" (client -> server) and "down" (server -> client).  A test
-- drives it through CONTROL_PORT, one command a line, each answered by one line ("ok ..." or
-- "err ...") once it has taken effect, so that whatever the test does after the answer meets
-- the new behaviour:
--
--   silence up|down|both   stop forwarding that way (bytes stay unread; no socket is closed)
--   resume                 forward both ways again, no delay, no refusal, no cut armed
--   delay SECONDS          forward each chunk SECONDS after it was read (0: at once)
--   drop                   close both sides of every connection (new ones are accepted)
--   refuse on|off          close each new connection at once (on), or accept it (off)
--   cut_reply OPCODE       (ZooKeeper framing) the first request of that opcode a client sends
--                          from now on is forwarded, and from that moment nothing goes down:
--                          the request reaches the server, its reply does not reach the client
--                          (OPCODE: a number, or create (any kind), delete, exists, get, set,
--                          get_children, sync, multi)
--   cut_request OPCODE SKIP  the requests of that opcode a client sends from now on: SKIP
--                          go up, and from the next one on nothing that connection sends
--                          goes up (it is thrown away): that request never reaches the
--                          server, and the connection is stuck until the client drops it
--   rewrite OPCODE TO      (ZooKeeper framing) every request of that opcode a client sends from
--                          now on goes up as opcode TO (a number): to a server that does not
--                          know TO, as an older server does not know a newer request (it
--                          answers ZUNIMPLEMENTED and closes the connection).  Meanwhile only
--                          whole requests go up
--   status                 "ok connections=N cut=0|1 accepted=N"
--   quit                   exit
--
-- The state is the proxy's, not a connection's: a connection made while "down" is silenced
-- is silenced too.  When one side closes, what it sent before its close is forwarded first
-- (unless its direction is silenced meanwhile), then the other side is closed: a ZooKeeper
-- peer that sends its id and hangs up (the lower id of a pair, so that the higher one calls
-- back) is heard.  Single-threaded: one select loop.  It exits when its owner (the test
-- process) is gone, checked at least twice a second, so a killed test leaves no proxy behind.
local socket = require "socket"

local owner, listen_port, control_port, target_host, target_port =
  tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3]), arg[4], tonumber(arg[5])
assert(owner and listen_port and control_port and target_host and target_port,
       "usage: proxy_process.lua OWNER_PID LISTEN_PORT CONTROL_PORT TARGET_HOST TARGET_PORT")

local function listener(port)
  local s = assert(socket.bind("127.0.0.1", port, 64)) -- sets reuseaddr
  s:settimeout(0)
  return s
end

local clients = listener(listen_port)
local control = listener(control_port)

local mode = { up = true, down = true, delay = 0, refuse = false, cut_opcodes = nil, cut = false }
local conns = {}      -- list of { client=, server=, pending = { up = {}, down = {} }, ... }
local controllers = {} -- control connections: { sock=, buf= }
local accepted = 0

local function owner_alive()
  local f = io.open("/proc/" .. owner .. "/stat", "r")
  if not f then return false end
  local stat = f:read("*l") or ""
  f:close()
  return stat:match("%) (%a)") ~= "Z"
end

local function close_conn(c)
  if c.closed then return end
  c.closed = true
  c.client:close()
  c.server:close()
end

local function open_conn(csock)
  local ssock = socket.tcp()
  ssock:settimeout(5)
  local ok = ssock:connect(target_host, target_port)
  if not ok then
    csock:close()
    ssock:close()
    return
  end
  csock:settimeout(0)
  ssock:settimeout(0)
  conns[#conns + 1] = { client = csock, server = ssock,
                        pending = { up = {}, down = {} }, -- { due=, data= } chunks to write
                        frame = "", forwarded = 0, first_frame = true }
end

-- ZooKeeper framing of the up direction: a 4-byte length, then the frame; the first frame
-- of a connection is the connect request, the others start with xid and opcode.  Returns
-- whether the cut_reply is armed and a request of its opcode is in data, where in the bytes
-- to forward the request a cut_request holds back starts (nil: none), and the bytes to
-- forward: data, with opcodes rewritten; while rewriting, the start of a request not yet
-- whole is kept back for the next call (c.forwarded: how much of c.frame went up already).
local function int32(s, i)
  local a, b, c, d = s:byte(i, i + 3)
  local n = ((a * 256 + b) * 256 + c) * 256 + d
  if n >= 2 ^ 31 then n = n - 2 ^ 32 end
  return n
end

local function scan_requests(c, data)
  local carried = c.forwarded -- bytes of a frame begun in earlier data, already forwarded
  c.frame = c.frame .. data
  local hit, held, at = false, nil, 1
  while #c.frame >= at + 3 do
    local len = int32(c.frame, at)
    if len < 0 or #c.frame < at + 3 + len then break end
    if c.first_frame then
      c.first_frame = false
    elseif len >= 8 then
      local opcode = int32(c.frame, at + 8)
      local to = mode.rewrite and mode.rewrite[opcode]
      if to and at + 8 > carried then -- (its opcode did not go up yet)
        c.frame = c.frame:sub(1, at + 7) .. string.pack(">i4", to) .. c.frame:sub(at + 12)
      end
      if mode.cut_opcodes and mode.cut_opcodes[opcode] then hit = true end
      if not held and mode.hold_opcodes and mode.hold_opcodes[opcode] then
        if mode.hold_skip > 0 then
          mode.hold_skip = mode.hold_skip - 1
        else
          held = math.max(1, at - carried)
        end
      end
    end
    at = at + 4 + len
  end
  local upto = #c.frame
  if mode.rewrite and at > carried then upto = at - 1 end -- the unfinished request waits
  local out = c.frame:sub(carried + 1, upto)
  c.frame = c.frame:sub(at)
  c.forwarded = math.max(0, upto - at + 1)
  return hit, held, out
end

local function queue_chunk(c, way, data)
  local q = c.pending[way]
  q[#q + 1] = { due = socket.gettime() + mode.delay, data = data }
end

-- Writes what is due; false when the peer is gone.
local function flush(c, way, now)
  if not mode[way] then return true end
  local q = c.pending[way]
  local sock = way == "up" and c.server or c.client
  while q[1] and q[1].due <= now do
    local chunk = q[1]
    local last, err, partial = sock:send(chunk.data)
    if not last then
      if err ~= "timeout" then return false end
      chunk.data = chunk.data:sub((partial or 0) + 1)
      return true
    end
    table.remove(q, 1)
  end
  return true
end

-- Reads what the socket has for way; false when it closed.
local function pump(c, way)
  local sock = way == "up" and c.client or c.server
  local data, err, partial = sock:receive(65536)
  data = data or partial
  if data and #data > 0 then
    local hit, held
    if way == "up" then hit, held, data = scan_requests(c, data) end
    if hit then
      mode.cut_opcodes, mode.cut, mode.down = nil, true, false -- before the request goes up
    end
    if held then -- what came before the held request goes up; it and the rest never do
      mode.hold_opcodes, mode.cut, c.discard_up = nil, true, true
      data = data:sub(1, held - 1)
    elseif way == "up" and c.discard_up then
      data = ""
    end
    if #data > 0 then queue_chunk(c, way, data) end
  end
  return not (err and err ~= "timeout")
end

--- Answers a control command with one line (the test waits for it).
local function answer(ctl, text)
  ctl.sock:settimeout(2)
  ctl.sock:send(text .. "\n")
  ctl.sock:settimeout(0)
end

-- The request opcodes (ZooDefs.OpCode) by name; "create" is every kind of create.
local OPCODES = { create = { 1, 15, 19, 21 }, delete = { 2 }, exists = { 3 }, get = { 4 },
                  set = { 5 }, get_children = { 8, 12 }, sync = { 9 }, multi = { 14 } }

local function opcode_set(name)
  local codes = OPCODES[name] or { tonumber(name) }
  if #codes == 0 then return nil end
  local set = {}
  for _, code in ipairs(codes) do set[code] = true end
  return set
end

local function command(ctl, line)
  local verb, a, b = line:match("^(%S+)%s*(%S*)%s*(%S*)")
  if verb == "silence" and (a == "up" or a == "down" or a == "both") then
    if a ~= "down" then mode.up = false end
    if a ~= "up" then mode.down = false end
  elseif verb == "resume" then
    mode.up, mode.down, mode.delay, mode.refuse, mode.cut_opcodes = true, true, 0, false, nil
    mode.hold_opcodes, mode.rewrite = nil, nil
  elseif verb == "delay" and tonumber(a) and tonumber(a) >= 0 then
    mode.delay = tonumber(a)
  elseif verb == "drop" then
    for _, c in ipairs(conns) do close_conn(c) end
  elseif verb == "refuse" and (a == "on" or a == "off") then
    mode.refuse = a == "on"
  elseif verb == "cut_reply" and opcode_set(a) then
    mode.cut_opcodes, mode.cut = opcode_set(a), false
  elseif verb == "cut_request" and opcode_set(a) and tonumber(b) and tonumber(b) >= 0 then
    mode.hold_opcodes, mode.hold_skip, mode.cut = opcode_set(a), tonumber(b), false
  elseif verb == "rewrite" and opcode_set(a) and math.tointeger(tonumber(b)) and
         math.abs(tonumber(b)) < 2 ^ 31 then
    mode.rewrite = {}
    for code in pairs(opcode_set(a)) do mode.rewrite[code] = math.tointeger(tonumber(b)) end
  elseif verb == "status" then
    local open = 0
    for _, c in ipairs(conns) do if not c.closed then open = open + 1 end end
    return answer(ctl, string.format("ok connections=%d cut=%d accepted=%d", open,
                                     mode.cut and 1 or 0, accepted))
  elseif verb == "quit" then
    answer(ctl, "ok")
    os.exit(0)
  else
    return answer(ctl, "err unknown command: " .. line)
  end
  answer(ctl, "ok")
end

local function read_control(ctl)
  local data, err, partial = ctl.sock:receive(4096)
  data = data or partial
  if data then ctl.buf = ctl.buf .. data end
  while true do
    local line, rest = ctl.buf:match("^([^\n]*)\n(.*)$")
    if not line then break end
    ctl.buf = rest
    command(ctl, line)
  end
  return not (err and err ~= "timeout")
end

local last_owner_check = 0
while true do
  local now = socket.gettime()
  if now - last_owner_check >= 0.5 then
    if not owner_alive() then os.exit(0) end
    last_owner_check = now
  end
  local recvt, sendt = { clients, control }, {}
  local next_due
  local live = {}
  for _, c in ipairs(conns) do
    if not c.closed then
      live[#live + 1] = c
      for _, way in ipairs({ "up", "down" }) do
        if mode[way] then
          local from = way == "up" and c.client or c.server
          local to = way == "up" and c.server or c.client
          if not c.ending then recvt[#recvt + 1] = from end
          local head = c.pending[way][1]
          if head then
            if head.due <= now then sendt[#sendt + 1] = to
            elseif not next_due or head.due < next_due then next_due = head.due end
          end
        end
      end
    end
  end
  conns = live
  for _, ctl in ipairs(controllers) do recvt[#recvt + 1] = ctl.sock end
  local timeout = 0.5
  if next_due then timeout = math.max(0, math.min(timeout, next_due - now)) end
  local readable = socket.select(recvt, sendt, timeout)
  if readable[clients] then
    local csock = clients:accept()
    if csock then
      accepted = accepted + 1
      if mode.refuse then csock:close() else open_conn(csock) end
    end
  end
  if readable[control] then
    local sock = control:accept()
    if sock then
      sock:settimeout(0)
      controllers[#controllers + 1] = { sock = sock, buf = "" }
    end
  end
  local still = {}
  for _, ctl in ipairs(controllers) do
    if readable[ctl.sock] and not read_control(ctl) then ctl.sock:close()
    else still[#still + 1] = ctl end
  end
  controllers = still
  for _, c in ipairs(conns) do
    if not c.closed then
      -- a side that closed ends the connection, but only once what it sent before its close
      -- (often read together with the close) went on: a peer's last words are not lost
      if not c.ending then
        if mode.up and readable[c.client] and not pump(c, "up") then c.ending = "up" end
        if mode.down and readable[c.server] and not pump(c, "down") then c.ending = "down" end
      end
      now = socket.gettime()
      local ok = flush(c, "up", now)
      ok = flush(c, "down", now) and ok
      local way = c.ending
      if not ok or (way and (not c.pending[way][1] or not mode[way])) then close_conn(c) end
    end
  end
end
