-- A busted output handler: busted's usual terminal output, then one closing line
-- "N passed, N failed" (errors count as failed) that CI reads.
return function(options)
  local busted = require "busted"
  local handler = require("busted.outputHandlers.utfTerminal")(options)
  local passed, failed = 0, 0
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
    io.write("\n", passed, " passed, ", failed, " failed\n")
    io.flush()
    return nil, true
  end)
  return handler
end
