#!/usr/bin/python3
"""kazoo_lock_bench.py - kazoo's Lock under load, the twin of lock_bench.lua.

On a fresh root /bench-lock-kazoo-<time>-<rand>:
  lock_cycles   CYCLES uncontended acquire() + release() of one Lock by one client
  lock_handoff  WAITERS worker processes (one session each) take turns on one Lock,
                ROUNDS times each, re-queueing right after each release, so about WAITERS
                contenders always wait.  Hand-off latency = time from the holder calling
                release() to the next holder's acquire() returning, on CLOCK_MONOTONIC
                (time.monotonic, shared by all processes); p50 and p99.
Prints:
  RESULT lock_cycles ops=<n> seconds=<s> cpu_us_per_op=<us> ops_per_s=<r>
  RESULT lock_handoff p50_ms=<ms> p99_ms=<ms> handoffs=<n> waiters=<w>
Needs Debian's python3-kazoo, so run it with the system interpreter:
  /usr/bin/python3 bench/kazoo_lock_bench.py HOSTS [CYCLES=500] [WAITERS=10] [ROUNDS=30]
(the worker mode, --worker, is internal).
"""

import math
import os
import random
import resource
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def worker(hosts, path, rounds, index):
    zk = KazooClient(hosts=hosts, timeout=20)
    zk.start(timeout=15)
    lock = zk.Lock(path + "/lock", "w%s" % index)
    zk.create(path + "/ready/w%s" % index, b"", ephemeral=True)
    go = threading.Event()

    def look(event=None):
        if zk.exists(path + "/go", watch=look):
            go.set()

    look()
    go.wait(120)
    lines = []
    for _ in range(rounds):
        lock.acquire()
        lines.append("A %.9f" % time.monotonic())
        lines.append("R %.9f" % time.monotonic())
        lock.release()
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    zk.stop()
    zk.close()


def percentile(values, q):
    return values[max(0, math.ceil(q * len(values)) - 1)]


def bench_cycles(zk, root, cycles):
    lock = zk.Lock(root + "/cycles", "bench")
    lock.acquire()  # the path exists from here on, as in a long-running process
    lock.release()
    cpu0, t0 = cpu_seconds(), time.monotonic()
    for _ in range(cycles):
        lock.acquire()
        lock.release()
    seconds, cpu = time.monotonic() - t0, cpu_seconds() - cpu0
    print("RESULT lock_cycles ops=%d seconds=%.6f cpu_us_per_op=%.3f ops_per_s=%.1f"
          % (cycles, seconds, cpu * 1e6 / cycles, cycles / seconds), flush=True)


def bench_handoff(zk, hosts, root, waiters, rounds):
    path = root + "/handoff"
    zk.ensure_path(path + "/ready")
    zk.ensure_path(path + "/lock")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", hosts,
                               path, str(rounds), str(i + 1)],
                              stdout=subprocess.PIPE, text=True)
             for i in range(waiters)]
    deadline = time.monotonic() + 60
    while len(zk.get_children(path + "/ready")) < waiters:
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not start")
        time.sleep(0.05)
    zk.create(path + "/go", b"")
    events = []
    for i, p in enumerate(procs):
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError("worker %d failed" % (i + 1))
        for line in out.split("\n"):
            if line:
                kind, t = line.split()
                events.append((float(t), kind))
    if len(events) != 2 * waiters * rounds:
        raise RuntimeError("workers reported %d events" % len(events))
    events.sort()
    latencies, released_at = [], None
    for t, kind in events:
        if kind == "R":
            released_at = t
        elif released_at is not None:
            latencies.append((t - released_at) * 1000)
            released_at = None
    latencies.sort()
    print("RESULT lock_handoff p50_ms=%.3f p99_ms=%.3f handoffs=%d waiters=%d"
          % (percentile(latencies, 0.50), percentile(latencies, 0.99), len(latencies), waiters),
          flush=True)


def main(argv):
    if len(argv) > 1 and argv[1] == "--worker":
        worker(argv[2], argv[3], int(argv[4]), argv[5])
        return 0
    if not 2 <= len(argv) <= 5:
        sys.stderr.write(__doc__)
        return 2
    hosts = argv[1]
    cycles = int(argv[2]) if len(argv) > 2 else 500
    waiters = int(argv[3]) if len(argv) > 3 else 10
    rounds = int(argv[4]) if len(argv) > 4 else 30
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=15)
    root = "/bench-lock-kazoo-%d-%d" % (time.time(), random.randrange(10 ** 9))
    try:
        bench_cycles(zk, root, cycles)
        bench_handoff(zk, hosts, root, waiters, rounds)
    finally:
        zk.delete(root, recursive=True)
        zk.stop()
        zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
