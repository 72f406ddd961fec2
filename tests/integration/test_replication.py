"""Broker replication (docs/brokers.md "Replication"): 3 servers and 3
brokers as real processes. Followers fetch from leaders, acks=all waits for
the ISR, the ISR follows real lag, nothing acknowledged is lost when the
leader is killed, and the logs agree below the high watermark.

One cluster serves the whole module; each test uses its own topic.
"""
import re
import signal
import struct
import subprocess
import time
import urllib.request

import pytest

from harness import Cluster, free_ports
from test_controller import (BROKER_ARGS, KEEL, SERVER_ARGS, Broker, keel, wait_active,
                             wait_partitions)
from test_kafka_clients import (closed, connect, kafka_python_batch, produce_error,
                                produce_v3, read_frame, request, wait_brokers_see)

LAG_MS = 2000
SESSION_MS = 8000  # brokers are fenced well after a lagging follower leaves the ISR
RSERVER_ARGS = [a if a != "3000" else str(SESSION_MS) for a in SERVER_ARGS]
assert RSERVER_ARGS != SERVER_ARGS


class MetricsBroker(Broker):
    """A broker that also serves /metrics (--metrics-port)."""

    def __init__(self, cluster, bid):
        super().__init__(cluster, bid)
        self.metrics_port = free_ports(1)[0]

    def start(self):
        args = [KEEL, "broker", "--id", str(self.id), "--servers", self.cluster.connect_string(),
                "--data-dir", self.data_dir, "--port", str(self.port),
                "--metrics-port", str(self.metrics_port)] + BROKER_ARGS + \
            self.cluster.cli_auth()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        log.close()

    def metrics(self):
        """{name or name{labels}: value} from /metrics."""
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        out = {}
        for ln in text.splitlines():
            if ln and not ln.startswith("#"):
                k, v = ln.rsplit(" ", 1)
                out[k] = float(v)
        return out


@pytest.fixture(scope="module")
def rc():
    """(cluster, {id: Broker}, bootstrap) with 3 active brokers and
    replica.lag.time.max.ms set low."""
    c = Cluster(3, server_args=RSERVER_ARGS)
    brokers = {i: MetricsBroker(c, i) for i in (1, 2, 3)}
    ok = False
    try:
        c.start()
        c.wait_leader()
        rc_, out, err = keel("configs", "alter", "--cluster", "--add-config",
                             "replica.lag.time.max.ms=%d" % LAG_MS,
                             "--servers", c.connect_string())
        assert rc_ == 0, (out, err)
        for b in brokers.values():
            b.start()
        wait_active(c, (1, 2, 3))
        c.kafka_brokers = brokers
        ok = True
        yield c, brokers, ",".join("127.0.0.1:%d" % b.port for b in brokers.values())
    finally:
        reports = []
        for b in brokers.values():
            if b.alive():
                b.proc.send_signal(signal.SIGCONT)
            b.kill()
            if not ok:
                print("---- broker %d ----\n%s" % (b.id, b.log()[-4000:]))
            # A sanitizer build (KEEL=build-debug/keel) reports here.
            reports += [ln for ln in b.log().splitlines()
                        if "AddressSanitizer" in ln or "runtime error:" in ln]
        c.cleanup()
    assert not reports, reports[:5]


def create(c, name, rf=3, min_isr=2):
    rc_, out, err = keel("topics", "create", name, "--partitions", "1", "--replication-factor",
                         str(rf), "--config", "min.insync.replicas=%d" % min_isr,
                         "--servers", c.connect_string())
    assert rc_ == 0, (out, err)
    parts = wait_partitions(c, name, lambda p: p.get(0, {}).get("leader", -1) >= 0, 15,
                            name + " led")
    wait_brokers_see(c, c.kafka_brokers, name, parts)
    return parts


def describe(c, topic):
    rc_, out, err = keel("topics", "describe", topic, "--servers", c.connect_string())
    assert rc_ == 0, err
    m = re.search(r"Partition: 0\tLeader: (\d+)", out)
    return {"leader": int(m.group(1))}


