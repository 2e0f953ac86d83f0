--- zklua.hosts — a hosts argument read as kazoo reads it (kazoo.hosts.collect_hosts).
--
--   local hosts = require "zklua.hosts"
--   hosts.collect_hosts("zk01:2181, zk02/app")      --> {{"zk01", 2181}, {"zk02", 2181}}, "/app"
--   hosts.collect_hosts({"zk01:2181", "/app"})      --> same: a last item starting with "/"
--   hosts.collect_hosts("[fe80::1]:2181")           --> {{"fe80::1", 2181}}, nil
--
-- A string is "host[:port],host[:port]...[/chroot]"; a list holds "host[:port]" items and, as
-- its last item, maybe the chroot.  As kazoo (urlsplit("xxx://" .. item)): spaces around items
-- and around a host are ignored, a missing or empty port is 2181, an IPv6 address is written
-- in brackets, host names are case-insensitive (lowercased).  The chroot is returned as
-- written, nil when there is none (as kazoo 2.8: "h:2181/" has none); the client normalises
-- and checks it (zklua.paths.normpath, zklua.check.path).
--
-- Every item must name a server libzookeeper can look up, and anything else raises
-- BadArgumentsError naming the item and what is wrong with it, before anything is sent or
-- changed.  kazoo lets some of these through to a connection that never comes (urlsplit drops
-- tabs and newlines, cuts a host at "?" or "#", takes "user@" away, reads port 0 as 2181), and
-- a NUL byte would cut the list libzookeeper is handed short: "\0\0" was an empty list, which
-- the library accepts and then never connects again.  Refused:
-- * no server at all, an empty item ("h,,k", "h,"), an empty host (":2181", "[]");
-- * a NUL byte, a control character (but spaces, tabs and newlines around an item) or a byte
--   over 127 anywhere in an item: host names are ASCII (IDN names in their xn-- form);
-- * a host that is neither a dotted name of letters, digits, "-" and "_" (labels of 1 to 63,
--   at most 253 in all, one trailing "." allowed) nor a bracketed IPv6 address ("[::1]",
--   "[fe80::1%eth0]"; an IPv6 address without brackets is ambiguous with the port);
-- * a port that is not decimal digits from 1 to 65535 (the library refuses 0);
-- * in a list, an item holding "," or "/" (one server per item; the chroot comes last).
local errors = require "zklua.errors"

local hosts = {}

local DEFAULT_PORT = 2181
hosts.DEFAULT_PORT = DEFAULT_PORT

local MAX_NAME = 253   -- a DNS name, without its trailing dot
local MAX_LABEL = 63

local function bad(fname, message)
  errors.raise(errors.BadArgumentsError, fname .. ": hosts: " .. message, nil,
               { argument = "hosts" })
end

--- A string as shown in an error: quoted, control bytes escaped, long ones cut.
local function shown(s)
  if #s > 60 then s = s:sub(1, 57) .. "..." end
  return (string.format("%q", s):gsub("\\\n", "\\n"):gsub("[%c\128-\255]", function(c)
    return string.format("\\%03d", c:byte())
  end))
end
hosts._shown = shown

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- What is wrong with the bytes of an item (after trimming), or nil.
local function byte_problem(text)
  if text:find("\0", 1, true) then return "a NUL byte" end
  local c = text:match("[%c]")
  if c then return string.format("a control character (byte %d)", c:byte()) end
  if text:find("[\128-\255]") then
    return "a byte over 127 (host names are ASCII; an IDN name in its xn-- form)"
  end
  return nil
end

-- Whether s is an IPv6 address (RFC 4291 text form: 8 groups of 1 to 4 hex digits, "::"
-- once for a run of zero groups, the last 32 bits maybe dotted IPv4), with maybe a "%zone".
local function is_ipv4(s)
  local a, b, c, d = s:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return false end
  for _, part in ipairs({ a, b, c, d }) do
    if #part > 3 or tonumber(part) > 255 or (#part > 1 and part:sub(1, 1) == "0") then
      return false
    end
  end
  return true
end

