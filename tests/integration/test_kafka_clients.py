"""Real Kafka clients against `keel broker` (docs/brokers.md): 3 servers and
3 brokers as real processes; kcat, confluent-kafka (librdkafka) and
kafka-python produce, read back in order, follow leadership, and bad input
closes only the connection that sent it.

One cluster serves the whole module (starting one is the slow part); each
test uses its own topics.
"""
import json
import os
import re
import socket
import struct
import subprocess
import time
import uuid

import pytest

from kafka_fixture import KCAT, kcat, running_brokers
from test_controller import describe_topic, keel, wait_active, wait_partitions


@pytest.fixture(scope="module")
def kc():
    """(cluster, {id: Broker}, bootstrap) with 3 active brokers."""
    with running_brokers(rack=lambda i: "r%d" % i,
                         broker_args=lambda c, i: ["--retention-check-interval-ms", "300"]) as k:
        yield k


def create(c, name, partitions=1, rf=1):
    rc, out, err = keel("topics", "create", name, "--partitions", str(partitions),
                        "--replication-factor", str(rf), "--servers", c.connect_string())
    assert rc == 0, (out, err)
    parts = wait_partitions(c, name, lambda p: len(p) == partitions and
                            all(x["leader"] >= 0 for x in p.values()), 15, name + " led")
    wait_brokers_see(c, brokers_of(c), name, parts)
    return parts


def brokers_of(c):
    return c.kafka_brokers


def broker_metadata(port, topic):
    out = subprocess.run([KCAT, "-b", "127.0.0.1:%d" % port, "-L", "-J", "-t", topic],
                         capture_output=True, timeout=30)
    if out.returncode != 0:
        return {}
    md = json.loads(out.stdout)
    for t in md["topics"]:
        if t["topic"] == topic and not t.get("error"):
            return {p["partition"]: p["leader"] for p in t["partitions"]}
    return {}


def wait_brokers_see(c, brokers, topic, parts):
    """Until every live broker's own image has the topic with these leaders."""
    want = {i: p["leader"] for i, p in parts.items()}
    for b in brokers.values():
        if b.alive():
            c.wait(lambda: broker_metadata(b.port, topic) == want, timeout=15,
                   what="broker %d serves %s" % (b.id, topic), interval=0.1)


def broker_with_leader(brokers, parts, p=0):
    return brokers[parts[p]["leader"]]


# ---- kcat ----

def test_kcat_metadata_lists_brokers_and_topics(kc):
    c, brokers, boot = kc
    create(c, "meta-t", partitions=3)
    out = kcat("-b", boot, "-L", "-J")
    md = json.loads(out)
    assert sorted(b["id"] for b in md["brokers"]) == [1, 2, 3]
    ports = {b["id"]: int(b["name"].rsplit(":", 1)[1]) for b in md["brokers"]}
    assert ports == {i: b.port for i, b in brokers.items()}
    # keel topics describe says where each broker listens.
    rc, text, err = keel("topics", "describe", "meta-t", "--servers", c.connect_string())
    assert rc == 0, err
    for i, b in brokers.items():
        assert "\tBroker: %d\tEndpoint: PLAINTEXT://127.0.0.1:%d\tRack: r%d\tState: active" % (
            i, b.port, i) in text, text
    topic = [t for t in md["topics"] if t["topic"] == "meta-t"][0]
    parts = describe_topic(c, "meta-t")
    assert {p["partition"]: p["leader"] for p in topic["partitions"]} == \
        {i: p["leader"] for i, p in parts.items()}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_consume_every_codec(kc, codec):
    c, brokers, boot = kc
    topic = "codec-" + codec
    create(c, topic)
    lines = ["%s-message-%03d" % (codec, i) for i in range(200)]
    kcat("-b", boot, "-P", "-t", topic, "-z", codec, "-K", ":", "-H", "h1=v1",
         "-X", "linger.ms=5",
         stdin="".join("k%d:%s\n" % (i % 7, l) for i, l in enumerate(lines)).encode())
    out = kcat("-b", boot, "-C", "-t", topic, "-o", "beginning", "-e",
               "-f", "%k|%s|%h|%o\n")
    got = [l.split("|") for l in out.splitlines()]
    assert [g[1] for g in got] == lines
    assert [g[0] for g in got] == ["k%d" % (i % 7) for i in range(200)]
    assert all(g[2] == "h1=v1" for g in got)
    assert [int(g[3]) for g in got] == list(range(200))


