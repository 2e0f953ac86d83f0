#!/usr/bin/python3
"""kazoo_sessions_bench.py - N kazoo sessions in one process, the twin of sessions_bench.lua.

  /usr/bin/python3 bench/kazoo_sessions_bench.py HOSTS N [SESSION_S=2] [HOLD_S=6]

Raises its own fd soft limit to the hard limit first (as bench/scale.lua does for zklua's
run), starts N KazooClients one after the other (start()), holds them connected HOLD_S
seconds (a session the server expires meanwhile counts as lost), then stops and closes them.
Prints one line, as sessions_bench.lua:
  RESULT sessions n=<N> connected=<n> connect_s=<s> close_s=<s> base_kb=<kb> rss_kb=<kb>
         threads=<n> fds=<n> base_threads=<n> base_fds=<n> lost=<n> nofile=<soft limit>
         error=<first error, to the line's end, or ->
"""
import gc
import os
import re
import resource
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState


def status(field):
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s*(\d+)", f.read()).group(1))


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    hosts, n = argv[1], int(argv[2])
    session = float(argv[3]) if len(argv) > 3 else 2.0
    hold = float(argv[4]) if len(argv) > 4 else 6.0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # a few fds kept aside: once the sessions took every other one (the fd limit), closing
    # these lets the measuring below still work
    reserve = [os.open("/dev/null", os.O_RDONLY) for _ in range(8)]
    gc.collect()
    base, base_threads = status("VmRSS"), status("Threads")
    base_fds = len(os.listdir("/proc/self/fd")) - 1 - len(reserve)
    clients, lost, first_error = [], [0], None
    lock = threading.Lock()

    def listener(state):
        if state == KazooState.LOST:
            with lock:
                lost[0] += 1

    t0 = time.monotonic()
    for _ in range(n):
        zk = None
        try:
            zk = KazooClient(hosts=hosts, timeout=session)
            zk.start(timeout=30)
        except Exception as e:  # noqa: BLE001 - the first failure is the result
            first_error = "session %d: %s: %s" % (len(clients) + 1, type(e).__name__, e)
            try:
                if zk is not None:
                    zk.stop()
                    zk.close()
            except Exception:  # noqa: BLE001
                pass
            break
        zk.add_listener(listener)
        clients.append(zk)
    connect_s = time.monotonic() - t0
    for fd in reserve:
        os.close(fd)
    gc.collect()
    rss, threads = status("VmRSS"), status("Threads")
    fds = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own
    time.sleep(hold)
    with lock:
        lost_held = lost[0]  # (stop() makes the listeners hear LOST: not counted)
    t1 = time.monotonic()
    for zk in clients:
        zk.stop()
        zk.close()
    close_s = time.monotonic() - t1
    err = "-" if first_error is None else re.sub(r"\s+", " ", first_error)[:160]
    print("RESULT sessions n=%d connected=%d connect_s=%.3f close_s=%.3f base_kb=%d rss_kb=%d "
          "threads=%d fds=%d base_threads=%d base_fds=%d lost=%d nofile=%d error=%s"
          % (n, len(clients), connect_s, close_s, base, rss, threads, fds, base_threads,
             base_fds, lost_held, hard, err),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
