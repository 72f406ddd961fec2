"""The operator surface of a running cluster (issue 5): `keel status`,
`keel leader transfer`, `keel members` through any server, the four-letter
words, the Prometheus endpoint, --config files, SIGTERM."""
import json
import os
import subprocess
import time
import urllib.request

import pytest
from kazoo.client import KazooClient

from harness import KEEL, four_letter


@pytest.fixture(scope="module")
def cluster(request):
    from harness import Cluster
    c = Cluster(3)
    c.start()
    c.wait_leader()
    yield c
    if request.session.testsfailed:
        print(c.dump_logs())
    c.cleanup()


def keel(*args, timeout=60):
    return subprocess.run([KEEL, *args], capture_output=True, text=True, timeout=timeout)


def test_status_table_and_json(cluster):
    leader = cluster.wait_leader()
    out = keel("status", "--servers", cluster.connect_string())
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "CLIENT", "ADDRESS"]
    roles = [l.split()[2] for l in lines[1:4]]
    assert sorted(roles) == ["follower", "follower", "leader"]
    assert "members (leader's view):" in out.stdout
    js = keel("status", "--json", "--servers", leader.client_addr)
    doc = json.loads(js.stdout)["servers"][0]
    assert doc["role"] == "leader" and doc["id"] == leader.id
    assert {m["id"] for m in doc["members"]} == set(cluster.servers)
    for m in doc["members"]:
        assert "match_index" in m and "lag" in m


def test_status_with_a_dead_server(cluster):
    victim = next(s for s in cluster.servers.values() if s.mode() == "follower")
    victim.kill()
    try:
        out = keel("status", "--servers", cluster.connect_string(), "--timeout-ms", "2000")
        assert "unreachable" in out.stdout
        assert out.returncode == 0  # the others answered
        # --json: one document for all servers, the dead one marked.
        out = keel("status", "--json", "--servers", cluster.connect_string(), "--timeout-ms",
                   "2000")
        docs = json.loads(out.stdout)["servers"]
        assert len(docs) == 3
        assert [d for d in docs if d.get("error") == "unreachable"] == \
            [{"server": victim.client_addr, "error": "unreachable"}]
        assert sorted(d["role"] for d in docs if "role" in d) == ["follower", "leader"]
    finally:
        victim.start()
        cluster.wait(lambda: victim.mode() == "follower", what="victim back")


def test_leader_transfer_through_a_follower(cluster):
    leader = cluster.wait_leader()
    target = next(s for s in cluster.servers.values() if s.id != leader.id)
    via = next(s for s in cluster.servers.values() if s.id not in (leader.id, target.id))
    out = keel("leader", "transfer", str(target.id), "--servers", via.client_addr,
               *cluster.cli_auth())
    assert out.returncode == 0, out.stdout + out.stderr
    cluster.wait(lambda: target.mode() == "leader", timeout=10, what="target leads")
    assert cluster.wait_leader().id == target.id
    # Transfer to a non-member fails clearly.
    out = keel("leader", "transfer", "77", "--servers", cluster.connect_string(),
               *cluster.cli_auth())
    assert out.returncode != 0
    assert "error" in out.stderr.lower()


def test_members_errors(cluster):
    out = keel("members", "remove", "99", "--servers", cluster.connect_string(),
               *cluster.cli_auth())
    assert out.returncode == 1
    assert "no such member" in out.stderr
    out = keel("members", "add", "0=127.0.0.1:1")
    assert out.returncode == 2
    out = keel("members", "frobnicate", "1")
    assert out.returncode == 2


