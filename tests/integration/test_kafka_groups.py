"""Consumer groups against `keel broker` (docs/groups.md): 3 servers and 3
brokers as real processes; kcat -G, confluent-kafka and kafka-python
consumers in groups, committed offsets, a member killed with SIGKILL, and a
coordinator restart that keeps every committed offset.

One cluster serves the module; each test uses its own topic and group.
The cluster default `offsets.topic.replication.factor` is 1 here: until
partition replication lands, a moved offsets partition would start empty
(see test_coordinator_failover_to_another_broker, which needs it).
"""
import os
import subprocess
import sys
import time
import uuid

import pytest

from harness import Cluster
from kafka_fixture import running_brokers
from test_controller import SERVER_ARGS, Broker, describe_topic, keel, wait_active
from test_kafka_clients import KCAT, create

PY = "/usr/bin/python3"
SESSION_MS = 6000
SEGMENT_BYTES = 16384  # small offsets segments: compaction runs in the tests


@pytest.fixture(scope="module")
def gc():
    """(cluster, {id: Broker}, bootstrap) with 3 active brokers."""
    def setup(c):
        rc, out, err = keel("configs", "alter", "--cluster", "--add-config",
                            "offsets.topic.replication.factor=1,offsets.topic.num.partitions=6,"
                            "offsets.topic.segment.bytes=%d" % SEGMENT_BYTES,
                            "--servers", c.connect_string())
        assert rc == 0, (out, err)
    with running_brokers(setup=setup) as k:
        yield k


def produce(boot, topic, values, partitions):
    """Sends values round-robin over the partitions, acks=all; returns
    {partition: [values in order]}."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5})
    errors = []
    by_part = {}
    for i, v in enumerate(values):
        part = i % partitions
        by_part.setdefault(part, []).append(v)
        p.produce(topic, v.encode(), partition=part,
                  on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(30) == 0
    assert errors == []
    return by_part


def consumer(boot, group, **extra):
    from confluent_kafka import Consumer
    conf = {"bootstrap.servers": boot, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500}
    conf.update(extra)
    return Consumer(conf)


def poll_until(cons, want, timeout=60):
    """Polls until `want` messages arrived (or the time is up); returns
    [(partition, offset, value)]."""
    got = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append((m.partition(), m.offset(), m.value().decode()))
    return got


def committed(boot, group, topic, partitions, timeout=30):
    """The group's committed offsets; retries while the coordinator moves or
    loads (librdkafka's committed() gives up on COORDINATOR_NOT_AVAILABLE)."""
    from confluent_kafka import KafkaException, TopicPartition
    deadline = time.time() + timeout
    while True:
        cons = consumer(boot, group)
        try:
            tps = cons.committed([TopicPartition(topic, p) for p in range(partitions)],
                                 timeout=30)
            return {tp.partition: tp.offset for tp in tps}
        except KafkaException:
            if time.time() > deadline:
                raise
            time.sleep(0.5)
        finally:
            cons.close()


# ---- confluent-kafka ----

def test_confluent_consumer_auto_commit_then_resume(gc):
    c, brokers, boot = gc
    topic, group = "auto-" + uuid.uuid4().hex[:6], "g-auto"
    create(c, topic, partitions=3)
    first = produce(boot, topic, ["a%03d" % i for i in range(90)], 3)
    cons = consumer(boot, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})
    cons.subscribe([topic])
    got = poll_until(cons, 90)
    assert sorted(v for _, _, v in got) == sorted(v for vs in first.values() for v in vs)
    for part, vs in first.items():
        assert [v for p, _, v in got if p == part] == vs
    time.sleep(1)  # let an auto commit go out after the last message
    cons.close()   # commits the final positions too
    assert committed(boot, group, topic, 3) == {0: 30, 1: 30, 2: 30}
    # A new member of the group starts where the group stopped.
    produce(boot, topic, ["b%03d" % i for i in range(30)], 3)
    cons = consumer(boot, group)
    cons.subscribe([topic])
    got = poll_until(cons, 30)
    cons.close()
    assert sorted(v for _, _, v in got) == ["b%03d" % i for i in range(30)]


