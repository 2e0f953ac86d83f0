--- zklua.paths — znode path arithmetic, as kazoo.protocol.paths.
--
--   local paths = require "zklua.paths"
--   paths.normpath("//a////b///c/")      --> "/a/b/c"
--   paths.join("/a", "b", "c")           --> "/a/b/c"   (an absolute part restarts: "/c")
--   paths.isabs("/a"), paths.basename("/a/b.//c..")  --> true, "c.."
--
-- Pure string functions: nothing is sent, no path is checked against ZooKeeper's rules
-- (zklua.check does that before a call).  A non-string argument raises BadArgumentsError
-- naming the function; normpath refuses "." and ".." components (BadArgumentsError, as
-- kazoo's ValueError), since ZooKeeper paths have no relative form.
local errors = require "zklua.errors"

local paths = {}

local function fail(fname, argument, message)
  errors.raise(errors.BadArgumentsError, fname .. ": " .. message, nil, { argument = argument })
end

local function string_arg(fname, value, argument)
  if type(value) ~= "string" then
    fail(fname, argument, argument .. " must be a string (got " .. type(value) .. ")")
  end
  return value
end

--- path without repeated or trailing slashes ("/a//b/" -> "/a/b", "//" -> "/"); with
--- trailing true a trailing slash is kept ("/a/" -> "/a/", as for sequential creates).
-- @raise BadArgumentsError when a component is "." or ".."
function paths.normpath(path, trailing)
  string_arg("normpath", path, "path")
  local comps = {}
  for comp in path:gmatch("[^/]+") do
    if comp == "." or comp == ".." then
      fail("normpath", "path", "relative paths not allowed (got " .. string.format("%q", path) .. ")")
    end
    comps[#comps + 1] = comp
  end
  local new_path = table.concat(comps, "/")
  if trailing == true and path:sub(-1) == "/" then new_path = new_path .. "/" end
  if path:sub(1, 1) == "/" and new_path ~= "/" then return "/" .. new_path end
  return new_path
end

--- Joins two or more parts, inserting "/" as needed ("/a", "b", "c" -> "/a/b/c"; "/" + "a" is
--- "/a"); an absolute part discards the parts before it ("/a/b", "/c" -> "/c").
function paths.join(a, ...)
  local path = string_arg("join", a, "path")
  for i = 1, select("#", ...) do
    local b = string_arg("join", (select(i, ...)), "part " .. (i + 1))
    if b:sub(1, 1) == "/" then
      path = b
    elseif path == "" or path:sub(-1) == "/" then
      path = path .. b
    else
      path = path .. "/" .. b
    end
  end
  return path
end

--- Whether path is absolute (starts with "/").
function paths.isabs(path)
  return string_arg("isabs", path, "path"):sub(1, 1) == "/"
end

--- The last component of path: what follows its last "/" ("/a/b" -> "b", "/a/" -> "").
function paths.basename(path)
  return string_arg("basename", path, "path"):match("([^/]*)$")
end

--- The parent of path ("/a/b" -> "/a", "/a" -> ""); nil when path has no "/".
function paths.parent(path)
  return string_arg("parent", path, "path"):match("^(.*)/[^/]*$")
end

--- root as an absolute, normalised chroot ("" -> "/", "//a" -> "/a"); kazoo's _norm_root.
function paths.norm_root(root)
  return paths.normpath(paths.join("/", string_arg("norm_root", root, "root")))
end

--- path (absolute or not) under root ("/a", "/b/c" -> "/a/b/c"); kazoo's _prefix_root.
function paths.prefix_root(root, path)
  string_arg("prefix_root", path, "path")
  return paths.normpath(paths.join(paths.norm_root(root), (path:gsub("^/+", ""))))
end

return paths
