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
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from harness import KEEL, RawZk, four_letter, free_ports

OPCODE_BASE = 1000
API_REGISTRATION, API_HEARTBEAT, API_UNREGISTER, API_CREATE_TOPICS, API_DELETE_TOPICS, \
    API_ALTER_CONFIGS, API_ALTER_PARTITION, API_DESCRIBE, API_FETCH, API_CREATE_PARTITIONS, \
    API_ELECT_LEADERS, API_ALTER_REASSIGNMENTS, API_LIST_REASSIGNMENTS = range(13)
API_ALLOCATE_PRODUCER_IDS = 13
API_COUNT = 14
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
                 "isr": r.i32_list(), "recovery": r.take(">b"), "adding": r.i32_list(),
                 "removing": r.i32_list()}
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
        ctl = json.loads(zk.get("/controller")[0])
        # keel's controller is a server, not a broker: Kafka tools must not be
        # sent to broker <server id>; keel names the server in its own field.
        assert ctl["brokerid"] == -1 and ctl["version"] == 2
        assert ctl["keel_controller_id"] == cluster.wait_leader().id
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
        # A known opcode with an empty body: MarshallingError.
        err, _, _ = zk.call(OPCODE_BASE + API_CREATE_PARTITIONS, b"")
        assert err == -5
        # An opcode past the known ones: Unimplemented, and the connection
        # closes (as ZooKeeper does for an unknown opcode).
        err, _, _ = zk.call(OPCODE_BASE + API_COUNT, b"")
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

    def __init__(self, cluster, bid, rack=None, extra_args=()):
        self.cluster = cluster
        self.id = bid
        self.rack = rack
        self.extra_args = list(extra_args)
        self.data_dir = os.path.join(cluster.root, "broker%d" % bid)
        self.log_path = os.path.join(cluster.root, "broker%d.log" % bid)
        self.port = free_ports(1)[0]
        self.proc = None

    def start(self):
        args = [KEEL, "broker", "--id", str(self.id), "--servers", self.cluster.connect_string(),
                "--data-dir", self.data_dir, "--port", str(self.port)] + BROKER_ARGS + \
            self.cluster.cli_auth() + self.extra_args
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
        m = re.match(r"\tTopic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+|none)\t"
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
        assert json.loads(zk.get("/controller")[0])["keel_controller_id"] == new.id
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
                brokers[2].data_dir, "--port", str(brokers[2].port)] + BROKER_ARGS + c.cli_auth()
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


def filtered(c, *flags, pattern=None):
    """Partition lines of `keel topics describe [pattern] FLAGS` as
    {(topic, partition)}; topic lines are checked to be absent with filters."""
    args = ["topics", "describe"] + ([pattern] if pattern else []) + list(flags)
    rc, out, err = keel(*(args + ["--servers", c.connect_string()]))
    assert rc == 0, err
    found = set()
    for line in out.splitlines():
        m = re.match(r"\tTopic: (\S+)\tPartition: (\d+)\t", line)
        assert m or not flags, "unexpected line with filters: %r" % line
        if m:
            found.add((m.group(1), int(m.group(2))))
    return found