def test_four_letter_words(cluster):
    leader = cluster.wait_leader()
    follower = next(s for s in cluster.servers.values() if s.id != leader.id)
    assert four_letter(leader.client_addr, "ruok") == "imok"
    srvr = four_letter(leader.client_addr, "srvr")
    assert "Mode: leader" in srvr and "Zxid: 0x" in srvr and "Node count:" in srvr
    assert "Mode: follower" in four_letter(follower.client_addr, "srvr")
    zk = KazooClient(hosts=leader.client_addr)
    zk.start()
    zk.create("/fourletter", b"x")
    zk.get("/fourletter", watch=lambda e: None)
    stat = four_letter(leader.client_addr, "stat")
    assert "Clients:" in stat and "Mode: leader" in stat
    cons = four_letter(leader.client_addr, "cons")
    assert "sid=0x%x" % zk.client_id[0] in cons
    mntr = dict(line.split("\t", 1) for line in four_letter(leader.client_addr, "mntr")
                .splitlines() if "\t" in line)
    assert mntr["zk_server_state"] == "leader"
    assert int(mntr["zk_znode_count"]) >= 3
    assert int(mntr["zk_watch_count"]) >= 1
    assert int(mntr["zk_followers"]) == 2
    assert int(mntr["keel_raft_leader"]) == leader.id
    conf = four_letter(leader.client_addr, "conf")
    assert "clientPort=%d" % leader.client_port in conf
    assert "serverId=%d" % leader.id in conf
    assert four_letter(leader.client_addr, "isro") == "rw"
    assert "watching" in four_letter(leader.client_addr, "wchs")
    zk.stop()
    zk.close()
    # An unknown word is not a ZooKeeper frame either: the connection closes.
    assert four_letter(leader.client_addr, "zzzz") == ""
    assert four_letter(leader.client_addr, "ruok") == "imok"


def test_metrics_endpoint(cluster):
    leader = cluster.wait_leader()
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % leader.metrics_port,
                                  timeout=5).read().decode()
    values = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    assert values["keel_raft_is_leader"] == 1
    assert values["keel_raft_term"] >= 2
    assert values["keel_raft_commit_index"] >= 1
    for hist in ("keel_wal_fsync_seconds", "keel_wal_append_seconds", "keel_request_seconds"):
        assert hist + "_count" in values
        assert hist + '_bucket{le="+Inf"}' in values
    # The leader's election (hard state, no-op entry) went through storage.
    assert values["keel_wal_fsync_seconds_count"] >= 1
    assert values["keel_wal_append_seconds_count"] >= 1
    for key in ("keel_network_bytes_in_total", "keel_network_bytes_out_total",
                "keel_client_connections", "keel_sessions", "keel_znodes",
                "keel_raft_proposals_total"):
        assert key in values, key
    status = json.loads(urllib.request.urlopen(
        "http://127.0.0.1:%d/status" % leader.metrics_port, timeout=5).read())
    assert status["role"] == "leader"
    assert urllib.request.urlopen("http://127.0.0.1:%d/health" % leader.metrics_port,
                                  timeout=5).read() == b"ok\n"


def test_config_file_and_help(tmp_path):
    out = keel("server", "--help")
    assert out.returncode == 0
    for flag in ("--id", "--data-dir", "--listen", "--peer-listen", "--cluster",
                 "--metrics-listen", "--config"):
        assert flag in out.stdout
    out = keel("server", "--id", "1")
    assert out.returncode == 2 and "required" in out.stderr
    # Every flag can come from the file; a single-server cluster from a file.
    from harness import free_ports
    cport, pport = free_ports(2)
    cfg = tmp_path / "keel.conf"
    cfg.write_text("# a test\nid = 1\ndata-dir = %s\nlisten = 127.0.0.1:%d\n"
                   "peer-listen = 127.0.0.1:%d\ncluster = 1=127.0.0.1:%d\n"
                   "election-timeout-ms = 500\nheartbeat-ms = 50\n"
                   "insecure-peers = true\n" %
                   (tmp_path / "data", cport, pport, pport))
    proc = subprocess.Popen([KEEL, "server", "--config", str(cfg)], stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 10
        mode = None
        while time.time() < deadline:
            try:
                srvr = four_letter("127.0.0.1:%d" % cport, "srvr")
                mode = [l for l in srvr.splitlines() if l.startswith("Mode:")]
                if mode == ["Mode: leader"]:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        assert mode == ["Mode: leader"]
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        assert b"shutting down" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    bad = tmp_path / "bad.conf"
    bad.write_text("no-such-option = 1\n")
    out = keel("server", "--config", str(bad))
    assert out.returncode == 2 and "unknown option" in out.stderr
