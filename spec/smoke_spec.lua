local zklua = require "zklua"
local testing = require "zklua.testing"

describe("a client on a standalone server", function()
  local server, zk
  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)
  before_each(function() zk = zklua.client(server.hosts); zk:start() end)
  after_each(function() zk:close() end)

  it("creates and reads back a node", function()
    zk:create("/smoke", "hello")
    local data, stat = zk:get("/smoke")
    assert.are.equal("hello", data)
    assert.are.equal(0, stat.version)
    zk:delete("/smoke")
  end)
end)