def scrape(server):
    """{metric or metric{labels}: value} from a server's /metrics."""
    import urllib.request
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % server.metrics_port,
                                  timeout=5).read().decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_describe_filters_follow_a_broker_death(kafka):
    """--under-replicated-partitions, --under-min-isr-partitions and
    --unavailable-partitions (issue 16) against real brokers: empty while all
    are up, exactly the affected partitions after a kill -9, empty again
    after the restart. Topic globs select by name."""
    c, brokers = kafka
    create_topic(c, "orders", 3, 2)
    rc, out, err = keel("topics", "create", "strict", "--partitions", "3",
                        "--replication-factor", "3", "--config", "min.insync.replicas=3",
                        "--servers", c.connect_string())
    assert rc == 0, err
    wait_partitions(c, "strict", lambda p: len(p) == 3 and full(p), 15, "strict full")
    create_topic(c, "solo", 3, 1)
    for flag in ("--under-replicated-partitions", "--under-min-isr-partitions",
                 "--unavailable-partitions"):
        assert filtered(c, flag) == set(), flag
    assert {t for t, _ in filtered(c, pattern="s*")} == {"strict", "solo"}

    leader = c.wait_leader()
    m = scrape(leader)
    assert m["keel_controller_ActiveControllerCount"] == 1
    assert m["keel_controller_GlobalTopicCount"] == 3
    assert m["keel_controller_GlobalPartitionCount"] == 9
    assert m["keel_controller_FencedBrokerCount"] == 0
    assert m["keel_controller_ActiveBrokerCount"] == 3
    assert m["keel_controller_UnderReplicatedPartitions"] == 0
    assert m["keel_controller_OfflinePartitionsCount"] == 0
    for b in (1, 2, 3):
        assert 'keel_controller_broker_metadata_lag{broker="%d"}' % b in m
    # Every heartbeat and topic creation went through the active controller.
    assert m["keel_controller_request_seconds_count"] >= 3
    for s in c.live():
        if s.id != leader.id:
            f = scrape(s)
            assert f["keel_controller_ActiveControllerCount"] == 0
            assert not any(k.startswith("keel_controller_broker_metadata_lag") for k in f)

    victim = 2
    orders = describe_topic(c, "orders")
    solo = describe_topic(c, "solo")
    brokers[victim].kill()
    wait_partitions(c, "orders", lambda ps: all(victim not in p["isr"] for p in ps.values()),
                    SESSION_TIMEOUT_S + 10, "broker %d out of every ISR" % victim)
    under = {("orders", p) for p, v in orders.items() if victim in v["replicas"]}
    under |= {("strict", p) for p in range(3)}
    assert filtered(c, "--under-replicated-partitions") == under
    # strict wants 3 in sync and has 2; orders' default min ISR is 1.
    assert filtered(c, "--under-min-isr-partitions") == {("strict", p) for p in range(3)}
    offline = {("solo", p) for p, v in solo.items() if v["replicas"] == [victim]}
    assert offline, "broker %d leads no solo partition: %s" % (victim, solo)
    assert filtered(c, "--unavailable-partitions") == offline
    assert filtered(c, "--under-replicated-partitions", pattern="ord*") == \
        {x for x in under if x[0] == "orders"}
    m = scrape(c.wait_leader())
    assert m["keel_controller_FencedBrokerCount"] == 1
    assert m["keel_controller_ActiveBrokerCount"] == 2
    assert m["keel_controller_UnderReplicatedPartitions"] == len(under)
    assert m["keel_controller_UnderMinIsrPartitionCount"] == 3
    assert m["keel_controller_OfflinePartitionsCount"] == len(offline)

    brokers[victim].start()
    wait_partitions(c, "orders", full, 30, "orders full again")
    wait_partitions(c, "strict", full, 30, "strict full again")
    assert filtered(c, "--under-replicated-partitions") == set()
    assert filtered(c, "--unavailable-partitions") == set()


def test_zookeeper_view_for_kafka_tools(kafka):
    """What Kafka's ZooKeeper-mode tools read: /cluster/id, /controller (no
    broker named as controller: keel's is a server), /brokers/ids/N present
    while the broker is alive and gone once it is fenced; writes under /admin
    are refused, never accepted silently."""
    c, brokers = kafka
    zk = kazoo(c)
    try:
        zk.sync("/")
        cid = json.loads(zk.get("/cluster/id")[0])
        assert cid["version"] == "1" and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", cid["id"])
        ctl = json.loads(zk.get("/controller")[0])
        assert ctl["brokerid"] == -1
        assert ctl["keel_controller_id"] == c.wait_leader().id
        mntr = four_letter(c.wait_leader().client_addr, "mntr")
        assert "keel_controller_active\t1\n" in mntr and "keel_active_broker_count\t3\n" in mntr
        assert not zk.exists("/brokers/ids/-1")
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        for path in ("/admin/reassign_partitions", "/admin/delete_topics/orders",
                     "/admin/preferred_replica_election"):
            with pytest.raises(NoAuthError):
                zk.create(path, b'{"version":1,"partitions":[]}', makepath=True)
            assert not zk.exists(path)
        brokers[3].kill()
        c.wait(lambda: zk.sync("/") is not None and not zk.exists("/brokers/ids/3"),
               timeout=SESSION_TIMEOUT_S + 10, what="/brokers/ids/3 gone after fencing")
        brokers[3].start()
        c.wait(lambda: zk.sync("/") is not None and zk.exists("/brokers/ids/3"),
               timeout=20, what="/brokers/ids/3 back")
        # The id stays the same across controllers.
        c.wait_leader().kill()
        c.wait_leader()
        zk.sync("/")
        assert json.loads(zk.get("/cluster/id")[0])["id"] == cid["id"]
    finally:
        zk.stop()


