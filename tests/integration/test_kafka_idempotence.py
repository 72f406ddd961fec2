"""The idempotent producer against `keel broker` (docs/brokers.md): 3 servers
and 3 brokers as real processes. InitProducerId hands out ids from blocks
the controller commits; the partition leader answers a retried batch with
its first offset and writes it once, refuses a sequence gap and an old
epoch; librdkafka with enable.idempotence=true goes through a leader
restart with no duplicate and no gap.
"""
import os
import signal
import struct
import threading
import time

from test_controller import keel, wait_active, wait_partitions
from test_kafka_clients import (broker_with_leader, connect, create, kcat, read_frame,  # noqa: F401
                                request, kc)

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
COORDINATOR_NOT_AVAILABLE = 15


def init_producer_id(port, transactional_id=None, corr=1):
    """InitProducerId v0 on a fresh connection: (error, producer id, epoch)."""
    if transactional_id is None:
        tid = struct.pack(">h", -1)
    else:
        tid = struct.pack(">h", len(transactional_id)) + transactional_id.encode()
    s = connect(port)
    try:
        s.sendall(request(22, 0, corr, tid + struct.pack(">i", 60000)))
        resp = read_frame(s)
    finally:
        s.close()
    rcorr, _throttle, err, pid, epoch = struct.unpack_from(">iihqh", resp, 0)
    assert rcorr == corr
    return err, pid, epoch


def next_producer_id(s, corr):
    """InitProducerId v0 on an open connection: (error, producer id)."""
    s.sendall(request(22, 0, corr, struct.pack(">hi", -1, 60000)))
    rcorr, _throttle, err, pid, _epoch = struct.unpack_from(">iihqh", read_frame(s), 0)
    assert rcorr == corr
    return err, pid


