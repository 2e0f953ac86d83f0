-- Curator's TestUriSpec (Curator 5.4, curator-x-discovery) in Lua: every test and assertion,
-- on zklua's UriSpec functions (zklua.recipes.service_discovery: uri_spec_parts, Curator's
-- UriSpec iterator of parts; build_uri, its build).  Curator's ServiceInstanceBuilder is an
-- instance table.  No server.
local sdm = require "zklua.recipes.service_discovery"

local function check_part(p, value, is_variable)
  assert.are.equal(value, p.value)
  assert.are.equal(is_variable, p.variable)
end

describe("TestUriSpec", function()
  it("testScheme", function()
    local spec = "{scheme}://foo.com"
    local instance = { id = "x", name = "foo", port = 5 }
    assert.are.equal("http://foo.com", sdm.build_uri(spec, instance))
    instance.ssl_port = 5
    assert.are.equal("https://foo.com", sdm.build_uri(spec, instance))
  end)

  it("testFromInstance", function()
    local instance = { address = "1.2.3.4", name = "foo", id = "bar", port = 5, ssl_port = 6,
                       registration_time_utc = 789, service_type = "PERMANENT" }
    local spec = "{scheme}://{address}:{port}:{ssl-port}/{name}/{id}/{registration-time-utc}/{service-type}"
    local m = { scheme = "test" }
    assert.are.equal("test://1.2.3.4:5:6/foo/bar/789/permanent", sdm.build_uri(spec, instance, m))
  end)

  it("testEscapes", function()
    local spec = "{one}two-three-{[}four{]}-five{six}"
    local parts = sdm.uri_spec_parts(spec)
    check_part(parts[1], "one", true)
    check_part(parts[2], "two-three-", false)
    check_part(parts[3], "[", true)
    check_part(parts[4], "four", false)
    check_part(parts[5], "]", true)
    check_part(parts[6], "-five", false)
    check_part(parts[7], "six", true)
    local m = { one = 1, six = 6 }
    assert.are.equal("1two-three-{four}-five6", sdm.build_uri(spec, nil, m))
  end)

  it("testBasic", function()
    local parts = sdm.uri_spec_parts("{one}{two}three-four-five{six}seven{eight}")
    check_part(parts[1], "one", true)
    check_part(parts[2], "two", true)
    check_part(parts[3], "three-four-five", false)
    check_part(parts[4], "six", true)
    check_part(parts[5], "seven", false)
    check_part(parts[6], "eight", true)
  end)
end)
