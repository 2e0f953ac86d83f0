--- zklua.hosts — a hosts argument read as kazoo reads it (kazoo.hosts.collect_hosts).
--
--   local hosts = require "zklua.hosts"
--   hosts.collect_hosts("zk01:2181, zk02/app")      --> {{"zk01", 2181}, {"zk02", 2181}}, "/app"
--   hosts.collect_hosts({"zk01:2181", "/app"})      --> same: a last item starting with "/"
--   hosts.collect_hosts("[fe80::1]:2181")           --> {{"fe80::1", 2181}}, nil
--
-- A string is "host[:port],host[:port]...[/chroot]"; a list holds "host[:port]" items and, as
-- its last item, maybe the chroot.  Spaces around items are ignored, a missing port is 2181,
-- an IPv6 address is written in brackets, host names are case-insensitive (lowercased, as
-- kazoo's urlsplit).  The chroot is returned as written, nil when there is none (as kazoo
-- 2.8: "h:2181/" has none); the client normalises it (zklua.paths.normpath).
-- A malformed item (no host, a port that is not a number from 1 to 65535, an IPv6 address
-- without brackets) raises BadArgumentsError naming it: nothing is sent anywhere.
local errors = require "zklua.errors"

local hosts = {}

local DEFAULT_PORT = 2181
hosts.DEFAULT_PORT = DEFAULT_PORT

local function bad(fname, message)
  errors.raise(errors.BadArgumentsError, fname .. ": hosts: " .. message, nil,
               { argument = "hosts" })
end

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- {host, port} from one "host[:port]" item.
local function host_port(fname, item)
  local text = trim(item)
  local host, rest
  if text:sub(1, 1) == "[" then
    host, rest = text:match("^%[([^%]]*)%](.*)$")
    if not host then bad(fname, "unclosed '[' in host " .. string.format("%q", item)) end
  else
    host, rest = text:match("^([^:]*)(.*)$")
    if rest:find(":", 2, true) then
      bad(fname, "an IPv6 address needs brackets, as [::1]:2181 (got " ..
          string.format("%q", item) .. ")")
    end
  end
  if host == "" or host:find("[%s/@%[%]]") then
    bad(fname, "bad hostname in " .. string.format("%q", item))
  end
  local port = DEFAULT_PORT
  if rest ~= "" then
    local digits = rest:match("^:(%d+)$")
    port = digits and tonumber(digits)
    if not port or port < 1 or port > 65535 then
      bad(fname, "the port must be a number from 1 to 65535 (got " .. string.format("%q", item) .. ")")
    end
  end
  return { host:lower(), port }
end

--- The {host, port} pairs and the chroot (or nil) of a hosts string or list; fname names the
--- call in errors (default "collect_hosts").
function hosts.collect_hosts(value, fname)
  fname = fname or "collect_hosts"
  local items, chroot = {}, nil
  if type(value) == "table" then
    for i, item in ipairs(value) do
      if type(item) ~= "string" then
        bad(fname, "item " .. i .. " must be a string (got " .. type(item) .. ")")
      end
      items[i] = item
    end
    if #items > 0 and trim(items[#items]):sub(1, 1) == "/" then
      chroot = table.remove(items)
    end
  elseif type(value) == "string" then
    local servers, rest = value:match("^([^/]*)/?(.*)$")
    if rest ~= "" then chroot = "/" .. rest end
    for item in (servers .. ","):gmatch("([^,]*),") do items[#items + 1] = item end
  else
    bad(fname, "must be a string like \"host:port,host:port/chroot\" or a list of " ..
        "\"host:port\" (got " .. type(value) .. ")")
  end
  if #items == 0 then bad(fname, "names no server") end
  local list = {}
  for i, item in ipairs(items) do list[i] = host_port(fname, item) end
  return list, chroot
end

--- "host:port" of a pair, IPv6 in brackets (as libzookeeper reads it).
function hosts.address(pair)
  local host = pair[1]
  if host:find(":", 1, true) then host = "[" .. host .. "]" end
  return host .. ":" .. pair[2]
end

return hosts
