-- A busted output handler: busted's usual terminal output, then one closing line
-- "N passed, N failed" (errors count as failed) that CI reads.  With ZKLUA_SPEC_TALLY set
-- to a file, the line is also appended there (scripts/spec-total adds up several runs).
-- With ZKLUA_SPEC_TIMES set to a file, each spec file's wall time is appended there
-- ("seconds<TAB>file"), for finding the slow specs (sort -rn FILE).
-- Each failed test also adds a line "FAILED <interpreter> <file>:<line> <name>: <message>"
-- (its lines joined by " | ", cut at 400 characters) to the tally, so that the end of
-- `make test` names what failed (scripts/spec-total).
return function(options)
  local busted = require "busted"
  local handler = require("busted.outputHandlers.utfTerminal")(options)
  local passed, failed = 0, 0
  local times = os.getenv("ZKLUA_SPEC_TIMES")
  if times and times ~= "" then
    local clock = require("zklua.core").monotonic
    local started = {}
    busted.subscribe({ "file", "start" }, function(file)
      started[file.name] = clock()
      return nil, true
    end)
    busted.subscribe({ "file", "end" }, function(file)
      local f = io.open(times, "a")
      if f and started[file.name] then
        f:write(string.format("%.1f\t%s\n", clock() - started[file.name], file.name))
        f:close()
      end
      return nil, true
    end)
  end
  busted.subscribe({ "test", "end" }, function(_, _, status)
    if status == "success" then passed = passed + 1
    elseif status == "failure" or status == "error" then failed = failed + 1 end
    return nil, true
  end)
  busted.subscribe({ "error" }, function(element)
    if element and element.descriptor ~= "it" then failed = failed + 1 end
    return nil, true
  end)
  busted.subscribe({ "suite", "end" }, function()
    local line = passed .. " passed, " .. failed .. " failed"
    io.write("\n", line, "\n")
    io.flush()
    local tally = os.getenv("ZKLUA_SPEC_TALLY")
    local f = tally and tally ~= "" and io.open(tally, "a")
    if f then
      local jit = rawget(_G, "jit")
      local interpreter = (jit and jit.version) or _VERSION
      local runner = os.getenv("ZKLUA_SPEC_LUA")
      if runner and runner ~= "" then interpreter = interpreter .. " (" .. runner .. ")" end
      for _, list in ipairs({ handler.failures, handler.errors }) do
        for _, failure in ipairs(list) do
          local trace = failure.trace or {}
          local message = tostring(failure.message):gsub("\n+", " | "):sub(1, 400)
          f:write(string.format("FAILED %s %s:%s %s: %s\n", interpreter,
            tostring(trace.short_src), tostring(trace.currentline), failure.name, message))
        end
      end
      f:write(line, "\n")
      f:close()
    end
    return nil, true
  end)
  return handler
end