def test_confluent_manual_commit_resumes_exactly(gc):
    c, brokers, boot = gc
    topic, group = "manual-" + uuid.uuid4().hex[:6], "g-manual"
    create(c, topic, partitions=2)
    produce(boot, topic, ["m%03d" % i for i in range(100)], 2)
    cons = consumer(boot, group, **{"enable.auto.commit": False})
    cons.subscribe([topic])
    got = poll_until(cons, 100)
    assert len(got) == 100
    # Commit only the first 20 of each partition.
    from confluent_kafka import TopicPartition
    res = cons.commit(offsets=[TopicPartition(topic, 0, 20), TopicPartition(topic, 1, 20)],
                      asynchronous=False)
    assert all(tp.error is None for tp in res), res
    cons.close()
    assert committed(boot, group, topic, 2) == {0: 20, 1: 20}
    cons = consumer(boot, group, **{"enable.auto.commit": False})
    cons.subscribe([topic])
    again = poll_until(cons, 60)
    cons.close()
    assert sorted((p, o) for p, o, _ in again) == \
        sorted((p, o) for p in (0, 1) for o in range(20, 50))


# ---- kcat and kafka-python ----

def test_kcat_balanced_consumer_commits(gc):
    c, brokers, boot = gc
    topic, group = "kcatg-" + uuid.uuid4().hex[:6], "g-kcat"
    create(c, topic, partitions=3)
    produce(boot, topic, ["k%03d" % i for i in range(60)], 3)
    out = subprocess.run([KCAT, "-b", boot, "-G", group, topic, "-c", "60", "-f", "%p %o %s\n",
                          "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100",
                          "-X", "session.timeout.ms=%d" % SESSION_MS],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.decode().split()
    values = sorted(lines[2::3])
    assert values == ["k%03d" % i for i in range(60)]
    assert committed(boot, group, topic, 3) == {0: 20, 1: 20, 2: 20}


def test_kafka_python_consumer_group(gc):
    from kafka import KafkaConsumer
    c, brokers, boot = gc
    topic, group = "kpy-" + uuid.uuid4().hex[:6], "g-kpy"
    create(c, topic, partitions=2)
    produce(boot, topic, ["p%03d" % i for i in range(50)], 2)
    cons = KafkaConsumer(topic, group_id=group, bootstrap_servers=boot.split(","),
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         consumer_timeout_ms=15000, session_timeout_ms=SESSION_MS,
                         heartbeat_interval_ms=500)
    got = []
    for m in cons:
        got.append(m.value.decode())
        if len(got) == 50:
            break
    cons.commit()
    cons.close()
    assert sorted(got) == ["p%03d" % i for i in range(50)]
    assert committed(boot, group, topic, 2) == {0: 25, 1: 25}


# ---- members dying ----

MEMBER = r'''
import os, sys
from confluent_kafka import Consumer
boot, group, topic, name, stop = sys.argv[1:6]
c = Consumer({"bootstrap.servers": boot, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": %d,
              "heartbeat.interval.ms": 500, "client.id": name})
def assigned(cons, parts):
    print("A", " ".join(str(p.partition) for p in parts), flush=True)
c.subscribe([topic], on_assign=assigned)
while not os.path.exists(stop):
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    print("R", m.partition(), m.offset(), m.value().decode(), flush=True)
    try:
        c.commit(message=m, asynchronous=False)
        print("C", m.partition(), m.offset(), flush=True)
    except Exception as e:
        print("E", m.partition(), m.offset(), e, flush=True)
c.close()
''' % SESSION_MS


class Member:
    def __init__(self, root, boot, group, topic, name):
        self.name = name
        self.stop_path = os.path.join(root, "stop-" + name)
        self.out_path = os.path.join(root, "member-" + name + ".out")
        script = os.path.join(root, "member.py")
        with open(script, "w") as f:
            f.write(MEMBER)
        self.out = open(self.out_path, "wb")
        self.proc = subprocess.Popen([PY, script, boot, group, topic, name, self.stop_path],
                                     stdout=self.out, stderr=subprocess.STDOUT)

    def lines(self):
        with open(self.out_path, "rb") as f:
            return [l.split() for l in f.read().decode(errors="replace").splitlines()]

    def reads(self):
        """[(partition, offset, value, time-less)] in order."""
        return [(int(l[1]), int(l[2]), l[3]) for l in self.lines() if l and l[0] == "R"]

    def commits(self):
        return [(int(l[1]), int(l[2])) for l in self.lines() if l and l[0] == "C"]

    def assignments(self):
        return [[int(x) for x in l[1:]] for l in self.lines() if l and l[0] == "A"]

    def stop(self):
        open(self.stop_path, "w").close()
        try:
            self.proc.wait(60)
        finally:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()


def test_three_members_one_killed_nothing_committed_read_twice(gc):
    c, brokers, boot = gc
    topic, group = "members-" + uuid.uuid4().hex[:6], "g-members"
    create(c, topic, partitions=6)
    members = [Member(c.root, boot, group, topic, n) for n in ("m1", "m2", "m3")]
    try:
        # All three share the partitions.
        c.wait(lambda: all(m.assignments() and len(m.assignments()[-1]) == 2
                           for m in members),
               timeout=60, what="3 members with 2 partitions each", interval=0.2)
        produced = produce(boot, topic, ["v%04d" % i for i in range(300)], 6)
        victim = members[0]
        victim_parts = set(victim.assignments()[-1])
        c.wait(lambda: len(victim.commits()) > 0, timeout=60, what="the victim commits")
        victim.kill()  # SIGKILL: no LeaveGroup, the session must expire
        killed_at = time.time()
        more = produce(boot, topic, ["w%04d" % i for i in range(300)], 6)
        for p, vs in more.items():
            produced[p] += vs
        survivors = members[1:]

        def taken():
            parts = set()
            for m in survivors:
                if m.assignments():
                    parts |= set(m.assignments()[-1])
            return parts == set(range(6))
        c.wait(taken, timeout=SESSION_MS / 1000 + 30, what="survivors take every partition",
               interval=0.1)
        took = time.time() - killed_at
        print("survivors held all 6 partitions %.1f s after the kill" % took)
        assert took < SESSION_MS / 1000 + 15

        def all_read():
            seen = set()
            for m in members:
                seen |= {v for _, _, v in m.reads()}
            return len(seen) == 600
        c.wait(all_read, timeout=90, what="all 600 records read", interval=0.2)
        for m in survivors:
            m.stop()
    finally:
        for m in members:
            m.kill()
    # Nothing skipped: every record was read, in order within a partition per member.
    reads = [(m.name, r) for m in members for r in m.reads()]
    assert {r[2] for _, r in reads} == {v for vs in produced.values() for v in vs}
    # Nothing committed is read twice: a record is read again only if its
    # commit was never acknowledged (the victim's last one, or a commit that
    # raced a rebalance and failed).
    acked = {(m.name, p, o) for m in members for p, o in m.commits()}
    first_reader = {}
    for m in members:
        for p, o, v in m.reads():
            key = (p, o)
            if key in first_reader:
                prev = first_reader[key]
                assert (prev, p, o) not in acked, \
                    "offset %d of partition %d was committed by %s and read again by %s" % (
                        o, p, prev, m.name)
            else:
                first_reader[key] = m.name
    # And the group restarts from its committed offsets.
    final = committed(boot, group, topic, 6)
    assert final == {p: len(vs) for p, vs in produced.items()}, (final, victim_parts)


# ---- the coordinator ----

def java_hash(s):
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        for unit in ([ord(ch)] if ord(ch) < 0x10000 else
                     [0xd800 + ((ord(ch) - 0x10000) >> 10), 0xdc00 + ((ord(ch) - 0x10000) & 0x3ff)]):
            h = (h * 31 + unit) & 0xffffffff
    return h - (1 << 32) if h >= (1 << 31) else h


def coordinator_of(c, group):
    parts = describe_topic(c, "__consumer_offsets")
    h = java_hash(group)
    p = 0 if h == -(1 << 31) else abs(h) % len(parts)
    return parts[p]["leader"], p


def test_coordinator_restart_keeps_committed_offsets(gc):
    c, brokers, boot = gc
    topic, group = "coord-" + uuid.uuid4().hex[:6], "g-coord"
    create(c, topic, partitions=3)
    produce(boot, topic, ["c%03d" % i for i in range(90)], 3)
    cons = consumer(boot, group, **{"enable.auto.commit": False})
    cons.subscribe([topic])
    assert len(poll_until(cons, 90)) == 90
    from confluent_kafka import TopicPartition
    cons.commit(offsets=[TopicPartition(topic, p, 10 + p) for p in range(3)], asynchronous=False)
    cons.close()
    leader, part = coordinator_of(c, group)
    b = brokers[leader]
    b.kill()  # SIGKILL
    b.start()
    c.wait(lambda: committed(boot, group, topic, 3) == {0: 10, 1: 11, 2: 12}, timeout=60,
           what="committed offsets back after the coordinator restarted", interval=0.5)


# ---- keel groups ----

def groups_cli(*args):
    return keel("groups", *args)


def describe_rows(text):
    """{(topic, partition): (current, log_end, lag, consumer)} from describe."""
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 9 and f[0] != "GROUP" and f[2].isdigit():
            rows[(f[1], int(f[2]))] = (f[3], f[4], f[5], f[6])
    return rows


def test_groups_cli_list_describe_reset_delete(gc):
    c, brokers, boot = gc
    topic, group = "cli-" + uuid.uuid4().hex[:6], "g-cli"
    create(c, topic, partitions=2)
    produce(boot, topic, ["x%03d" % i for i in range(40)], 2)
    from confluent_kafka import TopicPartition
    cons = consumer(boot, group, **{"enable.auto.commit": False, "client.id": "cli-client"})
    cons.subscribe([topic])
    assert len(poll_until(cons, 40)) == 40
    cons.commit(offsets=[TopicPartition(topic, 0, 15), TopicPartition(topic, 1, 5)],
                asynchronous=False)
    # While the member is there: describe shows it, reset and delete refuse.
    rc, out, err = groups_cli("describe", group, "--brokers", boot)
    assert rc == 0, err
    assert "Group %s is Stable with 1 member" % group in out, out
    rows = describe_rows(out)
    member_id = rows[(topic, 0)][3]
    assert member_id.startswith("cli-client-"), out  # member ids: client id + suffix
    assert rows[(topic, 0)] == ("15", "20", "5", member_id), out
    assert rows[(topic, 1)] == ("5", "20", "15", member_id), out
    rc, out, err = groups_cli("list", "--brokers", boot)
    assert rc == 0, err
    assert "%s\tStable" % group in out.splitlines(), out
    rc, out, err = groups_cli("reset-offsets", group, "--topic", topic, "--to-earliest",
                              "--brokers", boot)
    assert rc == 1 and "stop its consumers first" in err, (out, err)
    rc, out, err = groups_cli("delete", group, "--brokers", boot)
    assert rc == 1 and "NON_EMPTY_GROUP" in err, (out, err)
    cons.close()
    # Empty now: reset to an offset (clamped to the log end), then to the earliest.
    rc, out, err = groups_cli("reset-offsets", group, "--topic", topic, "--to-offset", "12",
                              "--brokers", boot)
    assert rc == 0, err
    assert committed(boot, group, topic, 2) == {0: 12, 1: 12}
    rc, out, err = groups_cli("reset-offsets", group, "--topic", topic, "--to-latest",
                              "--brokers", boot)
    assert rc == 0, err
    assert committed(boot, group, topic, 2) == {0: 20, 1: 20}
    rc, out, err = groups_cli("describe", group, "--brokers", boot)
    assert rc == 0, err
    assert "is Empty with 0 members" in out, out
    assert describe_rows(out)[(topic, 1)] == ("20", "20", "0", "-"), out
    rc, out, err = groups_cli("delete", group, "--brokers", boot)
    assert rc == 0 and "Deleted group %s" % group in out, (out, err)
    assert committed(boot, group, topic, 2) == {0: -1001, 1: -1001}
    rc, out, err = groups_cli("describe", group, "--brokers", boot)
    assert rc == 0 and "is Dead" in out, (out, err)


def test_offsets_partition_is_compacted_and_still_loads(gc):
    c, brokers, boot = gc
    topic, group = "compact-" + uuid.uuid4().hex[:6], "g-compact"
    create(c, topic, partitions=1)
    produce(boot, topic, ["z%03d" % i for i in range(10)], 1)
    from confluent_kafka import TopicPartition
    cons = consumer(boot, group, **{"enable.auto.commit": False})
    cons.subscribe([topic])
    assert len(poll_until(cons, 10)) == 10
    # ~100 bytes a commit record: 800 commits fill several 16 KiB segments.
    started = time.time()
    for i in range(800):
        cons.commit(offsets=[TopicPartition(topic, 0, i % 10)], asynchronous=False)
    took = time.time() - started
    print("800 synchronous commits in %.2f s (%.2f ms each)" % (took, took / 0.8))
    cons.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    cons.close()
    leader, part = coordinator_of(c, group)
    b = brokers[leader]
    pdir = os.path.join(b.data_dir, "__consumer_offsets-%d" % part)

    def segments():
        return sorted(f for f in os.listdir(pdir) if f.endswith(".log"))
    # The snapshot is written and, once durable, the prefix is cut.
    c.wait(lambda: len(segments()) <= 3 and segments()[0] != "%020d.log" % 0, timeout=30,
           what="old offsets segments deleted (%s)" % pdir, interval=0.2)
    size = sum(os.path.getsize(os.path.join(pdir, f)) for f in segments())
    assert size <= 3 * SEGMENT_BYTES + 4096, size
    b.kill()
    b.start()
    c.wait(lambda: committed(boot, group, topic, 1) == {0: 7}, timeout=60,
           what="the last commit survives compaction and a restart", interval=0.5)


# ---- kafkajs ----

KAFKAJS_DIR = os.path.join(os.path.dirname(__file__), "kafkajs")


@pytest.mark.skipif(not os.path.isdir(os.path.join(KAFKAJS_DIR, "node_modules", "kafkajs")),
                    reason="kafkajs not installed: npm install in tests/integration/kafkajs "
                           "(scripts/install-deps.sh does it when the npm registry is reachable)")
def test_kafkajs_consumer_run(gc):
    c, brokers, boot = gc
    topic, group = "kjs-" + uuid.uuid4().hex[:6], "g-kafkajs"
    create(c, topic, partitions=3)
    produce(boot, topic, ["j%03d" % i for i in range(60)], 3)
    out = subprocess.run(["node", os.path.join(KAFKAJS_DIR, "consume.js"), boot, group, topic,
                          "60"], capture_output=True, timeout=120)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    lines = [tuple(l.split()) for l in out.stdout.decode().splitlines()]
    # Every record once; a record handed out again after a rebalance (its
    # commit not yet out: at-least-once) is the same record at the same
    # offset, never another one.
    assert sorted({v for _, _, v in lines}) == ["j%03d" % i for i in range(60)], lines
    assert len({(p, o) for p, o, _ in lines}) == 60, lines
    assert committed(boot, group, topic, 3) == {0: 20, 1: 20, 2: 20}


# ---- coordinator failover across brokers ----

def test_coordinator_failover_to_another_broker():
    c = Cluster(3, server_args=SERVER_ARGS)
    brokers = {i: Broker(c, i) for i in (1, 2, 3)}
    try:
        c.start()
        c.wait_leader()
        for b in brokers.values():
            b.start()
        wait_active(c, (1, 2, 3))
        boot = ",".join("127.0.0.1:%d" % b.port for b in brokers.values())
        topic, group = "fo-t", "g-failover"
        create_on(c, brokers, topic, 3)
        produce(boot, topic, ["f%03d" % i for i in range(30)], 3)
        cons = consumer(boot, group, **{"enable.auto.commit": False})
        cons.subscribe([topic])
        assert len(poll_until(cons, 30)) == 30
        from confluent_kafka import TopicPartition
        cons.commit(offsets=[TopicPartition(topic, p, 4 + p) for p in range(3)],
                    asynchronous=False)
        cons.close()
        leader, part = coordinator_of(c, group)
        assert len(describe_topic(c, "__consumer_offsets")[part]["replicas"]) == 3
        brokers[leader].kill()  # for good: another replica must take over
        c.wait(lambda: describe_topic(c, "__consumer_offsets")[part]["leader"] not in
               (leader, -1), timeout=30, what="a new leader of the offsets partition")
        survivors = ",".join("127.0.0.1:%d" % b.port for i, b in brokers.items() if i != leader)
        c.wait(lambda: committed(survivors, group, topic, 3) == {0: 4, 1: 5, 2: 6},
               timeout=60, what="committed offsets on the new coordinator", interval=0.5)
    finally:
        for b in brokers.values():
            b.kill()
        c.cleanup()


def create_on(c, brokers, name, partitions):
    """create() for a cluster other than the module's."""
    c.kafka_brokers = brokers
    return create(c, name, partitions=partitions)
