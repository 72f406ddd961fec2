"""The Kafka workload of the fault runner: confluent-kafka (librdkafka)
producers with acks=all on an RF-3 topic with min.insync.replicas=2, every
value unique ("<producer>-<seq>"), every send recorded in the history; and
after the heal, the final reads the checker (kcheck.py) compares: a
consumer's read of every partition to the end, and every broker's own log
read from its partition files.

History records ("kproduce"): args {"p", "seq", "v", "part"}; outcome ok with
result {"offset"} when the delivery report said delivered, unknown when it
said anything else (a timed-out or failed batch may still be in the log) or
never came.

KEEL_FAULTS_RDKAFKA_DEBUG=PREFIX writes each producer's librdkafka debug log
(eos, msg, protocol, broker, topic) to PREFIX-<producer>.log: what the client
sent and was answered, for a fatal producer error (a few MB a minute).
"""
import glob
import os
import struct
import threading
import time

from history import OK, UNKNOWN

TOPIC = "faults"


class KafkaConfig:
    def __init__(self, **kw):
        self.producers = 2
        self.partitions = 3
        self.replication = 3
        self.min_isr = 2
        self.idempotent = False
        self.think = 0.01          # seconds between sends of one producer
        self.max_outstanding = 200  # sends without a delivery report
        self.message_timeout_ms = 20000
        # "spread": the controller places the leaders; "one": every
        # partition led by one broker (the others are followers only, for
        # the nemeses that must not touch a leader before replication).
        self.leaders = "spread"
        self.__dict__.update(kw)


def create_topic(brokers, kc, log=print):
    """Creates TOPIC (RF kc.replication, min.insync.replicas) and waits for
    every partition to have a leader that every broker knows of."""
    rf = min(kc.replication, len(brokers.brokers))
    first = 1 if kc.leaders == "one" else kc.partitions
    rc, out = brokers.keel("topics", "create", TOPIC, "--partitions", str(first),
                           "--replication-factor", str(rf),
                           "--config", "min.insync.replicas=%d" % kc.min_isr)
    if rc != 0:
        raise RuntimeError("topics create: %s" % out)
    parts = brokers.wait(lambda: (lambda d: len(d) == first and
                                  all(p["leader"] >= 0 for p in d.values()) and d)(
        brokers.describe(TOPIC)), 60, "topic %s led" % TOPIC)
    if first < kc.partitions:
        row = ":".join(str(b) for b in parts[0]["replicas"])
        rc, out = brokers.keel("topics", "alter", TOPIC, "--partitions", str(kc.partitions),
                               "--replica-assignment",
                               ",".join([row] * (kc.partitions - first)))
        if rc != 0:
            raise RuntimeError("topics alter: %s" % out)
        parts = brokers.wait(lambda: (lambda d: len(d) == kc.partitions and
                                      all(p["leader"] >= 0 for p in d.values()) and d)(
            brokers.describe(TOPIC)), 60, "topic %s led" % TOPIC)
    log("  kafka topic %s: %s" % (TOPIC, {p: (d["leader"], d["replicas"])
                                          for p, d in sorted(parts.items())}))
    wait_served(brokers, kc.partitions)
    return parts


def wait_served(brokers, partitions, timeout=60):
    """Until a client sees every partition with a leader."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})

    def ready():
        md = admin.list_topics(TOPIC, timeout=5)
        t = md.topics.get(TOPIC)
        return (t is not None and t.error is None and len(t.partitions) == partitions and
                all(p.leader >= 0 for p in t.partitions.values()))
    brokers.wait(ready, timeout, "clients see %s" % TOPIC)


class Producer(threading.Thread):
    def __init__(self, run, brokers, kc, name):
        super().__init__(name=name, daemon=True)
        self.run_ = run
        self.brokers = brokers
        self.kc = kc
        self.outstanding = 0

    def run(self):
        from confluent_kafka import KafkaException, Producer as CP
        kc = self.kc
        conf = {"bootstrap.servers": self.brokers.bootstrap(), "acks": "all",
                "linger.ms": 5, "compression.type": "none",
                "message.timeout.ms": kc.message_timeout_ms,
                "request.timeout.ms": 5000, "retry.backoff.ms": 200,
                "topic.metadata.refresh.interval.ms": 2000,
                "enable.idempotence": kc.idempotent,
                # Warnings and errors only: disconnects are the point of the run.
                "log_level": 4}
        if not kc.idempotent:
            # One request in flight: a retried batch cannot overtake a later one.
            conf["max.in.flight.requests.per.connection"] = 1
        h = self.run_.history

        def on_error(err):
            # A fatal error (idempotence: a state librdkafka cannot
            # recover from) ends the producer; say which.
            if err.fatal():
                self.run_.errors.append("%s: fatal producer error: %s" % (self.name, err))
        conf["error_cb"] = on_error
        debug_prefix = os.environ.get("KEEL_FAULTS_RDKAFKA_DEBUG")
        if debug_prefix:
            import logging
            lg = logging.getLogger(self.name)
            lg.propagate = False
            fh = logging.FileHandler(debug_prefix + "-" + self.name + ".log")
            fh.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            lg.addHandler(fh)
            lg.setLevel(logging.DEBUG)
            conf["debug"] = "eos,msg,protocol,broker,topic"
            conf["log_level"] = 7
            conf["logger"] = lg
        try:
            p = CP(conf)
        except KafkaException as e:
            self.run_.errors.append("%s: %r" % (self.name, e))
            return

        def report(op):
            def cb(err, msg):
                self.outstanding -= 1
                if err is None:
                    h.complete(op, OK, {"offset": msg.offset()})
                else:
                    h.complete(op, UNKNOWN, err=str(err.name()))
            return cb
        seq = 0
        try:
            while not self.run_.stop.is_set():
                if self.outstanding >= kc.max_outstanding:
                    p.poll(0.1)
                    continue
                part = seq % kc.partitions
                v = "%s-%d" % (self.name, seq)
                op = h.invoke(self.name, "kproduce", key="%s/%d" % (TOPIC, part),
                              args={"p": self.name, "seq": seq, "v": v, "part": part})
                while True:
                    try:
                        p.produce(TOPIC, value=v.encode(), partition=part,
                                  on_delivery=report(op))
                        self.outstanding += 1
                        break
                    except BufferError:
                        p.poll(0.1)
                seq += 1
                p.poll(0)
                time.sleep(kc.think)
            # What is still queued gets its delivery report (or stays open:
            # unknown) within the message timeout.
            p.flush(kc.message_timeout_ms / 1000.0 + 5)
        except Exception as e:  # noqa: BLE001
            self.run_.errors.append("%s: %r" % (self.name, e))


def make_producers(run, brokers, kc):
    return [Producer(run, brokers, kc, "kp-%d" % i) for i in range(kc.producers)]


# ---- final reads ----

def high_watermarks(brokers, partitions, timeout=60):
    """{partition: high watermark} from each partition's leader."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": brokers.bootstrap(), "group.id": "faults-final",
                  "enable.auto.commit": False})
    try:
        out = {}
        deadline = time.monotonic() + timeout
        for part in range(partitions):
            while True:
                try:
                    out[part] = c.get_watermark_offsets(TopicPartition(TOPIC, part),
                                                        timeout=5)[1]
                    break
                except Exception:  # noqa: BLE001
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        return out
    finally:
        c.close()


