"""Offset expiry (docs/groups.md "Offset retention"): with a short
`offsets.retention.ms` (cluster config), a group's committed offsets stay
while it has members, expire once it has been Empty that long, and the
expiry is written to __consumer_offsets as tombstones (below the high
watermark: on every in-sync replica), so that a coordinator that takes over
-- with expiry turned off, so it cannot expire them itself -- does not bring
them back. Offsets committed from outside the group protocol expire by
their commit time.

3 servers and 3 brokers; the offsets topic is replicated (RF 3).
"""
import time
import uuid

import pytest

from kafka_fixture import running_brokers
from test_controller import keel, wait_active
from test_kafka_clients import create
from test_kafka_groups import committed, consumer, coordinator_of, poll_until, produce

RETENTION_MS = 8000
CHECK_MS = 300


@pytest.fixture(scope="module")
def ec():
    def setup(c):
        set_cluster_config(c, "offsets.topic.num.partitions=3,offsets.retention.ms=%d,"
                           "offsets.retention.check.interval.ms=%d" % (RETENTION_MS, CHECK_MS))
    with running_brokers(setup=setup) as k:
        yield k


def set_cluster_config(c, configs):
    rc, out, err = keel("configs", "alter", "--cluster", "--add-config", configs,
                        "--servers", c.connect_string())
    assert rc == 0, (out, err)


def tombstones(boot, group, part, timeout=30):
    """The keys of the tombstones (null values) for `group` in
    __consumer_offsets partition `part`, read by a consumer (so only below
    the high watermark)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    cons = Consumer({"bootstrap.servers": boot, "group.id": "expiry-reader",
                     "enable.auto.commit": False, "enable.partition.eof": True})
    found = []
    try:
        cons.assign([TopicPartition("__consumer_offsets", part, 0)])
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            if m.value() is None and group.encode() in (m.key() or b""):
                found.append(m.key())
    finally:
        cons.close()
    return found


def test_offsets_expire_after_the_group_empties_and_stay_expired_on_failover(ec):
    c, brokers, boot = ec
    from confluent_kafka import TopicPartition
    topic, group = "exp-" + uuid.uuid4().hex[:6], "g-exp-" + uuid.uuid4().hex[:4]
    create(c, topic, partitions=2, rf=3)
    produce(boot, topic, ["e%03d" % i for i in range(20)], 2)
    cons = consumer(boot, group, **{"enable.auto.commit": False})
    cons.subscribe([topic])
    assert len(poll_until(cons, 20)) == 20
    cons.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 6)],
                asynchronous=False)
    # A live group keeps its offsets past the retention.
    lived = time.time()
    while time.time() - lived < (RETENTION_MS + 4 * CHECK_MS) / 1000.0:
        assert cons.poll(0.5) is None
    assert committed(boot, group, topic, 2) == {0: 4, 1: 6}
    cons.close()  # LeaveGroup: the group is Empty from now
    emptied = time.time()
    assert committed(boot, group, topic, 2) == {0: 4, 1: 6}
    c.wait(lambda: committed(boot, group, topic, 2) == {0: -1001, 1: -1001}, timeout=60,
           what="the offsets expired", interval=0.5)
    took = time.time() - emptied
    assert took >= RETENTION_MS / 1000.0 - 1.0, took  # not before the retention
    # The tombstones are committed (below the HW: on every ISR member).
    leader, part = coordinator_of(c, group)
    c.wait(lambda: len(tombstones(boot, group, part)) >= 3, timeout=30,
           what="tombstones for 2 offsets and the group")
    # Another coordinator, which would not expire anything itself, finds
    # them gone.
    set_cluster_config(c, "offsets.retention.ms=-1")
    brokers[leader].kill()
    c.wait(lambda: coordinator_of(c, group)[0] not in (leader, -1), timeout=60,
           what="another coordinator", interval=0.5)
    assert committed(boot, group, topic, 2, timeout=60) == {0: -1001, 1: -1001}
    brokers[leader].start()
    wait_active(c, (1, 2, 3), timeout=60)
    set_cluster_config(c, "offsets.retention.ms=%d" % RETENTION_MS)


def test_standalone_commits_expire_by_commit_time(ec):
    c, brokers, boot = ec
    from confluent_kafka import TopicPartition
    topic, group = "solo-" + uuid.uuid4().hex[:6], "g-solo-" + uuid.uuid4().hex[:4]
    create(c, topic, partitions=2, rf=3)
    produce(boot, topic, ["s%03d" % i for i in range(10)], 2)
    cons = consumer(boot, group, **{"enable.auto.commit": False})
    cons.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])  # no group
    res = cons.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    assert [tp.error for tp in res] == [None]
    first = time.time()
    assert committed(boot, group, topic, 2) == {0: 3, 1: -1001}
    # The second commit comes later: it outlives the first.
    time_between = RETENTION_MS / 2000.0
    while time.time() - first < time_between:
        cons.poll(0.2)
    cons.commit(offsets=[TopicPartition(topic, 1, 5)], asynchronous=False)
    c.wait(lambda: committed(boot, group, topic, 2)[0] == -1001, timeout=60,
           what="the first offset expired", interval=0.3)
    assert time.time() - first >= RETENTION_MS / 1000.0 - 1.0
    assert committed(boot, group, topic, 2)[1] == 5  # committed later: still there
    c.wait(lambda: committed(boot, group, topic, 2) == {0: -1001, 1: -1001}, timeout=60,
           what="the second offset expired", interval=0.5)
    cons.close()
