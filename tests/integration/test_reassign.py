"""Integration tests of partition reassignment (KIP-455, docs/controller.md
"Reassignment"): real `keel server` and `keel broker` processes, the
`keel partitions reassign` CLI in kafka-reassign-partitions.sh's shape,
`keel topics describe`, and kazoo reading the ZooKeeper view."""
import json
import os
import re
import socket
import struct

import pytest
from kazoo.exceptions import NoAuthError

from test_controller import (SERVER_ARGS, Broker, brokers_state, describe_topic, keel, kazoo,
                             wait_active, wait_partitions)

SESSION_TIMEOUT_S = 3.0


@pytest.fixture
def kafka3(cluster_factory, request):
    """3 servers and 3 brokers, no automatic preferred-leader rebalance (so
    that only reassignment moves leaders)."""
    args = [a if a != "2000" else "0" for a in SERVER_ARGS]
    c = cluster_factory(3, server_args=args)
    brokers = {i: Broker(c, i) for i in (1, 2, 3)}
    c.start()
    c.wait_leader()
    for b in brokers.values():
        b.start()
    wait_active(c, (1, 2, 3))
    yield c, brokers
    for b in brokers.values():
        b.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for b in brokers.values():
            print("---- broker %d ----\n%s" % (b.id, "\n".join(b.log().splitlines()[-40:])))