def consume_all(brokers, hw, timeout=120):
    """{partition: [[offset, value], ...]}: every partition read from offset
    0 by a consumer with a manual assignment, until the high watermark."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": brokers.bootstrap(), "group.id": "faults-final",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "auto.offset.reset": "earliest"})
    got = {p: [] for p in hw}
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in hw])
        done = {p for p, h in hw.items() if h == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(hw) and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            p = m.partition()
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if got[p] and got[p][-1][0] + 1 >= hw[p] or hw[p] == 0:
                        done.add(p)
                continue
            got[p].append([m.offset(), m.value().decode(errors="replace")])
            if m.offset() + 1 >= hw[p]:
                done.add(p)
        return got
    finally:
        c.close()


def _varint(buf, i):
    """Kafka's zigzag varint at buf[i:]: (value, next index)."""
    shift = 0
    raw = 0
    while True:
        b = buf[i]
        i += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (raw >> 1) ^ -(raw & 1), i


def parse_batches(data):
    """[(offset, value or None)] of every record in a segment's record
    batches (magic 2). Stops at a torn tail. Values of compressed batches
    (the workload sends none) are None; control batches are skipped."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length < 49 or end > len(data):
            break
        attrs, last_delta = struct.unpack_from(">hi", data, pos + 21)
        count = struct.unpack_from(">i", data, pos + 57)[0]
        if attrs & 0x20:
            pos = end
            continue
        if attrs & 0x07:
            out += [(base + d, None) for d in range(last_delta + 1)]
            pos = end
            continue
        i = pos + 61
        for _ in range(count):
            rlen, i = _varint(data, i)
            rend = i + rlen
            i += 1                      # attributes
            _, i = _varint(data, i)     # timestamp delta
            odelta, i = _varint(data, i)
            klen, i = _varint(data, i)
            i += max(klen, 0)
            vlen, i = _varint(data, i)
            value = None if vlen < 0 else data[i:i + vlen].decode(errors="replace")
            out.append((base + odelta, value))
            i = rend
        pos = end
    return out


def replica_log(data_dir, partition):
    """[[offset, value], ...] of a broker's log of TOPIC-partition."""
    recs = []
    for seg in sorted(glob.glob(os.path.join(data_dir, "%s-%d" % (TOPIC, partition),
                                             "*.log"))):
        with open(seg, "rb") as f:
            recs += [[o, v] for o, v in parse_batches(f.read())]
    return recs


def wait_full_isr(brokers, timeout=60):
    """Until every partition's ISR is its whole replica list (with
    replication: every follower caught up, so truncated where it diverged);
    returns the last `topics describe` and whether that happened."""
    deadline = time.monotonic() + timeout
    parts = {}
    while time.monotonic() < deadline:
        parts = brokers.describe(TOPIC)
        if parts and all(sorted(p["isr"]) == sorted(p["replicas"]) and p["leader"] >= 0
                         for p in parts.values()):
            return parts, True
        time.sleep(0.5)
    return parts, False


def read_final(brokers, kc, log=print):
    """After the producers stopped: waits (up to 60 s) for every replica to
    be in the ISR, then reads the high watermarks, the consumer's view and
    every broker's files."""
    describe, full = wait_full_isr(brokers)
    if not full:
        log("  kafka final: the ISR is not complete after 60 s: %s" % describe)
    hw = high_watermarks(brokers, kc.partitions)
    consumed = consume_all(brokers, hw)
    replicas = {b.id: {p: replica_log(b.data_dir, p) for p in range(kc.partitions)}
                for b in brokers.brokers.values()}
    log("  kafka final: high watermarks %s, consumed %s, replica logs %s" % (
        hw, {p: len(r) for p, r in consumed.items()},
        {b: {p: len(r) for p, r in parts.items()} for b, parts in replicas.items()}))
    return {"topic": TOPIC, "hw": hw, "consumed": consumed, "replicas": replicas,
            "idempotent": kc.idempotent, "describe": describe, "isr_complete": full}
