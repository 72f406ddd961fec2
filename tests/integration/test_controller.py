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
import re
import signal
import struct
import subprocess
import time
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from harness import KEEL, RawZk, free_ports

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
    try:
        c.wait_leader()
    except AssertionError:
        print(c.dump_logs())
        raise
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
        # An opcode past the known ones: Unimplemented, and the connection
        # closes (as ZooKeeper does for an unknown opcode).
        err, _, _ = zk.call(OPCODE_BASE + 9, b"")
        assert err == -6
        with pytest.raises((ConnectionError, OSError)):
            zk.call(3, b"\0\0\0\x01/\0")
    finally:
        zk.close()


# ---- brokers and the CLI ----

BROKER_ARGS = ["--heartbeat-interval-ms", "500", "--fetch-interval-ms", "100"]
ROLE_LINE = re.compile(r"broker=(\d+) (leader|follower) of (.+)-(\d+) at epoch (\d+)")
START_LINE = re.compile(r"keel broker (\d+) \(incarnation")


class Broker:
    """A `keel broker` process; its stderr goes to a log kept across restarts."""

    def __init__(self, cluster, bid, rack=None):
        self.cluster = cluster
        self.id = bid
        self.rack = rack
        self.data_dir = os.path.join(cluster.root, "broker%d" % bid)
        self.log_path = os.path.join(cluster.root, "broker%d.log" % bid)
        self.port = free_ports(1)[0]
        self.proc = None

    def start(self):
        args = [KEEL, "broker", "--id", str(self.id), "--servers", self.cluster.connect_string(),
                "--data-dir", self.data_dir, "--port", str(self.port)] + BROKER_ARGS
        if self.rack:
            args += ["--rack", self.rack]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        log.close()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout=20):
        """SIGTERM (controlled shutdown); returns the exit status."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("broker %d did not stop on SIGTERM" % self.id)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""


def keel(*args, timeout=30):
    out = subprocess.run([KEEL] + list(args), capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout, out.stderr


def brokers_state(cluster):
    """{id: (epoch, state)} from `keel brokers`."""
    rc, out, err = keel("brokers", "--servers", cluster.connect_string())
    assert rc == 0, err
    states = {}
    for line in out.splitlines():
        m = re.match(r"Broker: (\d+)\tEpoch: (\d+)\tRack: (\S+)\tState: (\w+)", line)
        assert m, line
        states[int(m.group(1))] = (int(m.group(2)), m.group(4))
    return states


def describe_topic(cluster, topic):
    """{partition: {leader, replicas, isr, epoch}} from `keel topics describe`."""
    rc, out, err = keel("topics", "describe", topic, "--servers", cluster.connect_string())
    assert rc == 0, err
    parts = {}
    for line in out.splitlines():
        m = re.match(r"Topic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+|none)\t"
                     r"Replicas: ([\d,]*)\tIsr: ([\d,]*)\tLeaderEpoch: (\d+)", line)
        if not m:
            continue
        ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
        leader = -1 if m.group(3) == "none" else int(m.group(3))
        parts[int(m.group(2))] = {"leader": leader, "replicas": ints(m.group(4)),
                                  "isr": ints(m.group(5)), "epoch": int(m.group(6))}
    return parts


def role_lines(broker):
    """Per run of the broker process: [(role, topic, partition, epoch)]."""
    runs = []
    for line in broker.log().splitlines():
        if START_LINE.search(line):
            runs.append([])
            continue
        m = ROLE_LINE.search(line)
        if m and runs:
            assert int(m.group(1)) == broker.id
            runs[-1].append((m.group(2), m.group(3), int(m.group(4)), int(m.group(5))))
    return runs


def check_no_split_brain(brokers):
    """No two brokers ever led one partition in one leader epoch, and each
    broker process saw the epochs of every partition only rise."""
    leaders = {}
    for b in brokers:
        for run in role_lines(b):
            last = {}
            for role, topic, part, epoch in run:
                key = (topic, part)
                assert epoch >= last.get(key, -1), \
                    "broker %d: epoch of %s-%d went back to %d" % (b.id, topic, part, epoch)
                last[key] = epoch
                if role == "leader":
                    owner = leaders.setdefault((topic, part, epoch), b.id)
                    assert owner == b.id, "brokers %d and %d both led %s-%d at epoch %d" % (
                        owner, b.id, topic, part, epoch)
    return leaders


SESSION_TIMEOUT_S = 3.0


@pytest.fixture
def kafka(cluster_factory, request):
    """3 servers and 3 brokers (racks r1..r3), all active."""
    c = cluster_factory(3, server_args=SERVER_ARGS)
    brokers = {i: Broker(c, i, rack="r%d" % i) for i in (1, 2, 3)}
    try:
        c.start()
        c.wait_leader()
        for b in brokers.values():
            b.start()
        wait_active(c, (1, 2, 3))
    except AssertionError:
        print(c.dump_logs())
        for b in brokers.values():
            b.kill()
            print("---- broker %d ----\n%s" % (b.id, b.log()))
        raise
    yield c, brokers
    for b in brokers.values():
        b.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for b in brokers.values():
            print("---- broker %d ----\n%s" % (b.id, "\n".join(b.log().splitlines()[-60:])))


def wait_active(c, ids, timeout=20.0):
    c.wait(lambda: all(brokers_state(c).get(i, (0, ""))[1] == "active" for i in ids),
           timeout=timeout, what="brokers %s active" % (ids,))


def wait_partitions(c, topic, cond, timeout, what):
    def check():
        parts = describe_topic(c, topic)
        return parts if parts and cond(parts) else None
    return c.wait(check, timeout=timeout, what=what, interval=0.1)


def full(parts):
    return all(p["leader"] in p["isr"] and sorted(p["isr"]) == sorted(p["replicas"])
               for p in parts.values())


def preferred(parts):
    return all(p["leader"] == p["replicas"][0] for p in parts.values())


def create_topic(c, name, partitions, rf):
    rc, out, err = keel("topics", "create", name, "--partitions", str(partitions),
                        "--replication-factor", str(rf), "--servers", c.connect_string())
    assert rc == 0 and out.strip() == "Created topic %s." % name, (rc, out, err)
    return wait_partitions(c, name, lambda p: len(p) == partitions and full(p), 15,
                           "%s: a leader and a full ISR per partition" % name)


def zk_states(zk, topic):
    zk.sync("/")
    out = {}
    for p in zk.get_children("/brokers/topics/%s/partitions" % topic):
        out[int(p)] = json.loads(zk.get("/brokers/topics/%s/partitions/%s/state" % (topic, p))[0])
    return out


def test_broker_failure_and_rejoin(kafka):
    """kill -9 of a broker: within the session timeout + a few seconds it
    leads nothing, is in no ISR, moved partitions have higher leader epochs,
    /brokers/ids drops it (kazoo watches fire). Restarted: unfenced, back in
    every ISR, preferred leaders restored. No split brain in the logs."""
    c, brokers = kafka
    before = create_topic(c, "sensor-data", 6, 2)
    assert all(len(p["replicas"]) == 2 for p in before.values())
    assert sorted(p["leader"] for p in before.values()) == [1, 1, 2, 2, 3, 3]
    zk = kazoo(c)
    try:
        states = zk_states(zk, "sensor-data")
        for pid, p in before.items():
            assert states[pid]["leader"] == p["leader"] and states[pid]["isr"] == p["isr"]
            assert states[pid]["leader_epoch"] == p["epoch"]
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        victim = 1
        led = [pid for pid, p in before.items() if p["leader"] == victim]
        ids_events, state_events = [], []
        zk.get_children("/brokers/ids", watch=lambda ev: ids_events.append(ev))
        zk.get("/brokers/topics/sensor-data/partitions/%d/state" % led[0],
               watch=lambda ev: state_events.append(ev))

        brokers[victim].kill()
        t0 = time.time()
        after = wait_partitions(
            c, "sensor-data",
            lambda ps: all(p["leader"] != victim and victim not in p["isr"] for p in ps.values()),
            SESSION_TIMEOUT_S + 7, "broker %d out of every leadership and ISR" % victim)
        elapsed = time.time() - t0
        print("broker %d fenced and moved out after %.2f s" % (victim, elapsed))
        for pid in led:
            assert after[pid]["epoch"] > before[pid]["epoch"], (pid, before[pid], after[pid])
            assert after[pid]["leader"] in before[pid]["isr"]
        for pid, p in after.items():
            assert p["leader"] in p["isr"]
            assert sorted(p["isr"]) == sorted(x for x in before[pid]["isr"] if x != victim)
        zk.sync("/")
        assert sorted(zk.get_children("/brokers/ids")) == ["2", "3"]
        c.wait(lambda: ids_events and state_events, timeout=5, what="kazoo watches fired")
        assert ids_events[0].path == "/brokers/ids"
        assert brokers_state(c)[victim][1] == "fenced"

        brokers[victim].start()
        t0 = time.time()
        wait_active(c, (victim,))
        back = wait_partitions(c, "sensor-data", lambda ps: full(ps) and preferred(ps), 20,
                               "full ISRs and preferred leaders again")
        print("broker %d back in every ISR and preferred leadership after %.2f s" % (
            victim, time.time() - t0))
        for pid in led:
            assert back[pid]["leader"] == victim and back[pid]["epoch"] > after[pid]["epoch"]
        zk.sync("/")
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        states = zk_states(zk, "sensor-data")
        for pid, p in back.items():
            assert states[pid]["leader"] == p["leader"] and states[pid]["isr"] == p["isr"]
    finally:
        zk.stop()
    # The restarted broker logs its leaderships anew, at the new epochs.
    c.wait(lambda: all(("leader", "sensor-data", pid, back[pid]["epoch"])
                       in role_lines(brokers[victim])[-1] for pid in led),
           timeout=5, what="broker %d logged its new leaderships" % victim)
    assert len(role_lines(brokers[victim])) == 2
    leaders = check_no_split_brain(brokers.values())
    for pid in led:
        assert leaders[("sensor-data", pid, back[pid]["epoch"])] == victim


def test_controlled_shutdown_moves_leaderships_first(kafka):
    """SIGTERM: the broker's leaderships move away before it exits (sooner
    than a session timeout could fence it); topics list/delete work."""
    c, brokers = kafka
    before = create_topic(c, "orders", 6, 2)
    victim = 3
    led = [pid for pid, p in before.items() if p["leader"] == victim]
    assert led
    c.wait(lambda: all("leader of orders-%d at epoch 0" % pid in brokers[victim].log()
                       for pid in led), timeout=5, what="broker %d knows its leaderships" % victim)
    t0 = time.time()
    assert brokers[victim].terminate() == 0
    elapsed = time.time() - t0
    print("controlled shutdown of broker %d took %.2f s" % (victim, elapsed))
    assert elapsed < SESSION_TIMEOUT_S, "took as long as a session timeout"
    # Already true when it exited: it waited for its own image to show it.
    after = describe_topic(c, "orders")
    for pid, p in after.items():
        assert p["leader"] != victim and p["leader"] != -1
        assert victim not in p["isr"] or p["isr"] == [victim]
    for pid in led:
        assert after[pid]["epoch"] > before[pid]["epoch"]
    log = brokers[victim].log()
    done = log.index("controlled shutdown complete")
    for pid in led:
        moved = re.search(r"follower of orders-%d at epoch %d" % (pid, after[pid]["epoch"]), log)
        assert moved and moved.start() < done, "orders-%d not moved before the exit" % pid
    assert brokers_state(c)[victim][1] == "fenced"
    check_no_split_brain(brokers.values())

    rc, out, _ = keel("topics", "list", "--servers", c.connect_string())
    assert rc == 0 and out.split() == ["orders"]
    rc, out, err = keel("topics", "delete", "orders", "--servers", c.connect_string())
    assert rc == 0, err
    rc, out, _ = keel("topics", "list", "--servers", c.connect_string())
    assert rc == 0 and out.split() == []
    rc, _, err = keel("topics", "describe", "orders", "--servers", c.connect_string())
    assert rc == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    c.wait(lambda: "no longer a replica of orders-" in brokers[1].log(), timeout=5,
           what="broker 1 dropped the deleted topic")

    servers = c.connect_string()
    rc, out, err = keel("topics", "create", "audit", "--partitions", "1",
                        "--replication-factor", "2", "--config", "retention.ms=1000",
                        "--servers", servers)
    assert rc == 0, err
    rc, out, err = keel("topics", "create", "audit", "--partitions", "1",
                        "--replication-factor", "2", "--servers", servers)
    assert rc == 1 and "TOPIC_ALREADY_EXISTS" in err
    rc, out, err = keel("topics", "create", "big", "--partitions", "1",
                        "--replication-factor", "3", "--servers", servers)
    assert rc == 1 and "INVALID_REPLICATION_FACTOR" in err  # broker 3 is gone
    rc, out, _ = keel("topics", "describe", "audit", "--servers", servers)
    assert rc == 0 and "Configs: retention.ms=1000" in out
    zk = kazoo(c)
    try:
        zk.sync("/")
        assert json.loads(zk.get("/config/topics/audit")[0])["config"] == {"retention.ms": "1000"}
    finally:
        zk.stop()


DUMP_PARTITION = re.compile(r"\[Topic: (\S+), Partition: (\d+), Leader: (Broker-\d+|none), "
                            r"ISR: \{([^}]*)\}\] LeaderEpoch: (\d+), PartitionEpoch: (\d+)")


def test_controller_failover_while_brokers_fail(kafka):
    """kill -9 of the Raft leader (the active controller) together with a
    broker: the new controller fences the broker and moves its partitions;
    afterwards every server's log holds the same decisions, none ignored
    (made twice) and every partition's epochs chain."""
    c, brokers = kafka
    before = create_topic(c, "events", 6, 3)
    old = c.wait_leader()
    victim = 2
    led = [pid for pid, p in before.items() if p["leader"] == victim]
    old.kill()
    brokers[victim].kill()
    t0 = time.time()
    new = c.wait_leader(exclude=(old.id,))
    after = wait_partitions(
        c, "events",
        lambda ps: all(p["leader"] != victim and victim not in p["isr"] for p in ps.values()),
        SESSION_TIMEOUT_S + 10, "broker %d out after the controller failover" % victim)
    print("new controller %d; broker %d moved out after %.2f s" % (new.id, victim,
                                                                   time.time() - t0))
    for pid in led:
        assert after[pid]["epoch"] > before[pid]["epoch"]
    zk = kazoo(c)
    try:
        zk.sync("/")
        assert json.loads(zk.get("/controller")[0])["brokerid"] == new.id
        assert int(zk.get("/controller_epoch")[0]) > 0
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "3"]
    finally:
        zk.stop()

    old.start()
    brokers[victim].start()
    wait_active(c, (1, 2, 3))
    back = wait_partitions(c, "events", lambda ps: full(ps) and preferred(ps), 25,
                           "full ISRs and preferred leaders after the failover")
    for b in brokers.values():
        b.kill()
    # Every server has the whole log before they stop.
    c.wait(lambda: len({s.status()["applied_index"] for s in c.live()}) == 1, timeout=10,
           what="servers applied the same index")
    c.stop()
    check_no_split_brain(brokers.values())

    dumps = []
    for s in c.servers.values():
        rc, out, err = keel("log", "dump", "--data-dir", s.data_dir, "--metadata-only")
        assert rc == 0, err
        assert "(ignored" not in out, "a decision was applied twice or out of turn"
        dumps.append([line for line in out.splitlines()
                      if "Batch at offset" in line or line.startswith("\t\t")])
    # The same decisions in the same order on every server (one may have
    # stopped before the others applied the last few: compare prefixes).
    dumps.sort(key=len)
    assert len(dumps[0]) > 0
    for d in dumps[1:]:
        assert d[:len(dumps[0])] == dumps[0]
    dumps = ["\n".join(d) for d in dumps]
    assert re.search(r"\[Topic: events, Partition: 0, Leader: Broker-\d, "
                     r"ISR: \{Broker-\d, Broker-\d, Broker-\d\}\] LeaderEpoch: 0, "
                     r"PartitionEpoch: 0", dumps[0])
    # Epochs chain: each record of a partition is its partition epoch + 1,
    # a leader change bumps the leader epoch, so nothing was decided twice.
    last = {}
    for m in DUMP_PARTITION.finditer(dumps[-1]):
        key = (m.group(1), int(m.group(2)))
        leader, epoch, pepoch = m.group(3), int(m.group(5)), int(m.group(6))
        if key in last:
            l_leader, l_epoch, l_pepoch = last[key]
            assert pepoch == l_pepoch + 1, (key, last[key], m.group(0))
            assert epoch == l_epoch + (1 if leader != l_leader else 0), (key, m.group(0))
        else:
            assert pepoch == 0 and epoch == 0
        last[key] = (leader, epoch, pepoch)
    for pid, p in back.items():
        # (The brokers were killed: they may have been fenced since.)
        assert last[("events", pid)][1] >= p["epoch"]
    fences = re.findall(r"FenceBroker: Broker-(\d+), Epoch: (\d+)", dumps[-1])
    assert len(fences) == len(set(fences)), "a broker epoch was fenced twice"
    assert any(b == str(victim) for b, _ in fences)


