"""The bstale-hw nemesis (knemesis.py) on the real build: a follower whose
high watermark is stale -- the leader acknowledged records it holds, it
never heard so -- is made leader after two kills (KIP-101's case). keel's
followers truncate by leader epoch, so the run must lose nothing
acknowledged and leave no divergent replicas; the nemesis must really have
elected the stale follower at least once, or the run tested nothing.

Its counterpart: test_planted_bugs.py builds keel with TRUNCATE_TO_HW (a
follower cuts its log at its high watermark) and requires the Kafka checker
to report lost records under the same nemesis.
"""
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
KEEL = os.path.abspath(os.environ.get("KEEL", os.path.join(SRC, "build", "keel")))

ARGS = ["--brokers", "3", "--no-zk", "--duration", "35s", "--nemesis", "bstale-hw",
        "--interval-min", "1", "--interval-max", "2", "--quiet", "3"]


def test_stale_follower_elected_loses_nothing():
    seed = random.SystemRandom().randrange(1 << 31)
    cmd = [sys.executable, os.path.join(HERE, "runner.py"), "run", "--seed", str(seed),
           "--keel", KEEL] + ARGS
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout[-6000:])
    assert p.returncode == 0, "the run failed (seed %d)" % seed
    m = re.search(r"kafka: acknowledged=(\d+) lost=(\d+) .* divergent=(\d+) misplaced=(\d+)",
                  p.stdout)
    assert m, "no kafka summary line (seed %d)" % seed
    assert int(m.group(1)) > 0
    assert (int(m.group(2)), int(m.group(3)), int(m.group(4))) == (0, 0, 0)
    hits = len(re.findall(r"bstale-hw elected", p.stdout))
    assert hits >= 1, "the stale follower was never elected (seed %d)" % seed
