"""Integration tests of CreateTopics with a manual replica assignment
(docs/brokers.md): `keel topics create --replica-assignment`, confluent-kafka's
AdminClient and kafka-python's KafkaAdminClient against 3 servers and 3
brokers; the controller writes exactly the rows given, the first replica
leading, and refuses bad ones with INVALID_REPLICA_ASSIGNMENT."""
import pytest

from test_controller import keel, wait_partitions
from test_kafka_clients import kc as k3  # noqa: F401 (a module-scoped fixture of its own here)


def metadata_replicas(boot, topic):
    """{partition: (leader, replicas)} from a Metadata request (confluent-kafka)."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": boot}).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p: (m.leader, list(m.replicas)) for p, m in t.partitions.items()}


def expect_layout(c, boot, topic, rows):
    want = {i: r for i, r in enumerate(rows)}
    parts = wait_partitions(c, topic, lambda p: len(p) == len(rows) and
                            all(x["leader"] == want[i][0] for i, x in p.items()), 20,
                            "%s laid out as given" % topic)
    assert {i: p["replicas"] for i, p in parts.items()} == want
    assert all(sorted(p["isr"]) == sorted(want[i]) for i, p in parts.items()), parts
    c.wait(lambda: metadata_replicas(boot, topic) == {i: (r[0], r) for i, r in want.items()},
           timeout=20, what="Metadata shows %s as given" % topic)


def test_keel_topics_create_with_replica_assignment(k3):
    c, brokers, boot = k3
    hosts = c.connect_string()
    rc, out, err = keel("topics", "create", "man", "--replica-assignment", "1:2,2:3,3:1",
                        "--servers", hosts)
    assert rc == 0 and out.strip() == "Created topic man.", (out, err)
    expect_layout(c, boot, "man", [[1, 2], [2, 3], [3, 1]])
    # Kafka's refusals, each with its reason; nothing is created.
    for spec, why in [("1:1", "twice: 1"), ("1:9", "no registered broker has id 9"),
                      ("1:2,3", "same number of replicas")]:
        rc, out, err = keel("topics", "create", "bad", "--replica-assignment", spec,
                            "--servers", hosts)
        assert rc == 1 and "INVALID_REPLICA_ASSIGNMENT" in err and why in err, (spec, err)
    rc, _, err = keel("topics", "create", "bad", "--replica-assignment", "1:2",
                      "--partitions", "1", "--servers", hosts)
    assert rc == 2 and "cannot go with --partitions" in err, err
    rc, out, err = keel("topics", "list", "--servers", hosts)
    assert rc == 0 and "man" in out.split() and "bad" not in out.split(), (out, err)


def test_confluent_admin_replica_assignment(k3):
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    c, brokers, boot = k3
    admin = AdminClient({"bootstrap.servers": boot})
    fs = admin.create_topics([NewTopic("ck-man", 2, replica_assignment=[[3, 1], [2, 3]])],
                             operation_timeout=10)
    fs["ck-man"].result(timeout=30)
    expect_layout(c, boot, "ck-man", [[3, 1], [2, 3]])
    # An unknown broker: INVALID_REPLICA_ASSIGNMENT from the controller.
    fs = admin.create_topics([NewTopic("ck-bad", 1, replica_assignment=[[1, 7]])],
                             operation_timeout=10)
    with pytest.raises(Exception) as e:
        fs["ck-bad"].result(timeout=30)
    assert "INVALID_REPLICA_ASSIGNMENT" in str(e.value) or "7" in str(e.value), e.value
    assert "ck-bad" not in admin.list_topics(timeout=10).topics
    # CreatePartitions (API 37) with an assignment for the new partition.
    fs = admin.create_partitions([NewPartitions("ck-man", 3, replica_assignment=[[1, 2]])])
    fs["ck-man"].result(timeout=30)
    expect_layout(c, boot, "ck-man", [[3, 1], [2, 3], [1, 2]])


def test_kafka_python_admin_replica_assignment(k3):
    import kafka.admin
    c, brokers, boot = k3
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=boot.split(","))
    try:
        admin.create_topics([kafka.admin.NewTopic("kp-man", -1, -1,
                                                  replica_assignments={0: [2, 1, 3],
                                                                       1: [1, 3, 2]})])
        expect_layout(c, boot, "kp-man", [[2, 1, 3], [1, 3, 2]])
        # Partition indexes must be 0..n-1.
        with pytest.raises(Exception) as e:
            admin.create_topics([kafka.admin.NewTopic("kp-gap", -1, -1,
                                                      replica_assignments={0: [1], 2: [2]})])
        assert "InvalidReplicaAssignment" in type(e.value).__name__ or \
            "39" in str(e.value) or "INVALID_REPLICA_ASSIGNMENT" in str(e.value), repr(e.value)
        assert "kp-gap" not in admin.list_topics()
    finally:
        admin.close()
