--- zklua.paths — znode path arithmetic (no checks: zklua.check validates paths).
local paths = {}

--- parent .. "/" .. name, with the root handled ("/" + "a" is "/a").
function paths.join(parent, name)
  return parent == "/" and "/" .. name or parent .. "/" .. name
end

--- The parent of path ("/a/b" -> "/a", "/a" -> ""); nil when path has no "/".
function paths.parent(path)
  return path:match("^(.*)/[^/]*$")
end

return paths
