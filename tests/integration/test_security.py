"""Attacks on a running cluster, as someone on the same network would try
them (issue 17), and the knobs that stop them (docs/security.md).

Each attack test shows four things: the attempt is refused, the cluster
keeps serving, nothing changed, and the server's log names the refused peer
(its address and the id it claimed). Raw peer frames follow src/net framing
(u32 length | u32 CRC-32C | payload) and the handshake of
src/node/peer_auth.h; raw Raft messages follow src/raft/msg.c.
"""
import base64
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import time
import urllib.request

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from harness import (KEEL, KEEL_AUTH, admin_call, admin_authenticate, four_letter,
                     free_ports, wait_log, _admin_roundtrip, _recv_exact)

# ---- wire helpers ----


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def peer_frame(payload):
    return struct.pack(">II", len(payload), crc32c(payload)) + payload


def hello(frm, to, version=2, addr=b"10.66.66.66:9999", nonce=None):
    body = struct.pack(">BIHQQH", 1, 0x4B45454C, version, frm, to, len(addr)) + addr
    return body + ((nonce or os.urandom(32)) if version >= 2 else b"")


def peer_mac(secret, role, dialer, acceptor, nonce_dialer, nonce_acceptor):
    """The handshake MAC of src/node/peer_auth.h (role 1 dialer, 2 acceptor)."""
    msg = b"keel-peer-auth-v2" + bytes([role]) + struct.pack(">QQ", dialer, acceptor)
    return hmac.new(secret, msg + nonce_dialer + nonce_acceptor, hashlib.sha256).digest()


def raft_msg(msg_type, frm, to, term, body):
    return struct.pack(">BBQQQ", 1, msg_type, frm, to, term) + body


def forged_append(frm, to, term):
    """A RAFT frame carrying AppendEntries with one entry at index 1000."""
    entry_data = b"create /forged by leader %d" % frm
    body = struct.pack(">QQQI", 999, term, 1000, 1)
    body += struct.pack(">QQBI", term, 1000, 1, len(entry_data)) + entry_data
    return b"\x02" + raft_msg(1, frm, to, term, body)


def forged_vote(frm, to, term):
    body = struct.pack(">QQB", 1 << 40, term, 0)
    return b"\x02" + raft_msg(5, frm, to, term, body)


def forged_forward_as_super():
    """A FORWARD frame (type 3) whose request names the identity super. Its
    body is never parsed: the link is refused before any frame is read."""
    ident = b"digest:super:forged"
    return b"\x03" + struct.pack(">Q", 1) + struct.pack(">H", len(ident)) + ident + \
        b"setData /guarded owned"


def peer_connect(server):
    host, port = server.peer_addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    return s, "127.0.0.1:%d" % s.getsockname()[1]


def read_frame(s):
    """One peer frame's payload, or None when the server closed."""
    try:
        n, crc = struct.unpack(">II", _recv_exact(s, 8))
        data = _recv_exact(s, n)
    except ConnectionError:
        return None
    assert crc32c(data) == crc
    return data


