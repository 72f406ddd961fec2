"""SASL on a `keel broker` listener (issue 17, docs/security.md):
`--sasl-users-file` makes the listener SASL_PLAINTEXT with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512. confluent-kafka (librdkafka) and kcat
produce and consume with each mechanism; a wrong password or an unknown
user is refused (SASL_AUTHENTICATION_FAILED, connection closed) while the
broker keeps serving others; before authentication only ApiVersions and
the SASL pair are served, as Kafka's SaslServerAuthenticator does.
"""
import os
import socket
import struct
import subprocess
import time

import pytest

from harness import KEEL, Cluster, make_secret
from kafka_fixture import running_brokers
from test_controller import SERVER_ARGS, Broker, keel, wait_active, wait_partitions
from test_kafka_clients import closed, read_frame, request

KCAT = "/usr/bin/kcat"
USERS = "# NAME:PASSWORD\nalice:alice-secret\nbob:b0b=,pw\n"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.fixture(scope="module")
def kc():
    """(cluster, broker, bootstrap): one server, one broker with SASL."""
    def sasl_args(c, bid):
        users = os.path.join(c.root, "kafka.users")
        with open(users, "w") as f:
            f.write(USERS)
        os.chmod(users, 0o600)
        return ["--sasl-users-file", users]
    # kcat -L there would need SASL settings: no "lists" wait.
    with running_brokers(servers=1, ids=(1,), broker_args=sasl_args, listed=False) as (
            c, brokers, boot):
        yield c, brokers[1], boot


def sasl_conf(boot, mech, user="alice", password="alice-secret"):
    return {"bootstrap.servers": boot, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mech, "sasl.username": user, "sasl.password": password}


def create(c, name):
    rc, out, err = keel("topics", "create", name, "--partitions", "1",
                        "--replication-factor", "1", "--servers", c.connect_string())
    assert rc == 0, (out, err)
    wait_partitions(c, name, lambda p: len(p) == 1 and p[0]["leader"] >= 0, 15, name + " led")


@pytest.mark.parametrize("mech", MECHANISMS)
def test_confluent_produce_consume(kc, mech):
    from confluent_kafka import Consumer, Producer, TopicPartition
    c, b, boot = kc
    topic = "sasl-" + mech.lower()
    create(c, topic)
    user, password = ("bob", "b0b=,pw") if mech == "SCRAM-SHA-512" else ("alice", "alice-secret")
    p = Producer(dict(sasl_conf(boot, mech, user, password), acks="all"))
    acked = []
    for i in range(20):
        p.produce(topic, value=b"m%d" % i, on_delivery=lambda e, m: acked.append(e))
    assert p.flush(60) == 0
    assert acked == [None] * 20
    cons = Consumer(dict(sasl_conf(boot, mech, user, password), **{
        "group.id": "g-" + mech, "enable.auto.commit": False, "enable.partition.eof": True}))
    cons.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 60
    while time.time() < deadline:
        m = cons.poll(1.0)
        if m is None:
            continue
        if m.error():
            break  # end of partition
        got.append(m.value())
    cons.close()
    assert got == [b"m%d" % i for i in range(20)]
    c.wait(lambda: "authenticated as %s (SASL %s)" % (user, mech) in b.log(),
           what="the broker's log of the authentication")


def auth_error(conf, timeout=30):
    """The error librdkafka reports to error_cb for a client with `conf`."""
    from confluent_kafka import Producer
    errors = []
    p = Producer(dict(conf, error_cb=lambda e: errors.append(e)))
    deadline = time.time() + timeout
    while not errors and time.time() < deadline:
        p.poll(0.2)
    return errors[0] if errors else None


