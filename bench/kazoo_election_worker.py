"""kazoo_election_worker.py - the kazoo member of bench/election_bench.lua (same protocol as its
zklua worker): run an Election on PATH; once elected, create the ephemeral node
PATH/leaders/MEMBER holding "<pid> <CLOCK_MONOTONIC>", wait until PATH/quit-MEMBER exists,
then return from the leader function and close.

Usage: kazoo_election_worker.py HOSTS PATH MEMBER SESSION_TIMEOUT_S
"""
import os
import sys
import threading
import time

from kazoo.client import KazooClient


def main():
    hosts, path, member, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    zk = KazooClient(hosts=hosts, timeout=timeout)
    zk.start(15)

    def lead():
        zk.create(path + "/leaders/" + member,
                  ("%d %.9f" % (os.getpid(), time.monotonic())).encode(),
                  ephemeral=True, makepath=True)
        quit_event = threading.Event()

        def look(event=None):
            if zk.exists(path + "/quit-" + member, watch=look) is not None:
                quit_event.set()

        look()
        quit_event.wait()

    zk.Election(path, member).run(lead)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