def test_fetch_metadata_from_a_snapshot(cluster, request):
    """A server restarted from a snapshot no longer has the old metadata
    entries: FetchMetadata from the start answers with the image, a broker
    following only that server builds its image from it and rejoins, and
    `keel log dump` starts from the snapshot's metadata section."""
    c = cluster
    brokers = {i: Broker(c, i) for i in (1, 2)}
    try:
        for b in brokers.values():
            b.start()
        wait_active(c, (1, 2))
        create_topic(c, "metrics", 2, 2)
        s1 = c.servers[1]
        rc, out, err = keel("snapshot", "--servers", s1.client_addr, *c.cli_auth())
        assert rc == 0, err
        c.wait(lambda: s1.status()["snapshot_index"] > 0, timeout=10, what="snapshot written")
        s1.kill()
        s1.start()
        c.wait(lambda: describe(s1.client_addr)["topics"].get("metrics"), timeout=10,
               what="server 1 back with its image")
        err, body = call(s1.client_addr, API_FETCH, fetch_request(1))
        f = fetch_response(body)
        assert err == 0 and f["error"] == 0, f
        assert f["snapshot_offset"] > 0 and f["snapshot"] and f["batches"] == []
        err, body = call(s1.client_addr, API_FETCH, fetch_request(f["snapshot_offset"] + 1))
        assert err == 0 and fetch_response(body)["snapshot_offset"] == -1

        brokers[2].kill()
        args = [KEEL, "broker", "--id", "2", "--servers", s1.client_addr, "--data-dir",
                brokers[2].data_dir, "--port", str(brokers[2].port)] + BROKER_ARGS
        log = open(brokers[2].log_path, "ab")
        brokers[2].proc = subprocess.Popen(args, stdout=log, stderr=log)
        log.close()
        c.wait(lambda: "loaded the metadata image at offset %d" % f["snapshot_offset"]
               in brokers[2].log(), timeout=10, what="broker 2 loaded the image")
        wait_active(c, (2,))
        wait_partitions(c, "metrics", lambda ps: full(ps) and preferred(ps), 15,
                        "broker 2 back in the ISRs")
        runs = role_lines(brokers[2])
        assert any(role == "leader" for role, _, _, _ in runs[-1])
        for b in brokers.values():
            b.kill()
        c.stop()
        rc, out, err = keel("log", "dump", "--data-dir", s1.data_dir)
        assert rc == 0, err
        m = re.search(r"snapshot at index \d+ \(term \d+\): metadata offset (\d+), "
                      r"2 brokers, 1 topics", out)
        # The file snapshot; the image sent later may include newer batches.
        assert m and 0 < int(m.group(1)) <= f["snapshot_offset"], out[:500]
        assert "membership:" in out or "zk createSession" in out
        check_no_split_brain(brokers.values())
    finally:
        for b in brokers.values():
            b.kill()
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            for b in brokers.values():
                print("---- broker %d ----\n%s" % (b.id, b.log()[-4000:]))
