-- The kazoo tests (kazoo's tests/*.py, see spec/kazoo/) that cannot apply to zklua at all, each
-- with the reason: `["test_x.py::test_name"] = "reason"`.  `make kazoo-parity` prints them as
-- "not applicable"; every other kazoo test is translated into spec/kazoo/ and passes.
-- Keep this list small and honest: a test that merely fails is not "not applicable".
return {
  ["test_client.py::test_create_unicode_value"] = "Python's str vs bytes: a Lua string is " ..
    "bytes, so there is no text value to refuse (any string is stored as given)",
  ["test_connection.py::test_bad_deserialization"] =
    "puts a Python request object whose reply parser raises into kazoo's own request queue; " ..
    "zklua's requests are libzookeeper's, and a server's reply cannot be made unreadable",
  ["test_connection.py::test_connection_sock"] =
    "inspects kazoo's internal wake-up socket pair; zklua has none (zk:fileno() is an eventfd)",
  ["test_connection.py::test_dirty_sock"] =
    "writes a stray byte into kazoo's internal wake-up socket, which zklua does not have",
  ["test_connection.py::test_xids_mismatch"] =
    "corrupts kazoo's own xid bookkeeping in Python; libzookeeper's cannot be reached, and " ..
    "a server never answers out of order",
}
