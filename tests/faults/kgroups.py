"""The consumer-group workload of the fault runner (`--kafka-group N`): N
confluent-kafka consumers in one group (GROUP) read the Kafka workload's
topic, and commit what they have read with synchronous commits -- every
COMMIT_INTERVAL_S, and when partitions are taken from them (the rebalance
callback, before they rejoin: so a commit is answered before the next
generation can hand its partitions to another member). An observer reads
the group's committed offsets (OffsetFetch) every second. The nemeses
gkill-coord and gpause-coord (knemesis.py) kill or stop the group's
coordinator: the broker leading its __consumer_offsets partition.

History records:
  "gcommit"  args {"parts": {partition: offset}}; ok when every partition
             was committed, fail when the answer says none was (the
             coordinator refused the member: UNKNOWN_MEMBER_ID,
             ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID),
             unknown otherwise (an error after the append may still be
             committed, e.g. COORDINATOR_NOT_AVAILABLE from a coordinator
             that lost its partition; a timeout);
  "gfetch"   the observer's OffsetFetch: ok with result {partition: offset}
             (-1001: none), fail when it got no answer (it changed nothing).
Deliveries are not in the history (one per record read): each member keeps
[[partition, offset, value], ...], saved in the final reads with the
group's committed offsets after the members stopped (kgcheck.py checks
them).
"""
import threading
import time

from history import FAIL, OK, UNKNOWN
from kworkload import TOPIC

GROUP = "faults-group"
COMMIT_INTERVAL_S = 0.3
OBSERVE_INTERVAL_S = 1.0
# Errors that say the commit was refused before anything was written.
REFUSED = {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS",
           "FENCED_INSTANCE_ID", "INVALID_GROUP_ID"}


def consumer_conf(brokers, name, **extra):
    conf = {"bootstrap.servers": brokers.bootstrap(), "group.id": GROUP,
            "client.id": name, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500, "max.poll.interval.ms": 120000,
            "topic.metadata.refresh.interval.ms": 2000, "log_level": 3}
    conf.update(extra)
    return conf


class Member(threading.Thread):
    def __init__(self, run, brokers, name):
        super().__init__(name=name, daemon=True)
        self.run_ = run
        self.brokers = brokers
        self.delivered = []          # [[partition, offset, value], ...]
        self.pending = {}            # partition -> next offset, not committed yet
        self.consumer = None

    def commit(self, why):
        from confluent_kafka import KafkaException, TopicPartition
        if not self.pending:
            return
        parts = dict(self.pending)
        h = self.run_.history
        op = h.invoke(self.name, "gcommit", key=GROUP,
                      args={"parts": {str(p): o for p, o in sorted(parts.items())}, "why": why})
        try:
            res = self.consumer.commit(offsets=[TopicPartition(TOPIC, p, o)
                                                for p, o in sorted(parts.items())],
                                       asynchronous=False)
            errs = sorted({tp.error.name() for tp in res if tp.error is not None})
        except KafkaException as e:
            errs = [e.args[0].name() if e.args and hasattr(e.args[0], "name") else repr(e)]
        if not errs:
            h.complete(op, OK)
            for p, o in parts.items():
                if self.pending.get(p) == o:
                    del self.pending[p]
        elif all(e in REFUSED for e in errs):
            h.complete(op, FAIL, err=",".join(errs))
        else:
            h.complete(op, UNKNOWN, err=",".join(errs))

    def on_revoke(self, consumer, partitions):
        # Before the next generation may give these partitions to another
        # member: what was read is committed (or the commit's fate known).
        self.commit("revoke")
        self.pending.clear()

    def run(self):
        from confluent_kafka import Consumer
        try:
            self.consumer = Consumer(consumer_conf(self.brokers, self.name))
            self.consumer.subscribe([TOPIC], on_revoke=self.on_revoke)
            last = time.monotonic()
            while not self.run_.stop.is_set():
                m = self.consumer.poll(0.1)
                if m is not None and m.error() is None:
                    p, off = m.partition(), m.offset()
                    self.delivered.append([p, off, m.value().decode(errors="replace")])
                    self.pending[p] = off + 1
                if time.monotonic() - last >= COMMIT_INTERVAL_S:
                    self.commit("interval")
                    last = time.monotonic()
            self.commit("final")
            self.consumer.close()
        except Exception as e:  # noqa: BLE001
            self.run_.errors.append("%s: %r" % (self.name, e))


class Observer(threading.Thread):
    """OffsetFetch of the group's offsets, every OBSERVE_INTERVAL_S, from a
    consumer of the group that never joins it."""

    def __init__(self, run, brokers, partitions):
        super().__init__(name="gobserver", daemon=True)
        self.run_ = run
        self.brokers = brokers
        self.partitions = partitions

    def run(self):
        from confluent_kafka import Consumer
        h = self.run_.history
        try:
            c = Consumer(consumer_conf(self.brokers, "gobserver"))
        except Exception as e:  # noqa: BLE001
            self.run_.errors.append("gobserver: %r" % e)
            return
        try:
            while not self.run_.stop.wait(OBSERVE_INTERVAL_S):
                op = h.invoke(self.name, "gfetch", key=GROUP)
                try:
                    got = committed_offsets(c, self.partitions, 5)
                    h.complete(op, OK, {str(p): o for p, o in sorted(got.items())})
                except Exception as e:  # noqa: BLE001
                    h.complete(op, FAIL, err=repr(e)[:100])
        finally:
            c.close()


def committed_offsets(consumer, partitions, timeout):
    from confluent_kafka import TopicPartition
    tps = consumer.committed([TopicPartition(TOPIC, p) for p in range(partitions)],
                             timeout=timeout)
    for tp in tps:
        if tp.error is not None:
            raise RuntimeError("OffsetFetch %d: %s" % (tp.partition, tp.error.name()))
    return {tp.partition: tp.offset for tp in tps}


def make_workers(run, brokers, kc, members):
    ms = [Member(run, brokers, "gm-%d" % i) for i in range(members)]
    return ms, ms + [Observer(run, brokers, kc.partitions)]


def read_final(brokers, kc, members, timeout=60, log=print):
    """After the members stopped: the group's committed offsets (retried
    while the coordinator moves) and every member's deliveries."""
    from confluent_kafka import Consumer
    c = Consumer(consumer_conf(brokers, "gfinal"))
    deadline = time.monotonic() + timeout
    final = None
    try:
        while final is None:
            try:
                final = committed_offsets(c, kc.partitions, 10)
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()
    log("  group final: committed %s, delivered %s" % (
        final, {m.name: len(m.delivered) for m in members}))
    return {"group": GROUP, "committed": final,
            "delivered": {m.name: m.delivered for m in members}}
