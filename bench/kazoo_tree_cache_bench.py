#!/usr/bin/python3
"""kazoo_tree_cache_bench.py - kazoo's TreeCache on a big tree, the twin of tree_cache_bench.lua.

PATH must hold the tree already (bench/run.lua makes it: 100 directories of 99 nodes, 10000
nodes with the root, 32-byte values).
  tree_cache  a listener counts the events; the time is from start() to INITIALIZED; RSS
              (VmRSS, after a full garbage collection) before the cache and after the load,
              and the peak (VmHWM); CPU is the process's user+sys during the load.
Prints:
  RESULT tree_cache nodes=<n> seconds=<s> cpu_s=<s> base_kb=<kb> rss_kb=<kb> peak_kb=<kb>
Needs Debian's python3-kazoo, so run it with the system interpreter:
  /usr/bin/python3 bench/kazoo_tree_cache_bench.py HOSTS PATH
"""

import gc
import re
import resource
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.cache import TreeCache, TreeEvent


def status_kb(field):
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s*(\d+)", f.read()).group(1))


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    hosts, path = argv[1], argv[2]
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=15)
    gc.collect()
    base = status_kb("VmRSS")

    cache = TreeCache(zk, path)
    added = [0]
    initialized = threading.Event()

    def listener(event):
        if event.event_type == TreeEvent.NODE_ADDED:
            added[0] += 1
        elif event.event_type == TreeEvent.INITIALIZED:
            initialized.set()

    cache.listen(listener)
    cpu0, t0 = cpu_seconds(), time.monotonic()
    cache.start()
    if not initialized.wait(600):
        raise RuntimeError("no INITIALIZED")
    seconds, cpu = time.monotonic() - t0, cpu_seconds() - cpu0
    gc.collect()
    rss = status_kb("VmRSS")
    if cache.get_data(path + "/d001/n001") is None:
        raise RuntimeError("the cache lacks a node")
    print("RESULT tree_cache nodes=%d seconds=%.6f cpu_s=%.6f base_kb=%d rss_kb=%d peak_kb=%d"
          % (added[0], seconds, cpu, base, rss, status_kb("VmHWM")), flush=True)
    cache.close()
    zk.stop()
    zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
