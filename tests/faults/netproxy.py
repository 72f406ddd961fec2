#!/usr/bin/env python3
"""Loopback TCP proxy in front of every server's Raft peer port: the
network partitions of the fault suite.

Each server k gets one proxy port P_k forwarding to its real peer port R_k,
and every server reaches k only through P_k (--cluster and `keel members
add` carry P_k). A peer link is one TCP connection per pair of servers (the
dialer sends HELLO first: frame length, CRC, type 1, "KEEL", version, from
id, to id), so the proxy learns from the HELLO which server dialed, and
knows every connection's pair {from, k} and both of its byte directions.

Rules, per directed pair "a>b" (bytes from server a to server b):
  drop   the pair's connections are closed at once and new ones are closed
         right after their HELLO (both directions: a TCP connection cannot
         lose one direction);
  hold   bytes a->b are not forwarded (and not read: TCP flow control backs
         up) until the rule is lifted; then they flow again, late. This is
         a black hole that keeps connections open, and can be one-way.

Control on stdin, one JSON object per line, answered by one line on
stdout:
  {"rules": {"1>2": "drop", "2>1": "drop", "3>1": "hold"}}   replace all
  {"stats": true}
The first stdout line is {"ports": {"1": P_1, ...}} once listening.

Usage: netproxy.py ID=REAL_HOST:REAL_PORT[@PROXY_PORT] ...
(PROXY_PORT 0 or absent: any free port).
"""
import asyncio
import json
import struct
import sys

HELLO_MAGIC = 0x4B45454C
HELLO_PREFIX = 4 + 4 + 1 + 4 + 2 + 8 + 8  # length, crc, type, magic, version, from, to


class Link:
    def __init__(self, src, dst):
        self.src = src        # the dialer
        self.dst = dst        # the server behind this proxy
        self.writers = []
        self.closed = False

    def close(self):
        if not self.closed:
            self.closed = True
            for w in self.writers:
                try:
                    w.transport.abort()
                except Exception:
                    pass


class Proxy:
    def __init__(self, targets):
        self.targets = targets          # id -> (host, port, proxy_port)
        self.rules = {}                 # (a, b) -> "drop" | "hold"
        self.links = set()
        self.gates = {}                 # (a, b) -> asyncio.Event (set = open)
        self.stats = {"accepted": 0, "dropped": 0, "bytes": 0, "bad_hello": 0}
        self.ports = {}

    def gate(self, a, b):
        g = self.gates.get((a, b))
        if g is None:
            g = asyncio.Event()
            g.set()
            self.gates[(a, b)] = g
        return g

    def dropped(self, a, b):
        return self.rules.get((a, b)) == "drop" or self.rules.get((b, a)) == "drop"

    def apply_rules(self, rules):
        self.rules = {}
        for k, v in rules.items():
            a, b = (int(x) for x in k.split(">"))
            if v not in ("drop", "hold"):
                raise ValueError("rule %s: %r" % (k, v))
            self.rules[(a, b)] = v
        for (a, b), g in list(self.gates.items()):
            if self.rules.get((a, b)) == "hold":
                g.clear()
            else:
                g.set()
        for (a, b), v in self.rules.items():
            if v == "hold":
                self.gate(a, b).clear()
        for link in list(self.links):
            if self.dropped(link.src, link.dst):
                self.stats["dropped"] += 1
                link.close()

    async def pump(self, link, reader, writer, a, b, first=b""):
        """Copies bytes a->b while the gate a>b is open."""
        gate = self.gate(a, b)
        try:
            data = first
            while True:
                if data:
                    await gate.wait()
                    if link.closed:
                        break
                    writer.write(data)
                    self.stats["bytes"] += len(data)
                    await writer.drain()
                await gate.wait()
                data = await reader.read(65536)
                if not data or link.closed:
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.close()

    async def on_accept(self, dst, reader, writer):
        self.stats["accepted"] += 1
        try:
            first = await asyncio.wait_for(reader.readexactly(HELLO_PREFIX), 30)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError):
            writer.transport.abort()
            return
        magic, _version, src, to = struct.unpack(">IHQQ", first[9:HELLO_PREFIX])
        if magic != HELLO_MAGIC or to != dst:
            self.stats["bad_hello"] += 1
            writer.transport.abort()
            return
        await self.forward(Link(src, dst), reader, writer, first)

    async def forward(self, link, reader, writer, first=b""):
        """Connects to the server behind the proxy and pumps both ways
        (under the rules) until either side closes or the link is dropped."""
        src, dst = link.src, link.dst
        link.writers.append(writer)
        if self.dropped(src, dst):
            self.stats["dropped"] += 1
            link.close()
            return
        host, port, _ = self.targets[dst]
        try:
            ureader, uwriter = await asyncio.open_connection(host, port)
        except OSError:
            link.close()
            return
        link.writers.append(uwriter)
        if self.dropped(src, dst):
            link.close()
            return
        self.links.add(link)
        try:
            await asyncio.gather(self.pump(link, reader, uwriter, src, dst, first),
                                 self.pump(link, ureader, writer, dst, src))
        finally:
            self.links.discard(link)

    def status(self):
        """What a control answer reports."""
        return dict(self.stats, links=len(self.links))

    def control_message(self, msg):
        if "rules" in msg:
            self.apply_rules(msg["rules"])

    async def control(self):
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while True:
            line = await reader.readline()
            if not line:
                for link in list(self.links):
                    link.close()
                return
            try:
                self.control_message(json.loads(line))
                reply = {"ok": True, "stats": self.status()}
            except Exception as e:  # a bad command must not kill the proxy
                reply = {"ok": False, "error": repr(e)}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()

    async def main(self):
        servers = []
        for sid, (_, _, pport) in self.targets.items():
            srv = await asyncio.start_server(
                lambda r, w, sid=sid: self.on_accept(sid, r, w), "127.0.0.1", pport)
            self.ports[sid] = srv.sockets[0].getsockname()[1]
            servers.append(srv)
        sys.stdout.write(json.dumps({"ports": self.ports}) + "\n")
        sys.stdout.flush()
        await self.control()
        for s in servers:
            s.close()


def parse(args):
    targets = {}
    for a in args:
        sid, rest = a.split("=", 1)
        pport = 0
        if "@" in rest:
            rest, p = rest.split("@", 1)
            pport = int(p)
        host, port = rest.rsplit(":", 1)
        targets[int(sid)] = (host, int(port), pport)
    return targets


if __name__ == "__main__":
    asyncio.run(Proxy(parse(sys.argv[1:])).main())
