--- zklua.check — argument checks, run before anything is sent.
--
-- Each raises a BadArgumentsError whose message names the call and the argument, e.g.
-- "create: path must start with '/' (got 'foo')", and whose `argument` field names it.
local core = require "zklua.core"
local errors = require "zklua.errors"
local paths = require "zklua.paths"

local check = {}

local function fail(fname, argument, message)
  errors.raise(errors.BadArgumentsError, fname .. ": " .. message, nil,
               { argument = argument })
end
check.fail = fail

local function shown(value)
  if type(value) == "string" then
    if #value > 40 then value = value:sub(1, 37) .. "..." end
    return string.format("%q", value)
  end
  return type(value)
end

-- Paths found valid lately: scripts use the same few paths over and over, and a table lookup
-- costs a fraction of checking a path's characters again.  check.known_paths is that table
-- (path -> true), so a hot call may look its path up before calling check.path at all.
-- Emptied in place when it grows big.
local known_paths, known_count = {}, 0
local KNOWN_PATHS_MAX = 4096
check.known_paths = known_paths

local function remember(path)
  if known_count >= KNOWN_PATHS_MAX then
    for known in pairs(known_paths) do known_paths[known] = nil end
    known_count = 0
  end
  known_paths[path], known_count = true, known_count + 1
end

--- A ZooKeeper path; sequential creates may end with '/'.  A path that passes is remembered
-- (in known_paths) unless it is a sequential prefix.
function check.path(fname, path, argument, sequential)
  if known_paths[path] then return path end -- also valid as a sequential prefix
  argument = argument or "path"
  if type(path) ~= "string" then
    fail(fname, argument, argument .. " must be a string (got " .. type(path) .. ")")
  end
  local problem = core.path_problem(path, sequential)
  if problem then fail(fname, argument, argument .. " " .. problem .. " (got " .. shown(path) .. ")") end
  if not sequential then remember(path) end
  return path
end

-- kazoo's reading of a path that is not in ZooKeeper's form: relative ("a/b" is "/a/b"),
-- repeated or trailing slashes ("/a//b/" is "/a/b"; a sequential create keeps its trailing
-- "/"), "" is "/".  nil when there is no such reading ("." or ".." components).
local function kazoo_form(path, sequential)
  local ok, normal = pcall(paths.normpath, path, sequential == true)
  if not ok then return nil end
  if normal:sub(1, 1) ~= "/" then normal = "/" .. normal end
  return normal
end

--- A path of a client call (zk:get, a transaction, a DataWatch...), read as kazoo reads it:
-- relative paths, repeated and trailing slashes are normalised (kazoo_form above); returns
-- the path to send.  Anything else is check.path's.  Recipe constructors read paths so too.
function check.kazoo_path(fname, path, argument, sequential)
  if known_paths[path] then return path end
  if type(path) == "string" and core.path_problem(path, sequential) then
    local normal = kazoo_form(path, sequential)
    if normal and not core.path_problem(normal, sequential) then return normal end
  end
  return check.path(fname, path, argument, sequential)
end