def plan_file(c, name, moves):
    path = os.path.join(c.root, name)
    with open(path, "w") as f:
        json.dump({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": r} for t, p, r in moves]}, f)
    return path


def reassign(c, *args):
    return keel("partitions", "reassign", "--servers", c.connect_string(), *args)


def describe_lines(c, topic):
    rc, out, err = keel("topics", "describe", topic, "--servers", c.connect_string())
    assert rc == 0, err
    return [line for line in out.splitlines() if line.startswith("\tTopic:")]


def wait_fenced(c, bid):
    c.wait(lambda: brokers_state(c).get(bid, (0, ""))[1] == "fenced",
           timeout=SESSION_TIMEOUT_S + 15, what="broker %d fenced" % bid)


def topic_configs(c, topic):
    rc, out, err = keel("configs", "describe", "--topic", topic, "--servers", c.connect_string())
    assert rc == 0, err
    return dict(line.strip().split("=", 1) for line in out.splitlines()[1:] if "=" in line)


def test_reassign_execute_verify_cancel_list(kafka3):
    c, brokers = kafka3
    hosts = c.connect_string()
    rc, out, err = keel("topics", "create", "mv", "--partitions", "1", "--replication-factor",
                        "2", "--servers", hosts)
    assert rc == 0, err
    p = wait_partitions(c, "mv", lambda p: len(p[0]["isr"]) == 2, 15, "mv in sync")[0]
    a, b = p["replicas"]
    assert p["leader"] == a
    x = ({1, 2, 3} - {a, b}).pop()

    # The new replica's broker is down: the reassignment stays in progress.
    brokers[x].kill()
    wait_fenced(c, x)
    move = plan_file(c, "move.json", [("mv", 0, [b, x])])
    rc, out, err = reassign(c, "--reassignment-json-file", move, "--execute",
                            "--throttle", "1000000")
    assert rc == 0, out + err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    current = json.loads(lines[2])
    assert current["partitions"][0]["replicas"] == [a, b]
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert "Successfully started partition reassignments for mv-0" in out
    assert "The inter-broker throttle limit was set to 1000000 B/s" in out

    rc, out, err = keel("topics", "describe", "mv", "--servers", hosts)
    assert rc == 0 and "\tReplicationFactor: 2\t" in out, out + err
    line = describe_lines(c, "mv")[0]
    assert "Replicas: %d,%d,%d\t" % (b, x, a) in line, line
    assert line.endswith("\tAdding Replicas: %d\tRemoving Replicas: %d" % (x, a)), line
    assert describe_topic(c, "mv")[0]["leader"] == a  # the leader stays meanwhile
    # Not under-replicated: the replica being added is not missing (Kafka's rule).
    rc, out, err = keel("topics", "describe", "mv", "--under-replicated-partitions",
                        "--servers", hosts)
    assert rc == 0 and "Partition: 0" not in out, out + err

    rc, out, err = reassign(c, "--list")
    assert rc == 0 and "mv-0: replicas: %d,%d,%d. adding: %d. removing: %d." % (
        b, x, a, x, a) in out, out + err
    rc, out, err = reassign(c, "--reassignment-json-file", move, "--verify")
    assert rc == 0 and "Reassignment of partition mv-0 is still in progress." in out, out + err
    cfg = topic_configs(c, "mv")
    assert cfg["leader.replication.throttled.replicas"] == "0:%d,0:%d" % (a, b), cfg
    assert cfg["follower.replication.throttled.replicas"] == "0:%d" % x, cfg

    # The ZooKeeper view, as Kafka 2.x tools read it; /admin stays read-only.
    zk = kazoo(c)
    try:
        zk.sync("/")
        admin = json.loads(zk.get("/admin/reassign_partitions")[0])
        assert admin == {"version": 1, "partitions": [
            {"topic": "mv", "partition": 0, "replicas": [b, x]}]}
        topic = json.loads(zk.get("/brokers/topics/mv")[0])
        assert topic["partitions"]["0"] == [b, x, a]
        assert topic["adding_replicas"] == {"0": [x]}
        assert topic["removing_replicas"] == {"0": [a]}
        with pytest.raises(NoAuthError):
            zk.set("/admin/reassign_partitions", b'{"version":1,"partitions":[]}')
        with pytest.raises(NoAuthError):
            zk.create("/admin/preferred_replica_election", b"{}")
    finally:
        zk.stop()

    # x comes back and joins the ISR: the controller completes the move and
    # the leader (a, removed) hands over to b, the first target replica.
    brokers[x].start()
    wait_active(c, (x,))
    done = wait_partitions(c, "mv", lambda p: p[0]["replicas"] == [b, x], 30, "move completed")
    assert sorted(done[0]["isr"]) == sorted([b, x])
    assert done[0]["leader"] == b
    assert "Adding Replicas" not in describe_lines(c, "mv")[0]
    rc, out, err = reassign(c, "--reassignment-json-file", move, "--verify")
    assert rc == 0 and "Reassignment of partition mv-0 is completed." in out, out + err
    assert "Clearing topic-level throttles on topic mv" in out
    assert "throttled" not in " ".join(topic_configs(c, "mv")), topic_configs(c, "mv")
    rc, out, _ = reassign(c, "--list")
    assert rc == 0 and out.strip() == "No partition reassignments found."
    zk = kazoo(c)
    try:
        zk.sync("/")
        assert zk.exists("/admin/reassign_partitions") is None
    finally:
        zk.stop()

    # Cancel: a move onto a dead broker reverts to the replicas before it.
    brokers[a].kill()
    wait_fenced(c, a)
    back = plan_file(c, "back.json", [("mv", 0, [a, x])])
    rc, out, err = reassign(c, "--reassignment-json-file", back, "--execute")
    assert rc == 0, out + err
    wait_partitions(c, "mv", lambda p: p[0]["replicas"] == [a, x, b], 10, "move started")
    rc, out, err = reassign(c, "--reassignment-json-file", back, "--cancel")
    assert rc == 0 and "Successfully cancelled partition reassignments for: mv-0" in out, \
        out + err
    # (current - adding, in the current order: the target's first)
    p = wait_partitions(c, "mv", lambda p: p[0]["replicas"] == [x, b], 10, "cancel reverted")[0]
    assert "Adding Replicas" not in describe_lines(c, "mv")[0]
    assert p["leader"] in (b, x) and sorted(p["isr"]) == sorted([b, x])
    rc, out, err = reassign(c, "--reassignment-json-file", back, "--verify")
    assert rc == 1 and "There is no active reassignment of partition mv-0, but replica set " \
        "is %d,%d rather than %d,%d." % (x, b, a, x) in out, out + err

    # Refusals carry Kafka's error names; usage errors exit 2.
    bad = plan_file(c, "bad.json", [("mv", 0, [b, 9]), ("nope", 0, [1])])
    rc, out, err = reassign(c, "--reassignment-json-file", bad, "--execute")
    assert rc == 1, out + err
    assert re.search(r"mv-0: INVALID_REPLICA_ASSIGNMENT: .*not registered", out), out
    assert "nope-0: UNKNOWN_TOPIC_OR_PARTITION" in out, out
    rc, _, _ = reassign(c, "--reassignment-json-file", bad)
    assert rc == 2
    rc, _, err = reassign(c, "--reassignment-json-file", bad, "--verify", "--throttle", "5")
    assert rc == 2


def test_reassign_generate(kafka3):
    c, _ = kafka3
    rc, _, err = keel("topics", "create", "gen", "--partitions", "3", "--replication-factor",
                      "2", "--servers", c.connect_string())
    assert rc == 0, err
    wait_partitions(c, "gen", lambda p: len(p) == 3, 15, "gen created")
    path = os.path.join(c.root, "topics.json")
    with open(path, "w") as f:
        json.dump({"version": 1, "topics": [{"topic": "gen"}]}, f)
    rc, out, err = reassign(c, "--generate", "--topics-to-move-json-file", path,
                            "--broker-list", "2,3")
    assert rc == 0, out + err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert [p["partition"] for p in proposed] == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [2, 3] for p in proposed)
    rc, _, err = reassign(c, "--generate", "--topics-to-move-json-file", path,
                          "--broker-list", "3")
    assert rc == 1 and "replication factor 2" in err, err


# ---- Kafka clients: AlterPartitionReassignments (45) and
# ListPartitionReassignments (46), v0, spoken raw (Debian's confluent-kafka
# 1.7 and kafka-python 2.0.2 have neither) ----

def uvarint(n):
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def cstr(s):
    return uvarint(len(s) + 1) + s.encode()


def carray(items):
    """A compact array of encoded items (None: the null array)."""
    return uvarint(0) if items is None else uvarint(len(items) + 1) + b"".join(items)


def i32s(ids):
    return None if ids is None else [struct.pack(">i", i) for i in ids]


class KafkaReader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7f) << shift
            shift += 7
            if not b & 0x80:
                return n

    def str(self):
        n = self.uvarint()
        if n == 0:
            return None
        s = self.data[self.pos:self.pos + n - 1].decode()
        self.pos += n - 1
        return s

    def array(self, item):
        n = self.uvarint()
        return None if n == 0 else [item() for _ in range(n - 1)]

    def tags(self):
        assert self.uvarint() == 0


