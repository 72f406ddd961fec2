"""The change feed (docs/change-feed.md) against real `keel server` processes.

- A 3-node cluster; a writer (kazoo, on a server the consumer is not on)
  makes creates, sets, deletes, ACL changes and multis while
  `keel watch --from-zxid Z PATH` prints them; midway the consumer's server
  is killed -9. The consumer resumes on another server from the last change
  it printed: its output holds every change the writer made exactly once,
  in (zxid, seq) order, with the zxids the writer was told.
- A start older than what the servers hold (after a snapshot compacted the
  log) gets the compacted error with the oldest start they hold, and that
  start works.
- A consumer that stops reading while the history moves past it gets the
  compacted error (the server does not buffer for it without bound).
"""
import os
import re
import signal
import struct
import subprocess
import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl, OPEN_ACL_UNSAFE

from harness import KEEL, Cluster, RawZk

LINE = re.compile(r"^(\d+) (\d+) (created|deleted|data|acl|child) (?:(\S+) )?(/.*)$")


class Consumer:
    """`keel watch --from-zxid` in the background; stdout lines collected."""

    def __init__(self, servers, path, from_zxid, *extra):
        self.proc = subprocess.Popen(
            [KEEL, "watch", "--from-zxid", str(from_zxid), path, "--servers", servers,
             "--session-timeout-ms", "20000", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.errors = []
        self.lock = threading.Lock()
        self.t_out = threading.Thread(target=self._read, args=(self.proc.stdout, self.lines))
        self.t_err = threading.Thread(target=self._read, args=(self.proc.stderr, self.errors))
        self.t_out.start()
        self.t_err.start()

    def _read(self, stream, into):
        for line in stream:
            with self.lock:
                into.append(line.rstrip("\n"))

    def wait_for(self, cond, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if cond(self):
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        with self.lock:
            raise AssertionError("%s: not seen in %ss; stdout tail %r, stderr %r" %
                                 (what, timeout, self.lines[-5:], self.errors))

    def servers_seen(self):
        return [e.split(" on ", 1)[1] for e in self.errors if e.startswith("feed of ")]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.t_out.join(timeout=10)
        self.t_err.join(timeout=10)

    def changes(self):
        out = []
        for line in self.lines:
            m = LINE.match(line)
            assert m, "unexpected line %r" % line
            out.append((int(m.group(1)), int(m.group(2)), m.group(3), m.group(5)))
        return out


def run_watch(servers, *args, timeout=60):
    return subprocess.run([KEEL, "watch", *args, "--servers", servers],
                          capture_output=True, text=True, timeout=timeout)


def kazoo_on(addr):
    zk = KazooClient(hosts=addr, timeout=20)
    zk.start(timeout=30)
    return zk


def running(request, c):
    """A started cluster for a module fixture; logs printed on failure."""
    c.start()
    c.wait_leader()
    yield c
    if request.session.testsfailed:
        print(c.dump_logs())
    c.cleanup()


@pytest.fixture(scope="module")
def cluster(request):
    yield from running(request, Cluster(3))


def test_every_change_exactly_once_across_a_server_kill(cluster):
    setup = kazoo_on(cluster.connect_string())
    _, stat = setup.create("/feed", b"", include_data=True)
    setup.stop()
    # A consumer on a follower (its server is stopped below; stopping the
    # leader would stall the writer too).
    leader = cluster.wait_leader()
    for _ in range(20):
        consumer = Consumer(cluster.connect_string(), "/feed", stat.czxid + 1)
        consumer.wait_for(lambda c: c.servers_seen(), 30, "the feed subscription")
        victim_addr = consumer.servers_seen()[0]
        victim = cluster.server_by_client_addr(victim_addr)
        if victim is not leader:
            break
        consumer.stop()
    assert victim is not leader
    try:
        other = leader
        zk = kazoo_on(other.client_addr)
        expected = []  # (zxid or None, type, path), in the order made

        def round_(i):
            p = "/feed/n%04d" % i
            _, st = zk.create(p, b"v%d" % i, include_data=True)
            expected.append((st.czxid, "created", p))
            st = zk.set(p, b"w%d" % i)
            expected.append((st.mzxid, "data", p))
            if i % 3 == 0:
                zk.delete(p)
                expected.append((None, "deleted", p))
            elif i % 3 == 1:
                zk.set_acls(p, [make_digest_acl("u", "pw", all=True)] + OPEN_ACL_UNSAFE)
                expected.append((None, "acl", p))
            else:
                q = p + "-m"
                tx = zk.transaction()
                tx.create(q, b"m")
                tx.set_data(p, b"x")
                tx.delete(q)
                tx.commit()
                expected.extend([(None, "created", q), (None, "data", p), (None, "deleted", q)])

        n = 120
        for i in range(n // 2):
            round_(i)
        consumer.wait_for(lambda c: len(c.lines) >= len(expected) // 2, 60,
                          "half of the changes before the kill")
        # Its server stops (the changes meanwhile never reach the consumer)
        # and then dies: the consumer resumes on another server ten rounds
        # behind, catching up from that server's history into the live
        # changes.
        victim.pause()
        for i in range(n // 2, n // 2 + 10):
            round_(i)
        with consumer.lock:
            lag = len(expected) - len(consumer.lines)
        victim.kill()
        for i in range(n // 2 + 10, n):
            round_(i)
        consumer.wait_for(lambda c: len(c.lines) >= len(expected), 90,
                          "every change after the kill")
        time.sleep(1.0)  # anything extra (a duplicate) would show up now
        zk.stop()
    finally:
        consumer.stop()
    got = consumer.changes()
    assert lag >= 20, "the consumer was only %d changes behind at the kill" % lag
    assert len(consumer.servers_seen()) >= 2, consumer.errors
    assert consumer.servers_seen()[1] != victim_addr
    # Exactly once, in order: the same sequence of (type, path) ...
    assert [(t, p) for (_, _, t, p) in got] == [(t, p) for (_, t, p) in expected]
    # ... with strictly increasing positions ...
    positions = [(z, s) for (z, s, _, _) in got]
    assert positions == sorted(set(positions))
    # ... and the zxids the writer was told.
    for (zxid, _, _, _), (want, _, _) in zip(got, expected):
        if want is not None:
            assert zxid == want
    # A multi's changes share one zxid, in the order of its ops.
    multis = [g[0] for g in got if g[3].endswith("-m") and g[2] == "created"]
    assert len(multis) == len([i for i in range(n) if i % 3 == 2])
    for z in multis:
        assert [g[2] for g in got if g[0] == z] == ["created", "data", "deleted"]


def test_a_restarted_server_rebuilds_its_history_from_the_log(cluster):
    """A server restarts from its snapshot and log: re-applying the log
    records the same changes, so it serves the same feed as one that ran
    all along (no snapshot yet: from the first change)."""
    s1 = cluster.servers[1]
    s1.stop()
    s1.start()
    others = [s for s in cluster.servers.values() if s is not s1 and s.alive()]
    assert others
    outs = []
    for s in (s1, others[0]):
        r = run_watch(s.client_addr, "--from-zxid", "0", "/feed", "--count", "60",
                      "--children", "--data", timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.splitlines())
    assert len(outs[0]) == 60
    assert outs[0] == outs[1]
    assert LINE.match(outs[0][0]).group(3) == "created"


def feed_request(from_zxid, path, flags=0, from_seq=0, version=0):
    p = path.encode()
    return struct.pack(">hqii", version, from_zxid, from_seq, len(p)) + p + \
        struct.pack(">i", flags)


def test_bad_feed_requests_get_errors_and_the_connection_serves_on(cluster):
    addr = [s for s in cluster.servers.values() if s.alive()][0].client_addr
    raw = RawZk(addr, cluster_auth=False)
    try:
        assert raw.call(2000, b"\x00\x00\x00")[0] == -5              # short: MarshallingError
        assert raw.call(2000, feed_request(1, "/", version=1))[0] == -5  # newer version
        assert raw.call(2000, feed_request(1, "/", flags=64))[0] == -5  # unknown flag
        assert raw.call(2000, feed_request(1, "/", from_seq=-1))[0] == -5
        assert raw.call(2000, feed_request(1, "no-slash"))[0] == -8     # BadArguments
        err, _, body = raw.call(2000, feed_request(1, "/feed"))
        assert err == 0
        version, error, oldest, last = struct.unpack(">hhqq", body[:20])
        assert (version, error) == (0, 0) and oldest >= 1 and last > 1
        # One feed per connection (its events, xid -100, come before the reply).
        raw.xid += 1
        raw._send(struct.pack(">ii", raw.xid, 2000) + feed_request(1, "/feed"))
        events = 0
        while True:
            xid, _, err = struct.unpack(">iqi", raw._recv()[:16])
            if xid == -100:
                events += 1
            elif xid == raw.xid:
                break
        assert err == -8 and events > 0
    finally:
        raw.close()
    # The server still serves.
    r = run_watch(addr, "--from-zxid", "0", "/feed", "--count", "1")
    assert r.returncode == 0, r.stderr


def test_the_largest_node_fits_an_event(cluster):
    """A node with as much data as jute.maxbuffer lets a create carry makes
    an event frame larger than 1 MiB: the client takes it."""
    addr = cluster.connect_string()
    zk = kazoo_on(addr)
    blob = os.urandom(1048500)
    _, st = zk.create("/big", blob, include_data=True)
    zk.stop()
    r = run_watch(addr, "--from-zxid", str(st.czxid), "/big", "--data", "--count", "1")
    assert r.returncode == 0, r.stderr
    m = LINE.match(r.stdout.splitlines()[0])
    assert m and m.group(3) == "created" and m.group(5) == "/big", r.stdout[:200]
    assert m.group(4) == "0x" + blob.hex()


@pytest.fixture(scope="module")
def small_cluster(request):
    c = Cluster(3, server_args=["--election-timeout-ms", "1000", "--heartbeat-ms", "100",
                                "--snapshot-entries", "100", "--snapshot-trailing", "5",
                                "--feed-retain-bytes", "400000"])
    yield from running(request, c)


def test_a_start_older_than_the_snapshot_is_compacted(small_cluster):
    c = small_cluster
    addr = list(c.servers.values())[1].client_addr
    zk = kazoo_on(addr)
    zk.create("/old", b"")
    for i in range(300):
        zk.create("/old/n%d" % i, b"x")
    zk.stop()
    server = c.server_by_client_addr(addr)
    c.wait(lambda: "snapshot at" in server.log(), timeout=30, what="a snapshot")
    # The oldest start a server reports is served (a snapshot every 100
    # entries may move it on meanwhile: then the error says so again).
    for attempt in range(5):
        r = run_watch(addr, "--from-zxid", "1", "/old", "--count", "1")
        assert r.returncode == 1, (r.stdout, r.stderr)
        m = re.search(r"compacted: .* from zxid 1; the oldest start they hold is (\d+)",
                      r.stderr)
        assert m, r.stderr
        oldest = int(m.group(1))
        assert oldest > 1
        consumer = Consumer(addr, "/old", oldest, "--count", "1")
        try:
            consumer.wait_for(lambda c: c.servers_seen() or c.proc.poll() is not None, 30,
                              "the subscription")
            zk = kazoo_on(addr)
            zk.create("/old/after%d" % attempt, b"")
            zk.stop()
            consumer.proc.wait(timeout=30)
        finally:
            consumer.stop()
        if consumer.proc.returncode == 0:
            break
        assert any(e.startswith("compacted:") for e in consumer.errors), consumer.errors
    assert consumer.proc.returncode == 0, consumer.errors
    (zxid, _, _, _), = consumer.changes()
    assert zxid >= oldest
    # --from-zxid 0: from the oldest the server holds, never compacted.
    consumer = Consumer(addr, "/old", 0, "--count", "1")
    try:
        consumer.wait_for(lambda c: c.lines or c.proc.poll() is not None, 30,
                          "a change from the oldest held")
    finally:
        consumer.stop()
    assert consumer.lines and not any(e.startswith("compacted") for e in consumer.errors)
    (zxid, _, _, _), = consumer.changes()
    assert zxid > 1


def test_a_consumer_that_stops_reading_gets_compacted(small_cluster):
    c = small_cluster
    addr = list(c.servers.values())[2].client_addr
    zk = kazoo_on(addr)
    _, st = zk.create("/slow", b"", include_data=True)
    consumer = Consumer(addr, "/slow", st.czxid + 1, "--data")
    try:
        consumer.wait_for(lambda c: c.servers_seen(), 30, "the feed subscription")
        consumer.proc.send_signal(signal.SIGSTOP)
        blob = os.urandom(20000)
        for i in range(600):  # 12 MB of data: far past the 400 kB history
            zk.create("/slow/n%d" % i, blob)
        consumer.proc.send_signal(signal.SIGCONT)
        consumer.proc.wait(timeout=60)
    finally:
        consumer.proc.send_signal(signal.SIGCONT)
        consumer.stop()
        zk.stop()
    assert consumer.proc.returncode == 1, consumer.errors
    assert any(e.startswith("compacted:") for e in consumer.errors), consumer.errors
    # What it printed before the end is a gap-free prefix of the changes.
    got = consumer.changes()
    paths = [p for (_, _, _, p) in got]
    assert paths == ["/slow/n%d" % i for i in range(len(paths))]
    # --data: each creation carries the node's data, in hex.
    datas = [LINE.match(line).group(4) for line in consumer.lines]
    assert datas and all(d == "0x" + blob.hex() for d in datas)
    server = c.server_by_client_addr(addr)
    assert "fell behind the history" in server.log()
