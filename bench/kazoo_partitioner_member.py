#!/usr/bin/python3
"""kazoo_partitioner_member.py - the kazoo member of bench/partitioner_bench.lua (KIND kazoo),
the twin of that script's --member mode: same protocol, same loop (kazoo's documented one).

  /usr/bin/python3 bench/kazoo_partitioner_member.py HOSTS PATH N_ITEMS IDENT TB SESSION_S

Joins a kazoo SetPartitioner on PATH over the items item-00001 .. item-<N_ITEMS> with
time_boundary TB and a session timeout of SESSION_S seconds, then runs the seed's loop
(release_set as soon as RELEASE).  Prints, flushed, on CLOCK_MONOTONIC (time.monotonic,
shared with the driver and the zklua members):
  "joined T"          once the SetPartitioner exists (its party node is created in __init__)
  "acquired N T"      every time it reaches ACQUIRED, with the size of its share
  "leaving T"         when the znode PATH-ctl/IDENT appears, right before finish()
  "suspended T", "lost T"  when the session's state goes SUSPENDED or LOST (not at the end)
  "failed T"          when the partitioner failed
and exits.  Errors go to stderr with a non-zero exit.
"""
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState


def say(*words):
    print(*words, flush=True)


def now():
    return "%.6f" % time.monotonic()


def member(hosts, path, n_items, ident, time_boundary, session):
    zk = KazooClient(hosts=hosts, timeout=session)
    closing = threading.Event()  # stop() makes the listeners hear LOST: not a loss

    def listener(state):
        if state != KazooState.CONNECTED and not closing.is_set():
            say(state.lower(), now())

    zk.add_listener(listener)
    zk.start(timeout=15)
    leave = threading.Event()
    changed = threading.Event()  # set on every state change and on the leave order

    def look(event=None):
        if zk.exists(path + "-ctl/" + ident, watch=look):
            leave.set()
            changed.set()

    look()
    items = ["item-%05d" % i for i in range(1, n_items + 1)]
    qp = zk.SetPartitioner(path=path, set=items, identifier=ident,
                           time_boundary=time_boundary, state_change_event=changed)
    say("joined", now())
    announced = False
    try:
        while True:
            if leave.is_set():
                say("leaving", now())
                qp.finish()
                break
            changed.clear()
            if qp.failed:
                say("failed", now())
                break
            elif qp.release:
                announced = False
                qp.release_set()
            elif qp.acquired:
                if not announced:
                    say("acquired", len(list(qp)), now())
                    announced = True
                changed.wait(1)
            elif qp.allocating:
                announced = False
                qp.wait_for_acquire(1)
    finally:
        closing.set()
        zk.stop()
        zk.close()


def main(argv):
    if len(argv) != 7:
        sys.stderr.write(__doc__)
        return 2
    member(argv[1], argv[2], int(argv[3]), argv[4], float(argv[5]), float(argv[6]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
