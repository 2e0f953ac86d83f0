-- kazoo's kazoo/tests/test_party.py, translated (see /work/shared/reference/kazoo-tests):
-- Party and ShallowParty on kazoo's harness (spec/kazoo/support.lua: the shared server,
-- h.client chrooted to a fresh namespace).  kazoo's `list(party)` is party:members(),
-- `len(party)` party:len(), `party.data.decode()` party.data (a string).
local support = require "kazoo.support"
local helpers = require "support.helpers"

local sorted = helpers.sorted

-- Python's set(party) == participants: the same members, in any order.
local function same_members(party, participants)
  local want = {}
  for name in pairs(participants) do want[#want + 1] = name end
  assert.are.same(sorted(want), sorted(party:members()))
end

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

-- kazoo's test_party, shared by its two classes: five members join one by one, then leave.
local function five_members(client, constructor, path)
  local parties = {}
  for i = 0, 4 do parties[#parties + 1] = client[constructor](client, path, "p" .. i) end
  local one_party = parties[1]

  assert.are.same({}, one_party:members())
  assert.are.equal(0, one_party:len())

  local participants = {}
  for _, party in ipairs(parties) do
    party:join()
    participants[party.data] = true
    same_members(party, participants)
    assert.are.equal(count(participants), party:len())
  end

  for _, party in ipairs(parties) do
    party:leave()
    participants[party.data] = nil
    same_members(party, participants)
    assert.are.equal(count(participants), party:len())
  end
end

describe("test_party.py", function()
  local h, client, path

  before_each(function()
    h = support.harness()
    client = h.client
    path = "/" .. support.uuid()
  end)

  after_each(function() h:teardown() end)

  it("KazooPartyTests::test_party", function()
    five_members(client, "Party", path)
  end)

  it("test_party_reuse_node", function()
    local party = client:Party(path, "p1")
    client:ensure_path(path)
    client:create(party.create_path)
    party:join()
    assert.is_true(party.participating)
    party:leave()
    assert.is_false(party.participating)
    assert.are.equal(0, party:len())
  end)

  it("test_party_vanishing_node", function()
    local party = client:Party(path, "p1")
    party:join()
    assert.is_true(party.participating)
    client:delete(party.create_path)
    party:leave()
    assert.is_false(party.participating)
    assert.are.equal(0, party:len())
  end)

  it("KazooShallowPartyTests::test_party", function()
    five_members(client, "ShallowParty", path)
  end)
end)