def test_topic_cli_validation(kafka):
    """Usage errors exit 2 and say what is wrong; errors name their topic or
    config key; `--` lets a topic name start with '-'; --help exits 0."""
    c, _ = kafka
    hosts = c.connect_string()
    for action in ("create", "delete", "list", "describe"):
        rc, out, _ = keel("topics", action, "--help")
        assert rc == 0 and out.startswith("usage: keel topics"), (action, rc)
    rc, out, _ = keel("brokers", "--help")
    assert rc == 0 and "keel brokers" in out
    rc, _, err = keel("topics", "create", "t", "--partitions", "three",
                      "--replication-factor", "1", "--servers", hosts)
    assert rc == 2 and "'three'" in err, err
    rc, _, err = keel("topics", "create", "t", "--partitions", "1", "--replication-factor",
                      "0", "--servers", hosts)
    assert rc == 2 and "'t'" in err and "at least 1" in err, err
    rc, out, err = keel("topics", "create", "--partitions", "1", "--replication-factor", "1",
                        "--servers", hosts, "--", "-dash")
    assert rc == 0 and out.strip() == "Created topic -dash.", err
    rc, out, err = keel("topics", "describe", "--servers", hosts, "--", "-dash")
    assert rc == 0 and "Topic: -dash\t" in out, err
    m = re.search(r"TopicId: (\S+)", out)
    assert m and not m.group(1).startswith("-")
    rc, _, err = keel("topics", "create", "a.b", "--partitions", "1", "--replication-factor",
                      "1", "--servers", hosts)
    assert rc == 0, err
    rc, _, err = keel("topics", "create", "a_b", "--partitions", "1", "--replication-factor",
                      "1", "--servers", hosts)
    assert rc == 1 and "'a_b'" in err and "a.b" in err, err
    rc, _, err = keel("topics", "create", "c", "--partitions", "1", "--replication-factor",
                      "1", "--config", "retention.msx=5", "--servers", hosts)
    assert rc == 1 and "retention.msx" in err and "INVALID_CONFIG" in err, err
    rc, _, err = keel("topics", "describe", "nope*", "--servers", hosts)
    assert rc == 1 and "nope*" in err, err


