"""`keel log dump` and the data-directory lock (issue 16): failed ZooKeeper
transactions are marked with their error, times print as ISO 8601, the header
is right without a snapshot, a running server's directory gets a warning, a
directory that is not keel's is refused, and two servers never share one
data directory."""
import os
import re
import subprocess

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError
import pytest

from harness import KEEL


def keel(*args, timeout=60):
    return subprocess.run([KEEL, *args], capture_output=True, text=True, timeout=timeout)


def test_log_dump_marks_failures_and_prints_iso_times(cluster_factory, tmp_path):
    c = cluster_factory(3)
    c.start()
    leader = c.wait_leader()
    zk = KazooClient(hosts=c.connect_string(), timeout=10)
    zk.start(timeout=15)
    try:
        zk.create("/dump-a", b"1")
        with pytest.raises(NodeExistsError):
            zk.create("/dump-a", b"again")
        with pytest.raises(BadVersionError):
            zk.set("/dump-a", b"x", version=7)
        zk.set("/dump-a", b"2", version=0)
    finally:
        zk.stop()
        zk.close()

    # While it runs: a warning, and still a dump.
    r = keel("log", "dump", "--data-dir", leader.data_dir)
    assert "belongs to a running server" in r.stderr, r.stderr
    # A second server on the same directory is refused.
    r = keel("server", "--id", str(leader.id), "--data-dir", leader.data_dir, "--listen",
             "127.0.0.1:1", "--peer-listen", "127.0.0.1:2", "--cluster", c.cluster_arg(),
             "--insecure-peers", *c.server_args, timeout=20)
    assert r.returncode == 1 and "in use by another keel server" in r.stderr, r.stderr

    c.stop()
    r = keel("log", "dump", "--data-dir", leader.data_dir)
    assert r.returncode == 0, r.stderr
    assert "belongs to a running server" not in r.stderr
    out = r.stdout
    m = re.match(r"no snapshot: (\d+) entries from index 1, last index (\d+)", out)
    assert m and int(m.group(1)) == int(m.group(2)), out[:300]
    creates = [l for l in out.splitlines() if "zk create /dump-a" in l]
    assert len(creates) == 2, creates
    assert "->" not in creates[0] and creates[1].endswith("-> ZNODE_EXISTS"), creates
    sets = [l for l in out.splitlines() if "zk setData /dump-a" in l]
    assert len(sets) == 2 and sets[0].endswith("-> ZBAD_VERSION") and "->" not in sets[1], sets
    assert re.search(r" at 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", creates[0]), creates[0]
    assert "2 ZooKeeper transactions failed at apply" in out
    assert re.search(r"time 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z, \d+ records?", out), out

    # Not a keel data directory: exit 1, said plainly.
    empty = tmp_path / "empty"
    empty.mkdir()
    r = keel("log", "dump", "--data-dir", str(empty))
    assert r.returncode == 1 and "is not a keel data directory" in r.stderr, r.stderr
    r = keel("log", "dump", "--data-dir", str(tmp_path / "missing"))
    assert r.returncode == 1 and r.stderr
