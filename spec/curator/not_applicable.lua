-- The Curator tests (spec/curator/inventory.lua) that cannot apply to zklua at all, each with
-- the reason: `["TestClass::testName"] = "reason"`.  `make curator-parity` prints them as
-- "not applicable"; every other Curator test is translated into spec/curator/ and passes.
-- Keep this list small and honest: a test that merely fails is not "not applicable".
-- TestLeaderSelectorEdges' two tests of CuratorFramework's create builder (no LeaderSelector).
local PROTECTED_CREATE = "CuratorFramework's create().withProtection().inBackground() and " ..
  "its FailedDeleteManager, which deletes a protected node whose create reported a connection " ..
  "loss: zklua's client (kazoo's create API) has no protected create; its recipes find their " ..
  "own protected nodes after a lost reply instead (TestLeaderSelectorEdges::flappingTest)"

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
  ["TestLeaderSelectorEdges::createProtectedNodeInBackgroundTest"] = PROTECTED_CREATE,
  ["TestLeaderSelectorEdges::createProtectedNodeInBackgroundTestNoRetry"] = PROTECTED_CREATE,
  ["TestLeaderSelector::testInterruption"] = "interrupts the leader's Java thread " ..
    "(Thread.interrupt) and reads LeaderSelector's package-private failedMutexReleaseCount: " ..
    "zklua cannot interrupt a running fn, and its selector has no such counter (the node " ..
    "left behind is testLeaderNodeDeleteOnInterrupt's)",
  ["TestLeaderSelector::testInterruptLeadershipWithRequeue"] = "LeaderSelector." ..
    "interruptLeadership(), which interrupts the Java thread running takeLeadership: zklua " ..
    "cannot interrupt a running fn (selector-interrupt); a fn ends a term by returning",
  ["TestLeaderSelector::testInterruptLeadership"] = "LeaderSelector.interruptLeadership(), " ..
    "which interrupts the Java thread running takeLeadership: zklua cannot interrupt a " ..
    "running fn (selector-interrupt); a fn ends a term by returning",
  ["TestLeaderSelector::testRaceAtStateChanged"] = "holds Curator's LeaderSelector between " ..
    "winning the mutex and calling takeLeadership through its package-private test hooks " ..
    "(debugLeadershipLatch, debugLeadershipWaitLatch) and throws CancelLeadershipException " ..
    "from stateChanged: zklua's selector (the C lock) has no such hooks",
  ["TestInterProcessSemaphore::testThreadedLeaseIncrease"] = "InterProcessSemaphoreV2(client, " ..
    "path, SharedCountReader): max leases read from a SharedCount and raised while a waiter " ..
    "waits; zklua's Semaphore takes max_leases as a number",
  ["TestServiceCache::testExecutorServiceIsInvoked"] = "checks that the cache ran its " ..
    "listeners through the java.util.concurrent.ExecutorService it was given (Java-only API; " ..
    "Curator itself skips the test on ZooKeeper 3.6+): zklua's listeners run from its event loop",
}