def test_broker_start_messages(kafka):
    """A restarted broker announces only the roles it holds once caught up
    (not those it held on the way through the log); a broker whose id a live
    broker holds says so and exits 1; a broker that cannot reach any server
    says so plainly."""
    c, brokers = kafka
    create_topic(c, "moves", 3, 2)
    # Move leaderships around so that the log holds roles broker 1 no longer has.
    brokers[1].kill()
    wait_partitions(c, "moves", lambda ps: all(p["leader"] != 1 for p in ps.values()),
                    SESSION_TIMEOUT_S + 10, "broker 1 leads nothing")
    brokers[1].start()
    wait_partitions(c, "moves", full, 30, "moves full again")
    c.wait(lambda: "caught up with the metadata log" in brokers[1].log().split(
        "keel broker 1 (incarnation")[-1], timeout=15, what="broker 1 caught up")
    last_run = role_lines(brokers[1])[-1]
    seen = [(t, p) for _, t, p, _ in last_run]
    assert len(seen) == len(set(seen)), "a partition announced twice while replaying: %s" % (
        last_run,)
    mine = {p for p, v in describe_topic(c, "moves").items() if 1 in v["replicas"]}
    assert {p for t, p in seen if t == "moves"} >= mine

    # Another process with broker 2's id, while broker 2 lives.
    dup_dir = os.path.join(c.root, "dup2")
    out = subprocess.run([KEEL, "broker", "--id", "2", "--servers", c.connect_string(),
                          "--data-dir", dup_dir, "--port", str(free_ports(1)[0]),
                          "--duplicate-id-timeout-ms", "3000"] + BROKER_ARGS + c.cli_auth(),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1, out.stderr
    assert "broker id 2 is taken by another live broker" in out.stderr
    assert brokers_state(c)[2][1] == "active"

    # No server answers.
    dead = "127.0.0.1:%d" % free_ports(1)[0]
    proc = subprocess.Popen([KEEL, "broker", "--id", "9", "--servers", dead, "--data-dir",
                             os.path.join(c.root, "lonely"), "--port",
                             str(free_ports(1)[0])] + BROKER_ARGS,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    want = "cannot reach the quorum at %s" % dead
    lines = []

    def read():
        for line in proc.stdout:
            lines.append(line)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        c.wait(lambda: any(want in line for line in lines), timeout=30,
               what="the broker saying it cannot reach the quorum")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        reader.join(20)
    text = "".join(lines)
    assert want in text, text


def test_configs_and_unregister(kafka):
    """keel configs describe|alter for a topic, a broker and the cluster
    default (unknown names refused, naming the key); keel brokers unregister
    removes a dead broker from `keel brokers` and /brokers/ids."""
    c, brokers = kafka
    hosts = c.connect_string()
    create_topic(c, "cfg", 1, 1)

    def describe_cfg(*what):
        rc, out, err = keel("configs", "describe", *what, "--servers", hosts)
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("Dynamic configs for ")
        return dict(l.strip().split("=", 1) for l in lines[1:])

    assert describe_cfg("--topic", "cfg") == {}
    rc, out, err = keel("configs", "alter", "--topic", "cfg", "--add-config",
                        "retention.ms=60000,min.insync.replicas=1", "--servers", hosts)
    assert rc == 0 and "Completed updating config for topic cfg." in out, err
    assert describe_cfg("--topic", "cfg") == {"retention.ms": "60000",
                                              "min.insync.replicas": "1"}
    rc, _, err = keel("configs", "alter", "--topic", "cfg", "--delete-config",
                      "min.insync.replicas", "--servers", hosts)
    assert rc == 0, err
    assert describe_cfg("--topic", "cfg") == {"retention.ms": "60000"}
    rc, _, err = keel("configs", "alter", "--cluster", "--add-config",
                      "unclean.leader.election.enable=false", "--servers", hosts)
    assert rc == 0, err
    assert describe_cfg("--cluster") == {"unclean.leader.election.enable": "false"}
    rc, _, err = keel("configs", "alter", "--broker", "2", "--add-config",
                      "message.max.bytes=2000000", "--servers", hosts)
    assert rc == 0, err
    assert describe_cfg("--broker", "2") == {"message.max.bytes": "2000000"}
    rc, _, err = keel("configs", "alter", "--topic", "cfg", "--add-config", "retention.mss=1",
                      "--servers", hosts)
    assert rc == 1 and "retention.mss" in err and "INVALID_CONFIG" in err, err
    rc, _, err = keel("configs", "alter", "--topic", "nope", "--add-config", "retention.ms=1",
                      "--servers", hosts)
    assert rc == 1 and "topic nope" in err, err
    rc, _, err = keel("configs", "describe", "--topic", "nope", "--servers", hosts)
    assert rc == 1 and "'nope'" in err, err
    rc, _, err = keel("configs", "describe", "--broker", "x", "--servers", hosts)
    assert rc == 2, err
    rc, out, _ = keel("configs", "alter", "--help")
    assert rc == 0 and out.startswith("usage: keel configs")

    brokers[3].kill()
    c.wait(lambda: brokers_state(c).get(3, (0, ""))[1] == "fenced", timeout=SESSION_TIMEOUT_S + 10,
           what="broker 3 fenced")
    # Only an operator or a broker of the cluster may unregister one.
    rc, out, err = keel("brokers", "unregister", "3", "--servers", hosts)
    assert rc == 1 and 3 in brokers_state(c), out + err
    rc, out, err = keel("brokers", "unregister", "3", "--servers", hosts, *c.cli_auth())
    assert rc == 0 and out.strip() == "Unregistered broker 3.", err
    assert 3 not in brokers_state(c)
    zk = kazoo(c)
    try:
        zk.sync("/")
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
    finally:
        zk.stop()
    rc, _, err = keel("brokers", "unregister", "3", "--servers", hosts, *c.cli_auth())
    assert rc == 1 and "broker 3" in err and "BROKER_ID_NOT_REGISTERED" in err, err


@pytest.fixture
def kafka_manual(cluster_factory, request):
    """Like `kafka`, with no automatic preferred-leader rebalance, so that
    on-demand elections are what moves leaders."""
    args = [a if a != "2000" else "0" for a in SERVER_ARGS]
    c = cluster_factory(3, server_args=args)
    brokers = {i: Broker(c, i, rack="r%d" % i) for i in (1, 2, 3)}
    c.start()
    c.wait_leader()
    for b in brokers.values():
        b.start()
    wait_active(c, (1, 2, 3))
    yield c, brokers
    for b in brokers.values():
        b.kill()


def test_add_partitions_and_leader_elections(kafka_manual):
    """keel topics alter --partitions grows a topic (placement continues the
    stripe; explicit assignments checked; brokers take the new roles; the
    ZooKeeper view lists them). keel leader-election: preferred moves
    leadership back to the first replica once it is in sync; unclean
    elects an offline partition's live replica."""
    c, brokers = kafka_manual
    hosts = c.connect_string()
    create_topic(c, "grow", 2, 2)
    rc, out, err = keel("topics", "alter", "grow", "--partitions", "4", "--servers", hosts)
    assert rc == 0 and out.strip() == "Topic grow now has 4 partitions.", err
    parts = wait_partitions(c, "grow", lambda p: len(p) == 4 and full(p), 15, "4 partitions")
    assert all(len(p["replicas"]) == 2 for p in parts.values())
    rc, _, err = keel("topics", "alter", "grow", "--partitions", "3", "--servers", hosts)
    assert rc == 1 and "'grow'" in err and "INVALID_PARTITIONS" in err, err
    rc, _, err = keel("topics", "alter", "grow", "--partitions", "5", "--replica-assignment",
                      "1:1", "--servers", hosts)
    assert rc == 1 and "INVALID_REPLICA_ASSIGNMENT" in err, err
    rc, _, err = keel("topics", "alter", "grow", "--partitions", "5", "--replica-assignment",
                      "3:2", "--servers", hosts)
    assert rc == 0, err
    parts = wait_partitions(c, "grow", lambda p: len(p) == 5, 15, "5 partitions")
    assert parts[4]["replicas"] == [3, 2] and parts[4]["leader"] == 3
    c.wait(lambda: re.search(r"leader of grow-4 at epoch 0", brokers[3].log()), timeout=10,
           what="broker 3 leads grow-4")
    zk = kazoo(c)
    try:
        zk.sync("/")
        assert sorted(json.loads(zk.get("/brokers/topics/grow")[0])["partitions"]) == \
            ["0", "1", "2", "3", "4"]
    finally:
        zk.stop()

    # Preferred election: the first replica of grow-4 (3) dies and returns.
    brokers[3].kill()
    wait_partitions(c, "grow", lambda p: p[4]["leader"] == 2, SESSION_TIMEOUT_S + 10,
                    "broker 2 leads grow-4")
    rc, out, _ = keel("leader-election", "--election-type", "preferred", "--topic", "grow",
                      "--partition", "4", "--servers", hosts, *c.cli_auth())
    assert rc == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in out, out
    brokers[3].start()
    # Each partition's leader adds it back once it has caught up there.
    wait_partitions(c, "grow", lambda p: all(3 in x["isr"] for x in p.values()
                                             if 3 in x["replicas"]), 30, "broker 3 back in sync")
    assert describe_topic(c, "grow")[4]["leader"] == 2  # nothing moved it back on its own
    rc, out, err = keel("leader-election", "--election-type", "preferred",
                        "--all-topic-partitions", "--servers", hosts, *c.cli_auth())
    assert rc == 0, out + err
    assert "Successfully completed leader election (PREFERRED) for partition grow-4" in out
    assert describe_topic(c, "grow")[4]["leader"] == 3

    # Unclean: a single-replica partition whose broker is gone, and a
    # two-replica one where only the replica out of the ISR comes back.
    rc, _, err = keel("topics", "create", "dirty", "--partitions", "1",
                      "--replication-factor", "2", "--servers", hosts)
    assert rc == 0, err
    d = wait_partitions(c, "dirty", full, 15, "dirty full")[0]
    first, second = d["replicas"]
    brokers[second].kill()
    wait_partitions(c, "dirty", lambda p: p[0]["isr"] == [first], SESSION_TIMEOUT_S + 10,
                    "ISR shrinks to the first replica")
    brokers[first].kill()
    wait_partitions(c, "dirty", lambda p: p[0]["leader"] == -1, SESSION_TIMEOUT_S + 10,
                    "dirty offline")
    brokers[second].start()
    wait_active(c, (second,))
    assert describe_topic(c, "dirty")[0]["leader"] == -1
    rc, out, _ = keel("leader-election", "--election-type", "unclean", "--all-topic-partitions",
                      "--servers", hosts, *c.cli_auth())
    assert rc == 1
    rc, out, err = keel("leader-election", "--election-type", "unclean", "--topic", "dirty",
                        "--partition", "0", "--servers", hosts, *c.cli_auth())
    assert rc == 0 and "Successfully completed leader election (UNCLEAN)" in out, out + err
    d = wait_partitions(c, "dirty", lambda p: p[0]["leader"] == second, 10, "unclean leader")[0]
    assert d["isr"] == [second]
    rc, out, _ = keel("leader-election", "--election-type", "unclean", "--topic", "dirty",
                      "--partition", "0", "--servers", hosts, *c.cli_auth())
    assert rc == 0 and "Valid replica already elected for partition dirty-0" in out, out
    rc, out, _ = keel("leader-election", "--election-type", "preferred", "--topic", "nope",
                      "--servers", hosts, *c.cli_auth())
    assert rc == 1