def kafka_call(port, api_key, body, corr=7):
    header = struct.pack(">hhih", api_key, 0, corr, 4) + b"test" + uvarint(0)
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        data = recv_exact(s, size)
    r = KafkaReader(data)
    assert r.take(">i") == corr
    r.tags()
    return r


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "the broker closed the connection"
        buf += chunk
    return buf


def alter_reassignments(port, topic, moves):
    """moves: [(partition, replicas or None)] -> {partition: (error, message)}"""
    parts = [struct.pack(">i", p) + carray(i32s(r)) + uvarint(0) for p, r in moves]
    body = struct.pack(">i", 30000) + carray([cstr(topic) + carray(parts) + uvarint(0)]) + \
        uvarint(0)
    r = kafka_call(port, 45, body)
    r.take(">i")
    top = (r.take(">h"), r.str())
    out = {}

    def partition():
        p, e, m = r.take(">i"), r.take(">h"), r.str()
        r.tags()
        out[p] = (e, m)

    def topic_result():
        assert r.str() == topic
        r.array(partition)
        r.tags()
    r.array(topic_result)
    r.tags()
    assert r.pos == len(r.data)
    return top, out


def list_reassignments(port):
    r = kafka_call(port, 46, struct.pack(">i", 30000) + uvarint(0) + uvarint(0))
    r.take(">i")
    top = (r.take(">h"), r.str())
    out = {}

    def topic_result():
        name = r.str()

        def partition():
            p = r.take(">i")
            ids = [r.array(lambda: r.take(">i")) for _ in range(3)]
            r.tags()
            out[(name, p)] = ids
        r.array(partition)
        r.tags()
    r.array(topic_result)
    r.tags()
    return top, out