def closed_by_server(s, timeout=5.0):
    """True when the server closes the connection without sending anything."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


# ---- cluster helpers ----


def client(cluster, ids=None, auth=None):
    zk = KazooClient(hosts=cluster.connect_string(ids), timeout=10.0,
                     auth_data=[auth] if auth else None)
    zk.start(timeout=10)
    return zk


def snapshot_state(cluster):
    """Per server: (term, leader, voters) — what an attack must not move."""
    out = {}
    for s in cluster.live():
        st = s.status()
        out[s.id] = (st["term"], st["leader"],
                     sorted(m["id"] for m in st.get("members", []) if m["role"] == "voter"))
    return out


def assert_serving(cluster, path):
    zk = client(cluster)
    try:
        zk.create(path, b"ok")
        assert zk.get(path)[0] == b"ok"
    finally:
        zk.stop()
        zk.close()


@pytest.fixture
def cluster(cluster_factory):
    c = cluster_factory(3)
    c.start()
    c.wait_leader()
    return c


def leader_and_follower(cluster):
    leader = cluster.wait_leader()
    follower = next(s for s in cluster.servers.values() if s.id != leader.id)
    return leader, follower


# ---- (a) a HELLO from a server that is not a member ----


def test_hello_from_unknown_server_is_refused(cluster):
    leader, follower = leader_and_follower(cluster)
    before = snapshot_state(cluster)
    for target in (leader, follower):
        s, local = peer_connect(target)
        s.sendall(peer_frame(hello(99, target.id)))
        # Not even a CHALLENGE comes back: refused before anything else.
        assert closed_by_server(s)
        s.close()
        wait_log(target, "peer link from %s (claims server 99): not a member of this "
                         "cluster; refused" % local)
    # The old, unauthenticated HELLO (protocol 1) from a member id: refused too.
    s, local = peer_connect(follower)
    s.sendall(peer_frame(hello(leader.id, follower.id, version=1)))
    assert closed_by_server(s)
    s.close()
    wait_log(follower, "peer link from %s (claims server %d): malformed HELLO or protocol "
                       "version" % (local, leader.id))
    assert snapshot_state(cluster) == before
    assert_serving(cluster, "/after-unknown-hello")


# ---- (b) a forged FORWARD claiming identity super ----


def test_forward_as_super_without_the_secret_is_refused(cluster):
    leader, follower = leader_and_follower(cluster)
    acl = make_digest_acl("owner", "pw", all=True)
    owner = client(cluster, auth=("digest", "owner:pw"))
    owner.create("/guarded", b"original", acl=[acl])
    before_acl = owner.get_acls("/guarded")[0]
    # 1. FORWARD as the very first frame, no handshake at all.
    s, local = peer_connect(leader)
    s.sendall(peer_frame(forged_forward_as_super()))
    assert closed_by_server(s)
    s.close()
    wait_log(leader, "peer link from %s (claims server 0): frame type 3 before the handshake "
                     "completed; refused" % local)
    # 2. A full handshake attempt claiming to be a member, without the
    # secret: the CHALLENGE comes, the PROOF is wrong, the FORWARD behind it
    # is never read.
    s, local = peer_connect(leader)
    s.sendall(peer_frame(hello(follower.id, leader.id)))
    challenge = read_frame(s)
    assert challenge is not None and challenge[0] == 10
    s.sendall(peer_frame(b"\x0b" + os.urandom(32)) + peer_frame(forged_forward_as_super()))
    assert closed_by_server(s)
    s.close()
    wait_log(leader, "peer link from %s (claims server %d): wrong proof (not the cluster "
                     "secret); refused" % (local, follower.id))
    # Nothing changed on any server, and the owner's session is alive.
    for srv in cluster.servers.values():
        zk = client(cluster, ids=[srv.id], auth=("digest", "owner:pw"))
        zk.sync("/")
        assert zk.get("/guarded")[0] == b"original"
        assert zk.get_acls("/guarded")[0] == before_acl
        zk.stop()
        zk.close()
    assert owner.connected
    owner.set("/guarded", b"still mine")
    owner.stop()
    owner.close()


# ---- (c) a forged APPEND from "leader 99" ----


def test_append_from_leader_99_is_refused(cluster):
    leader, follower = leader_and_follower(cluster)
    before = snapshot_state(cluster)
    term = before[follower.id][0] + 1
    # As server 99 (not a member): refused at HELLO.
    s, local = peer_connect(follower)
    s.sendall(peer_frame(hello(99, follower.id)) + peer_frame(forged_append(99, follower.id,
                                                                           term)))
    assert closed_by_server(s)
    s.close()
    wait_log(follower, "peer link from %s (claims server 99): not a member" % local)
    # As the real leader's id, without the secret: refused at PROOF.
    s, local = peer_connect(follower)
    s.sendall(peer_frame(hello(leader.id, follower.id)))
    assert read_frame(s)[0] == 10
    s.sendall(peer_frame(b"\x0b" + b"\x00" * 32) +
              peer_frame(forged_append(leader.id, follower.id, term)))
    assert closed_by_server(s)
    s.close()
    wait_log(follower, "peer link from %s (claims server %d): wrong proof" % (local, leader.id))
    assert snapshot_state(cluster) == before
    zk = client(cluster)
    for srv in cluster.servers.values():
        assert srv.status()["commit_index"] < 1000
    assert zk.exists("/forged") is None
    zk.stop()
    zk.close()
    assert_serving(cluster, "/after-forged-append")


# ---- (d) a VOTE at term 2^62 ----


def test_vote_at_term_2_62_has_no_effect(cluster):
    leader, follower = leader_and_follower(cluster)
    before = snapshot_state(cluster)
    for target in cluster.servers.values():
        claimed = next(i for i in cluster.servers if i != target.id)
        s, local = peer_connect(target)
        s.sendall(peer_frame(hello(claimed, target.id)))
        assert read_frame(s)[0] == 10
        s.sendall(peer_frame(b"\x0b" + os.urandom(32)) +
                  peer_frame(forged_vote(claimed, target.id, 1 << 62)))
        assert closed_by_server(s)
        s.close()
        wait_log(target, "peer link from %s (claims server %d): wrong proof" % (local, claimed))
    assert snapshot_state(cluster) == before
    assert_serving(cluster, "/after-vote")
    # A full restart still elects, at a sane term.
    cluster.stop()
    cluster.start()
    leader = cluster.wait_leader(timeout=30)
    assert leader.status()["term"] < 1000
    assert_serving(cluster, "/after-restart")


def test_impossible_terms_are_refused_even_from_a_member(cluster):
    """With the secret (an independent implementation of the handshake: the
    server's MAC must match ours), a member's link is accepted; a VOTE at
    term 2^62 and an APPEND at index 2^62 on it are still refused."""
    target = cluster.servers[3]
    # Server 1 is down, so no real link of its competes with ours.
    cluster.servers[1].kill()
    s, local = peer_connect(target)
    nonce_d = os.urandom(32)
    s.sendall(peer_frame(hello(1, 3, nonce=nonce_d)))
    ch = read_frame(s)
    typ, frm, to = struct.unpack(">BQQ", ch[:17])
    nonce_a, mac_a = ch[17:49], ch[49:81]
    assert (typ, frm, to, len(ch)) == (10, 3, 1, 81)
    assert mac_a == peer_mac(cluster.secret, 2, 1, 3, nonce_d, nonce_a)
    s.sendall(peer_frame(b"\x0b" + peer_mac(cluster.secret, 1, 1, 3, nonce_d, nonce_a)))
    s.sendall(peer_frame(forged_vote(1, 3, 1 << 62)))
    s.sendall(peer_frame(b"\x02" + raft_msg(1, 1, 3, 1, struct.pack(">QQQI", 1 << 62, 1,
                                                                        1 << 62, 0))))
    wait_log(target, "peer 1: Raft message type 5 with an impossible term or index "
                     "(term %d), refused" % (1 << 62))
    wait_log(target, "peer 1: Raft message type 1 with an impossible term or index")
    s.close()
    cluster.servers[1].start()
    cluster.wait(lambda: cluster.servers[1].mode() in ("leader", "follower"),
                 what="server 1 back")
    cluster.wait_leader()
    for srv in cluster.servers.values():
        assert srv.status()["term"] < 1000
    assert_serving(cluster, "/after-impossible-terms")


# ---- (e) unauthenticated admin frames on the client port ----


def test_unauthenticated_admin_frames_change_nothing(cluster):
    leader, follower = leader_and_follower(cluster)
    before = snapshot_state(cluster)
    others = [s for s in cluster.servers.values() if s.id != leader.id]
    # Transfer leadership, remove two members: each refused, the
    # connection stays open and answers the next request (status).
    host, port = leader.client_addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        local = "127.0.0.1:%d" % s.getsockname()[1]
        err, msg, _ = _admin_roundtrip(s, 3, follower.id.to_bytes(8, "big"))
        assert err == KEEL_AUTH and "not authorized" in msg
        for victim in others:
            err, msg, _ = _admin_roundtrip(s, 2, bytes([4]) + victim.id.to_bytes(8, "big") +
                                           b"\x00\x00")
            assert err == KEEL_AUTH, msg
        err, msg, _ = _admin_roundtrip(s, 4, b"")  # snapshot
        assert err == KEEL_AUTH, msg
        err, _, body = _admin_roundtrip(s, 1, b"")  # status: open, read-only
        assert err == 0 and b'"role"' in body
    wait_log(leader, "admin op 3 from %s refused: not authenticated" % local)
    wait_log(leader, "admin op 2 from %s refused: not authenticated" % local)
    # Through a follower, which would forward it: refused there.
    err, msg, _ = admin_call(follower.client_addr, 3, follower.id.to_bytes(8, "big"))
    assert err == KEEL_AUTH, msg
    # A wrong secret, and a replayed proof, fail too.
    err, msg, _ = admin_call(leader.client_addr, 3, follower.id.to_bytes(8, "big"),
                             secret=os.urandom(32))
    assert err == KEEL_AUTH and "authentication failed" in msg
    wait_log(leader, "admin authentication from 127.0.0.1:")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        err, _, body = _admin_roundtrip(s, 5, b"")
        nonce, sid = body[:32], int.from_bytes(body[32:40], "big")
        from harness import admin_operator_mac
        cn = os.urandom(32)
        proof = b"\x01" + cn + admin_operator_mac(cluster.secret, sid, nonce, cn)
        assert _admin_roundtrip(s, 6, proof)[0] == 0
    with socket.create_connection((host, int(port)), timeout=10) as s:
        assert _admin_roundtrip(s, 5, b"")[0] == 0  # a fresh nonce
        assert _admin_roundtrip(s, 6, proof)[0] == KEEL_AUTH  # old proof replayed
        assert _admin_roundtrip(s, 3, follower.id.to_bytes(8, "big"))[0] == KEEL_AUTH
    # The CLI without a credential says so and exits 1.
    out = subprocess.run([KEEL, "members", "remove", str(follower.id), "--servers",
                          leader.client_addr], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "not authorized" in out.stderr
    time.sleep(1.0)
    assert snapshot_state(cluster) == before
    assert cluster.wait_leader().id == leader.id
    assert_serving(cluster, "/after-admin-attack")
    # The operator, with the secret, can.
    out = subprocess.run([KEEL, "leader", "transfer", str(follower.id), "--servers",
                          leader.client_addr, *cluster.cli_auth()],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    cluster.wait(lambda: follower.mode() == "leader", timeout=10, what="transfer")


def test_super_digest_is_an_operator(cluster_factory):
    digest = base64.b64encode(hashlib.sha1(b"super:letmein").digest()).decode()
    c = cluster_factory(3, server_args=["--election-timeout-ms", "1000", "--heartbeat-ms",
                                        "100", "--super-digest", "super:" + digest])
    c.start()
    leader, follower = leader_and_follower(c)
    err, msg, _ = admin_call(leader.client_addr, 3, follower.id.to_bytes(8, "big"),
                             digest_auth="super:wrong")
    assert err == KEEL_AUTH, msg
    assert c.wait_leader().id == leader.id
    out = subprocess.run([KEEL, "leader", "transfer", str(follower.id), "--servers",
                          leader.client_addr, "--auth", "super:letmein"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    c.wait(lambda: follower.mode() == "leader", timeout=10, what="transfer")


# ---- peer-port limits (issue 18) ----


def test_idle_peer_connections_are_capped_and_timed_out(cluster_factory):
    c = cluster_factory(3, server_args=["--election-timeout-ms", "1000", "--heartbeat-ms",
                                        "100", "--max-peer-handshakes", "3",
                                        "--peer-handshake-timeout-ms", "1000"])
    c.start()
    leader = c.wait_leader()
    # 40 idle connections at once: 3 wait for their handshake deadline, the
    # rest are refused on arrival.
    socks = [peer_connect(leader)[0] for _ in range(40)]
    start = time.time()
    closed = [closed_by_server(s, timeout=4.0) for s in socks]
    assert all(closed), closed
    assert time.time() - start < 4.0
    for s in socks:
        s.close()
    wait_log(leader, "too many unauthenticated peer connections; refused")
    # One more, a second later, that never sends its HELLO: timed out, and
    # logged (a new second), after a line counting what was not logged.
    time.sleep(1.1)
    s = peer_connect(leader)[0]
    assert closed_by_server(s, timeout=4.0)
    s.close()
    wait_log(leader, "handshake not completed in time; refused")
    wait_log(leader, "more peer connections were refused (not logged: over 20 lines a second)")
    assert leader.log().count("; refused") < 41
    metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % leader.metrics_port,
                                     timeout=5).read().decode()
    refused = [l for l in metrics.splitlines()
               if l.startswith("keel_peer_connections_refused_total ")]
    assert refused and float(refused[0].split()[1]) >= 41, refused
    assert c.wait_leader().id == leader.id
    assert_serving(c, "/after-idle-peers")


# ---- starting without a secret; the four-letter-word whitelist ----


def test_server_needs_a_secret_or_insecure_peers(tmp_path):
    cport, pport = free_ports(2)
    base = [KEEL, "server", "--id", "1", "--data-dir", str(tmp_path / "d"), "--listen",
            "127.0.0.1:%d" % cport, "--peer-listen", "127.0.0.1:%d" % pport,
            "--cluster", "1=127.0.0.1:%d" % pport]
    out = subprocess.run(base, capture_output=True, text=True, timeout=10)
    assert out.returncode == 2
    assert "--cluster-secret-file" in out.stderr and "--insecure-peers" in out.stderr
    short = tmp_path / "short.secret"
    short.write_text("abcd\n")
    out = subprocess.run(base + ["--cluster-secret-file", str(short)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 1 and "keel secret generate" in out.stderr


def run_single(tmp_path, extra):
    cport, pport = free_ports(2)
    args = [KEEL, "server", "--id", "1", "--data-dir", str(tmp_path / "d"), "--listen",
            "127.0.0.1:%d" % cport, "--peer-listen", "127.0.0.1:%d" % pport,
            "--cluster", "1=127.0.0.1:%d" % pport, "--election-timeout-ms", "300",
            "--heartbeat-ms", "50"] + extra
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    addr = "127.0.0.1:%d" % cport
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if "Mode: leader" in four_letter(addr, "srvr"):
                return proc, addr
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("single server did not start")


def test_four_letter_word_whitelist(tmp_path):
    proc, addr = run_single(tmp_path, ["--insecure-peers"])
    try:
        assert four_letter(addr, "ruok") == "imok"
        assert "zk_server_state" in four_letter(addr, "mntr")
        assert four_letter(addr, "isro") == "rw"
        for word in ("conf", "stat", "cons", "envi", "wchs", "srst"):
            assert four_letter(addr, word) == \
                "%s is not executed because it is not in the whitelist.\n" % word
        # --insecure-peers: admin needs no credential (and the log said so).
        assert admin_call(addr, 4)[0] == 0
    finally:
        proc.terminate()
        err = proc.communicate(timeout=15)[1].decode()
    assert "--insecure-peers: anyone who reaches" in err
    cfg = tmp_path / "keel.conf"
    cfg.write_text("4lw.commands.whitelist = ruok, conf\ninsecure-peers = true\n")
    proc, addr = run_single(tmp_path, ["--config", str(cfg), "--4lw-whitelist", "srvr,conf"])
    try:
        assert "jute.maxbuffer" in four_letter(addr, "conf")
        assert "not in the whitelist" in four_letter(addr, "ruok")  # the flag won
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    out = subprocess.run([KEEL, "server", "--id", "1", "--data-dir", "x", "--listen", "a:1",
                          "--peer-listen", "a:2", "--insecure-peers", "--4lw-whitelist",
                          "ruok,toolong"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and "--4lw-whitelist" in out.stderr


# ---- broker requests on the client port need the cluster credential ----


def test_broker_requests_need_the_cluster_credential(cluster, tmp_path):
    """Registering as a broker, heartbeating, AlterPartition, unregistering
    and ElectLeaders come only from sessions that proved the cluster
    credential (addauth "keel", bound to the session) or super: others get
    NoAuth and nothing changes; a wrong credential is refused and closes
    the session; `keel broker` without the secret, or with another one,
    exits saying so. Topic requests stay open, as in Kafka without an
    authorizer."""
    from harness import RawZk
    from test_controller import (API_DESCRIBE, API_REGISTRATION, OPCODE_BASE, describe_request,
                                 describe_response, registration_request)
    import uuid
    leader, follower = leader_and_follower(cluster)
    reg = registration_request(7, uuid.uuid4().bytes)
    # No credential: NoAuth, logged with the client's address, no broker 7.
    anon = RawZk(follower.client_addr, cluster_auth=False)
    try:
        err, _, _ = anon.call(OPCODE_BASE + API_REGISTRATION, reg)
        assert err == -102
        err, _, body = anon.call(OPCODE_BASE + API_DESCRIBE, describe_request())
        assert err == 0 and describe_response(body)["brokers"] == {}
    finally:
        anon.close()
    wait_log(follower, "BrokerRegistration refused: the session has not proved the cluster "
             "credential")
    # A credential made with another secret: AuthFailed, the session ends.
    bad = RawZk(follower.client_addr, secret=os.urandom(32))
    try:
        assert bad.auth_err == -115
        assert closed_by_server(bad.sock)
    finally:
        bad.sock.close()
    wait_log(follower, "the cluster credential (addauth keel) was refused")
    # The real one registers.
    good = RawZk(follower.client_addr)
    try:
        assert good.auth_err == 0
        err, _, _ = good.call(OPCODE_BASE + API_REGISTRATION, reg)
        assert err == 0
    finally:
        good.close()
    # keel broker without the secret, then with another cluster's.
    base = [KEEL, "broker", "--id", "8", "--servers", cluster.connect_string(),
            "--port", str(free_ports(1)[0])]
    out = subprocess.run(base + ["--data-dir", str(tmp_path / "b8")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "--cluster-secret-file" in out.stderr, out.stderr
    other = tmp_path / "other.secret"
    other.write_text(subprocess.run([KEEL, "secret", "generate"], capture_output=True,
                                    text=True, check=True).stdout)
    other.chmod(0o600)
    out = subprocess.run(base + ["--data-dir", str(tmp_path / "b8b"), "--cluster-secret-file",
                                 str(other)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "refused the cluster credential" in out.stderr, out.stderr
    assert_serving(cluster, "/after-broker-auth")
