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
from test_controller import SERVER_ARGS, Broker, describe_topic, keel, wait_active
from test_kafka_clients import KCAT, create, kcat

PY = "/usr/bin/python3"
SESSION_MS = 6000


@pytest.fixture(scope="module")
def gc():
    """(cluster, {id: Broker}, bootstrap) with 3 active brokers."""
    c = Cluster(3, server_args=SERVER_ARGS)
    brokers = {i: Broker(c, i) for i in (1, 2, 3)}
    ok = False
    try:
        c.start()
        c.wait_leader()
        rc, out, err = keel("configs", "alter", "--cluster", "--add-config",
                            "offsets.topic.replication.factor=1,offsets.topic.num.partitions=6",
                            "--servers", c.connect_string())
        assert rc == 0, (out, err)
        for b in brokers.values():
            b.start()
        wait_active(c, (1, 2, 3))
        c.kafka_brokers = brokers
        for b in brokers.values():
            c.wait(lambda: "3 brokers" in kcat("-b", "127.0.0.1:%d" % b.port, "-L"),
                   timeout=15, what="broker %d lists 3 brokers" % b.id)
        ok = True
        yield c, brokers, ",".join("127.0.0.1:%d" % b.port for b in brokers.values())
    finally:
        for b in brokers.values():
            b.kill()
            if not ok:
                print("---- broker %d ----\n%s" % (b.id, b.log()[-4000:]))
        c.cleanup()


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


def committed(boot, group, topic, partitions):
    from confluent_kafka import TopicPartition
    cons = consumer(boot, group)
    try:
        tps = cons.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
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
