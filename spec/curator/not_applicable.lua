-- The Curator tests (spec/curator/inventory.lua) that cannot apply to zklua at all, each with
-- the reason: `["TestClass::testName"] = "reason"`.  `make curator-parity` prints them as
-- "not applicable"; every other Curator test is translated into spec/curator/ and passes.
-- Keep this list small and honest: a test that merely fails is not "not applicable".
return {
  ["TestInterProcessMutex::testWithSchema"] = "Curator's Schema/SchemaSet, a Java-only " ..
    "client-side validator of paths and data (CuratorFrameworkFactory.builder().schemaSet): " ..
    "zklua's client has no schemas",
  ["TestInterProcessMutex::testRevoking"] = "Curator's lock revocation (makeRevocable, " ..
    "Revoker.attemptRevoke: a holder told to let go through its node's data \"__REVOKE__\"): " ..
    "zklua's Lock offers no revocation",
  ["TestLeaderLatch::testWithCircuitBreaker"] = "Curator's ConnectionStateListenerManagerFactory." ..
    "circuitBreaking, a Java-only wrapper that rate-limits the connection events its listeners " ..
    "get: zklua's client has no listener managers",
  ["TestLeaderLatch::testWatchedNodeDeletedOnReconnect"] = "drives a race inside Curator's " ..
    "LeaderLatch through its package-private test hooks (debugCheckLeaderShipLatch, reset()), " ..
    "holding checkLeadership() between its steps: zklua's latch (the C lock) has no such hooks",
  ["TestLeaderLatch::testResettingOfLeadershipAfterConcurrentLeadershipChange"] = "drives a " ..
    "race inside Curator's LeaderLatch through its package-private test hooks " ..
    "(debugResetWaitLatch, debugResetWaitBeforeNodeDeleteLatch, reset()): zklua's latch (the C " ..
    "lock) has no such hooks",
  ["TestLeaderLatch::testLeadershipElectionWhenNodeDisappearsAfterChildrenAreRetrieved"] =
    "holds Curator's LeaderLatch between its getChildren and its watch through the package-" ..
    "private test hook debugCheckLeaderShipLatch: zklua's latch (the C lock) has no such hook",
  ["TestLeaderLatch::testProperCloseWithoutConnectionEstablished"] = "overrides LeaderLatch's " ..
    "package-private reset() and protected cancelStartTask() to see that close() cancelled " ..
    "Curator's background start task: zklua's latch has no start task to cancel",
  ["TestLeaderLatch::testResetRace"] = "drives Curator's LeaderLatch reset() against its own " ..
    "start through the package-private test hook debugResetWaitLatch: zklua's latch (the C " ..
    "lock) has no such hook",
}
