"""SASL DIGEST-MD5 for ZooKeeper clients, the same assertions against keel
(`--jaas-file`) and Apache ZooKeeper 3.8 (the same JAAS file through
java.security.auth.login.config, with the SASL authentication provider):
kazoo's sasl_options gets the identity sasl:alice, `sasl` and `auth` ACLs
work and keep others out, a wrong password loses the session, and the raw
exchange (a first token ignored, the challenge's directives, a garbage
response answered AuthFailed with a null token, then closed) is the same.

One single-server backend per side (cheap: one JVM), not the suite's
3-server ensemble, which runs without SASL.
"""
import os
import shutil
import struct
import subprocess
import tempfile
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.protocol.states import KazooState
from kazoo.security import ACL, Id, Permissions

from conftest import BACKENDS, ZK_ENSEMBLE
from harness import Cluster
from test_sasl import Raw  # tests/integration: a bare session for opcode 102

JAAS = """Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_alice="secret"
    user_bob="bobpw";
};
"""


@pytest.fixture(scope="module", params=BACKENDS)
def sasl_backend(request):
    root = tempfile.mkdtemp(prefix="keel-compat-sasl-")
    jaas = os.path.join(root, "jaas.conf")
    with open(jaas, "w") as f:
        f.write(JAAS)
    os.chmod(jaas, 0o600)
    if request.param == "keel":
        c = Cluster(1)
        c.server_args = c.server_args + ["--jaas-file", jaas]
        c.start()
        c.wait_leader(timeout=30)
        try:
            yield c.servers[1].client_addr
        finally:
            c.cleanup()
            shutil.rmtree(root, ignore_errors=True)
        return
    env = dict(os.environ, ZK_JVM_OPTS="-Xmx256m -XX:+UseSerialGC"
               " -Djava.security.auth.login.config=" + jaas +
               " -Dzookeeper.authProvider.1="
               "org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
    zdir = os.path.join(root, "zk")
    out = subprocess.run([ZK_ENSEMBLE, "start", "1", zdir], env=env, check=True,
                         stdout=subprocess.PIPE, timeout=180).stdout.decode().strip()
    try:
        yield out.splitlines()[-1]
    finally:
        subprocess.run([ZK_ENSEMBLE, "stop", zdir], env=env, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def sasl_client(addr, user, password):
    zk = KazooClient(hosts=addr, timeout=20, connection_retry={"max_tries": 1},
                     sasl_options={"mechanism": "DIGEST-MD5", "username": user,
                                   "password": password})
    zk.start(timeout=20)
    return zk


def test_kazoo_sasl_acls(sasl_backend):
    alice = sasl_client(sasl_backend, "alice", "secret")
    try:
        alice.create("/sasl-a", b"a", acl=[ACL(Permissions.ALL, Id("sasl", "alice"))])
        alice.create("/sasl-auth", b"", acl=[ACL(Permissions.ALL, Id("auth", ""))])
        for p in ("/sasl-a", "/sasl-auth"):
            acl, _ = alice.get_acls(p)
            assert [(a.id.scheme, a.id.id, a.perms) for a in acl] == [("sasl", "alice", 31)]
        assert alice.get("/sasl-a")[0] == b"a"
    finally:
        alice.stop()
        alice.close()
    bob = sasl_client(sasl_backend, "bob", "bobpw")
    anon = KazooClient(hosts=sasl_backend, timeout=20)
    anon.start(timeout=20)
    try:
        for zk in (bob, anon):
            with pytest.raises(NoAuthError):
                zk.get("/sasl-a")
    finally:
        for zk in (bob, anon):
            zk.stop()
            zk.close()


def test_kazoo_wrong_password_loses_the_session(sasl_backend):
    zk = KazooClient(hosts=sasl_backend, timeout=20, connection_retry={"max_tries": 1},
                     sasl_options={"mechanism": "DIGEST-MD5", "username": "alice",
                                   "password": "wrong"})
    try:
        try:
            zk.start(timeout=20)
        except Exception:
            pass
        deadline = time.time() + 30
        while not (zk.state == KazooState.LOST and not zk.connected):
            assert time.time() < deadline, zk.state
            time.sleep(0.05)
    finally:
        zk.stop()
        zk.close()


def directives(challenge):
    return sorted(part.split("=", 1)[0] for part in challenge.decode().split(","))


def test_raw_exchange(sasl_backend):
    raw = Raw(sasl_backend)
    err, zxid, body = raw.sasl(b"an initial response")
    assert (err, zxid) == (0, 0)
    (n,) = struct.unpack(">i", body[:4])
    challenge = body[4:4 + n]
    assert directives(challenge) == ["algorithm", "charset", "nonce", "realm"]
    assert b'realm="zk-sasl-md5"' in challenge and b"algorithm=md5-sess" in challenge
    err, zxid, body = raw.sasl(b"\x00\xff" * 10)
    assert (err, zxid, body) == (-115, 0, struct.pack(">i", -1))
    assert raw.closed()
