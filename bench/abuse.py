#!/usr/bin/env python3
"""abuse.py — a well-behaved client's latency with and without an abusive
one (issue 18), on one keel server started here.

The well-behaved client sends getData of a small node, one at a time, and
records each round trip. The abusive client keeps --pipeline getChildren
requests of a node with --children children in flight on one connection,
re-sending as replies come back (about 0.9 MB per reply at 100k children:
names are 5 hex digits, so the reply fits in the 1 MiB packet limit).
The same measurement runs twice, quiet then under abuse, and the report
puts the two side by side:

    bench/abuse.py [--children 100000] [--duration 5] [--pipeline 32]
                   [--json FILE]

Prints one table (p50/p99/max of the well-behaved client, its request
count, and the abuser's replies per second). KEEL=path/to/keel picks the
binary (default build/keel). Run it on an otherwise quiet machine: it is
not a timed test, and the numbers are only as good as the machine is idle.
"""
import argparse
import json
import multiprocessing
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from harness import Cluster, RawZk, _recv_exact  # noqa: E402


def zk_string(s):
    b = s.encode()
    return struct.pack(">i", len(b)) + b


def populate(addr, parent, children):
    """Creates `parent` with `children` children through multi requests."""
    raw = RawZk(addr)
    create_body = zk_string(parent) + struct.pack(">i", -1) + \
        struct.pack(">i", 1) + struct.pack(">i", 31) + zk_string("world") + zk_string("anyone") + \
        struct.pack(">i", 0)
    err, _z, _b = raw.call(1, create_body)
    assert err in (0, -110), err
    raw.call(1, zk_string("/small") + struct.pack(">i", 5) + b"hello" + struct.pack(">i", 1) +
             struct.pack(">i", 31) + zk_string("world") + zk_string("anyone") + struct.pack(">i", 0))
    batch = 1000
    for start in range(0, children, batch):
        ops = b""
        for i in range(start, min(start + batch, children)):
            op = zk_string("%s/%05x" % (parent, i)) + struct.pack(">i", -1) + \
                struct.pack(">i", 1) + struct.pack(">i", 31) + zk_string("world") + \
                zk_string("anyone") + struct.pack(">i", 0)
            ops += struct.pack(">i?i", 1, False, -1) + op
        ops += struct.pack(">i?i", -1, True, -1)
        err, _z, _b = raw.call(14, ops)
        assert err == 0, err
    raw.close()


def well_behaved(addr, duration, out):
    raw = RawZk(addr)
    body = zk_string("/small") + b"\0"
    lat = []
    end = time.time() + duration
    while time.time() < end:
        t0 = time.perf_counter()
        err, _z, _b = raw.call(4, body)
        lat.append(time.perf_counter() - t0)
        assert err == 0, err
    raw.close()
    out.extend(lat)


def abuser(addr, parent, pipeline, stop, counts):
    """Runs in its own process (the GIL must not put the abuser's work into
    the well-behaved client's latency) and reads replies as fast as the
    kernel hands them over, without parsing them: every reply has the size
    of the first one, so it only counts bytes."""
    raw = RawZk(addr, timeout=30)
    req = struct.pack(">I", 8 + 4 + len(parent) + 1)
    body = zk_string(parent) + b"\0"
    raw._send(struct.pack(">ii", 1, 8) + body)
    (n,) = struct.unpack(">I", _recv_exact(raw.sock, 4))
    _recv_exact(raw.sock, n)
    reply_size = 4 + n
    frame = req + struct.pack(">ii", 2, 8) + body  # the xid does not matter here
    raw.sock.sendall(frame * pipeline)
    buf = bytearray(1 << 20)
    got = 0
    replies = 0
    while not stop.is_set():
        k = raw.sock.recv_into(buf)
        if k == 0:
            break
        got += k
        done = got // reply_size
        if done:
            got -= done * reply_size
            replies += done
            raw.sock.sendall(frame * done)
    counts.put(replies)
    raw.sock.close()


def summary(lat):
    lat = sorted(lat)
    if not lat:
        return {"count": 0}

    def q(p):
        return lat[min(len(lat) - 1, int(len(lat) * p))] * 1000.0
    return {"count": len(lat), "p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": lat[-1] * 1000.0}


def measure(addr, args, abusive):
    lat = []
    stop = multiprocessing.Event()
    counts = multiprocessing.Queue()
    p = None
    if abusive:
        p = multiprocessing.Process(target=abuser, args=(addr, "/big", args.pipeline, stop, counts))
        p.start()
        time.sleep(0.5)  # let it reach full pipeline
    well_behaved(addr, args.duration, lat)
    stop.set()
    replies = 0
    if p is not None:
        replies = counts.get(timeout=30)
        p.join(30)
    s = summary(lat)
    s["abuser_replies_per_s"] = replies / (args.duration + 0.5)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--children", type=int, default=100000)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--pipeline", type=int, default=32)
    ap.add_argument("--json")
    ap.add_argument("--server-args", default="",
                    help="extra `keel server` flags, e.g. \"--client-frames-per-turn 0\"")
    args = ap.parse_args()
    c = Cluster(1, server_args=["--election-timeout-ms", "1000", "--heartbeat-ms", "100"] +
                args.server_args.split())
    try:
        c.start()
        srv = c.wait_leader(timeout=20)
        populate(srv.client_addr, "/big", args.children)
        quiet = measure(srv.client_addr, args, False)
        abused = measure(srv.client_addr, args, True)
        alive = srv.alive()
    finally:
        c.cleanup()
    print("well-behaved getData latency, %d children, abuser pipelining %d getChildren:" %
          (args.children, args.pipeline))
    print("%-10s %8s %9s %9s %9s %14s" % ("run", "requests", "p50 ms", "p99 ms", "max ms",
                                          "abuser rep/s"))
    for name, s in (("quiet", quiet), ("abused", abused)):
        print("%-10s %8d %9.2f %9.2f %9.2f %14.1f" % (name, s["count"], s["p50_ms"], s["p99_ms"],
                                                     s["max_ms"], s["abuser_replies_per_s"]))
    print("server alive afterwards: %s" % alive)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"options": vars(args), "quiet": quiet, "abused": abused}, f, indent=1)
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
