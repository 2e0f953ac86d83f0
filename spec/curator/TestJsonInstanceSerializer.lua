-- Curator's TestJsonInstanceSerializer (Curator 5.4, curator-x-discovery) in Lua: every test and
-- assertion, on zklua's codec of Curator's instance bytes (src/recipes/service_instance.h,
-- through zklua.core: service_instance_encode / service_instance_decode, what ServiceDiscovery
-- writes and reads).  Curator's ServiceInstance<T> is an instance table (name, id, address,
-- port, ssl_port, payload, registration_time_utc, service_type, uri_spec, enabled); a payload
-- that is a Java object (a List, a Map, a class) is its JSON text, payload_json.  No server.
local core = require "zklua.core"

-- new ServiceInstance<T>("name", "id", "address", 10, 20, payload, 0, DYNAMIC, "{a}/b/{c}",
-- enabled)
local function instance(fields)
  local t = { name = "name", id = "id", address = "address", port = 10, ssl_port = 20,
              registration_time_utc = 0, service_type = "DYNAMIC", uri_spec = "{a}/b/{c}",
              enabled = true }
  for k, v in pairs(fields or {}) do t[k] = v end
  return t
end

-- serializer.serialize then deserialize; with_enabled: JsonInstanceSerializer(cls, false)
-- writes "enabled" (Curator 5's default leaves it out).
local function round_trip(inst, with_enabled)
  local bytes = assert(core.service_instance_encode(inst, with_enabled))
  return core.service_instance_decode(bytes), bytes
end

local function check_fields(inst, rhs)
  assert.are.same(inst, rhs) -- assertEquals(instance, rhs): every field
  assert.are.equal(inst.id, rhs.id)
  assert.are.equal(inst.name, rhs.name)
  assert.are.equal(inst.payload, rhs.payload)
  assert.are.equal(inst.payload_json, rhs.payload_json)
  assert.are.equal(inst.address, rhs.address)
  assert.are.equal(inst.port, rhs.port)
  assert.are.equal(inst.ssl_port, rhs.ssl_port)
  assert.are.equal(inst.uri_spec, rhs.uri_spec)
  assert.are.equal(inst.enabled, rhs.enabled)
end

describe("TestJsonInstanceSerializer", function()
  it("testBasic", function()
    local inst = instance({ payload = "payload" })
    check_fields(inst, (round_trip(inst)))
  end)

  it("testWrongPayloadType [difference: payload-untyped]", function()
    -- Curator: bytes with a String payload read by a JsonInstanceSerializer<Double> throw
    -- ClassCastException.  zklua's instances carry no payload class: the payload comes back
    -- as the string it is (a number payload would come back as its JSON text, payload_json)
    local rhs = round_trip(instance({ payload = "payload" }))
    assert.are.equal("payload", rhs.payload)
    assert.is_nil(rhs.payload_json)
    local number = round_trip(instance({ payload_json = "1.5" }))
    assert.are.equal("1.5", number.payload_json)
    assert.is_nil(number.payload)
  end)

  it("testNoPayload", function()
    local inst = instance()
    check_fields(inst, (round_trip(inst)))
  end)

  it("testNoEnabledState", function()
    local inst = core.service_instance_decode("{}")
    assert.is_true(inst.enabled, "Instance that has no 'enabled' should be assumed enabled")
  end)

  it("testPayloadAsList", function()
    local inst = instance({ payload_json = '["Test value 1","Test value 2"]', enabled = false })
    local rhs, bytes = round_trip(inst, true)
    check_fields(inst, rhs)
    assert.is_truthy(bytes:find('"payload":["Test value 1","Test value 2"]', 1, true), bytes)
  end)

  it("testPayloadAsMap", function()
    local inst = instance({ payload_json = '{"1":"Test value 1","2":"Test value 2"}', enabled = false })
    local rhs, bytes = round_trip(inst, true)
    check_fields(inst, rhs)
    assert.is_truthy(bytes:find('"payload":{"1":"Test value 1","2":"Test value 2"}', 1, true), bytes)
  end)

  it("testPayloadClass", function()
    local inst = instance({ payload_json = '{"@class":"org.apache.curator.x.discovery.' ..
                                           'TestJsonInstanceSerializer$Payload","val":"Test value"}' })
    check_fields(inst, (round_trip(inst)))
  end)
end)
