-- The API reference (`make docs`, LDoc over lua/zklua) builds without warnings and has a page
-- for every module, recipes included; every recipe module opens with what SUSPENDED and LOST
-- do to it (the guarantees the reference shows).
local function run(cmd)
  local pipe = assert(io.popen(cmd .. " 2>&1"))
  local out = pipe:read("a")
  local ok = pipe:close()
  return ok, out
end

local function lua_modules()
  local list = {}
  local pipe = assert(io.popen("cd lua && find zklua -name '*.lua' | sort"))
  for file in pipe:lines() do
    list[#list + 1] = file:gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
  end
  pipe:close()
  return list
end

describe("the API reference", function()
  local dir
  setup(function() dir = os.tmpname(); os.remove(dir) end)
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("builds without warnings, one page per module", function()
    local ok, out = run("ldoc -q -d '" .. dir .. "' .")
    assert(ok, out)
    for line in out:gmatch("[^\n]+") do
      assert(line:match("^format:") or line:match("^reading configuration"),
             "ldoc warned: " .. line)
    end
    for _, module in ipairs(lua_modules()) do
      local name = module:gsub("^zklua%.?", "")
      if name ~= "" then
        local f = io.open(dir .. "/modules/" .. name .. ".html")
        assert(f, "no page for " .. module)
        f:close()
      end
    end
  end)

  it("states SUSPENDED and LOST behaviour for every recipe", function()
    local pipe = assert(io.popen("ls lua/zklua/recipes/*.lua"))
    for file in pipe:lines() do
      local f = assert(io.open(file))
      local head = f:read(6000)
      f:close()
      if not file:match("lost%.lua$") then
        assert.is_truthy(head:find("SUSPENDED", 1, true), file .. " says nothing of SUSPENDED")
        assert.is_truthy(head:find("LOST", 1, true), file .. " says nothing of LOST")
      end
    end
    pipe:close()
  end)
end)