# ---- confluent-kafka ----

def test_confluent_produce_then_consume_in_order(kc):
    from confluent_kafka import Consumer, Producer, TopicPartition
    c, brokers, boot = kc
    parts = create(c, "cf-t", partitions=3)
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 2})
    acked = []
    for i in range(300):
        p.produce("cf-t", value=b"v%d" % i, key=b"k%d" % i, partition=i % 3,
                  on_delivery=lambda err, msg: acked.append((err, msg.partition(),
                                                             msg.offset())))
    assert p.flush(30) == 0
    assert all(e is None for e, _, _ in acked) and len(acked) == 300
    for part in range(3):
        offs = [o for _, pp, o in acked if pp == part]
        assert sorted(offs) == list(range(100))
    cons = Consumer({"bootstrap.servers": boot, "group.id": "unused",
                     "enable.auto.commit": False, "enable.partition.eof": True})
    cons.assign([TopicPartition("cf-t", i, 0) for i in range(3)])
    got = {0: [], 1: [], 2: []}
    eofs = set()
    deadline = time.time() + 30
    while len(eofs) < 3 and time.time() < deadline:
        m = cons.poll(1.0)
        if m is None:
            continue
        if m.error():
            eofs.add(m.partition())
            continue
        got[m.partition()].append((m.offset(), m.key(), m.value()))
    cons.close()
    for part in range(3):
        want = [i for i in range(300) if i % 3 == part]
        assert [v for _, _, v in got[part]] == [b"v%d" % i for i in want]
        assert [o for o, _, _ in got[part]] == list(range(100))
    lo, hi = None, None
    cons = Consumer({"bootstrap.servers": boot, "group.id": "unused"})
    lo, hi = cons.get_watermark_offsets(TopicPartition("cf-t", 0), timeout=10)
    cons.close()
    assert (lo, hi) == (0, 100)
    assert parts  # created and led


def test_confluent_long_poll_sees_new_data(kc):
    """A consumer waiting at the end (max_wait) gets a record produced later."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    c, brokers, boot = kc
    create(c, "poll-t")
    cons = Consumer({"bootstrap.servers": boot, "group.id": "unused",
                     "fetch.wait.max.ms": 2000})
    cons.assign([TopicPartition("poll-t", 0, 0)])
    assert cons.poll(1.0) is None
    p = Producer({"bootstrap.servers": boot})
    p.produce("poll-t", value=b"late")
    assert p.flush(10) == 0
    deadline = time.time() + 15
    m = None
    while time.time() < deadline:
        m = cons.poll(1.0)
        if m is not None and not m.error():
            break
    cons.close()
    assert m is not None and m.value() == b"late"


# ---- kafka-python ----

def test_kafka_python_produce_consume(kc):
    import kafka
    c, brokers, boot = kc
    create(c, "kp-t", partitions=2)
    prod = kafka.KafkaProducer(bootstrap_servers=boot.split(","), acks=1,
                               api_version_auto_timeout_ms=10000)
    futs = [prod.send("kp-t", value=b"x%d" % i, key=b"k", partition=i % 2)
            for i in range(50)]
    offs = [f.get(timeout=20).offset for f in futs]
    prod.close()
    assert sorted(offs) == sorted(list(range(25)) * 2)
    cons = kafka.KafkaConsumer(bootstrap_servers=boot.split(","), enable_auto_commit=False,
                               consumer_timeout_ms=5000, group_id=None)
    tps = [kafka.TopicPartition("kp-t", i) for i in range(2)]
    cons.assign(tps)
    cons.seek_to_beginning()
    got = {0: [], 1: []}
    for m in cons:
        got[m.partition].append(m.value)
        if sum(len(v) for v in got.values()) == 50:
            break
    cons.close()
    for part in range(2):
        assert got[part] == [b"x%d" % i for i in range(50) if i % 2 == part]


# ---- leadership ----

def test_kill_leader_metadata_moves_and_produce_succeeds(kc):
    """RF 2: killing the leader moves leadership, clients follow the
    metadata and produce to the new leader, which has the follower's copy of
    what was acknowledged before. The killed broker comes back afterwards
    (module cluster)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient  # noqa: F401 (metadata only)
    c, brokers, boot = kc
    parts = create(c, "move-t", rf=2)
    old = parts[0]["leader"]
    p = Producer({"bootstrap.servers": boot, "acks": "all", "topic.metadata.refresh.interval.ms":
                  1000, "retry.backoff.ms": 200, "message.timeout.ms": 60000})
    done = []
    p.produce("move-t", value=b"before", on_delivery=lambda e, m: done.append((e, m.offset())))
    assert p.flush(30) == 0 and done == [(None, 0)]
    brokers[old].kill()
    try:
        parts = wait_partitions(c, "move-t", lambda p: p[0]["leader"] not in (-1, old), 20,
                                "leader moved off broker %d" % old)
        new = parts[0]["leader"]
        # Each surviving broker's own image follows the controller's.
        wait_brokers_see(c, brokers, "move-t", parts)
        others = ",".join("127.0.0.1:%d" % b.port for i, b in brokers.items() if i != old)
        assert "leader %d," % new in kcat("-b", others, "-L", "-t", "move-t")
        # The same producer follows the metadata to the new leader, whose
        # log has "before" (acks=all: the follower had it durable).
        p.produce("move-t", value=b"after", on_delivery=lambda e, m: done.append((e, m.offset())))
        assert p.flush(60) == 0 and done[1] == (None, 1), done
        out = kcat("-b", others, "-C", "-t", "move-t", "-o", "beginning", "-e")
        assert out.splitlines() == ["before", "after"]
    finally:
        brokers[old].start()
        wait_active(c, (1, 2, 3), timeout=30)


