#!/usr/bin/python3
"""kazoo_bench.py - ZooKeeper client benchmark on kazoo, the twin of raw_c.c.

Measures, on a fresh root /bench-kazoo-<pid> holding a 64-byte node "get":
  async_get    N_ASYNC pipelined get_async calls (submit all, then wait for
               every result; each must succeed with 64 bytes of data),
  sync_get     N_SYNC_GET sequential get calls,
  sync_create  N_SYNC_CREATE sequential create calls of persistent nodes
               <root>/c-<i> holding 16 bytes,
  connect      BENCH_N_CONNECT (default 0: none) sequential new clients:
               start (TCP, the TLS handshake over TLS, the session), then
               stop and close.
Over TLS (use_ssl) when BENCH_TLS_CA, BENCH_TLS_CERT and BENCH_TLS_KEY name PEM
files (ca, certfile, keyfile; HOSTS then names a TLS port).
For each workload it reports wall-clock time (time.perf_counter) and process
CPU time, user+sys over all threads (resource.getrusage RUSAGE_SELF), as:
  RESULT <workload> ops=<n> seconds=<s> cpu_us_per_op=<us> ops_per_s=<r>
Connecting and cleaning up are not timed. Nothing else goes to stdout;
diagnostics go to stderr. Exit status is non-zero on any failure.

Needs Debian's python3-kazoo, so run it with the system interpreter:
  /usr/bin/python3 bench/kazoo_bench.py HOSTS [N_ASYNC=20000] [N_SYNC_GET=2000] [N_SYNC_CREATE=2000]
"""

import gc
import os
import resource
import sys
import time

from kazoo.client import KazooClient

CLIENT_NAME = "kazoo"
SESSION_TIMEOUT_S = 10.0
CONNECT_WAIT_S = 15.0
ASYNC_WAIT_S = 120.0
GET_DATA = b"g" * 64
CREATE_DATA = b"c" * 16
DEFAULT_COUNTS = (20000, 2000, 2000)


class BenchFailure(Exception):
    """A workload saw an unexpected result."""


def parse_args(argv):
    if not 2 <= len(argv) <= 5:
        raise ValueError("wrong number of arguments")
    counts = list(DEFAULT_COUNTS)
    for i, text in enumerate(argv[2:]):
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"invalid count {text!r} (want a positive integer)")
        counts[i] = int(text)
    return argv[1], counts


def process_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measured(workload, ops, run):
    """Runs run() and prints its RESULT line.  A full collection ends the measurement, as in
    zklua_bench.lua: each workload pays for its own garbage (most of kazoo's is freed at once
    by reference counting; the collector finds the cycles)."""
    cpu_start = process_cpu_seconds()
    wall_start = time.perf_counter()
    run()
    gc.collect()
    wall = time.perf_counter() - wall_start
    cpu = process_cpu_seconds() - cpu_start
    print(f"RESULT {workload} ops={ops} seconds={wall:.6f} "
          f"cpu_us_per_op={cpu * 1e6 / ops:.3f} ops_per_s={ops / wall:.1f}",
          flush=True)


def check_get_data(data, source):
    if len(data) != len(GET_DATA):
        raise BenchFailure(f"{source}: got {len(data)} bytes, want {len(GET_DATA)}")


def async_get(zk, path, n):
    pending = [zk.get_async(path) for _ in range(n)]
    for result in pending:
        data, _stat = result.get(timeout=ASYNC_WAIT_S)
        check_get_data(data, "async get")


def sync_get(zk, path, n):
    for _ in range(n):
        data, _stat = zk.get(path)
        check_get_data(data, "sync get")


def sync_create(zk, root, n):
    for i in range(n):
        zk.create(f"{root}/c-{i}", CREATE_DATA)


def client_options():
    """KazooClient's TLS options from BENCH_TLS_* (none: plaintext)."""
    if not os.environ.get("BENCH_TLS_CA"):
        return {}
    return {"use_ssl": True, "verify_certs": True, "ca": os.environ["BENCH_TLS_CA"],
            "certfile": os.environ["BENCH_TLS_CERT"], "keyfile": os.environ["BENCH_TLS_KEY"]}


def connect(hosts, n):
    for _ in range(n):
        client = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S, **client_options())
        client.start(timeout=CONNECT_WAIT_S)
        client.stop()
        client.close()


def run_workloads(zk, hosts, root, counts):
    n_async, n_sync_get, n_sync_create = counts
    get_node = f"{root}/get"
    measured("async_get", n_async, lambda: async_get(zk, get_node, n_async))
    measured("sync_get", n_sync_get, lambda: sync_get(zk, get_node, n_sync_get))
    measured("sync_create", n_sync_create,
             lambda: sync_create(zk, root, n_sync_create))
    n_connect = int(os.environ.get("BENCH_N_CONNECT", "0"))
    if n_connect > 0:
        measured("connect", n_connect, lambda: connect(hosts, n_connect))


def main(argv):
    try:
        hosts, counts = parse_args(argv)
    except ValueError as err:
        print(f"{err}\nusage: {argv[0]} HOSTS [N_ASYNC=20000] "
              "[N_SYNC_GET=2000] [N_SYNC_CREATE=2000]", file=sys.stderr)
        return 2

    zk = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S, **client_options())
    try:
        zk.start(timeout=CONNECT_WAIT_S)
    except Exception as err:  # kazoo raises its own timeout type
        print(f"could not connect to {hosts}: {err!r}", file=sys.stderr)
        zk.close()
        return 1

    root = f"/bench-{CLIENT_NAME}-{os.getpid()}"
    ok = False
    try:
        zk.create(root)
        zk.create(f"{root}/get", GET_DATA)
        run_workloads(zk, hosts, root, counts)
        ok = True
    except Exception as err:
        print(f"benchmark failed: {err!r}", file=sys.stderr)
    finally:
        try:
            zk.delete(root, recursive=True)
        except Exception as err:
            print(f"cleanup of {root} failed: {err!r}", file=sys.stderr)
            ok = False
        zk.stop()
        zk.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