local function groups_of(s)
  local groups = {}
  if s == "" then return groups end
  for group in (s .. ":"):gmatch("([^:]*):") do groups[#groups + 1] = group end
  return groups
end

local function is_ipv6(s)
  local address, zone = s:match("^([^%%]*)%%(.*)$")
  if address then
    if not zone:match("^[%w%._%-]+$") then return false end
    s = address
  end
  if not s:match("^[%x:%.]+$") or not s:find(":", 1, true) then return false end
  local head, tail = s:match("^(.-)::(.*)$")
  if head and tail:find("::", 1, true) then return false end
  local groups = groups_of(head or s)
  local after = head and groups_of(tail) or {}
  local count = 0
  local all = {}
  for _, g in ipairs(groups) do all[#all + 1] = g end
  for _, g in ipairs(after) do all[#all + 1] = g end
  for i, g in ipairs(all) do
    if i == #all and g:find(".", 1, true) then
      if not is_ipv4(g) then return false end
      count = count + 2
    elseif g:match("^%x%x?%x?%x?$") then
      count = count + 1
    else
      return false
    end
  end
  if head then return count < 8 end
  return count == 8
end

-- Whether a name of digits and dots is an IPv4 address as getaddrinfo reads one (inet_aton:
-- 1 to 4 parts, the last filling the bytes left; a part with a leading 0 is octal).
local function is_numeric_address(name)
  local parts = {}
  for part in (name .. "."):gmatch("([^.]*)%.") do parts[#parts + 1] = part end
  if #parts > 4 then return false end
  for i, part in ipairs(parts) do
    if part == "" or #part > 12 then return false end
    local value = tonumber(part, (#part > 1 and part:sub(1, 1) == "0") and 8 or 10)
    local limit = i < #parts and 256 or 256 ^ (5 - #parts)
    if not value or value >= limit then return false end
  end
  return true
end

-- What is wrong with a host name (not bracketed), or nil.
local function name_problem(name)
  if #name > MAX_NAME + 1 or (#name == MAX_NAME + 1 and name:sub(-1) ~= ".") then
    return "a host name longer than " .. MAX_NAME .. " characters"
  end
  if name:find(":", 1, true) then
    return "an IPv6 address without brackets (write [::1]:2181)"
  end
  local bad_char = name:match("[^%w%.%-_]")
  if bad_char then
    return "a host name holds only letters, digits, '-', '_' and '.' (got " ..
      shown(bad_char) .. ")"
  end
  local body = name:sub(-1) == "." and name:sub(1, -2) or name
  if body:match("^[%d%.]+$") then -- a top-level label is never all digits: an address
    if not is_numeric_address(body) then return "not an IPv4 address" end
    return nil
  end
  for label in (body .. "."):gmatch("([^.]*)%.") do
    if label == "" then return "an empty label in a host name" end
    if #label > MAX_LABEL then
      return "a host name label longer than " .. MAX_LABEL .. " characters"
    end
  end
  return nil
end

-- {host, port} from one "host[:port]" item.
local function host_port(fname, item, in_list, index, whole)
  local text = trim(item)
  local function refuse(why) bad(fname, why .. " in " .. shown(item)) end
  if text == "" then
    bad(fname, "server " .. index .. " is empty in " .. shown(whole))
  end
  local problem = byte_problem(text)
  if problem then refuse(problem) end
  if in_list and text:find("[,/]") then
    refuse("one server per list item (the chroot is the list's last item)")
  end
  local host, rest
  if text:sub(1, 1) == "[" then
    host, rest = text:match("^%[([^%]]*)%](.*)$")
    if not host then refuse("an unclosed '['") end
    if host == "" then refuse("an empty host") end
    if not is_ipv6(host) then refuse("not an IPv6 address in brackets") end
  else
    host, rest = text:match("^([^:]*)(.*)$")
    if rest:find(":", 2, true) then
      local address = text:match("^(.*):%d*$")
      refuse((is_ipv6(text) or (address and is_ipv6(address)))
             and "an IPv6 address without brackets (write [::1]:2181)"
             or "more than one ':' (one port per server)")
    end
    host = trim(host)
    if host == "" then refuse("an empty host") end
    problem = name_problem(host)
    if problem then refuse(problem) end
  end
  local port = DEFAULT_PORT
  if rest ~= "" and rest ~= ":" then -- "h:" is 2181, as kazoo's
    local digits = rest:match("^:(%d+)$")
    port = digits and tonumber(digits)
    if not port or port < 1 or port > 65535 then
      refuse("a port that is not a number from 1 to 65535")
    end
  end
  return { host:lower(), port }
end

--- The {host, port} pairs and the chroot (or nil) of a hosts string or list; fname names the
--- call in errors (default "collect_hosts").  Raises BadArgumentsError for a malformed one.
function hosts.collect_hosts(value, fname)
  fname = fname or "collect_hosts"
  local items, chroot = {}, nil
  local in_list = type(value) == "table"
  if in_list then
    for i, item in ipairs(value) do
      if type(item) ~= "string" then
        bad(fname, "item " .. i .. " must be a string (got " .. type(item) .. ")")
      end
      items[i] = item
    end
    if #items > 0 and trim(items[#items]):sub(1, 1) == "/" then
      chroot = trim(table.remove(items))
    end
  elseif type(value) == "string" then
    local servers, rest = value:match("^([^/]*)/?(.*)$")
    if rest ~= "" then chroot = "/" .. rest end
    for item in (servers .. ","):gmatch("([^,]*),") do items[#items + 1] = item end
    if #items == 1 and trim(items[1]) == "" then items = {} end
  else
    bad(fname, "must be a string like \"host:port,host:port/chroot\" or a list of " ..
        "\"host:port\" (got " .. type(value) .. ")")
  end
  if #items == 0 then bad(fname, "names no server (got " .. shown(tostring(
    in_list and "{}" or value)) .. ")") end
  local list = {}
  local whole = in_list and table.concat(items, ",") or value
  for i, item in ipairs(items) do list[i] = host_port(fname, item, in_list, i, whole) end
  return list, chroot
end

--- "host:port" of a pair as libzookeeper reads it: it splits an entry at its last ":", and
--- looks the host up as written, so an IPv6 address goes without brackets ("::1:2181"; the
--- library's getaddrinfo finds no "[::1]").
function hosts.address(pair)
  return pair[1] .. ":" .. pair[2]
end

return hosts
