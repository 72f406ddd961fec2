"""Integration tests of the cluster controller (docs/controller.md): real
`keel server` processes, `keel broker` processes and the `keel` CLI, with
kazoo reading the ZooKeeper view of the metadata.

The keel extension opcodes are spoken here directly through a raw
ZooKeeper-protocol client (harness.RawZk) with a small encoder/decoder of
the request bodies (src/meta/proto.c), so that the server side is tested
independently of the C client.
"""
import json
import os
import struct
import time
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from harness import RawZk

OPCODE_BASE = 1000
API_REGISTRATION, API_HEARTBEAT, API_UNREGISTER, API_CREATE_TOPICS, API_DELETE_TOPICS, \
    API_ALTER_CONFIGS, API_ALTER_PARTITION, API_DESCRIBE, API_FETCH = range(9)
NOT_CONTROLLER = 41

SERVER_ARGS = ["--election-timeout-ms", "1000", "--heartbeat-ms", "100",
               "--broker-session-timeout-ms", "3000",
               "--leader-rebalance-interval-ms", "2000"]


# ---- the request bodies (jute-like, big-endian; version 0) ----

def _str(s):
    if s is None:
        return struct.pack(">i", -1)
    b = s.encode()
    return struct.pack(">i", len(b)) + b


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def str(self):
        n = self.take(">i")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes(self):
        n = self.take(">i")
        if n < 0:
            return None
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i32_list(self):
        return [self.take(">i") for _ in range(self.take(">i"))]

    def done(self):
        assert self.pos == len(self.data), "%d trailing bytes" % (len(self.data) - self.pos)


def registration_request(broker_id, incarnation, host="127.0.0.1", port=9092, rack=None,
                         previous_epoch=-1):
    body = struct.pack(">hi", 0, broker_id) + incarnation
    body += struct.pack(">i", 1) + _str("PLAINTEXT") + _str(host) + struct.pack(">HH", port, 0)
    return body + _str(rack) + struct.pack(">q", previous_epoch)


def registration_response(data):
    r = Reader(data)
    assert r.take(">h") == 0
    out = {"error": r.take(">h"), "message": r.str(), "epoch": r.take(">q")}
    r.done()
    return out


def heartbeat_request(broker_id, epoch, offset, want_fence=False, want_shutdown=False):
    return struct.pack(">hiqq??", 0, broker_id, epoch, offset, want_fence, want_shutdown)


def heartbeat_response(data):
    r = Reader(data)
    assert r.take(">h") == 0
    out = {"error": r.take(">h"), "message": r.str(), "caught_up": r.take(">?"),
           "fenced": r.take(">?"), "should_shut_down": r.take(">?")}
    r.done()
    return out


def create_topics_request(topics, validate_only=False):
    body = struct.pack(">hi", 0, len(topics))
    for name, partitions, rf in topics:
        body += _str(name) + struct.pack(">ihi", partitions, rf, 0)
    return body + struct.pack(">?", validate_only)


def create_topics_response(data):
    r = Reader(data)
    assert r.take(">h") == 0
    out = []
    for _ in range(r.take(">i")):
        name = r.str()
        r.pos += 16
        out.append({"name": name, "error": r.take(">h"), "message": r.str(),
                    "partitions": r.take(">i"), "rf": r.take(">h")})
    r.done()
    return out


def describe_request(topics=(), brokers=True, include_topics=True):
    body = struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics)
    return body + struct.pack(">??", brokers, include_topics)


def describe_response(data):
    r = Reader(data)
    assert r.take(">h") == 0
    out = {"error": r.take(">h"), "controller_id": r.take(">i"),
           "controller_epoch": r.take(">i"), "offset": r.take(">q"), "brokers": {},
           "topics": {}}
    for _ in range(r.take(">i")):
        b = {"id": r.take(">i"), "epoch": r.take(">q")}
        r.pos += 16
        for _ in range(r.take(">i")):
            r.str(), r.str(), r.take(">HH")
        b["rack"] = r.str()
        b["fenced"] = r.take(">?")
        b["shutdown"] = r.take(">?")
        out["brokers"][b["id"]] = b
    for _ in range(r.take(">i")):
        name = r.str()
        r.pos += 16
        t = {"error": r.take(">h"), "partitions": {}}
        for _ in range(r.take(">i")):
            p = {"id": r.take(">i"), "leader": r.take(">i"), "leader_epoch": r.take(">i"),
                 "partition_epoch": r.take(">i"), "replicas": r.i32_list(),
                 "isr": r.i32_list(), "recovery": r.take(">b")}
            t["partitions"][p["id"]] = p
        t["configs"] = {}
        for _ in range(r.take(">i")):
            k = r.str()
            t["configs"][k] = r.str()
        out["topics"][name] = t
    r.done()
    return out


def fetch_request(from_offset, max_bytes=1 << 20):
    return struct.pack(">hqi", 0, from_offset, max_bytes)


def fetch_response(data):
    r = Reader(data)
    assert r.take(">h") == 0
    out = {"error": r.take(">h"), "high_watermark": r.take(">q"),
           "snapshot_offset": r.take(">q"), "snapshot": r.bytes(), "batches": []}
    for _ in range(r.take(">i")):
        out["batches"].append((r.take(">q"), r.bytes()))
    r.done()
    return out


def call(addr, api, body, session=None):
    """One extension request on a fresh (or the given) session: (err, body)."""
    zk = session or RawZk(addr)
    try:
        err, _zxid, reply = zk.call(OPCODE_BASE + api, body)
        return err, reply
    finally:
        if session is None:
            zk.close()


