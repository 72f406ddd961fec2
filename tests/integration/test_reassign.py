"""Integration tests of partition reassignment (KIP-455, docs/controller.md
"Reassignment"): real `keel server` and `keel broker` processes, the
`keel partitions reassign` CLI in kafka-reassign-partitions.sh's shape,
`keel topics describe`, and kazoo reading the ZooKeeper view."""
import json
import os
import re

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

    line = describe_lines(c, "mv")[0]
    assert "Replicas: %d,%d,%d\t" % (b, x, a) in line, line
    assert line.endswith("\tAdding Replicas: %d\tRemoving Replicas: %d" % (x, a)), line
    assert describe_topic(c, "mv")[0]["leader"] == a  # the leader stays meanwhile

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
