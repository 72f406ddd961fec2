"""Durability on real processes (issue 4): acknowledged writes survive
kill -9 of every server; a torn tail on a follower is repaired; a damaged
record in the middle of a log stops the server from starting."""
import os
import re
import subprocess
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from harness import KEEL, admin_call

SMALL_SEGMENTS = ["--segment-bytes", "4194304", "--election-timeout-ms", "1000",
                  "--heartbeat-ms", "100"]


def connect(cluster, ids=None, timeout=10.0):
    zk = KazooClient(hosts=cluster.connect_string(ids), timeout=timeout)
    zk.start(timeout=timeout)
    return zk


def close(zk):
    try:
        zk.stop()
        zk.close()
    except Exception:  # noqa: BLE001
        pass


def wal_records(data_dir):
    """(segment path, index, offset, size) of every live record, from
    `keel wal dump`."""
    out = subprocess.run([KEEL, "wal", "dump", "--data-dir", data_dir], capture_output=True,
                         text=True, check=False).stdout
    records = []
    segment = None
    for line in out.splitlines():
        m = re.match(r"\s+(seg-\S+\.wal)\s", line)
        if m:
            segment = os.path.join(data_dir, m.group(1))
            continue
        m = re.match(r"\s+index (\d+)\s+term \d+\s+type \d+\s+size (\d+)\s+offset (\d+)", line)
        if m and segment:
            records.append((segment, int(m.group(1)), int(m.group(3)), int(m.group(2))))
    return records


class Writers:
    """Threads creating distinct znodes as fast as they can, recording every
    acknowledged path."""

    def __init__(self, cluster, prefix, threads=4):
        self.cluster = cluster
        self.prefix = prefix
        self.acked = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(t,), daemon=True)
                        for t in range(threads)]

    def run(self, t):
        i = 0
        zk = None
        while not self.stop.is_set():
            try:
                if zk is None:
                    zk = KazooClient(hosts=self.cluster.connect_string(), timeout=2.0)
                    zk.start(timeout=2.0)
                path = "/d/%s-w%d-%06d" % (self.prefix, t, i)
                try:
                    zk.create(path, b"v")
                except NodeExistsError:
                    pass  # an earlier attempt whose ack was lost did commit
                with self.lock:
                    self.acked.add(path)
                i += 1
            except Exception:  # noqa: BLE001 - unknown outcome: not acked
                if zk is not None:
                    close(zk)
                    zk = None
                i += 1
                time.sleep(0.01)
        if zk is not None:
            close(zk)

    def __enter__(self):
        for th in self.threads:
            th.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for th in self.threads:
            th.join(timeout=20)


def test_kill_all_servers_during_writes_loses_nothing(cluster_factory):
    c = cluster_factory(3, server_args=SMALL_SEGMENTS)
    c.start()
    c.wait_leader()
    zk = connect(c)
    zk.create("/d")
    close(zk)
    total = set()
    for round_ in range(3):
        with Writers(c, "r%d" % round_) as w:
            time.sleep(2.5)
            # Every server at once, mid-load.
            for s in c.servers.values():
                s.proc.kill()
            for s in c.servers.values():
                s.proc.wait()
        with w.lock:
            acked = set(w.acked)
        assert len(acked) > 20, "the load produced too few writes to mean anything"
        total |= acked
        c.start()
        c.wait_leader(timeout=20)
        zk = connect(c)
        zk.sync("/d")
        present = set("/d/" + ch for ch in zk.get_children("/d"))
        close(zk)
        missing = total - present
        print("round %d: %d acknowledged so far, %d present, %d missing" %
              (round_, len(total), len(present), len(missing)))
        assert not missing, "acknowledged writes lost: %s" % sorted(missing)[:10]


def test_torn_tail_on_stopped_follower_is_repaired(cluster_factory):
    c = cluster_factory(3, server_args=SMALL_SEGMENTS)
    c.start()
    leader = c.wait_leader()
    zk = connect(c)
    for i in range(200):
        zk.create("/t%03d" % i, b"x" * 50)
    close(zk)
    follower = next(s for s in c.servers.values() if s.id != leader.id)
    c.wait(lambda: follower.status()["applied_index"] >= leader.status()["commit_index"],
           what="follower caught up")
    follower.kill()
    recs = wal_records(follower.data_dir)
    assert recs, "no records found in the follower's log"
    seg, index, offset, size = recs[-1]
    # Cut the file in the middle of its last record: a write torn by a crash.
    os.truncate(seg, offset + 10)
    up = [s.id for s in c.servers.values() if s.id != follower.id]
    zk = connect(c, ids=up)
    for i in range(200, 260):
        zk.create("/t%03d" % i, b"y")
    close(zk)
    follower.start()
    c.wait(lambda: follower.status()["applied_index"] >= c.wait_leader().status()["commit_index"],
           timeout=20, what="repaired follower caught up")
    log = follower.log()
    assert "storage recovery" in log, "the repair was not reported"
    zk = connect(c, ids=[follower.id])
    assert zk.get("/t199")[0] == b"x" * 50
    assert zk.exists("/t259") is not None
    close(zk)


def test_flipped_byte_mid_log_refuses_to_start_then_rejoins(cluster_factory):
    c = cluster_factory(3, server_args=SMALL_SEGMENTS)
    c.start()
    leader = c.wait_leader()
    zk = connect(c)
    for i in range(300):
        zk.create("/f%03d" % i, b"z" * 40)
    close(zk)
    victim = next(s for s in c.servers.values() if s.id != leader.id)
    c.wait(lambda: victim.status()["applied_index"] >= leader.status()["commit_index"],
           what="victim caught up")
    victim.kill()
    recs = wal_records(victim.data_dir)
    seg, index, offset, size = recs[len(recs) // 2]
    with open(seg, "r+b") as f:
        f.seek(offset + 30)
        b = f.read(1)
        f.seek(offset + 30)
        f.write(bytes([b[0] ^ 0x40]))
    victim.start()
    try:
        rc = victim.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        raise AssertionError("a server with a damaged log kept running:\n" + victim.log())
    assert rc != 0
    log = victim.log()
    assert os.path.basename(seg) in log, "the damaged file is not named:\n" + log[-2000:]
    assert "offset" in log
    # The other two keep serving.
    up = [s.id for s in c.servers.values() if s.id != victim.id]
    zk = connect(c, ids=up)
    zk.create("/after-damage", b"1")
    close(zk)
    # The documented repair: remove it, wipe its data, rejoin it.
    leader = c.wait_leader()
    err, msg, _ = c.admin(leader.client_addr, 2,
                             bytes([4]) + victim.id.to_bytes(8, "big") + b"\x00\x00", timeout=30)
    assert err == 0, msg
    victim.wipe()
    victim.start(join=True)
    err, msg, _ = c.admin(leader.client_addr, 2,
                             bytes([1]) + victim.id.to_bytes(8, "big") +
                             len(victim.peer_addr).to_bytes(2, "big") + victim.peer_addr.encode(),
                             timeout=60)
    assert err == 0, msg
    zk = connect(c, ids=[victim.id])
    zk.sync("/")
    assert zk.get("/f150")[0] == b"z" * 40
    assert zk.exists("/after-damage") is not None
    close(zk)