def describe(addr, topics=()):
    err, body = call(addr, API_DESCRIBE, describe_request(topics))
    assert err == 0
    return describe_response(body)


def kazoo(cluster):
    zk = KazooClient(hosts=cluster.connect_string(), timeout=10)
    zk.start(timeout=15)
    return zk


# ---- tests of the server side, through the raw protocol ----

@pytest.fixture
def cluster(cluster_factory):
    c = cluster_factory(3, server_args=SERVER_ARGS)
    c.start()
    c.wait_leader()
    return c


def follower_of(cluster):
    leader = cluster.wait_leader()
    return next(s for s in cluster.live() if s.id != leader.id)


def register(addr, broker_id, rack=None):
    incarnation = uuid.uuid4().bytes
    deadline = time.time() + 15
    while True:
        err, body = call(addr, API_REGISTRATION, registration_request(broker_id, incarnation,
                                                                      rack=rack))
        assert err == 0
        resp = registration_response(body)
        if resp["error"] == 0:
            return resp["epoch"]
        assert resp["error"] == NOT_CONTROLLER and time.time() < deadline, resp
        time.sleep(0.2)


def test_extension_opcodes_register_heartbeat_topic(cluster):
    """A broker registers through a follower (forwarded to the leader),
    is unfenced once its heartbeat says it has the registration; a topic
    is created; DescribeCluster, FetchMetadata and the ZooKeeper view agree
    on every server."""
    fol = follower_of(cluster)
    epoch = register(fol.client_addr, 1, rack="r1")
    assert epoch > 0
    # The reply came after the follower applied the registration: reads
    # there see it.
    d = describe(fol.client_addr)
    assert d["brokers"][1]["epoch"] == epoch and d["brokers"][1]["fenced"]
    reg_offset = d["offset"]
    err, body = call(fol.client_addr, API_HEARTBEAT, heartbeat_request(1, epoch, reg_offset))
    hb = heartbeat_response(body)
    assert err == 0 and hb["error"] == 0 and hb["caught_up"], hb
    cluster.wait(lambda: not describe(fol.client_addr)["brokers"][1]["fenced"], timeout=10,
                 what="broker 1 unfenced")
    err, body = call(fol.client_addr, API_CREATE_TOPICS,
                     create_topics_request([("sensor-data", 3, 1)]))
    res = create_topics_response(body)
    assert err == 0 and res[0]["error"] == 0, res
    for s in cluster.live():
        d = describe(s.client_addr, ["sensor-data"])
        parts = d["topics"]["sensor-data"]["partitions"]
        if len(parts) == 3 and all(p["leader"] == 1 for p in parts.values()):
            continue
        cluster.wait(lambda: all(p["leader"] == 1 for p in describe(
            s.client_addr, ["sensor-data"])["topics"]["sensor-data"]["partitions"].values()),
            what="topic on server %d" % s.id)
    # FetchMetadata from the start returns the batches in order.
    err, body = call(fol.client_addr, API_FETCH, fetch_request(1))
    f = fetch_response(body)
    assert err == 0 and f["error"] == 0 and f["snapshot_offset"] == -1
    offsets = [o for o, _ in f["batches"]]
    assert offsets == sorted(offsets) and len(offsets) >= 3
    err, body = call(fol.client_addr, API_FETCH, fetch_request(offsets[-1] + 1))
    assert fetch_response(body)["batches"] == []
    # The ZooKeeper view, from kazoo.
    zk = kazoo(cluster)
    try:
        reg = json.loads(zk.get("/brokers/ids/1")[0])
        assert reg["epoch"] == epoch and reg["rack"] == "r1"
        state = json.loads(zk.get("/brokers/topics/sensor-data/partitions/0/state")[0])
        assert state["leader"] == 1 and state["isr"] == [1]
        assert json.loads(zk.get("/controller")[0])["brokerid"] == cluster.wait_leader().id
        with pytest.raises(NoAuthError):
            zk.set("/brokers/ids/1", b"{}")
        with pytest.raises(NoAuthError):
            zk.create("/brokers/ids/7", b"{}")
        with pytest.raises(NoAuthError):
            zk.delete("/brokers/topics/sensor-data/partitions/0/state")
    finally:
        zk.stop()


def test_bad_extension_requests(cluster):
    """A malformed body gets MarshallingError and the session stays usable;
    a newer body version gets Unimplemented; a session's requests are
    answered in order."""
    fol = follower_of(cluster)
    zk = RawZk(fol.client_addr)
    try:
        err, _, _ = zk.call(OPCODE_BASE + API_DESCRIBE, b"\0")
        assert err == -5
        err, _, _ = zk.call(OPCODE_BASE + API_REGISTRATION, b"\0\0\0")
        assert err == -5
        err, _, _ = zk.call(OPCODE_BASE + API_FETCH, struct.pack(">hqi", 7, 1, 100))
        assert err == -6
        err, _, body = zk.call(OPCODE_BASE + API_DESCRIBE, describe_request())
        assert err == 0 and describe_response(body)["error"] == 0
        err, _, body = zk.call(OPCODE_BASE + API_CREATE_TOPICS,
                               create_topics_request([("t", 1, 1)]))
        # No broker is registered: replication factor 1 cannot be placed.
        assert err == 0 and create_topics_response(body)[0]["error"] == 38
        err, _, body = zk.call(3, b"\0\0\0\x01/\0")  # exists("/") still works
        assert err == 0
    finally:
        zk.close()
