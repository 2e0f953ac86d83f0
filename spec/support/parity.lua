-- A busted output handler for translated test suites of other libraries: kazoo's tests
-- (spec/kazoo, `make kazoo-parity`) and, with ZKLUA_PARITY_KIND=curator, Curator's test classes
-- (spec/curator, `make curator-parity`): one line per test, then totals per file (class) and
-- overall.
--
--   test_lock.py::test_lock_cancel            pass
--   test_lock.py::test_foo                    difference lock-reentry
--   test_client.py::test_gevent_handler       not applicable: gevent is Python's
--   test_lock.py::test_bar                    FAIL
--   TestLeaderLatch::testResetRace            pass
--
-- kazoo: a test is named "<kazoo file>::<kazoo test>": the spec's outer describe is the kazoo
-- file ("test_lock.py"), its `it` the kazoo test (inner describes, if any, join with "::").
-- Curator: "<test class>::<test method>": the outer describe is the class ("TestLeaderLatch",
-- default: the spec file's name, spec/curator/TestLeaderLatch.lua), its `it` the method.
-- A test whose name ends with " [difference: KEY]" passed while asserting a deliberate
-- difference; KEY must have a row in README.md's "Differences from kazoo" (or "Differences
-- from Curator") table (a first cell `KEY`), else the test counts as FAIL.  The entries of
-- the not-applicable list (spec/kazoo/not_applicable.lua, spec/curator/not_applicable.lua)
-- are printed as not applicable; an entry that is also translated counts as FAIL.
-- FAIL: a failed, erroring or pending test, an error outside any test (setup, teardown,
-- loading the file), named "<file>::<where>", or a test (or not-applicable entry) named
-- after no test of the inventory (spec/kazoo/inventory.lua by scripts/kazoo-inventory,
-- spec/curator/inventory.lua by scripts/curator-inventory), the list of the library's tests.
-- An inventory test neither translated nor listed as not applicable is printed "missing".
-- A name shared by two classes of a file is written "Class::test_name".  With
-- ZKLUA_PARITY_PARTIAL=1 (some spec files run, not all) only their files are searched
-- for missing tests.  The messages of the FAILs follow the
-- totals.  With ZKLUA_PARITY_RESULT set to a file, the number of FAILs and missing tests is
-- written there (scripts/kazoo-parity and scripts/curator-parity exit non-zero when it is
-- not 0).
return function()
  local busted = require "busted"
  local handler = require("busted.outputHandlers.base")()

  -- What differs between the two kinds of suite: where their lists are, how a spec file and
  -- a describe name a file (class), and which README table holds the difference keys.
  local KINDS = {
    kazoo = {
      dir = "spec/kazoo/", library = "kazoo", unit = "kazoo file", width = 24,
      file_of_spec = function(base) return (base:gsub("_spec%.lua$", ".py")) end,
      is_file = function(name) return name:match("%.py$") ~= nil end,
      key_pattern = "^(.-%.py)::(.+)$", key_form = "test_x.py::test_name",
    },
    curator = {
      dir = "spec/curator/", library = "Curator", unit = "Curator class", width = 29,
      file_of_spec = function(base) return (base:gsub("%.lua$", "")) end,
      is_file = function(name) return name:match("^Test[%w_]+$") ~= nil end,
      key_pattern = "^(Test[%w_]+)::(.+)$", key_form = "TestClass::testName",
    },
  }
  local KIND = KINDS[os.getenv("ZKLUA_PARITY_KIND") or "kazoo"] or KINDS.kazoo
  -- (other files in spec/kazoo_parity_spec.lua, which tests this handler)
  local NOT_APPLICABLE_FILE = os.getenv("ZKLUA_PARITY_NOT_APPLICABLE") or KIND.dir .. "not_applicable.lua"
  local INVENTORY_FILE = os.getenv("ZKLUA_PARITY_INVENTORY") or KIND.dir .. "inventory.lua"
  local TABLE = "Differences from " .. KIND.library
  local results, messages = {}, {}

  local function read_file(path)
    local f = io.open(path, "r")
    if not f then return "" end
    local text = f:read("*a")
    f:close()
    return text
  end
  -- README.md's "### Differences from <library>" section: where the difference keys are rows
  local readme = read_file("README.md")
  local from = readme:find("\n### " .. TABLE .. "\n", 1, true)
  readme = from and readme:sub(from, (readme:find("\n#", from + 5) or #readme)) or ""

  -- The file (class) of a spec file name ("spec/kazoo/test_lock_spec.lua" -> "test_lock.py",
  -- "spec/curator/TestLeaderLatch.lua" -> "TestLeaderLatch").
  local function file_of(name)
    local base = tostring(name or "?"):match("([^/]+)$")
    return KIND.file_of_spec(base)
  end

  -- "<kazoo file>::<name>" for an element (a test, a describe, a hook, a file).
  local function full_name(element)
    local names, file = {}, nil
    local e = element
    while e do
      if e.descriptor == "file" then
        file = e.name
        break
      end
      if e.name and e.descriptor ~= "suite" then table.insert(names, 1, e.name) end
      e = busted.parent(e)
    end
    if #names == 0 then return file_of(file), "<file>" end
    if not KIND.is_file(names[1]) then
      table.insert(names, 1, file_of(file))
    end
    local test_file = table.remove(names, 1)
    if element.descriptor ~= "it" then
      names[#names + 1] = "<" .. tostring(element.descriptor) .. ">"
    end
    return test_file, table.concat(names, "::")
  end

  local function add(test_file, name, status, message)
    results[#results + 1] = { file = test_file, name = name, status = status }
    if message then messages[#messages + 1] = test_file .. "::" .. name .. "\n" .. message end
  end

  local function trimmed(message)
    local text = type(message) == "string" and message or tostring(message)
    local lines = {}
    for line in (text .. "\n"):gmatch("(.-)\n") do
      if #lines == 12 then lines[#lines + 1] = "  ..." break end
      lines[#lines + 1] = "  " .. line
    end
    return table.concat(lines, "\n")
  end

  busted.subscribe({ "test", "end" }, function(element, _, status)
    local test_file, name = full_name(element)
    local plain, key = name:match("^(.-) %[difference: ([^%]]+)%]$")
    if status == "success" and key then
      if readme:find("| `" .. key .. "` |", 1, true) then
        add(test_file, plain, "difference " .. key)
      else
        add(test_file, plain, "FAIL", "  difference " .. key ..
          " has no row in README.md's \"" .. TABLE .. "\" table (| `" .. key .. "` | ...)")
      end
    elseif status == "success" then
      add(test_file, name, "pass")
    elseif status == "pending" then
      add(test_file, plain or name, "FAIL", "  pending: no test may be skipped")
    end
    return nil, true
  end)

  local ended = false
  local function on_failure(element, _, message)
    local test_file, name = full_name(element)
    if ended then -- after the report (e.g. a finaliser at exit): shown, and busted counts it
      io.stderr:write(KIND.library:lower(), "-parity: an error after the report: ", test_file, "::",
                      name, "\n",
                      trimmed(message), "\n")
      return nil, true
    end
    local plain = name:match("^(.-) %[difference: [^%]]+%]$")
    add(test_file, plain or name, "FAIL", trimmed(message))
    return nil, true
  end
  busted.subscribe({ "failure" }, on_failure)
  busted.subscribe({ "error" }, on_failure)

  busted.subscribe({ "suite", "end" }, function()
    ended = true
    -- a run of some spec files only (ZKLUA_PARITY_PARTIAL) reports on their files only
    local partial, ran = os.getenv("ZKLUA_PARITY_PARTIAL") == "1", {}
    for _, r in ipairs(results) do ran[r.file] = true end
    local ok, not_applicable = pcall(dofile, NOT_APPLICABLE_FILE)
    if not ok or type(not_applicable) ~= "table" then
      add("not_applicable.lua", "<load>", "FAIL", trimmed(not_applicable))
      not_applicable = {}
    end
    local seen = {}
    for _, r in ipairs(results) do seen[r.file .. "::" .. r.name] = r end
    local listed = {}
    for key, reason in pairs(not_applicable) do listed[#listed + 1] = { key = key, reason = reason } end
    table.sort(listed, function(a, b) return a.key < b.key end)
    for _, entry in ipairs(listed) do
      local test_file, name = tostring(entry.key):match(KIND.key_pattern)
      if not test_file then
        add("not_applicable.lua", tostring(entry.key), "FAIL",
            "  a key must read \"" .. KIND.key_form .. "\"")
      elseif partial and not ran[test_file] then -- luacheck: ignore 542
        -- not one of this run's files
      elseif seen[entry.key] then -- its line says FAIL
        seen[entry.key].status = "FAIL"
        messages[#messages + 1] = entry.key .. "\n  translated and also listed in " ..
                                  NOT_APPLICABLE_FILE
      else
        add(test_file, name, "not applicable: " .. tostring(entry.reason))
      end
    end

    -- against the inventory: every name is a test of the library, each of its tests is accounted for
    local ok_inv, inventory = pcall(dofile, INVENTORY_FILE)
    if not ok_inv or type(inventory) ~= "table" then
      add("inventory.lua", "<load>", "FAIL", trimmed(inventory))
      inventory = {}
    end
    local covered = {}
    for _, r in ipairs(results) do
      local tests = inventory[r.file]
      if tests and not r.name:match("^<") then
        local class, test = r.name:match("^([%w_]+)::([%w_]+)$")
        local found, classes = false, 0
        for _, t in ipairs(tests) do
          if t[2] == (test or r.name) then
            classes = classes + 1
            if not class or t[1] == class then
              found = true
              covered[r.file .. "::" .. tostring(t[1]) .. "::" .. t[2]] = true
            end
          end
        end
        if not found then
          r.status = "FAIL"
          messages[#messages + 1] = r.file .. "::" .. r.name .. "\n  no " .. KIND.library .. " test of that name in " ..
            r.file .. " (" .. INVENTORY_FILE .. ")"
        elseif classes > 1 and not class then
          r.status = "FAIL"
          messages[#messages + 1] = r.file .. "::" .. r.name .. "\n  several classes of " .. r.file ..
            " have " .. r.name .. ": name it Class::" .. r.name
        end
      end
    end
    local inventory_files = {}
    for file in pairs(inventory) do
      if ran[file] or not partial then inventory_files[#inventory_files + 1] = file end
    end
    table.sort(inventory_files)
    for _, file in ipairs(inventory_files) do
      for _, t in ipairs(inventory[file]) do
        if not covered[file .. "::" .. tostring(t[1]) .. "::" .. t[2]] then
          local shared = 0
          for _, other in ipairs(inventory[file]) do
            if other[2] == t[2] then shared = shared + 1 end
          end
          add(file, (shared > 1 and t[1] .. "::" or "") .. t[2], "missing")
        end
      end
    end

    -- one group per file (class), in file order; tests in the order they ran
    local files, by_file, width = {}, {}, 0
    for _, r in ipairs(results) do
      if not by_file[r.file] then
        by_file[r.file] = {}
        files[#files + 1] = r.file
      end
      table.insert(by_file[r.file], r)
      width = math.max(width, #r.file + 2 + #r.name)
    end
    table.sort(files)
    local function count(list)
      local c = { pass = 0, difference = 0, na = 0, missing = 0, fail = 0 }
      for _, r in ipairs(list) do
        if r.status == "pass" then c.pass = c.pass + 1
        elseif r.status:match("^difference") then c.difference = c.difference + 1
        elseif r.status:match("^not applicable") then c.na = c.na + 1
        elseif r.status == "missing" then c.missing = c.missing + 1
        else c.fail = c.fail + 1 end
      end
      return c
    end
    local function totals(c)
      return string.format("%d pass, %d difference, %d not applicable, %d missing, %d FAIL",
                           c.pass, c.difference, c.na, c.missing, c.fail)
    end
    local out = {}
    for _, file in ipairs(files) do
      for _, r in ipairs(by_file[file]) do
        local label = r.file .. "::" .. r.name
        out[#out + 1] = label .. string.rep(" ", width - #label + 2) .. r.status
      end
    end
    out[#out + 1] = ""
    out[#out + 1] = "totals per " .. KIND.unit .. ":"
    local form = "  %-" .. KIND.width .. "s %s"
    for _, file in ipairs(files) do
      out[#out + 1] = string.format(form, file, totals(count(by_file[file])))
    end
    local all = count(results)
    out[#out + 1] = string.format(form, "all", totals(all))
    if #messages > 0 then
      out[#out + 1] = ""
      out[#out + 1] = "FAILs:"
      for _, m in ipairs(messages) do out[#out + 1] = m end
    end
    io.write(table.concat(out, "\n"), "\n")
    io.flush()
    local result = os.getenv("ZKLUA_PARITY_RESULT")
    local f = result and result ~= "" and io.open(result, "w")
    if f then
      f:write(all.fail + all.missing, "\n")
      f:close()
    end
    return nil, true
  end)

  return handler
end