# ---- durability ----

def test_restart_recovers_acknowledged_records(kc):
    c, brokers, boot = kc
    parts = create(c, "dur-t")
    lead = broker_with_leader(brokers, parts)
    kcat("-b", boot, "-P", "-t", "dur-t", "-X", "acks=all",
         stdin="".join("r%d\n" % i for i in range(100)).encode())
    lead.kill()
    lead.start()
    wait_active(c, (1, 2, 3), timeout=30)
    wait_partitions(c, "dur-t", lambda p: p[0]["leader"] == lead.id, 30, "leader back")
    deadline = time.time() + 30
    while True:
        try:
            out = kcat("-b", boot, "-C", "-t", "dur-t", "-o", "beginning", "-e", timeout=20)
            if len(out.splitlines()) == 100:
                break
        except AssertionError:
            pass
        assert time.time() < deadline, "records not readable after restart"
        time.sleep(0.5)
    assert out.splitlines() == ["r%d" % i for i in range(100)]
    assert "partition logs: " in lead.log()


# ---- bad input ----

def frame(body):
    return struct.pack(">i", len(body)) + body


def request(api_key, version, corr, body, client_id=b"t"):
    return frame(struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def closed(s, timeout=10):
    """True when the peer closes (after any bytes it sends)."""
    s.settimeout(timeout)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def read_frame(s):
    def exact(n):
        b = bytearray(n)
        view, got = memoryview(b), 0
        while got < n:
            k = s.recv_into(view[got:], n - got)
            assert k, "connection closed"
            got += k
        return bytes(b)
    size = struct.unpack(">i", exact(4))[0]
    return exact(size)


def still_serves(boot):
    out = kcat("-b", boot, "-L")
    assert "3 brokers" in out


def produce_v3(topic, partition, records, acks=1, corr=7):
    t = topic.encode()
    body = struct.pack(">hhi", -1, acks, 5000) + struct.pack(">i", 1) + \
        struct.pack(">h", len(t)) + t + struct.pack(">i", 1) + \
        struct.pack(">i", partition) + struct.pack(">i", len(records)) + records
    return request(0, 3, corr, body)


def produce_error(resp):
    # v3 response: corr, topics[1]: name, partitions[1]: index, error, ...
    corr, n = struct.unpack_from(">ii", resp, 0)
    nl = struct.unpack_from(">h", resp, 8)[0]
    pos = 10 + nl
    _count, _index, err = struct.unpack_from(">iih", resp, pos)
    return err


def test_bad_input_closes_only_that_connection(kc):
    c, brokers, boot = kc
    parts = create(c, "bad-t")
    lead = broker_with_leader(brokers, parts)
    kcat("-b", boot, "-P", "-t", "bad-t", stdin=b"good0\n")
    # Garbage: a negative size.
    s = connect(lead.port)
    s.sendall(b"\xff\xff\xff\xfe junk")
    assert closed(s)
    # An oversized frame (over 100 MiB).
    s = connect(lead.port)
    s.sendall(struct.pack(">i", 200 << 20) + b"x" * 100)
    assert closed(s)
    # A header that does not decode.
    s = connect(lead.port)
    s.sendall(frame(b"\x00\x03"))
    assert closed(s)
    # An unknown API key: closed. ApiVersions at an unknown version: an answer.
    s = connect(lead.port)
    s.sendall(request(999, 0, 1, b""))
    assert closed(s)
    s = connect(lead.port)
    s.sendall(request(18, 99, 42, b""))
    resp = read_frame(s)
    corr, err = struct.unpack_from(">ih", resp, 0)
    assert (corr, err) == (42, 35)  # UNSUPPORTED_VERSION, with the table
    s.close()
    # SaslHandshake for PLAIN on a listener that offers SASL only to the
    # brokers (SCRAM, for replica fetches): answered, then closed.
    s = connect(lead.port)
    s.sendall(request(17, 1, 3, b"\x00\x05PLAIN"))
    assert closed(s)
    # A silent client: closed at the handshake deadline (10 s by default).
    s = connect(lead.port)
    assert closed(s, timeout=15)
    still_serves(boot)
    log = lead.log()
    assert "no request within the handshake deadline" in log
    assert "request frame over the size limit" in log


def kafka_python_batch(value=b"hello"):
    """A valid magic-2 batch built by kafka-python's own encoder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(b.build())


def test_bad_batches_get_errors_and_leave_the_log_clean(kc):
    c, brokers, boot = kc
    parts = create(c, "batch-t")
    lead = broker_with_leader(brokers, parts)
    good = kafka_python_batch(b"first")
    s = connect(lead.port)
    s.sendall(produce_v3("batch-t", 0, good, corr=1))
    assert produce_error(read_frame(s)) == 0
    # A flipped byte in the records: CORRUPT_MESSAGE (CRC).
    bad = bytearray(kafka_python_batch(b"second"))
    bad[-1] ^= 0xFF
    s.sendall(produce_v3("batch-t", 0, bytes(bad), corr=2))
    assert produce_error(read_frame(s)) == 2
    # A batchLength past the bytes sent: CORRUPT_MESSAGE.
    bad = bytearray(kafka_python_batch(b"third"))
    struct.pack_into(">i", bad, 8, len(bad) + 100)
    s.sendall(produce_v3("batch-t", 0, bytes(bad), corr=3))
    assert produce_error(read_frame(s)) == 2
    # A magic 1 message set: UNSUPPORTED_FOR_MESSAGE_FORMAT.
    msg = struct.pack(">bbq", 1, 0, 0) + struct.pack(">i", -1) + struct.pack(">i", 3) + b"old"
    import binascii
    msg = struct.pack(">I", binascii.crc32(msg)) + msg
    legacy = struct.pack(">qi", 0, len(msg)) + msg
    s.sendall(produce_v3("batch-t", 0, legacy, corr=4))
    assert produce_error(read_frame(s)) == 43
    # Magic 0 likewise.
    msg0 = struct.pack(">bb", 0, 0) + struct.pack(">i", -1) + struct.pack(">i", 3) + b"old"
    msg0 = struct.pack(">I", binascii.crc32(msg0)) + msg0
    s.sendall(produce_v3("batch-t", 0, struct.pack(">qi", 0, len(msg0)) + msg0, corr=5))
    assert produce_error(read_frame(s)) == 43
    # The connection still works; the log holds only the good records.
    s.sendall(produce_v3("batch-t", 0, kafka_python_batch(b"last"), corr=6))
    assert produce_error(read_frame(s)) == 0
    s.close()
    out = kcat("-b", boot, "-C", "-t", "batch-t", "-o", "beginning", "-e", "-f", "%s@%o\n")
    assert out.splitlines() == ["first@0", "last@1"]
    # Unknown topic, and a partition this broker does not lead.
    s = connect(lead.port)
    s.sendall(produce_v3("no-such-topic", 0, kafka_python_batch(), corr=8))
    assert produce_error(read_frame(s)) == 3
    other = [b for i, b in brokers.items() if i != lead.id][0]
    s2 = connect(other.port)
    s2.sendall(produce_v3("batch-t", 0, kafka_python_batch(), corr=9))
    assert produce_error(read_frame(s2)) == 6
    s.close()
    s2.close()


# ---- admin ----

def incremental_alter_v0(corr, topic, key, value):
    t, k, v = topic.encode(), key.encode(), value.encode()
    body = struct.pack(">i", 1) + struct.pack(">bh", 2, len(t)) + t + struct.pack(">i", 1) + \
        struct.pack(">h", len(k)) + k + struct.pack(">bh", 0, len(v)) + v + b"\x00"
    return request(44, 0, corr, body)


def test_confluent_admin_client(kc):
    from confluent_kafka.admin import (AdminClient, ConfigResource, NewPartitions,
                                       NewTopic)
    c, brokers, boot = kc
    admin = AdminClient({"bootstrap.servers": boot})
    fs = admin.create_topics([NewTopic("adm-t", 2, 1, config={"retention.ms": "1000"})],
                             operation_timeout=10)
    fs["adm-t"].result(timeout=30)
    parts = wait_partitions(c, "adm-t", lambda p: len(p) == 2, 15, "adm-t created")
    wait_brokers_see(c, brokers, "adm-t", parts)
    # ZooKeeper clients see it where Kafka 2.x tools look.
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=c.connect_string(), timeout=10)
    zk.start(timeout=30)
    try:
        zk.sync("/")
        assignment = json.loads(zk.get("/brokers/topics/adm-t")[0])
        assert sorted(assignment["partitions"]) == ["0", "1"], assignment
        state = json.loads(zk.get("/brokers/topics/adm-t/partitions/0/state")[0])
        assert state["leader"] == parts[0]["leader"], state
    finally:
        zk.stop()
        zk.close()
    # A second create of the same name: TOPIC_ALREADY_EXISTS from the controller.
    fs = admin.create_topics([NewTopic("adm-t", 1, 1)])
    with pytest.raises(Exception) as e:
        fs["adm-t"].result(timeout=30)
    assert "TOPIC_ALREADY_EXISTS" in str(e.value) or "already exists" in str(e.value)
    md = admin.list_topics(timeout=10)
    assert len(md.topics["adm-t"].partitions) == 2
    # DescribeConfigs from the broker's image.
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm-t")
    cfg = admin.describe_configs([res])[res].result(timeout=30)
    assert cfg["retention.ms"].value == "1000"
    # IncrementalAlterConfigs (confluent-kafka 1.7 only has the legacy
    # AlterConfigs, below): a raw v0 request.
    lead = brokers[parts[0]["leader"]]
    s = connect(lead.port)
    s.sendall(incremental_alter_v0(5, "adm-t", "retention.ms", "2000"))
    resp = read_frame(s)
    s.close()
    corr, _throttle, count, err = struct.unpack_from(">iiih", resp, 0)
    assert (corr, count, err) == (5, 1, 0)
    c.wait(lambda: admin.describe_configs([res])[res].result(timeout=30)["retention.ms"].value
           == "2000", timeout=15, what="retention.ms altered")
    # The legacy AlterConfigs (what confluent-kafka 1.7's alter_configs
    # sends) replaces the topic's whole config: retention.ms goes.
    res2 = ConfigResource(ConfigResource.Type.TOPIC, "adm-t",
                          set_config={"cleanup.policy": "compact"})
    admin.alter_configs([res2])[res2].result(timeout=30)

    def topic_configs():
        got = admin.describe_configs([res])[res].result(timeout=30)
        return {k: v.value for k, v in got.items()}
    c.wait(lambda: topic_configs() == {"cleanup.policy": "compact"}, timeout=15,
           what="configs replaced")
    # An unknown name is refused and changes nothing.
    bad = ConfigResource(ConfigResource.Type.TOPIC, "adm-t", set_config={"no.such": "1"})
    with pytest.raises(Exception) as e:
        admin.alter_configs([bad])[bad].result(timeout=30)
    assert "INVALID_CONFIG" in str(e.value) or "no.such" in str(e.value), e.value
    assert topic_configs() == {"cleanup.policy": "compact"}
    # CreatePartitions, then DeleteTopics.
    admin.create_partitions([NewPartitions("adm-t", 4)])["adm-t"].result(timeout=30)
    wait_partitions(c, "adm-t", lambda p: len(p) == 4, 15, "adm-t grown to 4")
    admin.delete_topics(["adm-t"], operation_timeout=10)["adm-t"].result(timeout=30)
    c.wait(lambda: "adm-t" not in admin.list_topics(timeout=10).topics, timeout=15,
           what="adm-t deleted")


def test_kafka_python_admin_create_delete(kc):
    import kafka.admin
    c, brokers, boot = kc
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=boot.split(","))
    admin.create_topics([kafka.admin.NewTopic("kpa-t", 3, 1)])
    wait_partitions(c, "kpa-t", lambda p: len(p) == 3, 15, "kpa-t created")
    admin.delete_topics(["kpa-t"])
    c.wait(lambda: "kpa-t" not in admin.list_topics(), timeout=15, what="kpa-t deleted")
    admin.close()


# ---- keel produce / keel consume ----

def test_keel_produce_consume_cli(kc):
    c, brokers, boot = kc
    create(c, "cli-t", partitions=2)
    lines = ["line %d" % i for i in range(1200)]  # three batches
    out = subprocess.run([os.environ["KEEL"], "produce", "--brokers", boot.split(",")[0],
                          "--topic", "cli-t", "--key", "user-7"],
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    # One key: one partition, the one Kafka's partitioner picks (kcat agrees).
    got = {}
    for p in (0, 1):
        got[p] = kcat("-b", boot, "-C", "-t", "cli-t", "-p", str(p), "-o", "beginning", "-e",
                      "-f", "%k %s\n").splitlines()
    full = [p for p in (0, 1) if got[p]]
    assert len(full) == 1 and got[full[0]] == ["user-7 " + l for l in lines]
    out = subprocess.run([os.environ["KEEL"], "consume", "--brokers", boot.split(",")[-1],
                          "--topic", "cli-t", "--partition", str(full[0]), "--from-beginning",
                          "--max-messages", "1000"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == lines[:1000]
    # kcat's murmur2 partitioner puts the same key on the same partition.
    kcat("-b", boot, "-P", "-t", "cli-t", "-K", ":", "-X", "partitioner=murmur2_random",
         stdin=b"user-7:from-kcat\n")
    tail = kcat("-b", boot, "-C", "-t", "cli-t", "-p", str(full[0]), "-o", "-1", "-e")
    assert tail.splitlines() == ["from-kcat"]


# ---- fetch by sendfile ----

def test_large_fetch_to_a_slow_reader_arrives_whole(kc):
    """A Fetch whose records do not fit the socket buffer: what sendfile
    cannot hand to the kernel at once is copied and queued behind it; the
    client still reads one well-formed response with intact batches."""
    from kafka.record.util import calc_crc32c
    c, brokers, boot = kc
    parts = create(c, "big-t")
    lead = broker_with_leader(brokers, parts)
    value = "v" * 1000
    kcat("-b", boot, "-P", "-t", "big-t", "-X", "batch.size=65536",
         stdin="".join("%s-%05d\n" % (value, i) for i in range(8000)).encode())
    s = connect(lead.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    t = b"big-t"
    body = struct.pack(">iiiib", -1, 0, 1, 64 << 20, 0) + struct.pack(">ih", 1, len(t)) + t + \
        struct.pack(">iiqi", 1, 0, 0, 64 << 20)
    s.sendall(request(1, 4, 77, body))
    time.sleep(2)  # let the broker meet a full socket
    resp = read_frame(s)
    s.close()
    corr, _throttle, ntopics, nl = struct.unpack_from(">iiih", resp, 0)
    pos = 14 + nl
    nparts, part, err, hw, lso, aborted, size = struct.unpack_from(">iihqqii", resp, pos)
    pos += 4 + 4 + 2 + 8 + 8 + 4 + 4
    assert (corr, ntopics, nparts, part, err, hw) == (77, 1, 1, 0, 0, 8000)
    records = resp[pos:pos + size]
    assert len(records) == size > 8000 * 1000
    count, at = 0, 0
    while at < len(records):
        base, length = struct.unpack_from(">qi", records, at)
        crc = struct.unpack_from(">I", records, at + 17)[0]
        assert crc == calc_crc32c(records[at + 21:at + 12 + length]), "batch at %d" % base
        assert base == count
        count += struct.unpack_from(">i", records, at + 23)[0] + 1
        at += 12 + length
    assert count == 8000
    # Both paths ran: the broker's totals at a clean stop say so.
    assert lead.terminate() == 0
    try:
        m = re.search(r"fetched (\d+) record bytes with sendfile, (\d+) copied", lead.log())
        assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, m and m.group(0)
    finally:
        lead.start()
        wait_active(c, (1, 2, 3), timeout=30)


# ---- sarama (Go) and kafkajs (Node.js) ----

CLIENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients")  # sarama


_BUILT = {}


def built_client(tmp_path_factory, name):
    """A private copy of a client program (sarama: tests/clients/sarama;
    kafkajs: tests/integration/kafkajs), built (go build / npm ci) in a temp
    dir so the source tree stays clean; once per test run."""
    if name not in _BUILT:
        _BUILT[name] = build_client(tmp_path_factory, name)
    return _BUILT[name]


def build_client(tmp_path_factory, name):
    work = tmp_path_factory.mktemp(name)
    if name == "sarama":
        src = os.path.join(CLIENTS, name)
        out = str(work / "sarama-roundtrip")
        env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
                   GOCACHE=str(work / "gocache"), GOFLAGS="")
        r = subprocess.run(["go", "build", "-o", out, os.path.join(src, "roundtrip.go")],
                           env=env, capture_output=True, timeout=600)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        return [out]
    # kafkajs: the package pinned in tests/integration/kafkajs (which the
    # group tests share), installed afresh in the temp dir.
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafkajs")
    for f in ("package.json", "package-lock.json", "roundtrip.js"):
        with open(os.path.join(src, f), "rb") as i, open(str(work / f), "wb") as o:
            o.write(i.read())
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=str(work), capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return ["node", str(work / "roundtrip.js")]


def read_back(boot, topic, n):
    """kcat's view of partition 0: [(offset, key, value)]."""
    out = kcat("-b", boot, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(n),
               "-e", "-f", "%o %k %s\\n", timeout=60)
    return [tuple(ln.split(" ", 2)) for ln in out.splitlines() if ln]


@pytest.mark.parametrize("codec", ["none", "snappy", "zstd"])
def test_sarama_produce_consume(kc, tmp_path_factory, codec):
    c, brokers, boot = kc
    topic = "sarama-" + codec
    create(c, topic, partitions=2)
    cmd = built_client(tmp_path_factory, "sarama")
    r = subprocess.run(cmd + ["-brokers", boot, "-topic", topic, "-n", "200", "-codec", codec],
                       capture_output=True, timeout=180)
    out = r.stdout.decode()
    assert r.returncode == 0, (out, r.stderr.decode()[-3000:])
    m = re.search(r"sarama ok produced=200 consumed=200 first=(\d+) last=(\d+)", out)
    assert m and int(m.group(2)) - int(m.group(1)) == 199, out
    got = read_back(boot, topic, 200)
    assert got == [(str(int(m.group(1)) + i), "k%d" % i, "sarama-%d" % i) for i in range(200)]


def test_kafkajs_admin_and_produce(kc, tmp_path_factory):
    c, brokers, boot = kc
    topic = "kafkajs-t"
    cmd = built_client(tmp_path_factory, "kafkajs")
    r = subprocess.run(cmd + ["--brokers=" + boot, "--topic=" + topic, "--n=120", "--create=3",
                              "--codec=gzip"], capture_output=True, timeout=180)
    out = r.stdout.decode()
    assert r.returncode == 0, (out, r.stderr.decode()[-3000:])
    m = re.search(r"kafkajs ok produced=120 first=(\d+) last=(\d+)", out)
    assert m and int(m.group(1)) == 0 and int(m.group(2)) == 119, out
    # The topic kafkajs created is in the controller's image with 3 partitions.
    assert len(describe_topic(c, topic)) == 3
    got = read_back(boot, topic, 120)
    assert got == [(str(i), "k%d" % i, "kafkajs-%d" % i) for i in range(120)]


def read_line(proc, timeout):
    import select
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no line from %s within %ds" % (proc.args[0], timeout)
    return proc.stdout.readline().decode()


def test_each_client_follows_a_leader_kill(kc, tmp_path_factory):
    """kafka-python, sarama and kafkajs each produce to an RF-2 partition,
    its leader broker is killed, and the same producer instance finds the
    new leader and produces there (kcat and confluent-kafka: see
    test_kill_leader_metadata_moves_and_produce_succeeds)."""
    import kafka
    c, brokers, boot = kc
    parts = create(c, "follow-t", rf=2)
    old = parts[0]["leader"]
    procs = {name: subprocess.Popen(built_client(tmp_path_factory, name) + args,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for name, args in (("sarama", ["-brokers", boot, "-topic", "follow-t", "-follow"]),
                                ("kafkajs", ["--brokers=" + boot, "--topic=follow-t",
                                             "--follow=1"]))}
    try:
        for name, p in procs.items():
            assert read_line(p, 120).startswith("before ok offset="), name
        kp = kafka.KafkaProducer(bootstrap_servers=boot.split(","), acks="all", retries=60,
                                 retry_backoff_ms=250, metadata_max_age_ms=1000,
                                 api_version_auto_timeout_ms=10000)
        kp.send("follow-t", value=b"kafka-python-before", partition=0).get(timeout=30)
        brokers[old].kill()
        parts = wait_partitions(c, "follow-t", lambda p: p[0]["leader"] not in (-1, old), 20,
                                "leader moved off broker %d" % old)
        wait_brokers_see(c, brokers, "follow-t", parts)
        for p in procs.values():
            p.stdin.write(b"\n")
            p.stdin.flush()
        kp.send("follow-t", value=b"kafka-python-after", partition=0).get(timeout=60)
        kp.close()
        for name, p in procs.items():
            line = read_line(p, 120)
            assert line.startswith("after ok offset="), (name, line)
            assert p.wait(30) == 0, name
        others = ",".join("127.0.0.1:%d" % b.port for i, b in brokers.items() if i != old)
        out = kcat("-b", others, "-C", "-t", "follow-t", "-o", "beginning", "-e")
        after = [v for v in out.splitlines() if v.endswith("-after")]
        assert sorted(after) == ["kafka-python-after", "kafkajs-after", "sarama-after"], out
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        brokers[old].start()
        wait_active(c, (1, 2, 3), timeout=30)


# ---- retention ----

def test_retention_deletes_old_segments(kc):
    """retention.bytes and segment.bytes set with the AdminClient reach the
    partition log: old segments go, the log start moves up, what is kept
    stays readable; altering retention.ms to -1 and retention.bytes away
    stops it."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    c, brokers, boot = kc
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic("ret-t", 1, 1, config={"segment.bytes": "1024",
                                                       "retention.bytes": "4096"})]
                        )["ret-t"].result(timeout=30)
    parts = wait_partitions(c, "ret-t", lambda p: len(p) == 1 and p[0]["leader"] >= 0, 15,
                            "ret-t led")
    wait_brokers_see(c, brokers, "ret-t", parts)
    lead = broker_with_leader(brokers, parts)
    # One record per batch (linger 0, batch size 1 record): ~30 segments.
    for i in range(60):
        kcat("-b", boot, "-P", "-t", "ret-t", "-p", "0", "-X", "acks=all",
             stdin=("r%03d-" % i + "x" * 400 + "\n").encode())
    cons = Consumer({"bootstrap.servers": boot, "group.id": "unused", "enable.auto.commit": False})
    try:
        # Retention runs every 300 ms, maybe first while the records still
        # came in: wait until a pass found all 60 there.
        c.wait(lambda: cons.get_watermark_offsets(TopicPartition("ret-t", 0), timeout=10)[0]
               > 40, timeout=30, what="retention moved the log start", interval=0.3)
        low, high = cons.get_watermark_offsets(TopicPartition("ret-t", 0), timeout=10)
    finally:
        cons.close()
    assert high == 60 and 0 < low < 60, (low, high)
    # At most retention.bytes plus the active segment is kept.
    assert (high - low) * 400 < 4096 + 1024 + 60 * 100, (low, high)
    out = kcat("-b", boot, "-C", "-t", "ret-t", "-p", "0", "-o", "beginning", "-e")
    kept = [ln[:4] for ln in out.splitlines()]
    # What is kept is the tail from the log start on: from `low`, or later
    # if a pass still running when the watermarks were read went on.
    first = 60 - len(kept)
    assert first >= low and kept == ["r%03d" % i for i in range(first, 60)], (low, kept)
    assert "retention: deleted" in lead.log()
