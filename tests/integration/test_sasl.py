"""SASL DIGEST-MD5 for ZooKeeper clients (issue 17, docs/security.md).

kazoo's sasl_options (pure-sasl's DIGEST-MD5 client, the same exchange
ZooKeeper's Java client makes) against `keel server --jaas-file` (ZooKeeper's
JAAS format) and `--sasl-users-file`: the session gets the identity
sasl:USER, the `sasl` ACL scheme lets it in and keeps others out, a wrong
password fails the exchange (AuthFailed, connection closed) while the server
keeps serving, and a `sasl` request to a server without SASL is answered as
ZooKeeper answers it (OK, no token).
"""
import os
import socket
import struct

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.protocol.states import KazooState
from kazoo.security import ACL, Id, Permissions

from harness import _recv_exact

JAAS = """// as ZooKeeper's java.security.auth.login.config
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_alice="secret"
    user_bob="b0bs:pass";
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="alice"
    password="secret";
};
"""


def sasl_client(hosts, user, password, timeout=20):
    zk = KazooClient(hosts=hosts, timeout=timeout, connection_retry={"max_tries": 1},
                     sasl_options={"mechanism": "DIGEST-MD5", "username": user,
                                   "password": password})
    zk.start(timeout=timeout)
    return zk


def assert_refused(cluster, addr, user, password):
    """kazoo reports CONNECTED before its SASL exchange; a refused exchange
    then moves it to AUTH_FAILED (the session LOST) and every request fails."""
    zk = KazooClient(hosts=addr, timeout=20, connection_retry={"max_tries": 1},
                     sasl_options={"mechanism": "DIGEST-MD5", "username": user,
                                   "password": password})
    try:
        try:
            zk.start(timeout=20)
        except Exception:
            pass
        cluster.wait(lambda: zk.state == KazooState.LOST and not zk.connected, timeout=30,
                     what="the session LOST after AUTH_FAILED for %s on %s" % (user, addr))
        with pytest.raises(Exception):
            zk.get("/")
    finally:
        zk.stop()
        zk.close()


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def sasl_cluster(cluster_factory, size, flags_of_root):
    c = cluster_factory(size)
    c.server_args = c.server_args + flags_of_root(c.root)
    c.start()
    c.wait_leader(timeout=30)
    return c


def alice_acl():
    return [ACL(Permissions.ALL, Id("sasl", "alice"))]


def test_digest_md5_jaas_three_servers(cluster_factory):
    c = sasl_cluster(cluster_factory, 3, lambda root: [
        "--jaas-file", write_file(os.path.join(root, "jaas.conf"), JAAS)])
    addrs = [c.servers[i].client_addr for i in sorted(c.servers)]
    alice = sasl_client(addrs[0], "alice", "secret")
    try:
        alice.create("/sasl-node", b"v1", acl=alice_acl())
        assert alice.get("/sasl-node")[0] == b"v1"
        acl, _ = alice.get_acls("/sasl-node")
        assert [(a.id.scheme, a.id.id, a.perms) for a in acl] == [("sasl", "alice", 31)]
        # "auth" expands to the sasl identity, as in ZooKeeper.
        alice.create("/sasl-auth", b"", acl=[ACL(Permissions.ALL, Id("auth", ""))])
        acl, _ = alice.get_acls("/sasl-auth")
        assert [(a.id.scheme, a.id.id) for a in acl] == [("sasl", "alice")]
    finally:
        alice.stop()
        alice.close()

    # Alice again through another server: the identity rides with writes
    # forwarded to the leader, and reads of the replicated ACL pass.
    alice2 = sasl_client(addrs[2], "alice", "secret")
    try:
        alice2.set("/sasl-node", b"v2")
        assert alice2.get("/sasl-node")[0] == b"v2"
    finally:
        alice2.stop()
        alice2.close()

    # No SASL: NoAuth. Another SASL user: NoAuth.
    anon = KazooClient(hosts=addrs[1], timeout=20)
    anon.start(timeout=20)
    bob = sasl_client(addrs[1], "bob", "b0bs:pass")
    try:
        for zk in (anon, bob):
            with pytest.raises(NoAuthError):
                zk.get("/sasl-node")
            with pytest.raises(NoAuthError):
                zk.set("/sasl-node", b"x")
        assert anon.exists("/sasl-node") is not None  # exists needs no permission
    finally:
        for zk in (anon, bob):
            zk.stop()
            zk.close()

    # A wrong password fails the exchange; the server keeps serving.
    for addr in addrs:
        assert_refused(c, addr, "alice", "not-the-password")
    assert_refused(c, addrs[0], "mallory", "secret")
    c.wait(lambda: "SASL DIGEST-MD5 authentication failed: wrong password" in
           c.servers[1].log(), what="the refusal in server 1's log")
    assert "no such user" in c.servers[1].log()
    alice3 = sasl_client(addrs[0], "alice", "secret")
    try:
        assert alice3.get("/sasl-node")[0] == b"v2"
    finally:
        alice3.stop()
        alice3.close()