--- A node value: a string (binary-safe) or nil (empty), within the server's packet limit.
-- (The client's create and set keep a nil value as ZooKeeper's null: see check.data.)
function check.value(fname, value, path, argument)
  argument = argument or "value"
  if value == nil then return "" end
  if type(value) ~= "string" then
    fail(fname, argument, argument .. " must be a string or nil (got " .. type(value) .. ")")
  end
  -- the request carries the path and about a hundred bytes of framing besides the value
  local limit = core.max_packet - #path - 128
  if #value > limit then
    fail(fname, argument, string.format("%s is %d bytes, over the server's limit of %d " ..
         "(1 MiB per request)", argument, #value, limit))
  end
  return value
end

--- A node's data as create, set and a transaction write it: a string (binary-safe) within the
-- server's packet limit, or nil, ZooKeeper's null value (read back as nil, kazoo's None).
function check.data(fname, value, path, argument)
  if value == nil then return nil end
  return check.value(fname, value, path, argument)
end

--- A znode version: nil means any (-1).
function check.version(fname, version, argument)
  argument = argument or "version"
  if version == nil then return -1 end
  if type(version) ~= "number" or version ~= math.floor(version) or version < -1
     or version > 2147483647 then
    fail(fname, argument, argument .. " must be an integer >= -1 (got " .. shown(version) .. ")")
  end
  return version
end

--- Whether fn can be called: a function, or a table or userdata with a __call metamethod.
function check.callable(fn)
  if type(fn) == "function" then return true end
  local mt = (type(fn) == "table" or type(fn) == "userdata") and getmetatable(fn)
  return type(mt) == "table" and rawget(mt, "__call") ~= nil
end

--- A watch: nil, or a function (or callable table) called once with the event.
function check.watch(fname, watch, argument)
  if watch ~= nil and type(watch) ~= "function" and not check.callable(watch) then
    fail(fname, argument or "watch",
         (argument or "watch") .. " must be a function, a callable table or nil (got " ..
         type(watch) .. ")")
  end
  return watch
end

--- An options table: nil or a table whose keys are all in allowed (name -> type).
function check.options(fname, opts, allowed, argument)
  argument = argument or "opts"
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    fail(fname, argument, argument .. " must be a table (got " .. type(opts) .. ")")
  end
  for k, v in pairs(opts) do
    local want = allowed[k]
    if not want then
      fail(fname, tostring(k), "unknown option '" .. tostring(k) .. "'")
    end
    if want ~= "any" and type(v) ~= want then
      fail(fname, k, "option '" .. k .. "' must be a " .. want .. " (got " .. type(v) .. ")")
    end
  end
  return opts
end

--- A recipe's layout option: nil (the first of names, the default) or one of names; the
--- layout, or a BadArgumentsError listing them (hint: more words for it).
function check.layout(fname, layout, names, hint)
  if layout == nil then return names[1] end
  for _, name in ipairs(names) do
    if layout == name then return layout end
  end
  local quoted = {}
  for i, name in ipairs(names) do quoted[i] = string.format("%q", name) end
  local list = #quoted == 1 and quoted[1] or
               table.concat(quoted, ", ", 1, #quoted - 1) .. " or " .. quoted[#quoted]
  local got = type(layout) == "string" and string.format("%q", layout) or type(layout)
  fail(fname, "layout", "option 'layout' must be " .. list .. " (got " .. got ..
       (hint and "; " .. hint or "") .. ")")
end

--- A timeout in seconds: nil (no limit) or a number >= 0.
function check.timeout(fname, timeout, argument)
  argument = argument or "timeout"
  if timeout ~= nil and (type(timeout) ~= "number" or timeout ~= timeout or timeout < 0) then
    -- NaN fails timeout == timeout; math.huge is allowed (no limit)
    fail(fname, argument, argument .. " must be a number of seconds >= 0 or nil (got " ..
         shown(timeout) .. ")")
  end
  return timeout
end

--- A boolean-ish flag: nil, false or true.
function check.flag(fname, value, argument)
  if value ~= nil and type(value) ~= "boolean" then
    fail(fname, argument, argument .. " must be a boolean (got " .. type(value) .. ")")
  end
  return value == true
end

--- A list of ACLs (kazoo's shape {perms=, id={scheme=, id=}}, or {perms=, scheme=, id=}).
function check.acls(fname, acls, argument)
  argument = argument or "acl"
  if type(acls) ~= "table" or #acls == 0 then
    fail(fname, argument, argument .. " must be a non-empty list of ACLs (got " ..
         shown(acls) .. ")")
  end
  for i = 1, #acls do -- not ipairs: a hole ({nil, acl}) must not end the check early
    local acl = acls[i]
    local where = argument .. "[" .. i .. "]"
    if type(acl) ~= "table" then fail(fname, argument, where .. " must be an ACL table") end
    local perms = acl.perms
    if type(perms) ~= "number" or perms ~= math.floor(perms) or perms < 0 or perms > 31 then
      fail(fname, argument, where .. ".perms must be an integer from 0 to 31")
    end
    local id = type(acl.id) == "table" and acl.id or acl
    if type(id.scheme) ~= "string" or type(id.id) ~= "string" then
      fail(fname, argument, where .. " needs an id: {scheme = string, id = string}")
    end
  end
  return acls
end

return check
