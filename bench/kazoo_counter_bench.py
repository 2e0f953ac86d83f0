"""kazoo_counter_bench.py - the kazoo twin of the nginx bench's /counter burst
(bench/nginx_bench.lua): PROCESSES client processes (a KazooClient each) share concurrent
increments of one Counter, THREADS threads per process, each thread one `counter += 1` per
burst, every thread of every process released at once; each increment is timed alone
(time.monotonic, around the add).  BURSTS bursts; the counter's final value is checked.

kazoo's Counter keeps no per-call state an increment depends on (it reads the value and its
version into locals, sets at that version, and KazooClient.retry runs a fresh copy of the
retry policy per call); only its pre_value/post_value attributes are shared, and they are not
read here.  So each process makes ONE Counter that its threads share, as kazoo's users would.

Prints: RESULT kazoo_counter n=<n> p50_ms=<ms> p99_ms=<ms> max_ms=<ms> seconds=<s>
    python3 bench/kazoo_counter_bench.py HOSTS [PROCESSES=4] [THREADS=50] [BURSTS=2]
"""
import multiprocessing
import os
import random
import sys
import threading
import time

from kazoo.client import KazooClient


def member(hosts, path, threads, bursts, barrier, results):
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(15)
    counter = zk.Counter(path)
    counter.value  # ensures the node, as every member's first use would
    try:
        for _ in range(bursts):
            go = threading.Event()
            latencies = [None] * threads

            def work(i):
                go.wait()
                t0 = time.monotonic()
                _ = counter + 1
                latencies[i] = time.monotonic() - t0

            workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
            for w in workers:
                w.start()
            barrier.wait(60)  # every process's threads are waiting: release them all
            go.set()
            for w in workers:
                w.join()
            barrier.wait(60)  # the burst is over everywhere before the next one starts
            results.put(latencies)
    finally:
        zk.stop()
        zk.close()


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: kazoo_counter_bench.py HOSTS [PROCESSES] [THREADS] [BURSTS]")
    hosts = sys.argv[1]
    processes = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    bursts = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    root = "/bench-kazoo-counter-%d-%d" % (os.getpid(), random.randrange(10 ** 9))
    path = root + "/counter"

    ctx = multiprocessing.get_context("fork")  # no client exists yet in this process
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    started = time.monotonic()
    procs = [ctx.Process(target=member, args=(hosts, path, threads, bursts, barrier, results))
             for _ in range(processes)]
    for p in procs:
        p.start()
    latencies = []
    for _ in range(processes * bursts):
        latencies.extend(results.get(timeout=300))
    for p in procs:
        p.join(60)
    seconds = time.monotonic() - started
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        sys.exit("kazoo_counter_bench: member exit codes %s" % failed)

    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(15)
    try:
        value = zk.Counter(path).value
        zk.delete(root, recursive=True)
    finally:
        zk.stop()
        zk.close()
    expected = processes * threads * bursts
    if value != expected or None in latencies:
        sys.exit("kazoo_counter_bench: counter %s after %d increments" % (value, expected))

    latencies.sort()
    n = len(latencies)

    def at(q):
        return latencies[max(0, min(n - 1, int(q * n + 0.5) - 1))] * 1000

    print("RESULT kazoo_counter n=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f seconds=%.3f"
          % (n, at(0.5), at(0.99), latencies[-1] * 1000, seconds))


if __name__ == "__main__":
    main()