class Raw:
    """A bare ZooKeeper session for the sasl request (opcode 102)."""

    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.send(struct.pack(">iqiq", 0, 0, 10000, 0) + struct.pack(">i", 16) + b"\0" * 16 +
                  b"\0")
        self.recv()
        self.xid = 0

    def send(self, payload):
        self.sock.sendall(struct.pack(">I", len(payload)) + payload)

    def recv(self):
        (n,) = struct.unpack(">I", _recv_exact(self.sock, 4))
        return _recv_exact(self.sock, n)

    def call(self, opcode, body):
        self.xid += 1
        self.send(struct.pack(">ii", self.xid, opcode) + body)
        resp = self.recv()
        xid, zxid, err = struct.unpack(">iqi", resp[:16])
        assert xid == self.xid
        return err, zxid, resp[16:]

    def sasl(self, token):
        body = struct.pack(">i", -1) if token is None else struct.pack(">i", len(token)) + token
        return self.call(102, body)

    def exists(self, path):
        p = path.encode()
        return self.call(3, struct.pack(">i", len(p)) + p + b"\0")

    def closed(self):
        try:
            self.sock.settimeout(10)
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def test_sasl_without_mechanism_answers_ok_without_token(cluster_factory):
    c = cluster_factory(1)
    c.start()
    c.wait_leader(timeout=30)
    raw = Raw(c.servers[1].client_addr)
    err, zxid, body = raw.sasl(b"")
    # ZooKeeper without a JAAS Server section: OK, SetSASLResponse(null).
    assert (err, zxid, body) == (0, 0, struct.pack(">i", -1))
    err, _, _ = raw.exists("/")
    assert err == 0  # the connection keeps serving
    raw.sock.close()


def test_users_file_super_user_and_bad_exchanges(cluster_factory):
    def flags(root):
        path = write_file(os.path.join(root, "sasl.users"),
                          "# NAME:PASSWORD\nalice:secret\nadmin:adm1n\n")
        return ["--sasl-users-file", path, "--sasl-super-user", "admin"]
    c = sasl_cluster(cluster_factory, 1, flags)
    addr = c.servers[1].client_addr
    alice = sasl_client(addr, "alice", "secret")
    alice.create("/private", b"p", acl=alice_acl())
    alice.stop()
    alice.close()
    admin = sasl_client(addr, "admin", "adm1n")
    try:
        assert admin.get("/private")[0] == b"p"  # super: every ACL passes
    finally:
        admin.stop()
        admin.close()

    # A first token is ignored, as ZooKeeper's server ignores it: the
    # challenge comes back (DIGEST-MD5 has no initial response).
    raw = Raw(addr)
    err, _, body = raw.sasl(b"username=\"alice\"")
    assert err == 0
    (n,) = struct.unpack(">i", body[:4])
    challenge = body[4:4 + n]
    assert b'realm="zk-sasl-md5"' in challenge and b"algorithm=md5-sess" in challenge
    err, _, body = raw.sasl(b"\x00\xff" * 3000)
    assert (err, body) == (-115, struct.pack(">i", -1))  # AuthFailed, null token
    assert raw.closed()
    # Still serving.
    alice = sasl_client(addr, "alice", "secret")
    try:
        assert alice.get("/private")[0] == b"p"
    finally:
        alice.stop()
        alice.close()


def test_bad_users_file_refuses_to_start(cluster_factory, tmp_path):
    import subprocess
    from harness import KEEL
    bad = write_file(str(tmp_path / "bad.users"), "alice\n")
    jaas = write_file(str(tmp_path / "krb.jaas"),
                      "Server { com.sun.security.auth.module.Krb5LoginModule required; };\n")
    for flag, path, words in (("--sasl-users-file", bad, "line 1"),
                              ("--jaas-file", jaas, "only org.apache.zookeeper")):
        r = subprocess.run([KEEL, "server", "--id", "1", "--data-dir", str(tmp_path / "d"),
                            "--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0",
                            "--cluster", "1=127.0.0.1:1", "--insecure-peers", flag, path],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
        assert words in r.stderr, r.stderr


ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"


def zkcli(addr, script, jvm_flags, timeout=120):
    import subprocess
    env = dict(os.environ, CLIENT_JVMFLAGS=" ".join(jvm_flags))
    r = subprocess.run([ZKCLI, "-server", addr], input=script, capture_output=True, text=True,
                       env=env, timeout=timeout)
    return r.stdout + r.stderr


def test_java_client_zkcli_digest_md5(cluster_factory):
    """ZooKeeper's Java client (Debian's zkCli.sh, DigestMD5Client of the
    JDK) with a JAAS Client section: SaslAuthenticated, the sasl identity in
    whoami and ACLs; without SASL: Insufficient permission."""
    def flags(root):
        return ["--jaas-file", write_file(os.path.join(root, "jaas.conf"), JAAS)]
    c = sasl_cluster(cluster_factory, 1, flags)
    addr = c.servers[1].client_addr
    good = write_file(os.path.join(c.root, "client.jaas"), JAAS)
    out = zkcli(addr, "create /j x sasl:alice:cdrwa\ngetAcl /j\nget /j\nwhoami\nquit\n",
                ["-Djava.security.auth.login.config=" + good, "-Dzookeeper.sasl.client=true"])
    assert "state:SaslAuthenticated" in out, out
    assert "Created /j" in out, out
    assert "'sasl,'alice\n: cdrwa" in out, out
    assert "sasl: alice" in out, out
    out = zkcli(addr, "get /j\nquit\n", ["-Dzookeeper.sasl.client=false"])
    assert "Insufficient permission : /j" in out, out
    wrong = write_file(os.path.join(c.root, "wrong.jaas"),
                       JAAS.replace('password="secret"', 'password="not-it"'))
    # A request after connecting: the Java client holds it until its SASL
    # exchange ends, so the server sees the wrong response before a quit
    # can close the connection (a bare "quit" raced the exchange).
    out = zkcli(addr, "get /j\nquit\n", ["-Djava.security.auth.login.config=" + wrong])
    assert "state:SaslAuthenticated" not in out, out
    c.wait(lambda: "authentication failed: wrong password" in c.servers[1].log(),
           what="the refusal in the log")