def idem_batch(pid, epoch, seq, values):
    """A magic-2 batch of an idempotent producer, by kafka-python's encoder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    return bytes(b.build())


def produce(s, topic, records, corr):
    """Produce v3, acks=all, one partition (0): (error, base offset)."""
    t = topic.encode()
    body = struct.pack(">hhi", -1, -1, 30000) + struct.pack(">i", 1) + \
        struct.pack(">h", len(t)) + t + struct.pack(">i", 1) + \
        struct.pack(">i", 0) + struct.pack(">i", len(records)) + records
    s.sendall(request(0, 3, corr, body))
    resp = read_frame(s)
    rcorr, _n = struct.unpack_from(">ii", resp, 0)
    assert rcorr == corr
    nl = struct.unpack_from(">h", resp, 8)[0]
    _count, _index, err, base = struct.unpack_from(">iihq", resp, 10 + nl)
    return err, base


def values_of(boot, topic):
    return kcat("-b", boot, "-C", "-t", topic, "-o", "beginning", "-e").splitlines()


def test_init_producer_id_hands_out_distinct_ids(kc):
    c, brokers, boot = kc
    seen = set()
    for b in brokers.values():
        for i in range(3):
            err, pid, epoch = init_producer_id(b.port, corr=10 + i)
            assert (err, epoch) == (NONE, 0)
            assert pid >= 0 and pid not in seen
            seen.add(pid)
    # Each broker took its own block: ids of two brokers are 1000 apart.
    blocks = {pid // 1000 for pid in seen}
    assert len(blocks) == 3, sorted(seen)
    # Transactions are not supported: a transactional id is refused clearly.
    err, pid, _ = init_producer_id(brokers[1].port, transactional_id="tx-1")
    assert (err, pid) == (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    # The blocks are in the metadata log, one record each.
    leader = c.wait_leader()
    rc, out, err = keel("log", "dump", "--data-dir", leader.data_dir, "--metadata-only")
    assert rc == 0, err
    assert out.count("ProducerIds: Broker-") == 3, out[-3000:]


def test_retry_gap_and_old_epoch(kc):
    c, brokers, boot = kc
    parts = create(c, "idem-raw")
    lead = broker_with_leader(brokers, parts)
    err, pid, epoch = init_producer_id(lead.port)
    assert err == NONE
    s = connect(lead.port)
    first = idem_batch(pid, epoch, 0, [b"a0", b"a1"])
    assert produce(s, "idem-raw", first, 1) == (NONE, 0)
    # The same batch again (a retry): the first offset, nothing written.
    assert produce(s, "idem-raw", first, 2) == (NONE, 0)
    second = idem_batch(pid, epoch, 2, [b"b2"])
    assert produce(s, "idem-raw", second, 3) == (NONE, 2)
    assert produce(s, "idem-raw", first, 4) == (NONE, 0)  # still one of the last 5
    assert produce(s, "idem-raw", second, 5) == (NONE, 2)
    # A gap: sequence 5 after 2.
    gap = idem_batch(pid, epoch, 5, [b"gap"])
    assert produce(s, "idem-raw", gap, 6)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    # A newer epoch must start at sequence 0; then the old epoch is fenced.
    assert produce(s, "idem-raw", idem_batch(pid, epoch + 1, 3, [b"x"]), 7)[0] == \
        OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(s, "idem-raw", idem_batch(pid, epoch + 1, 0, [b"e1"]), 8) == (NONE, 3)
    assert produce(s, "idem-raw", idem_batch(pid, epoch, 3, [b"old"]), 9)[0] == \
        INVALID_PRODUCER_EPOCH
    s.close()
    assert values_of(boot, "idem-raw") == ["a0", "a1", "b2", "e1"]

    # After a kill -9 and restart the state comes back from the log: the
    # retry of an acknowledged batch still gets its first offset.
    lead.kill()
    lead.start()
    wait_active(c, (1, 2, 3), timeout=30)
    wait_partitions(c, "idem-raw", lambda p: p[0]["leader"] == lead.id, 30, "leader back")

    def retried():
        try:
            s = connect(lead.port)
            try:
                return produce(s, "idem-raw", idem_batch(pid, epoch + 1, 0, [b"e1"]), 10)
            finally:
                s.close()
        except (OSError, AssertionError):
            return None
    c.wait(lambda: retried() == (NONE, 3), timeout=30, what="retry after restart",
           interval=0.3)
    s = connect(lead.port)
    assert produce(s, "idem-raw", idem_batch(pid, epoch + 1, 1, [b"e2"]), 11) == (NONE, 4)
    assert produce(s, "idem-raw", idem_batch(pid, epoch + 1, 3, [b"e4"]), 12)[0] == \
        OUT_OF_ORDER_SEQUENCE_NUMBER
    s.close()
    assert values_of(boot, "idem-raw") == ["a0", "a1", "b2", "e1", "e2"]

    # A clean stop writes the state to a snapshot; keel dump-log shows it.
    assert lead.terminate() == 0
    try:
        rc, out, err = keel("dump-log", os.path.join(lead.data_dir, "idem-raw-0"))
        assert rc == 0, err
        assert "producer snapshot 00000000000000000005.snapshot: 1 producers before offset 5" \
            in out, out
        assert "  producer %d epoch %d: seq 0..0 @ 3..3 seq 1..1 @ 4..4" % (pid, epoch + 1) \
            in out, out
    finally:
        lead.start()
        wait_active(c, (1, 2, 3), timeout=60)


def test_librdkafka_idempotent_producer_through_leader_restart(kc):
    """confluent-kafka with enable.idempotence=true keeps producing while the
    partition's leader is killed (-9) and restarted, then paused past the
    client's request timeout (so the client resends batches the broker
    then writes): every acknowledged record is in the log exactly once, in
    the order produced."""
    from confluent_kafka import Producer
    c, brokers, boot = kc
    parts = create(c, "idem-rdk")
    lead = broker_with_leader(brokers, parts)
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 2, "retry.backoff.ms": 100, "message.timeout.ms": 120000,
                  "request.timeout.ms": 1000,
                  "topic.metadata.refresh.interval.ms": 500,
                  "max.in.flight.requests.per.connection": 5})
    acked, failed = [], []

    def report(err, msg):
        (failed if err is not None else acked).append((msg.value(), err))

    stop = threading.Event()
    sent = []

    def run():
        i = 0
        while not stop.is_set():
            v = b"v%06d" % i
            try:
                p.produce("idem-rdk", value=v, on_delivery=report)
                sent.append(v)
                i += 1
            except BufferError:
                pass
            p.poll(0.001)
        p.flush(150)

    t = threading.Thread(target=run)
    t.start()
    try:
        c.wait(lambda: len(acked) >= 2000, timeout=60, what="first acknowledgements")
        lead.kill()
        time.sleep(0.5)  # records pile up for a dead leader
        lead.start()
        wait_active(c, (1, 2, 3), timeout=60)
        wait_partitions(c, "idem-rdk", lambda p: p[0]["leader"] == lead.id, 60, "leader back")
        n = len(acked)
        c.wait(lambda: len(acked) >= n + 2000, timeout=90, what="acknowledgements after restart")
        # Paused past request.timeout.ms: the client gives up on in-flight
        # requests and resends them; the broker, resumed, reads both.
        os.kill(lead.proc.pid, signal.SIGSTOP)
        time.sleep(2.5)
        os.kill(lead.proc.pid, signal.SIGCONT)
        n = len(acked)
        c.wait(lambda: len(acked) >= n + 2000, timeout=90, what="acknowledgements after pause")
    finally:
        stop.set()
        t.join(200)
    assert not t.is_alive()
    assert failed == [], failed[:5]
    got = [v.encode() for v in values_of(boot, "idem-rdk")]
    acked_values = [v for v, _ in acked]
    assert len(got) == len(set(got)), "duplicates in the log"
    assert set(acked_values) <= set(got), "acknowledged records missing"
    # No gap: what is in the log is a prefix of what was sent, in order.
    assert got == sent[:len(got)]
    # The leader's count of retries answered with their first offsets.
    assert lead.terminate() == 0
    lead.start()
    dups = [line for line in lead.log().splitlines() if "retried idempotent batches" in line]
    print("records: %d acknowledged, %d in the log; %s" % (len(acked), len(got), dups))
    wait_active(c, (1, 2, 3), timeout=60)


def test_producer_ids_distinct_across_controller_failover(kc):
    """A broker uses up its block while the active controller is killed: the
    next blocks come from the new controller, and no id repeats."""
    c, brokers, boot = kc
    s = connect(brokers[2].port)
    ids, corr = [], [0]

    def take(n):
        deadline = time.time() + 60
        while n > 0:
            corr[0] += 1
            err, pid = next_producer_id(s, corr[0])
            if err == COORDINATOR_NOT_AVAILABLE:  # no controller yet: ask again
                assert time.time() < deadline, "no producer id block within 60 s"
                time.sleep(0.2)
                continue
            assert err == NONE
            ids.append(pid)
            n -= 1
    try:
        take(1)
        old = c.wait_leader()
        old.kill()
        try:
            c.wait_leader(exclude=(old.id,), timeout=30)
            take(2100)  # two more blocks at least
        finally:
            old.start()
            c.wait_leader(timeout=30)
    finally:
        s.close()
    assert len(set(ids)) == len(ids)
    assert len({pid // 1000 for pid in ids}) >= 3
