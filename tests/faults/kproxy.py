#!/usr/bin/env python3
"""Loopback TCP proxy in front of every broker's Kafka port: the broker
network partitions of the fault suite (the Kafka counterpart of
netproxy.py, whose rule engine it reuses).

Each broker k listens on its real port L_k and registers the proxy port
P_k (`keel broker --advertised-port P_k`), so clients and other brokers
(followers fetching from a leader) reach k only through P_k. Kafka
connections carry no HELLO naming their sender, so the proxy finds out who
dialed from the kernel: the accepted connection's peer port is the local
port of a socket in /proc/net/tcp, whose inode is an open fd of one of the
broker processes (their pids come on the control channel). A connection
from anything else (the workload's clients) has source 0 and is never cut.

Rules, per directed pair "a>b" of broker ids (bytes from a to b), as in
netproxy.py: "drop" closes the pair's connections and refuses new ones;
"hold" stops forwarding a->b until lifted.

Control on stdin, one JSON object per line, answered by one line:
  {"pids": {"1": 1234, ...}}        the broker processes (after restarts)
  {"rules": {"1>2": "drop", ...}}   replace all rules
  {"stats": true}                   only the answer: its "stats" has "open",
                                    the "a>b" pairs (a dialed b) with a
                                    connection forwarded now
The first stdout line is {"ports": {"1": P_1, ...}} once listening.

Usage: kproxy.py ID=REAL_HOST:REAL_PORT[@PROXY_PORT] ...
"""
import asyncio
import os
import sys

from netproxy import Link, Proxy, parse


def socket_inode(local_port, remote_port):
    """The inode of the IPv4 loopback socket with this local and remote port
    (None if gone)."""
    want_l = ":%04X" % local_port
    want_r = ":%04X" % remote_port
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[1].endswith(want_l) and cols[2].endswith(want_r):
                    return cols[9]
    except OSError:
        pass
    return None


def owner_of(inode, pids):
    """The id whose process holds socket:[inode], else 0."""
    target = "socket:[%s]" % inode
    for bid, pid in pids.items():
        fds = "/proc/%d/fd" % pid
        try:
            for fd in os.listdir(fds):
                try:
                    if os.readlink(os.path.join(fds, fd)) == target:
                        return bid
                except OSError:
                    continue
        except OSError:
            continue
    return 0


class KafkaProxy(Proxy):
    def __init__(self, targets):
        super().__init__(targets)
        self.pids = {}
        self.stats["from_brokers"] = 0

    def source(self, writer, dst):
        peer = writer.get_extra_info("peername")
        local = writer.get_extra_info("sockname")
        if not peer or not local or not self.pids:
            return 0
        inode = socket_inode(peer[1], local[1])
        return owner_of(inode, self.pids) if inode else 0

    async def on_accept(self, dst, reader, writer):
        self.stats["accepted"] += 1
        src = self.source(writer, dst)
        if src:
            self.stats["from_brokers"] += 1
        await self.forward(Link(src, dst), reader, writer)

    def dropped(self, a, b):
        # Source 0 is a client: clients are never cut.
        return a != 0 and b != 0 and super().dropped(a, b)

    def status(self):
        st = super().status()
        st["open"] = sorted({"%d>%d" % (l.src, l.dst) for l in self.links if l.src})
        return st

    def control_message(self, msg):
        if "pids" in msg:
            self.pids = {int(k): int(v) for k, v in msg["pids"].items() if v}
        super().control_message(msg)


if __name__ == "__main__":
    asyncio.run(KafkaProxy(parse(sys.argv[1:])).main())
