"""The Kafka checker bites on a real cluster, before broker replication
exists: a partition's leader holds the only copy of its records, so kill -9
of leader brokers (restarted after a few seconds) hands leadership to a
broker with an empty log. Acknowledged records are then missing from what
consumers read, and the restarted old leader holds other records at the
same offsets: the checker must report both (lost > 0, divergent > 0).

This is the truthful result of today's brokers, not a planted bug. Once
replication lands the same schedule must lose nothing: CMake then stops
running this test (KEEL_FAULTS_KAFKA_REPLICATED=ON) and faults_kafka runs
leader kills expecting no anomaly, while test_planted_bugs.py's broker bugs
take over the job of proving the checker bites.
"""
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
KEEL = os.path.abspath(os.environ.get("KEEL", os.path.join(SRC, "build", "keel")))


def test_leader_kills_without_replication_lose_acknowledged_records():
    seeds = []
    for _ in range(3):
        seed = random.SystemRandom().randrange(1 << 31)
        seeds.append(seed)
        cmd = [sys.executable, os.path.join(HERE, "runner.py"), "run", "--seed", str(seed),
               "--keel", KEEL, "--brokers", "3", "--no-zk", "--duration", "20s",
               "--nemesis", "bkill-leader", "--interval-min", "1", "--interval-max", "2",
               "--hold-min", "2", "--hold-max", "4", "--quiet", "2",
               "--expect-anomaly", "kafka"]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(p.stdout[-5000:])
        m = re.search(r"kafka: acknowledged=(\d+) lost=(\d+) .* divergent=(\d+)", p.stdout)
        if p.returncode == 0 and m and int(m.group(2)) > 0 and int(m.group(3)) > 0:
            assert int(m.group(1)) > int(m.group(2))
            return
    raise AssertionError("leader kills without replication were not reported as lost and "
                         "divergent records (seeds %s)" % seeds)