def test_reassign_through_kafka_api(kafka3):
    c, brokers = kafka3
    rc, _, err = keel("topics", "create", "kv", "--partitions", "1", "--replication-factor", "2",
                      "--servers", c.connect_string())
    assert rc == 0, err
    p = wait_partitions(c, "kv", lambda p: len(p[0]["isr"]) == 2, 15, "kv in sync")[0]
    a, b = p["replicas"]
    x = ({1, 2, 3} - {a, b}).pop()
    brokers[x].kill()
    wait_fenced(c, x)
    port = brokers[b].port
    top, res = alter_reassignments(port, "kv", [(0, [b, x]), (3, [a]), (0, [])])
    assert top == (0, None)
    # partition 0 twice: the second (empty target) is refused; 3 is unknown
    assert res[3][0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert res[0][0] == 39 and res[0][1]  # the empty target: INVALID_REPLICA_ASSIGNMENT
    top, ongoing = list_reassignments(port)
    assert top == (0, None)
    assert ongoing == {("kv", 0): [[b, x, a], [x], [a]]}, ongoing
    top, res = alter_reassignments(port, "kv", [(0, None)])  # cancel
    assert res == {0: (0, None)}, res
    wait_partitions(c, "kv", lambda p: sorted(p[0]["replicas"]) == sorted([a, b]), 10,
                    "cancelled")
    top, res = alter_reassignments(port, "kv", [(0, None)])
    assert res[0][0] == 85  # NO_REASSIGNMENT_IN_PROGRESS
    assert list_reassignments(port) == ((0, None), {})


def filled_topic(c, brokers, name):
    """A 1-partition RF-1 topic holding ~600 KB: (its leader, another broker)."""
    import subprocess
    rc, out, err = keel("topics", "create", name, "--partitions", "1", "--replication-factor",
                        "1", "--servers", c.connect_string())
    assert rc == 0, err
    a = wait_partitions(c, name, lambda p: p[0]["leader"] > 0, 15, name + " led")[0]["leader"]
    boot = "127.0.0.1:%d" % brokers[a].port
    # Many small batches (batch.size), so that the throttle can pace them.
    payload = "".join("r%04d-%s\n" % (i, "x" * 1000) for i in range(600)).encode()
    out = subprocess.run(["kcat", "-b", boot, "-P", "-t", name, "-p", "0", "-X", "acks=all",
                          "-X", "batch.size=4000", "-X", "linger.ms=0"], input=payload,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return a, ({1, 2, 3} - {a}).pop()


def test_throttled_reassignment_copies_at_the_rate(kafka3):
    """--throttle reaches the new replica's broker: it fetches the moving
    partition at follower.replication.throttled.rate, so copying ~600 KB at
    150 KB/s takes at least ~3 s before the move completes (a lower bound
    only: load can only make it slower); --verify then clears the
    throttle."""
    import time
    c, brokers = kafka3
    a, x = filled_topic(c, brokers, "thr")
    move = plan_file(c, "thr.json", [("thr", 0, [a, x])])
    started = time.time()
    rc, out, err = reassign(c, "--reassignment-json-file", move, "--execute",
                            "--throttle", "150000")
    assert rc == 0, out + err
    p = wait_partitions(c, "thr", lambda p: p[0]["replicas"] == [a, x] and
                        sorted(p[0]["isr"]) == sorted([a, x]), 60, "thr moved")[0]
    took = time.time() - started
    assert took >= 3.0, "600 KB copied at 150 KB/s in %.1f s" % took
    assert "Adding" not in describe_lines(c, "thr")[0]
    assert p["leader"] == a
    rc, out, err = reassign(c, "--reassignment-json-file", move, "--verify")
    assert rc == 0 and "Clearing topic-level throttles on topic thr" in out, out + err
    assert "follower.replication.throttled.replicas" not in topic_configs(c, "thr")


def test_leader_throttle_copies_at_the_rate(kafka3):
    """leader.replication.throttled.rate on the leader broker and
    leader.replication.throttled.replicas on the topic (no follower-side
    throttle): the leader answers the new replica's fetches at the rate, so
    copying ~600 KB at 150 KB/s takes at least ~3 s (a lower bound: load
    only slows it), and the leader reports the bytes it sent under the
    throttle; the ISR members are never held back."""
    import time
    c, brokers = kafka3
    hosts = c.connect_string()
    a, x = filled_topic(c, brokers, "lthr")
    rc, out, err = keel("configs", "alter", "--broker", str(a), "--add-config",
                        "leader.replication.throttled.rate=150000", "--servers", hosts)
    assert rc == 0, out + err
    rc, out, err = keel("configs", "alter", "--topic", "lthr", "--add-config",
                        "leader.replication.throttled.replicas=0:%d" % a, "--servers", hosts)
    assert rc == 0, out + err
    assert "follower.replication.throttled.replicas" not in topic_configs(c, "lthr")
    move = plan_file(c, "lthr.json", [("lthr", 0, [a, x])])
    started = time.time()
    rc, out, err = reassign(c, "--reassignment-json-file", move, "--execute")
    assert rc == 0, out + err
    p = wait_partitions(c, "lthr", lambda p: p[0]["replicas"] == [a, x] and
                        sorted(p[0]["isr"]) == sorted([a, x]), 60, "lthr moved")[0]
    took = time.time() - started
    assert took >= 3.0, "600 KB copied at 150 KB/s in %.1f s" % took
    assert p["leader"] == a
    # The leader's totals at a clean stop name the throttled bytes.
    assert brokers[a].terminate() == 0
    m = re.search(r"sent (\d+) record bytes to followers under the leader throttle",
                  brokers[a].log())
    assert m and int(m.group(1)) >= 600 * 1000, brokers[a].log()[-2000:]