@pytest.mark.parametrize("mech", MECHANISMS)
def test_wrong_password_refused_and_others_served(kc, mech):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    c, b, boot = kc
    err = auth_error(sasl_conf(boot, mech, password="wrong"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    c.wait(lambda: "SASL %s authentication failed: wrong password" % mech in b.log(),
           what="the refusal in the broker's log")
    err = auth_error(sasl_conf(boot, mech, user="mallory"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    c.wait(lambda: "SASL %s authentication failed: no such user" % mech in b.log(),
           what="the unknown user in the broker's log")
    good = AdminClient(sasl_conf(boot, mech))
    md = good.list_topics(timeout=20)
    assert 1 in md.brokers


def test_kcat_scram_and_plain(kc):
    c, b, boot = kc
    create(c, "sasl-kcat")
    base = [KCAT, "-b", boot, "-X", "security.protocol=SASL_PLAINTEXT"]
    for mech in MECHANISMS:
        auth = ["-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=alice",
                "-X", "sasl.password=alice-secret"]
        r = subprocess.run(base + auth + ["-P", "-t", "sasl-kcat"], input=b"k-" + mech.encode(),
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
    r = subprocess.run(base + ["-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice",
                               "-X", "sasl.password=alice-secret", "-C", "-t", "sasl-kcat",
                               "-o", "beginning", "-e", "-q"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"k-" + m.encode() for m in MECHANISMS]
    # Wrong password, and no SASL at all: refused.
    r = subprocess.run(base + ["-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice",
                               "-X", "sasl.password=nope", "-L", "-m", "8"],
                       capture_output=True, timeout=60)
    assert r.returncode != 0
    r = subprocess.run([KCAT, "-b", boot, "-L", "-m", "8"], capture_output=True, timeout=60)
    assert r.returncode != 0


KAFKAJS_DIR = os.path.join(os.path.dirname(__file__), "kafkajs")


@pytest.mark.skipif(not os.path.isdir(os.path.join(KAFKAJS_DIR, "node_modules", "kafkajs")),
                    reason="kafkajs not installed: npm install in tests/integration/kafkajs "
                           "(scripts/install-deps.sh does it when the npm registry is reachable)")
@pytest.mark.parametrize("mech", ["plain", "scram-sha-256", "scram-sha-512"])
def test_kafkajs_sasl(kc, mech):
    c, b, boot = kc
    topic = "kjs-sasl-" + mech
    create(c, topic)
    out = subprocess.run(["node", os.path.join(KAFKAJS_DIR, "roundtrip.js"), "--brokers=" + boot,
                          "--topic=" + topic, "--n=20", "--sasl=%s:alice:alice-secret" % mech],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    assert b"kafkajs ok produced=20 first=0 last=19" in out.stdout
    bad = subprocess.run(["node", os.path.join(KAFKAJS_DIR, "roundtrip.js"), "--brokers=" + boot,
                          "--topic=" + topic, "--n=1", "--sasl=%s:alice:wrong" % mech],
                         capture_output=True, timeout=120)
    assert bad.returncode != 0
    assert b"SASL" in bad.stderr or b"uthentication" in bad.stderr, bad.stderr[-2000:]


# ---- raw requests before authentication ----

def test_requests_before_authentication(kc):
    c, b, boot = kc
    port = b.port
    # Metadata v1 (all topics) before authenticating: closed.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(3, 1, 1, struct.pack(">i", -1)))
    assert closed(s)
    s.close()
    # ApiVersions v0 is served and lists SaslHandshake (17) and SaslAuthenticate (36).
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(18, 0, 2, b""))
    resp = read_frame(s)
    corr, err, n = struct.unpack(">ihi", resp[:10])
    keys = {struct.unpack(">hhh", resp[10 + 6 * i:16 + 6 * i])[0] for i in range(n)}
    assert (corr, err) == (2, 0) and {17, 36} <= keys
    # SaslHandshake v1 for an unknown mechanism: the offered ones, then closed.
    mech = b"GSSAPI"
    s.sendall(request(17, 1, 3, struct.pack(">h", len(mech)) + mech))
    resp = read_frame(s)
    corr, err = struct.unpack(">ih", resp[:6])
    assert (corr, err) == (3, 33)  # UNSUPPORTED_SASL_MECHANISM
    assert b"SCRAM-SHA-512" in resp and b"PLAIN" in resp
    assert closed(s)
    s.close()
    # PLAIN with a wrong password: SASL_AUTHENTICATION_FAILED (58), closed.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    mech = b"PLAIN"
    s.sendall(request(17, 1, 4, struct.pack(">h", len(mech)) + mech))
    assert struct.unpack(">ih", read_frame(s)[:6]) == (4, 0)
    token = b"\0alice\0wrong"
    s.sendall(request(36, 0, 5, struct.pack(">i", len(token)) + token))
    corr, err = struct.unpack(">ih", read_frame(s)[:6])
    assert (corr, err) == (5, 58)
    assert closed(s)
    s.close()
    # SaslAuthenticate without a handshake: closed.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(36, 0, 6, struct.pack(">i", 5) + b"hello"))
    resp = b""
    try:
        resp = read_frame(s)
    except (AssertionError, ConnectionResetError):
        pass  # closed without an answer
    assert resp == b"" or struct.unpack(">ih", resp[:6]) == (6, 34)  # ILLEGAL_SASL_STATE
    assert closed(s)
    s.close()
    # PLAIN done right, then Metadata is served.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(17, 1, 7, struct.pack(">h", len(mech)) + mech))
    assert struct.unpack(">ih", read_frame(s)[:6]) == (7, 0)
    token = b"alice\0alice\0alice-secret"
    s.sendall(request(36, 0, 8, struct.pack(">i", len(token)) + token))
    assert struct.unpack(">ih", read_frame(s)[:6]) == (8, 0)
    s.sendall(request(3, 1, 9, struct.pack(">i", -1)))
    (corr,) = struct.unpack(">i", read_frame(s)[:4])
    assert corr == 9
    s.close()
    assert "Metadata before SASL authentication" in b.log()


def test_brokers_replicate_through_sasl_listeners(tmp_path):
    """Three brokers with SASL listeners: the followers authenticate to
    the leader as the brokers' own user (its password derived from the
    cluster secret), so an rf=3 topic keeps a full ISR under acks=all; a
    users file that defines that user is refused at start."""
    from test_controller import full
    from confluent_kafka import Producer
    c = Cluster(1, server_args=SERVER_ARGS)
    users = os.path.join(c.root, "kafka.users")
    with open(users, "w") as f:
        f.write(USERS)
    os.chmod(users, 0o600)
    brokers = [Broker(c, i, extra_args=["--sasl-users-file", users]) for i in (1, 2, 3)]
    try:
        c.start()
        c.wait_leader()
        for b in brokers:
            b.start()
        wait_active(c, (1, 2, 3))
        rc, out, err = keel("topics", "create", "sasl-rf3", "--partitions", "1",
                            "--replication-factor", "3", "--servers", c.connect_string())
        assert rc == 0, (out, err)
        parts = wait_partitions(c, "sasl-rf3", lambda p: len(p) == 1 and full(p), 30,
                                "sasl-rf3 with a full ISR")
        boot = ",".join("127.0.0.1:%d" % b.port for b in brokers)
        p = Producer(dict(sasl_conf(boot, "SCRAM-SHA-256"), acks="all"))
        acked = []
        for i in range(50):
            p.produce("sasl-rf3", value=b"r%d" % i, on_delivery=lambda e, m: acked.append(e))
        assert p.flush(60) == 0
        assert acked == [None] * 50
        wait_partitions(c, "sasl-rf3", lambda p: full(p), 30, "the ISR still full")
        leader = brokers[parts[0]["leader"] - 1]
        c.wait(lambda: leader.log().count("authenticated as keel-broker (SASL SCRAM-SHA-256)") >= 2,
               what="both followers authenticated to the leader")
    finally:
        for b in brokers:
            b.kill()
        c.cleanup()
    bad = tmp_path / "bad.users"
    bad.write_text("keel-broker:x\n")
    secret = str(tmp_path / "cluster.secret")
    make_secret(secret)
    r = subprocess.run([KEEL, "broker", "--id", "9",
                        "--servers", "127.0.0.1:1", "--data-dir", str(tmp_path / "d"),
                        "--sasl-users-file", str(bad), "--cluster-secret-file", secret],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "reserved for the brokers" in r.stderr, r.stderr
