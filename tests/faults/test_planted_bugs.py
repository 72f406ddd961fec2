"""The checkers bite: servers built with a deliberately planted bug must be
caught. Each test takes keel built with KEEL_PLANT_BUG_NAME defined
(build/keel-plant-name, see build_planted), runs the fault suite against
it with the faults that expose the bug, and passes only if the named
checker reports an anomaly.

  SYNC_NO_BARRIER   (src/node/client_zk.c) sync answers at once, without
                    the ReadIndex barrier: a server cut off from the others
                    serves sync + read stale. Exposed by isolating servers;
                    caught by the register linearizability checker.
  ACK_BEFORE_FSYNC  (src/node/storage.c) entries are reported durable
                    before they are written, and the write lags by 20 ms
                    (a slow disk; kill -9 keeps the page cache, so the lag
                    stands in for what a power cut would lose): kill -9 of
                    every server at once loses acknowledged writes. Exposed by whole-cluster
                    kills under a heavier add load; caught by the set
                    checker (and the counter and sequential ones).

With KEEL_FAULTS_KAFKA_PLANTED=1 in the environment (CMake sets it when
KEEL_FAULTS_KAFKA_REPLICATED is ON: the bugs exist only once broker
replication does), the broker bugs too, each caught by the Kafka checker
(kcheck.py) under the broker nemeses that expose it:

  TRUNCATE_TO_HW        a broker that becomes follower truncates to the high
                        watermark instead of asking OffsetForLeaderEpoch.
                        Exposed by bstale-hw (knemesis.py): a follower whose
                        HW is stale (the leader's answers to it held) follows
                        a new leader, cuts at that HW, and is elected before
                        it fetches back what it cut: acknowledged records
                        are lost;
  ACK_BEFORE_ISR        acks=all is answered before every ISR member has
                        the batch: a leader kill loses acknowledged records;
  GROUP_COMMIT_BEFORE_HW  an OffsetCommit is answered once the coordinator
                        alone has it durable: gcut-coord (the followers'
                        fetches held, then the coordinator killed) loses
                        acknowledged commits, caught by the group checker;
  ISR_SHRINK_BY_LEADER  the leader drops lagging followers from its own ISR
                        without AlterPartition, acknowledging with fewer
                        copies than the controller believes: follower cuts
                        and pauses, then a leader kill, lose acknowledged
                        records.

Catching is probabilistic (the faults must land while the bug matters), so a
test makes up to three runs of different seeds and passes on the first that
catches; every run prints its seed.
"""
import os
import random
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
KEEL = os.path.abspath(os.environ.get("KEEL", os.path.join(SRC, "build", "keel")))


def build_planted(bug):
    """The path of a keel with the bug planted: keel-plant-<bug> next to
    keel, which the normal build makes (tests/faults/CMakeLists.txt), or,
    for a bug it has no target for, a whole keel built with the bug into its
    own build directory (incremental after the first time)."""
    planted = os.path.join(os.path.dirname(KEEL), "keel-plant-" + bug.lower().replace("_", "-"))
    if os.path.exists(planted):
        return planted
    out = os.path.join(os.path.dirname(KEEL), "plant-" + bug)
    cfg = ["cmake", "-S", SRC, "-B", out, "-DCMAKE_BUILD_TYPE=Release",
           "-DKEEL_PLANT_BUG=" + bug]
    subprocess.run(cfg, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", out, "--target", "keel", "-j", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(out, "keel")


def caught(binary, checker, args, attempts=3):
    seeds = []
    for _ in range(attempts):
        seed = random.SystemRandom().randrange(1 << 31)
        seeds.append(seed)
        cmd = [sys.executable, os.path.join(HERE, "runner.py"), "run", "--seed", str(seed),
               "--keel", binary, "--expect-anomaly", checker] + args
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(p.stdout[-6000:])
        if p.returncode == 0:
            return True, seeds
    return False, seeds


KAFKA_ARGS = ["--brokers", "3", "--no-zk", "--duration", "40s", "--interval-min", "1",
              "--interval-max", "3", "--hold-min", "1.5", "--hold-max", "4", "--quiet", "3"]
KAFKA_BUGS = [
    ("TRUNCATE_TO_HW", "kafka", KAFKA_ARGS[:4] + ["30s", "--interval-min", "1",
                                                  "--interval-max", "2", "--quiet", "3",
                                                  "--nemesis", "bstale-hw"]),
    ("ACK_BEFORE_ISR", "kafka", KAFKA_ARGS + ["--nemesis", "bkill-leader,bkill-all"]),
    ("ISR_SHRINK_BY_LEADER", "kafka", KAFKA_ARGS + ["--nemesis", "bcut,bpause,bkill-leader"]),
    ("GROUP_COMMIT_BEFORE_HW", "group", KAFKA_ARGS[:4] + ["30s", "--interval-min", "1",
                                                          "--interval-max", "2", "--quiet", "3",
                                                          "--kafka-group", "3",
                                                          "--kafka-idempotent",
                                                          "--nemesis", "gcut-coord"]),
]


@pytest.mark.parametrize("bug,checker,args", [
    ("SYNC_NO_BARRIER", "registers",
     ["--duration", "20s", "--nemesis", "isolate", "--interval-min", "1", "--interval-max", "2",
      "--hold-min", "3", "--hold-max", "5", "--quiet", "2"]),
    ("ACK_BEFORE_FSYNC", "set",
     ["--duration", "20s", "--nemesis", "killall", "--interval-min", "1", "--interval-max",
      "2", "--quiet", "2", "--workload", '{"set_workers": 5, "think": 0.002}']),
] + (KAFKA_BUGS if os.environ.get("KEEL_FAULTS_KAFKA_PLANTED") == "1" else []))
def test_planted_bug_is_caught(bug, checker, args):
    binary = build_planted(bug)
    ok, seeds = caught(binary, checker, args)
    assert ok, "the %s checker did not catch the planted bug %s (seeds %s)" % (
        checker, bug, seeds)