def produce_all(boot, topic, values, timeout=60):
    """acks=all; returns {value: offset} of the acknowledged ones."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": timeout * 1000, "retry.backoff.ms": 100,
                  "topic.metadata.refresh.interval.ms": 1000})
    acked = {}

    def done(err, msg):
        if err is None:
            acked[msg.value()] = msg.offset()
    for v in values:
        p.produce(topic, value=v, on_delivery=done)
        p.poll(0)
    p.flush(timeout + 10)
    return acked


def consume_all(boot, topic, want, timeout=60):
    """Every record from the leader: [(offset, value)]."""
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": boot, "group.id": "g", "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 1000})
    cons.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < want and time.time() < deadline:
            m = cons.poll(1.0)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.value()))
    finally:
        cons.close()
    return out


def log_batches(broker, topic):
    """[(offsets, position, size, records, epoch, timestamps)] of every
    batch, from `keel dump-log` of a broker's partition directory (None
    while a write is under way)."""
    rc_, out, err = keel("dump-log", "%s/%s-0" % (broker.data_dir, topic))
    if rc_ != 0:
        return None
    rows = []
    for line in out.splitlines():
        m = re.search(r"offset (\d+)\.\.(\d+) position (\d+) size (\d+) records (\d+) "
                      r"epoch (\d+) codec \S+ crc ok timestamps (\S+)", line)
        if m:
            rows.append(m.groups())
    return rows


def test_acks_all_is_on_every_isr_member_and_logs_agree(rc):
    c, brokers, boot = rc
    create(c, "rep-a")
    values = [b"a%d" % i for i in range(300)]
    acked = produce_all(boot, "rep-a", values)
    assert len(acked) == 300
    # Every replica's log holds the same batches at the same offsets, with
    # the same epochs and CRCs, once the followers have fetched.
    def same():
        logs = [log_batches(b, "rep-a") for b in brokers.values()]
        if None in logs:
            return None
        total = sum(int(r[1]) - int(r[0]) + 1 for r in logs[0])
        return logs if total == 300 and logs[0] == logs[1] == logs[2] else None
    logs = c.wait(same, timeout=20, what="three logs agree")
    assert logs[0][0][0] == "0"
    lead = brokers[describe(c, "rep-a")["leader"]]
    m = lead.metrics()
    assert m["kafka_network_requestmetrics_requests_produce_total"] >= 1
    assert m["kafka_network_requestmetrics_requests_fetchfollower_total"] >= 2
    assert m["kafka_network_requestmetrics_totaltimems_produce_seconds_count"] >= 1

    def lags():
        return [v for k, v in lead.metrics().items()
                if k.startswith('kafka_server_fetcherlagmetrics_consumerlag{topic="rep-a"')]
    assert len(lags()) == 2
    # Both followers reach the log end (their next fetch reports it).
    c.wait(lambda: lags() == [0, 0], timeout=10, what="follower lag 0")
    # Each leader serves the same records at the same offsets: move the
    # leadership with controlled shutdowns and read from whoever leads.
    want = sorted((o, v) for v, o in acked.items())
    assert consume_all(boot, "rep-a", 300) == want
    served = {describe(c, "rep-a")["leader"]}
    for _ in range(3):
        if len(served) == 3:
            break
        lead = describe(c, "rep-a")["leader"]
        assert brokers[lead].terminate(30) == 0
        try:
            parts = wait_partitions(c, "rep-a", lambda p: p[0]["leader"] not in (-1, lead), 20,
                                    "leadership moved off broker %d" % lead)
            new = parts[0]["leader"]
            others = ",".join("127.0.0.1:%d" % b.port for i, b in brokers.items() if i != lead)
            assert consume_all(others, "rep-a", 300) == want, "broker %d serves otherwise" % new
            served.add(new)
        finally:
            brokers[lead].start()
            wait_active(c, (1, 2, 3), timeout=30)
            wait_partitions(c, "rep-a", lambda p: len(p[0]["isr"]) == 3, 30, "ISR full again")
    assert len(served) >= 2, served


def test_kill_leader_mid_stream_loses_nothing_acknowledged(rc):
    c, brokers, boot = rc
    parts = create(c, "rep-k")
    old = parts[0]["leader"]
    import threading
    acked = {}
    values = [b"k%d" % i for i in range(3000)]
    t = threading.Thread(target=lambda: acked.update(produce_all(boot, "rep-k", values, 90)))
    t.start()
    time.sleep(1.0)
    brokers[old].kill()
    try:
        t.join(120)
        assert not t.is_alive()
        assert len(acked) > 0
        parts = wait_partitions(c, "rep-k", lambda p: p[0]["leader"] not in (-1, old),
                                SESSION_MS / 1000 + 20, "leader moved off broker %d" % old)
        others = ",".join("127.0.0.1:%d" % b.port for i, b in brokers.items() if i != old)
        hi = max(acked.values()) + 1
        got = dict((v, o) for o, v in consume_all(others, "rep-k", hi, 90))
        lost = [v for v in acked if got.get(v) != acked[v]]
        assert not lost, "acknowledged records lost or moved: %r" % lost[:10]
    finally:
        brokers[old].start()
        wait_active(c, (1, 2, 3), timeout=30)
    # The old leader rejoins as a follower: it truncates what it had beyond
    # the new leader's log (by leader epoch) and catches up to the same log.
    wait_partitions(c, "rep-k", lambda p: sorted(p[0]["isr"]) == [1, 2, 3], 60,
                    "old leader back in the ISR")

    def same():
        logs = [log_batches(b, "rep-k") for b in brokers.values()]
        return logs if None not in logs and logs[0] == logs[1] == logs[2] else None
    c.wait(same, timeout=30, what="three logs agree after the rejoin")


def test_former_leader_truncates_its_unreplicated_suffix_by_epoch(rc):
    """The followers are stopped while the leader takes three acks=1
    batches: only the first reaches them (it answers the fetch they had
    waiting). The leader dies; a follower is elected with the first batch
    only; the old leader comes back as a follower, asks OffsetForLeaderEpoch
    for its last epoch and cuts the two batches nobody else has — then holds
    the same log as the others, new batches included."""
    c, brokers, boot = rc
    parts = create(c, "rep-x", min_isr=1)
    old = parts[0]["leader"]
    followers = [r for r in parts[0]["replicas"] if r != old]
    wait_partitions(c, "rep-x", lambda p: len(p[0]["isr"]) == 3, 20, "full ISR")
    acked = produce_all(boot, "rep-x", [b"base%d" % i for i in range(5)])
    assert len(acked) == 5
    for f in followers:
        brokers[f].proc.send_signal(signal.SIGSTOP)
    try:
        s = connect(brokers[old].port)
        for i in range(3):  # well inside replica.lag.time.max.ms
            s.sendall(produce_v3("rep-x", 0, kafka_python_batch(b"only-old-%d" % i), acks=1,
                                 corr=10 + i))
            assert produce_error(read_frame(s)) == 0
        s.close()
        before = log_batches(brokers[old], "rep-x")
        brokers[old].kill()
    finally:
        for f in followers:
            brokers[f].proc.send_signal(signal.SIGCONT)
    assert before is not None and len(before) >= 4  # the base batch(es) + 3
    parts = wait_partitions(c, "rep-x", lambda p: p[0]["leader"] in followers,
                            SESSION_MS / 1000 + 20, "a follower leads")
    new = parts[0]["leader"]
    try:
        acked = produce_all(boot, "rep-x", [b"after%d" % i for i in range(5)])
        assert len(acked) == 5
    finally:
        brokers[old].start()
        wait_active(c, (1, 2, 3), timeout=30)
    wait_partitions(c, "rep-x", lambda p: len(p[0]["isr"]) == 3, 60, "old leader back in sync")

    def same():
        logs = [log_batches(b, "rep-x") for b in brokers.values()]
        return logs if None not in logs and logs[0] == logs[1] == logs[2] else None
    logs = c.wait(same, timeout=30, what="three logs agree")
    assert before[-1] not in logs[0] and before[-2] not in logs[0]
    assert "truncated 1 partition log(s)" in brokers[old].log()
    got = [v for _, v in consume_all(boot, "rep-x", 100, timeout=20)]
    assert b"only-old-2" not in got and b"only-old-1" not in got
    assert got[-5:] == [b"after%d" % i for i in range(5)]
    assert new in followers


def test_isr_shrinks_on_lag_and_grows_back(rc):
    c, brokers, boot = rc
    parts = create(c, "rep-s")
    lead = parts[0]["leader"]
    follower = [r for r in parts[0]["replicas"] if r != lead][0]
    wait_partitions(c, "rep-s", lambda p: len(p[0]["isr"]) == 3, 20, "full ISR")
    brokers[follower].proc.send_signal(signal.SIGSTOP)
    # Bootstrap from the running brokers only: a client whose first
    # connection goes to the stopped one waits for its socket timeout.
    live = ",".join("127.0.0.1:%d" % b.port for i, b in brokers.items() if i != follower)
    try:
        t0 = time.time()
        produce_all(live, "rep-s", [b"s%d" % i for i in range(50)], 30)
        wait_partitions(c, "rep-s", lambda p: follower not in p[0]["isr"], 15,
                        "ISR shrinks without broker %d" % follower)
        # By lag (replica.lag.time.max.ms), not by fencing: the broker's
        # session has not expired yet, it is still registered and unfenced.
        assert time.time() - t0 < SESSION_MS / 1000 - 1, time.time() - t0
        assert "ISR change" in brokers[lead].log()
        m = brokers[lead].metrics()
        assert m["kafka_server_replicamanager_isrshrinks_total"] >= 1
        c.wait(lambda: brokers[lead].metrics()[
            "kafka_server_replicamanager_underreplicatedpartitions"] >= 1, timeout=10,
            what="leader reports an under-replicated partition")
    finally:
        brokers[follower].proc.send_signal(signal.SIGCONT)
    wait_partitions(c, "rep-s", lambda p: follower in p[0]["isr"], 30,
                    "ISR grows back with broker %d" % follower)
    assert brokers[lead].metrics()["kafka_server_replicamanager_isrexpands_total"] >= 1


def fetch_v4(topic, partition, offset, replica_id, corr=9):
    t = topic.encode()
    body = struct.pack(">iiiib", replica_id, 100, 1, 1 << 20, 0) + struct.pack(">i", 1) + \
        struct.pack(">h", len(t)) + t + struct.pack(">i", 1) + \
        struct.pack(">iqi", partition, offset, 1 << 20)
    return request(1, 4, corr, body)


def test_a_forged_replica_fetch_is_refused(rc):
    """A Fetch that claims to come from a follower (replica_id >= 0) moves
    the ISR and the high watermark, so the brokers' own fetchers prove the
    cluster secret first (SASL as keel-broker); one that did not is closed,
    and consumers and real replication go on."""
    c, brokers, boot = rc
    parts = create(c, "rep-f")
    lead = brokers[parts[0]["leader"]]
    follower = [r for r in parts[0]["replicas"] if r != lead.id][0]
    produce_all(boot, "rep-f", [b"f%d" % i for i in range(10)], 30)
    s = connect(lead.port)
    s.sendall(fetch_v4("rep-f", 0, 10 ** 6, follower))
    assert closed(s)
    s.close()
    assert "replica Fetch from a connection that did not authenticate as a broker" in \
        lead.log()
    s = connect(lead.port)
    s.sendall(fetch_v4("rep-f", 0, 0, -1))
    resp = read_frame(s)
    s.close()
    assert struct.unpack_from(">i", resp, 0)[0] == 9 and b"f9" in resp
    wait_partitions(c, "rep-f", lambda p: len(p[0]["isr"]) == 3, 20, "full ISR")
    assert "authenticated as keel-broker" in brokers[follower].log() or \
        "authenticated as keel-broker" in lead.log()


def test_acks_all_below_min_insync_is_refused(rc):
    c, brokers, boot = rc
    parts = create(c, "rep-m", rf=2, min_isr=3)
    lead = brokers[parts[0]["leader"]]
    s = connect(lead.port)
    s.sendall(produce_v3("rep-m", 0, kafka_python_batch(b"x"), acks=-1))
    assert produce_error(read_frame(s)) == 19  # NOT_ENOUGH_REPLICAS
    s.sendall(produce_v3("rep-m", 0, kafka_python_batch(b"y"), acks=1, corr=8))
    assert produce_error(read_frame(s)) == 0  # acks=1 does not need the ISR
    s.close()


def broker_isr(port, topic):
    """Partition 0's ISR as this broker's own image has it (Metadata v1 to
    that broker; kcat may ask another one)."""
    t = topic.encode()
    s = connect(port)
    try:
        s.sendall(request(3, 1, 5, struct.pack(">ih", 1, len(t)) + t))
        r = read_frame(s)
    finally:
        s.close()
    pos = 4
    (n,) = struct.unpack_from(">i", r, pos)
    pos += 4
    for _ in range(n):  # brokers: id, host, port, rack
        (hl,) = struct.unpack_from(">h", r, pos + 4)
        pos += 4 + 2 + hl + 4
        (rl,) = struct.unpack_from(">h", r, pos)
        pos += 2 + max(rl, 0)
    pos += 4  # controller id
    (n,) = struct.unpack_from(">i", r, pos)
    pos += 4
    for _ in range(n):
        (_err, nl) = struct.unpack_from(">hh", r, pos)
        name = r[pos + 4:pos + 4 + nl]
        pos += 4 + nl + 1
        (np_,) = struct.unpack_from(">i", r, pos)
        pos += 4
        for _ in range(np_):
            _perr, index, _leader, nr = struct.unpack_from(">hiii", r, pos)
            pos += 14 + 4 * nr
            (ni,) = struct.unpack_from(">i", r, pos)
            isr = list(struct.unpack_from(">%di" % ni, r, pos + 4))
            pos += 4 + 4 * ni
            if name == t and index == 0:
                return sorted(isr)
    return []


def test_idempotent_batch_behind_one_refused_for_the_isr(rc):
    """docs/brokers.md: the leader refuses an idempotent producer's next
    batch for too few in-sync replicas; the batch behind it, read once the
    ISR is whole again, is refused the same way -- not with
    OUT_OF_ORDER_SEQUENCE_NUMBER, which killed librdkafka 2.0.2 in the
    fault run -- and both, retried in order, are written once."""
    from test_kafka_idempotence import idem_batch, init_producer_id, produce, values_of
    c, brokers, boot = rc
    parts = create(c, "rep-i", rf=3, min_isr=3)
    lead_id = parts[0]["leader"]
    lead = brokers[lead_id]
    follower = [r for r in parts[0]["replicas"] if r != lead_id][0]
    c.wait(lambda: len(broker_isr(lead.port, "rep-i")) == 3, timeout=30,
           what="the leader sees the full ISR", interval=0.2)
    err, pid, epoch = init_producer_id(lead.port)
    assert err == 0
    s = connect(lead.port)
    try:
        assert produce(s, "rep-i", idem_batch(pid, epoch, 0, [b"a0"]), 1) == (0, 0)
        first = idem_batch(pid, epoch, 1, [b"b1"])
        second = idem_batch(pid, epoch, 2, [b"c2"])
        brokers[follower].proc.send_signal(signal.SIGSTOP)
        try:
            c.wait(lambda: follower not in broker_isr(lead.port, "rep-i"), timeout=30,
                   what="the ISR shrinks without broker %d" % follower, interval=0.2)
            assert produce(s, "rep-i", first, 2)[0] == 19  # NOT_ENOUGH_REPLICAS
        finally:
            brokers[follower].proc.send_signal(signal.SIGCONT)
        c.wait(lambda: len(broker_isr(lead.port, "rep-i")) == 3, timeout=30,
               what="broker %d back in the ISR" % follower, interval=0.2)
        assert produce(s, "rep-i", second, 3)[0] == 19  # Kafka: 45, OUT_OF_ORDER
        assert produce(s, "rep-i", first, 4) == (0, 1)
        assert produce(s, "rep-i", second, 5) == (0, 2)
        assert produce(s, "rep-i", first, 6) == (0, 1)  # a retry: its offset, one copy
        gap = idem_batch(pid, epoch, 5, [b"gap"])
        assert produce(s, "rep-i", gap, 7)[0] == 45  # a real gap is still refused so
    finally:
        s.close()
    assert values_of(boot, "rep-i") == ["a0", "b1", "c2"]
    wait_active(c, (1, 2, 3), timeout=30)


def test_controlled_shutdown_of_a_follower_and_leader_logs_totals(rc):
    """SIGTERM: leaderships move, the fetchers and /metrics close, the
    broker exits 0 and logs its replication totals (a sanitizer build also
    checks for leaks here)."""
    c, brokers, boot = rc
    parts = create(c, "rep-t")
    produce_all(boot, "rep-t", [b"t%d" % i for i in range(20)])
    lead = parts[0]["leader"]
    assert brokers[lead].terminate(30) == 0
    try:
        log = brokers[lead].log()
        assert "controlled shutdown complete" in log
        m = re.findall(r"replication: (\d+) fetches .* (\d+) follower fetches served", log)
        assert m and int(m[-1][1]) > 0, m
        # The others go on: the new leader takes acks=all with ISR 2 >= 2.
        acked = produce_all(boot, "rep-t", [b"u%d" % i for i in range(20)])
        assert len(acked) == 20
    finally:
        brokers[lead].start()
        wait_active(c, (1, 2, 3), timeout=30)
