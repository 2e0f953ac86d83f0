#!/usr/bin/python3
"""kazoo_watch_burst.py - the kazoo twin of spec/fixtures/watch_burst.lua (bench/scale.lua).

  /usr/bin/python3 bench/kazoo_watch_burst.py HOSTS ROOT N CAP_S WRITER...

Makes ROOT/n1..nN (value "0", at most 1000 creates in flight), one DataWatch on each, then
runs the writer command WRITER... (another process; bench/scale.lua passes zklua's
`spec/fixtures/watch_burst.lua write HOSTS ROOT N`, the writer the zklua run uses, which sets
every node to "1") and waits, at most CAP_S seconds from the writer's start, until every
DataWatch reported "1".  Prints one line, as the fixture does:
  delivered D of N depth 0 seconds S rss_kb R peak_kb P setup_s T
S: from the writer's start to the last delivery (or to the cap); R: VmRSS after the burst
(after a garbage collection), P: VmHWM; T: making the nodes and the watches.  kazoo runs
every callback on its one callback thread, so "depth" does not apply (0).
"""
import gc
import re
import subprocess
import sys
import threading
import time

from kazoo.client import KazooClient

WINDOW = 1000


def status_kb(field):
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s*(\d+)", f.read()).group(1))


def main(argv):
    if len(argv) < 6:
        sys.stderr.write(__doc__)
        return 2
    hosts, root, n, cap = argv[1], argv[2], int(argv[3]), float(argv[4])
    writer = argv[5:]
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=15)
    t_setup = time.monotonic()
    zk.ensure_path(root)
    pending = []
    for i in range(1, n + 1):
        pending.append(zk.create_async("%s/n%d" % (root, i), b"0"))
        if len(pending) >= WINDOW:
            pending.pop(0).get(60)
    for p in pending:
        p.get(60)
    lock = threading.Lock()
    state = {"delivered": 0, "last": None}
    done = threading.Event()

    def watcher(data, stat):
        if data == b"1":
            with lock:
                state["delivered"] += 1
                state["last"] = time.monotonic()
                if state["delivered"] == n:
                    done.set()

    for i in range(1, n + 1):
        zk.DataWatch("%s/n%d" % (root, i), watcher)
    setup_s = time.monotonic() - t_setup
    started = time.monotonic()
    subprocess.run(writer, check=True, stdin=subprocess.DEVNULL)
    done.wait(max(0.0, cap - (time.monotonic() - started)))
    with lock:
        delivered, last = state["delivered"], state["last"]
    seconds = (last if delivered == n else time.monotonic()) - started
    gc.collect()
    print("delivered %d of %d depth 0 seconds %.3f rss_kb %d peak_kb %d setup_s %.3f"
          % (delivered, n, seconds, status_kb("VmRSS"), status_kb("VmHWM"), setup_s),
          flush=True)
    zk.stop()
    zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
