"""`keel import-zookeeper` against a real Apache ZooKeeper 3.8 (issue 19).

A standalone ZooKeeper (Debian's package) with snapCount=1000 gets a varied
tree from kazoo: 10,000 nodes, sequentials, ACLs of every scheme (world,
digest, ip, auth), containers, TTL nodes, multi transactions (one that
fails), setData and setACL bumping versions, deletes, ephemerals (one
session closed, one alive when ZooKeeper stops). Every node's data, ACL and
Stat as ZooKeeper served them is recorded; ZooKeeper is killed (so the
newest snapshot is followed by log txns that must be replayed); the data
dir is imported; a 3-server keel cluster starts on it (server 1 on the
imported dir, 2 and 3 empty, joining and receiving it by snapshot install)
and every node is read back from each server and compared.

Fields that cannot match, and why (docs/migration.md):
  - /zookeeper/config is keel's own (ZooKeeper's describes its ensemble);
  - ephemeral nodes are dropped, so their parents show numChildren lower
    and cversion higher by the number dropped (as after the sessions
    expired in ZooKeeper; pzxid is kept).
Plus corrupt input: a flipped byte in a log, in a log's padding and in a
snapshot is refused with the file name and offset.

Ports 23100-23299 (this test's range).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from kazoo.security import ACL, Id, Permissions, make_digest_acl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "compat"))
from harness import KEEL, Cluster, Server, admin_call  # noqa: E402
import kazoo_ext  # noqa: E402

ZK_JAR = os.environ.get("ZK_JAR", "/usr/share/java/zookeeper.jar")
def _free_port_below_32768(start):
    """The first port from `start` nobody listens on (fixed ports below the
    kernel's ephemeral range; a leftover server on one is skipped, not
    talked to)."""
    import socket
    for port in range(start, start + 50):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port in [%d, %d)" % (start, start + 50))


ZK_PORT = _free_port_below_32768(23101)
KEEL_CLIENT = {1: 23201, 2: 23202, 3: 23203}
KEEL_PEER = {1: 23211, 2: 23212, 3: 23213}
KEEL_METRICS = {1: 23221, 2: 23222, 3: 23223}
AUTH = [("digest", "alice:secret"), ("digest", "bob:hunter2")]
BULK_GROUPS, BULK_PER_GROUP = 100, 100  # 10,000 nodes
TTL_SHORT_MS = 45000


def zk_classpath(conf):
    cp = conf + ":" + ZK_JAR
    if os.path.exists("/usr/share/java/slf4j-simple.jar"):
        cp += ":/usr/share/java/slf4j-simple.jar"
    return cp


class ZooKeeper:
    """One standalone Apache ZooKeeper on ZK_PORT with its own data dir."""

    def __init__(self, root):
        self.root = root
        self.data = os.path.join(root, "data")
        conf = os.path.join(root, "conf")
        os.makedirs(self.data)
        os.makedirs(conf)
        with open(os.path.join(conf, "zoo.cfg"), "w") as f:
            f.write("tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
                    "maxClientCnxns=0\nforceSync=yes\nadmin.enableServer=false\n"
                    "4lw.commands.whitelist=ruok,srvr\n" % (self.data, ZK_PORT))
        self.log = open(os.path.join(root, "zk.log"), "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseSerialGC",
             "-Dzookeeper.extendedTypesEnabled=true", "-Dzookeeper.snapCount=1000",
             "-Dzookeeper.forceSync=yes", "-Dzookeeper.log.dir=" + root,
             "-cp", zk_classpath(conf), "org.apache.zookeeper.server.quorum.QuorumPeerMain",
             os.path.join(conf, "zoo.cfg")],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def client(hosts, auth=True, timeout=30):
    zk = KazooClient(hosts=hosts, timeout=10, auth_data=AUTH if auth else None)
    zk.start(timeout=timeout)
    return zk


def wait_all(results):
    for r in results:
        r.get(timeout=60)


def write_tree(zk):
    """The varied tree. Returns the paths of the TTL and container nodes
    whose behaviour is checked on keel afterwards."""
    alice = make_digest_acl("alice", "secret", all=True)
    bob_read = make_digest_acl("bob", "hunter2", read=True)
    world_read = ACL(Permissions.READ, Id("world", "anyone"))
    ip_local = ACL(Permissions.ALL, Id("ip", "127.0.0.1"))
    ip_net = ACL(Permissions.READ | Permissions.WRITE, Id("ip", "10.0.0.0/8"))
    auth_all = ACL(Permissions.ALL, Id("auth", ""))

    zk.create("/app", b"root of the app")
    zk.create("/app/config", b"v0")
    for i in range(1, 6):
        zk.set("/app/config", ("v%d" % i).encode())            # version 5
    zk.create("/app/empty", b"")
    zk.create("/app/binary", bytes(range(256)) * 4)
    # ACLs of every scheme (the reader holds alice's and bob's digests and
    # connects from 127.0.0.1).
    zk.create("/acl", b"")
    zk.create("/acl/world-read", b"w", acl=[world_read, alice])
    zk.create("/acl/digest", b"d", acl=[alice, bob_read])
    zk.create("/acl/ip", b"i", acl=[ip_local, ip_net])
    zk.create("/acl/auth", b"a", acl=[auth_all])               # stored as digest
    zk.create("/acl/mixed", b"m", acl=[world_read, alice, ip_local])
    zk.set_acls("/acl/mixed", [world_read, alice])              # aversion 1
    zk.set_acls("/acl/mixed", [world_read, alice, ip_net])      # aversion 2
    # Sequentials, some deleted (cversion keeps counting).
    zk.create("/seq", b"")
    seqs = [zk.create("/seq/job-", b"j", sequence=True) for _ in range(30)]
    for p in seqs[::3]:
        zk.delete(p)
    # Containers (with children, so ZooKeeper keeps them) and TTL nodes.
    zk.create("/kinds", b"")
    kazoo_ext.create_container(zk, "/kinds/container", b"c")
    zk.create("/kinds/container/child", b"x")
    kazoo_ext.create_container(zk, "/kinds/container2", b"c2")
    zk.create("/kinds/container2/only", b"x")
    kazoo_ext.create_ttl(zk, "/kinds/ttl-long", 3600 * 1000, b"t")
    kazoo_ext.create_ttl(zk, "/kinds/ttl-seq-", 3600 * 1000, b"ts", sequential=True)
    # Multi: one that commits, one that fails (an error txn in the log).
    t = zk.transaction()
    t.create("/multi", b"m")
    t.create("/multi/a", b"a")
    t.create("/multi/b", b"b")
    t.set_data("/app/empty", b"now set")
    t.check("/app/config", 5)
    t.delete("/seq/job-0000000001")
    assert not any(isinstance(r, Exception) for r in t.commit())
    t = zk.transaction()
    t.create("/multi/never", b"n")
    t.check("/app/config", 99)
    results = t.commit()
    assert isinstance(results[1], BadVersionError)
    assert not zk.exists("/multi/never")
    # 10,000 nodes: half by plain creates, half by 100-op multis.
    zk.create("/bulk", b"")
    wait_all([zk.create_async("/bulk/g%03d" % g, b"group") for g in range(BULK_GROUPS)])
    half = BULK_GROUPS // 2
    pending = []
    for g in range(half):
        for i in range(BULK_PER_GROUP):
            pending.append(zk.create_async("/bulk/g%03d/n%04d" % (g, i), b"value-%d-%d" % (g, i)))
        if len(pending) >= 1000:
            wait_all(pending)
            pending = []
    wait_all(pending)
    for g in range(half, BULK_GROUPS):
        t = zk.transaction()
        for i in range(BULK_PER_GROUP):
            t.create("/bulk/g%03d/n%04d" % (g, i), b"value-%d-%d" % (g, i))
        t.commit()
    wait_all([zk.set_async("/bulk/g%03d/n0000" % g, b"changed") for g in range(BULK_GROUPS)])
    wait_all([zk.delete_async("/bulk/g%03d/n0099" % g) for g in range(0, BULK_GROUPS, 2)])
    # Ephemerals: a session that closes (closeSession deletes them) and one
    # alive when ZooKeeper stops (the importer drops and reports them).
    zk.create("/eph", b"")
    closed = client("127.0.0.1:%d" % ZK_PORT, auth=False)
    closed.create("/eph/closed-1", b"", ephemeral=True)
    closed.create("/eph/closed-seq-", b"", ephemeral=True, sequence=True)
    closed.stop()
    closed.close()
    zk.create("/eph/alive-1", b"e", ephemeral=True)
    zk.create("/eph/alive-seq-", b"e", ephemeral=True, sequence=True)
    zk.create("/app/config/alive-eph", b"e", ephemeral=True)
    zk.create("/eph/persistent", b"p")


def read_tree(zk):
    """{path: (data, acl tuples, stat tuple, sorted children)} of every node."""
    nodes = {}
    level = ["/"]
    while level:
        kids = [(p, zk.get_children_async(p)) for p in level]
        gets = [(p, zk.get_async(p), zk.get_acls_async(p)) for p in level]
        nxt = []
        for (p, k), (_, g, a) in zip(kids, gets):
            children = sorted(k.get(timeout=60))
            data, stat = g.get(timeout=60)
            acls, _ = a.get(timeout=60)
            acl = sorted((x.perms, x.id.scheme, x.id.id) for x in acls)
            nodes[p] = (data, acl, tuple(stat), children)
            nxt += [(p.rstrip("/") + "/" + c) for c in children]
        level = nxt
    return nodes


@pytest.fixture(scope="module")
def zk_dir():
    """ZooKeeper's data dir after the run, what it served, and the ephemerals."""
    root = tempfile.mkdtemp(prefix="keel-import-zk-")
    zk_server = ZooKeeper(os.path.join(root, "zk"))
    try:
        deadline = time.time() + 90
        zk = None
        while zk is None:
            try:
                zk = client("127.0.0.1:%d" % ZK_PORT, timeout=5)
            except Exception:
                if time.time() > deadline or zk_server.proc.poll() is not None:
                    raise
                time.sleep(0.5)
        write_tree(zk)
        served = read_tree(zk)
        ephemerals = sorted(p for p, n in served.items() if n[2][7] != 0)
        # A TTL node that must expire on keel (after the comparisons), made
        # just before the stop; /kinds is read again with it.
        kazoo_ext.create_ttl(zk, "/kinds/ttl-short", TTL_SHORT_MS, b"soon")
        served.update({p: n for p, n in read_tree(zk).items()
                       if p in ("/kinds", "/kinds/ttl-short")})
        zk_server.kill()  # the newest snapshot is followed by logged txns
        stopped_at = time.time()
        zk.stop()
        zk.close()
        yield {"root": root, "data": zk_server.data, "served": served,
               "ephemerals": ephemerals, "stopped_at": stopped_at}
    finally:
        zk_server.kill()
        shutil.rmtree(root, ignore_errors=True)


