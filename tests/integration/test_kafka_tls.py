"""TLS on the Kafka listener (`keel broker --listener-tls-cert/-key/-ca`,
docs/security.md): 3 servers and 2 brokers whose listeners speak only TLS.
confluent-kafka (librdkafka) and kcat with security.protocol=SSL produce
and consume a topic replicated on both brokers (the follower's fetcher
talks TLS to the leader, so acks=all needs it), and a plaintext client on
the TLS listener is refused while the brokers keep serving.
"""
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

import pytest

from kafka_fixture import running_brokers
from test_controller import keel, wait_partitions
from test_tls import Pki

KCAT = "/usr/bin/kcat"


@pytest.fixture(scope="module")
def ktls():
    root = tempfile.mkdtemp(prefix="keel-ktls-")
    pki = Pki(root)
    tls = ["--listener-tls-cert", pki.path("server.crt"), "--listener-tls-key",
           pki.path("server.key"), "--listener-tls-ca", pki.path("ca.crt")]
    try:
        # kcat -L there would need the TLS settings: no "lists" wait.
        with running_brokers(ids=(1, 2), broker_args=lambda c, i: tls, listed=False) as (
                c, brokers, _):
            yield c, brokers, pki
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ssl_conf(pki, boot):
    return {"bootstrap.servers": boot, "security.protocol": "SSL",
            "ssl.ca.location": pki.path("ca.crt")}


def kcat_ssl(pki, *args, stdin=None):
    out = subprocess.run([KCAT, "-X", "security.protocol=SSL",
                          "-X", "ssl.ca.location=" + pki.path("ca.crt"), *args],
                         input=stdin, capture_output=True, timeout=60)
    return out.returncode, out.stdout.decode(errors="replace"), out.stderr.decode(errors="replace")


def create_replicated(c, topic, partitions):
    """A topic on both brokers, each partition led with both in sync."""
    rc, out, err = keel("topics", "create", topic, "--partitions", str(partitions),
                        "--replication-factor", "2", "--servers", c.connect_string())
    assert rc == 0, (out, err)
    wait_partitions(c, topic, lambda p: len(p) == partitions and
                    all(x["leader"] >= 0 and len(x["isr"]) == 2 for x in p.values()),
                    30, "%s led with both replicas in sync" % topic)


def boot_of(brokers):
    return ",".join("127.0.0.1:%d" % b.port for b in brokers.values())


def test_confluent_and_kcat_over_tls_with_replication(ktls):
    from confluent_kafka import Consumer, Producer, TopicPartition
    c, brokers, pki = ktls
    boot = boot_of(brokers)
    create_replicated(c, "tls-t", 2)
    c.wait(lambda: "tls-t" in kcat_ssl(pki, "-b", boot, "-L")[1], timeout=30,
           what="brokers list tls-t over TLS")
    p = Producer(dict(ssl_conf(pki, boot), acks="all", **{"linger.ms": 2}))
    acked = []
    big = b"x" * 40000  # records larger than one TLS record
    for i in range(200):
        p.produce("tls-t", value=(big if i % 50 == 0 else b"v%d" % i), partition=i % 2,
                  on_delivery=lambda e, m: acked.append((e, m.partition(), m.offset())))
    assert p.flush(60) == 0
    assert len(acked) == 200 and all(e is None for e, _, _ in acked), acked[:3]
    cons = Consumer(dict(ssl_conf(pki, boot), **{"group.id": "unused",
                                                   "enable.auto.commit": False,
                                                   "enable.partition.eof": True}))
    cons.assign([TopicPartition("tls-t", i, 0) for i in range(2)])
    got = {0: [], 1: []}
    eofs = set()
    deadline = time.time() + 60
    while len(eofs) < 2 and time.time() < deadline:
        m = cons.poll(1.0)
        if m is None:
            continue
        if m.error():
            eofs.add(m.partition())
            continue
        got[m.partition()].append(m.value())
    cons.close()
    for part in range(2):
        want = [(big if i % 50 == 0 else b"v%d" % i) for i in range(200) if i % 2 == part]
        assert got[part] == want
    # The followers fetched over TLS: both replicas still in sync, and no
    # fetcher complained.
    wait_partitions(c, "tls-t", lambda p: all(len(x["isr"]) == 2 for x in p.values()), 15,
                    "both replicas still in sync")
    for b in brokers.values():
        assert "replica fetcher for broker" not in b.log(), b.log()[-3000:]
        assert "Kafka listener in TLS" in b.log()
    # kcat over TLS reads the same records.
    rc, out, err = kcat_ssl(pki, "-b", boot, "-C", "-t", "tls-t", "-p", "1", "-o", "beginning",
                            "-e", "-c", "3", "-f", "%s\\n")
    assert rc == 0, err
    assert out.split("\n")[:3] == ["v1", "v3", "v5"]


def test_plaintext_client_on_the_tls_listener_is_refused(ktls):
    c, brokers, pki = ktls
    b = brokers[1]
    api_versions = struct.pack(">hhih", 18, 0, 1, 1) + b"t"
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s.sendall(struct.pack(">i", len(api_versions)) + api_versions)
    s.settimeout(20)
    try:
        data = s.recv(4096)
    except ConnectionResetError:
        data = b""
    s.close()
    assert data == b"" or data[0] == 21, data[:16]  # nothing, or a TLS alert
    c.wait(lambda: "not TLS" in b.log() or "wrong version number" in b.log(), timeout=15,
           what="the broker logs the refused plaintext client")
    rc, out, err = kcat_ssl(pki, "-b", "127.0.0.1:%d" % b.port, "-L")
    assert rc == 0 and "2 brokers" in out, (out, err)


KAFKAJS_DIR = os.path.join(os.path.dirname(__file__), "kafkajs")


@pytest.mark.skipif(not os.path.isdir(os.path.join(KAFKAJS_DIR, "node_modules", "kafkajs")),
                    reason="kafkajs not installed: npm install in tests/integration/kafkajs "
                           "(scripts/install-deps.sh does it when the npm registry is reachable)")
def test_kafkajs_over_tls(ktls):
    """kafkajs (its own TLS, Node's) produces with acks=all to a topic
    replicated on both TLS brokers and reads it back, verifying the
    brokers' certificates against the CA."""
    c, brokers, pki = ktls
    boot = boot_of(brokers)
    create_replicated(c, "tls-kjs", 1)
    script = os.path.join(KAFKAJS_DIR, "roundtrip.js")
    out = subprocess.run(["node", script, "--brokers=" + boot, "--topic=tls-kjs", "--n=20",
                          "--ssl-ca=" + pki.path("ca.crt")], capture_output=True, timeout=120)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    assert b"kafkajs ok produced=20 first=0 last=19" in out.stdout
