"""Integration test of the high-watermark checkpoint (docs/brokers.md,
"High-watermark checkpoint"): 3 servers and 3 brokers; a broker writes
DATA_DIR/replication-offset-checkpoint every --hw-checkpoint-interval-ms and
at a clean stop, and after a restart (clean or kill -9) each partition starts
from its checkpointed high watermark — shown by a restarted follower whose
leader is stopped, so that nothing but the checkpoint can have told it."""
import os
import re
import signal
import struct
import subprocess
import urllib.request

from harness import free_ports
from test_controller import keel, wait_active, wait_partitions
from test_kafka_clients import kc  # noqa: F401 (a module-scoped fixture of its own here)
from test_kafka_clients import kcat

MAGIC = 0x4B485743  # "KHWC"


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def checkpoint(broker):
    """{partition: high watermark} of the one-partition topic in the
    broker's checkpoint file (the test's; __consumer_offsets has more), or
    None when there is no file yet."""
    path = os.path.join(broker.data_dir, "replication-offset-checkpoint")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    magic, version, count = struct.unpack_from(">IHI", data)
    assert (magic, version, len(data)) == (MAGIC, 1, 14 + 28 * count), data[:16]
    assert struct.unpack_from(">I", data, len(data) - 4)[0] == crc32c(data[:-4])
    topics = {}
    for i in range(count):
        topic_id = data[10 + 28 * i:26 + 28 * i]
        partition, hw = struct.unpack_from(">iq", data, 26 + 28 * i)
        topics.setdefault(topic_id, {})[partition] = hw
    single = [t for t in topics.values() if list(t) == [0]]
    assert len(single) <= 1, topics
    return single[0] if single else {}


def metric_hw(port, topic, partition):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read()
    except OSError:
        return None
    m = re.search(r'keel_broker_partition_high_watermark\{topic="%s",partition="%d"\} (\d+)'
                  % (topic, partition), body.decode())
    return int(m.group(1)) if m else None


def latest(boot, topic):
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": boot, "group.id": "hwc-probe"})
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        cons.close()


def test_restarted_broker_starts_from_its_checkpointed_high_watermark(kc):  # noqa: F811
    c, brokers, boot = kc
    hosts = c.connect_string()
    b3 = brokers[3]
    mport = free_ports(1)[0]
    b3.extra_args += ["--hw-checkpoint-interval-ms", "200", "--metrics-port", str(mport)]
    assert b3.terminate() == 0
    b3.start()
    wait_active(c, (1, 2, 3), timeout=60)
    rc, out, err = keel("topics", "create", "hwc", "--replica-assignment", "1:2:3",
                        "--servers", hosts)
    assert rc == 0, err
    wait_partitions(c, "hwc", lambda p: p[0]["leader"] == 1 and sorted(p[0]["isr"]) == [1, 2, 3],
                    30, "hwc led by broker 1 with a full ISR")
    kcat("-b", "127.0.0.1:%d" % brokers[1].port, "-P", "-t", "hwc", "-p", "0", "-X", "acks=all",
         stdin="".join("v%d\n" % i for i in range(200)).encode())
    assert latest(boot, "hwc") == 200
    # Periodically: broker 3's checkpoint reaches 200 (every 200 ms here).
    c.wait(lambda: (checkpoint(b3) or {}).get(0) == 200, timeout=30,
           what="broker 3 checkpoints high watermark 200")
    # At a clean stop: the newest high watermark (the default interval is
    # 5 s, so this is the stop's write).
    assert brokers[2].terminate() == 0
    assert checkpoint(brokers[2]) == {0: 200}
    assert "wrote the high-watermark checkpoint" in brokers[2].log()
    brokers[2].start()
    # kill -9 of broker 3 while the leader is stopped: the restarted broker
    # cannot hear the high watermark from a leader, so the 200 it shows
    # comes from its checkpoint (without one it would show 0).
    leader_pid = brokers[1].proc.pid
    os.kill(leader_pid, signal.SIGSTOP)
    try:
        b3.kill()
        b3.start()
        first = c.wait(lambda: [v for v in [metric_hw(mport, "hwc", 0)] if v is not None],
                       timeout=20, what="broker 3 reports hwc-0 after its restart")[0]
        assert first == 200, first
        assert re.search(r"high-watermark checkpoint: \d+ partitions to start from it", b3.log())
    finally:
        os.kill(leader_pid, signal.SIGCONT)
    # Settled again: ListOffsets latest did not go back, every record reads.
    wait_active(c, (1, 2, 3), timeout=90)
    wait_partitions(c, "hwc", lambda p: sorted(p[0]["isr"]) == [1, 2, 3], 90, "full ISR again")
    c.wait(lambda: latest(boot, "hwc") == 200, timeout=30, what="latest offset 200")
    out = subprocess.run(["kcat", "-b", boot, "-C", "-t", "hwc", "-o", "beginning", "-e"],
                         capture_output=True, timeout=60)
    assert out.stdout.decode().splitlines() == ["v%d" % i for i in range(200)]
    # A corrupt checkpoint is named in the log and ignored; the broker
    # starts as without one and learns the high watermark from its leader.
    b2 = brokers[2]
    mport2 = free_ports(1)[0]
    b2.extra_args += ["--metrics-port", str(mport2)]
    assert b2.terminate() == 0
    path = os.path.join(b2.data_dir, "replication-offset-checkpoint")
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff")
    b2.start()
    c.wait(lambda: re.search(r"ignoring the high-watermark checkpoint \S+: its checksum does "
                             r"not match", b2.log()), timeout=30, what="the corrupt file logged")
    c.wait(lambda: metric_hw(mport2, "hwc", 0) == 200, timeout=30,
           what="broker 2 learns high watermark 200 from its leader")
    assert b2.terminate() == 0
    assert checkpoint(b2) == {0: 200}, b2.log()[-3000:]  # the clean stop wrote a good one