def run_import(src, dst, *extra):
    return subprocess.run([KEEL, "import-zookeeper", "--from", src, "--data-dir", dst, *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)


def expected_view(served, ephemerals):
    """What keel must serve: ZooKeeper's tree minus the ephemerals (their
    parents' numChildren down, cversion up by the number dropped) and
    minus /zookeeper/config (keel's own)."""
    want = {p: list(n) for p, n in served.items() if p not in ephemerals}
    for e in ephemerals:
        parent = e.rsplit("/", 1)[0] or "/"
        data, acl, stat, children = want[parent]
        stat = list(stat)
        stat[5] += 1   # cversion
        stat[9] -= 1   # numChildren
        children = [c for c in children if parent.rstrip("/") + "/" + c != e]
        want[parent] = [data, acl, tuple(stat), children]
    del want["/zookeeper/config"]
    return {p: tuple(n) for p, n in want.items()}


KAFKA_VIEW = ("controller", "controller_epoch", "brokers", "config", "cluster", "admin")
PROBE = "cutover-probe"  # the first write after the cut-over


def check_keel_view(got, want, last_zxid):
    """keel's controller adds the Kafka view (/controller, /brokers, ...)
    under the root when it first leads: those nodes are taken out of `got`,
    and the root's stat is checked for exactly that difference (numChildren
    and cversion up by the nodes added, pzxid at the write that added them)."""
    added = [c for c in got["/"][3] if c in KAFKA_VIEW + (PROBE,) and "/" + c not in want]
    assert added, got["/"][3]
    for p in list(got):
        if p.split("/")[1] in added:
            del got[p]
    data, acl, stat, children = got["/"]
    wdata, wacl, wstat, wchildren = want["/"]
    stat = list(stat)
    assert stat[9] == wstat[9] + len(added)
    assert stat[5] == wstat[5] + len(added)
    assert stat[10] > last_zxid
    stat[9], stat[5], stat[10] = wstat[9], wstat[5], wstat[10]
    got["/"] = (data, acl, tuple(stat), [c for c in children if c not in added])


def test_import_and_serve_from_three_servers(zk_dir):
    served, ephemerals = zk_dir["served"], zk_dir["ephemerals"]
    assert len(served) > BULK_GROUPS * BULK_PER_GROUP
    assert len(ephemerals) == 3, ephemerals
    assert ephemerals[:2] == ["/app/config/alive-eph", "/eph/alive-1"], ephemerals
    assert ephemerals[2].startswith("/eph/alive-seq-"), ephemerals
    files = os.listdir(os.path.join(zk_dir["data"], "version-2"))
    assert len([f for f in files if f.startswith("snapshot.")]) >= 5, files

    c = Cluster(0)
    try:
        for sid in (1, 2, 3):
            c.servers[sid] = Server(c, sid, KEEL_CLIENT[sid], KEEL_PEER[sid], KEEL_METRICS[sid])
        c.server_args += ["--housekeeping-ms", "200"]
        d1 = c.servers[1].data_dir
        started = time.time()
        res = run_import(zk_dir["data"], d1, "--id", "1", "--cluster", c.cluster_arg())
        import_secs = time.time() - started
        out = res.stdout.decode()
        assert res.returncode == 0, res.stderr.decode() + out
        # Ephemerals reported: count and paths.
        assert "dropped 3 ephemeral nodes" in out, out
        for e in ephemerals:
            assert "dropped ephemeral %s " % e in out, out
        # Log txns after the newest snapshot were replayed.
        applied = int(re.search(r"txns: \d+ read, (\d+) applied", out).group(1))
        assert applied > 0, out
        last_zxid = int(re.search(r"up to zxid 0x([0-9a-f]+)", out).group(1), 16)

        c.servers[1].start(cluster_arg="1=" + c.servers[1].peer_addr)
        leader = c.wait_leader(timeout=30)
        assert leader.id == 1
        zk = client(leader.client_addr)
        zk.create("/" + PROBE, b"first write after the cut-over")
        first_write = time.time()
        zk.stop()
        zk.close()
        for sid in (2, 3):
            s = c.servers[sid]
            s.start(join=True)
            err, msg, _ = admin_call(leader.client_addr, 2,
                                     bytes([1]) + sid.to_bytes(8, "big") +
                                     len(s.peer_addr).to_bytes(2, "big") + s.peer_addr.encode(),
                                     timeout=120, secret=c.secret)
            assert err == 0, msg
        print("cut-over: import %.2fs; ZooKeeper stopped -> first write on keel %.2fs "
              "(import started %.2fs after the stop); import -> 3 servers members %.2fs" % (
                  import_secs, first_write - zk_dir["stopped_at"],
                  started - zk_dir["stopped_at"], time.time() - started))
        st = c.servers[1].status()
        assert st["applied_index"] >= last_zxid
        for sid in (2, 3):
            c.wait(lambda: c.servers[sid].status()["applied_index"] >= last_zxid,
                   timeout=60, what="server %d caught up" % sid)
            assert "snapshot" in c.servers[sid].log() and "installed" in c.servers[sid].log()

        want = expected_view(served, set(ephemerals))
        for sid in (1, 2, 3):
            zk = client(c.servers[sid].client_addr)
            try:
                got = read_tree(zk)
            finally:
                zk.stop()
                zk.close()
            assert got.pop("/zookeeper/config")[1] == [(1, "world", "anyone")]
            check_keel_view(got, want, last_zxid)
            missing = sorted(set(want) - set(got))
            extra = sorted(set(got) - set(want))
            assert not missing and not extra, (sid, missing[:5], extra[:5])
            diffs = [(p, want[p], got[p]) for p in sorted(want) if want[p] != got[p]]
            assert not diffs, (sid, len(diffs), diffs[:3])

        # Container and TTL nodes stayed what they were: an emptied
        # container and an expired TTL node are removed by keel.
        zk = client(c.servers[2].client_addr)
        try:
            assert zk.exists("/kinds/container2")
            zk.delete("/kinds/container2/only")
            c.wait(lambda: zk.exists("/kinds/container2") is None, timeout=30,
                   what="the emptied container removed")
            c.wait(lambda: zk.exists("/kinds/ttl-short") is None,
                   timeout=TTL_SHORT_MS / 1000 + 30, what="the short TTL node expired")
            assert zk.exists("/kinds/ttl-long") is not None
            assert zk.exists("/kinds/container") is not None
            # New writes get zxids above every imported one.
            stat = zk.set("/app/config", b"after import")
            assert stat.mzxid > last_zxid and stat.version == 6
        finally:
            zk.stop()
            zk.close()
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.cleanup()


def copy_data(zk_dir, tmp):
    dst = os.path.join(tmp, "zkcopy")
    shutil.copytree(zk_dir["data"], dst)
    return dst, os.path.join(dst, "version-2")


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def newest(v2, prefix):
    names = [n for n in os.listdir(v2) if n.startswith(prefix)]
    return max(names, key=lambda n: int(n.split(".")[1], 16))


def summary(out):
    """The importer's 'imported N znodes up to zxid Z; ...; state hash H'."""
    m = re.search(r"imported \d+ znodes up to zxid 0x[0-9a-f]+; dropped \d+ ephemeral nodes; "
                  r"state hash [0-9a-f]+", out)
    assert m, out
    return m.group(0)


def test_incomplete_newest_snapshot_falls_back_to_the_previous(zk_dir, tmp_path):
    """A snapshot cut short (a crash while ZooKeeper wrote it) is skipped, as
    ZooKeeper skips it: the previous snapshot plus more of the logs give the
    very same tree (same state hash, which covers every node's path, data,
    ACL and Stat)."""
    whole = run_import(zk_dir["data"], str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr.decode()
    src, v2 = copy_data(zk_dir, str(tmp_path))
    snap = newest(v2, "snapshot.")
    path = os.path.join(v2, snap)
    os.truncate(path, os.path.getsize(path) - 100)
    res = run_import(src, str(tmp_path / "out"))
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr.decode()
    assert "skipped incomplete snapshot %s" % path in out, out
    older = int(re.search(r"snapshot \S+/snapshot\.([0-9a-f]+): zxid", out).group(1), 16)
    assert older < int(snap.split(".")[1], 16)
    replayed = int(re.search(r"txns: \d+ read, (\d+) applied", out).group(1))
    before = int(re.search(r"txns: \d+ read, (\d+) applied", whole.stdout.decode()).group(1))
    assert replayed > before
    assert summary(out) == summary(whole.stdout.decode())


def test_flipped_byte_in_log_txn_is_refused(zk_dir, tmp_path):
    src, v2 = copy_data(zk_dir, str(tmp_path))
    log = newest(v2, "log.")
    flip(os.path.join(v2, log), 16 + 12 + 30)  # inside the first txn's bytes
    res = run_import(src, str(tmp_path / "out"))
    err = res.stderr.decode()
    assert res.returncode == 1, err
    assert "%s: refused at offset 16: txn checksum (Adler-32) mismatch" % log in err, err
    assert not os.path.exists(str(tmp_path / "out" / "hardstate"))


def test_flipped_byte_in_log_padding_is_refused(zk_dir, tmp_path):
    src, v2 = copy_data(zk_dir, str(tmp_path))
    log = newest(v2, "log.")
    size = os.path.getsize(os.path.join(v2, log))
    flip(os.path.join(v2, log), size - 100)  # in the preallocated zeros
    res = run_import(src, str(tmp_path / "out"))
    err = res.stderr.decode()
    assert res.returncode == 1, err
    assert "%s: refused at offset %d: nonzero byte in the preallocated padding" % (
        log, size - 100) in err, err


def test_flipped_byte_in_snapshot_is_refused(zk_dir, tmp_path):
    src, v2 = copy_data(zk_dir, str(tmp_path))
    snap = newest(v2, "snapshot.")
    path = os.path.join(v2, snap)
    size = os.path.getsize(path)
    # Inside the last node's data area, well before the trailer: the
    # structure still parses, only the seal's checksum can catch it.
    with open(path, "rb") as f:
        body = f.read()
    at = body.rfind(b"value-") + 3
    assert 0 < at < size - 100
    flip(path, at)
    res = run_import(src, str(tmp_path / "out"))
    err = res.stderr.decode()
    assert res.returncode == 1, err
    m = re.search(r"%s: refused at offset (\d+): Adler-32 checksum mismatch" % re.escape(snap),
                  err)
    assert m, err
    assert at < int(m.group(1)) < size
