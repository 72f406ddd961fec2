"""TLS: the secure client port (kazoo and the Java client / zkCli.sh over
TLS, the x509 ACL scheme), peer mutual TLS, and what must be refused — a
plaintext client on the TLS port, a peer whose certificate another CA
signed — while the cluster keeps serving.

A throwaway CA and certificates are made for each run with the openssl CLI
(docs/security.md, "TLS"). One 3-server cluster runs every test: peer links
in mutual TLS, a plaintext and a secure client port on every server.
"""
import os
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl

from harness import KEEL, KEEL_AUTH, Cluster, _admin_roundtrip, free_ports, wait_log

CLIENT_DN = "CN=client,OU=clients,O=keel-test"
OTHER_DN = "CN=other,OU=clients,O=keel-test"
ADMIN_DN = "CN=admin,OU=ops,O=keel-test"
ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"


# ---- a throwaway PKI ----


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_cert(d, name, subject, ca, server=False):
    """A P-256 key and a certificate signed by CA `ca` (a name in d)."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject, cwd=d)
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        if server:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "2", "-out", name + ".crt", "-extfile", ext, cwd=d)
    # Java's PEM key store wants the key and the certificate in one file.
    with open(os.path.join(d, name + ".pem"), "w") as out:
        for part in (name + ".key", name + ".crt"):
            with open(os.path.join(d, part)) as f:
                out.write(f.read())


def make_ca(d, name, cn):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".crt", "-days", "2",
            "-subj", "/O=keel-test/CN=" + cn, cwd=d)


class Pki:
    def __init__(self, d):
        self.dir = d
        make_ca(d, "ca", "test CA")
        make_ca(d, "other-ca", "other CA")
        make_cert(d, "server", "/O=keel-test/CN=server", "ca", server=True)
        make_cert(d, "peer", "/O=keel-test/CN=peer", "ca", server=True)
        make_cert(d, "client", "/O=keel-test/OU=clients/CN=client", "ca")
        make_cert(d, "other", "/O=keel-test/OU=clients/CN=other", "ca")
        make_cert(d, "admin", "/O=keel-test/OU=ops/CN=admin", "ca")
        make_cert(d, "stranger", "/O=keel-test/CN=stranger", "other-ca", server=True)

    def path(self, name):
        return os.path.join(self.dir, name)


# ---- the cluster ----


def peer_tls_args(pki, cert="peer", ca="ca"):
    return ["--peer-tls-cert", pki.path(cert + ".crt"), "--peer-tls-key", pki.path(cert + ".key"),
            "--peer-tls-ca", pki.path(ca + ".crt")]


class TlsCluster:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="keel-tls-")
        self.pki = Pki(self.root)
        self.cluster = Cluster(3, root=os.path.join(self.root, "cluster"))
        self.secure = {}
        used = {p for s in self.cluster.servers.values()
                for p in (s.client_port, s.peer_port, s.metrics_port)}
        for sid, s in self.cluster.servers.items():
            port = free_ports(1)[0]
            while port in used:
                port = free_ports(1)[0]
            used.add(port)
            self.secure[sid] = "127.0.0.1:%d" % port
            s.extra_args = self.server_args(sid)
        self.cluster.start()
        self.cluster.wait_leader(timeout=30)

    def server_args(self, sid, peer=None):
        return ["--secure-listen", self.secure[sid],
                "--tls-cert", self.pki.path("server.crt"), "--tls-key", self.pki.path("server.key"),
                "--tls-ca", self.pki.path("ca.crt"), "--x509-super-user", ADMIN_DN,
                ] + (peer or peer_tls_args(self.pki))

    def secure_hosts(self):
        return ",".join(self.secure[i] for i in sorted(self.secure))

    def kazoo(self, cert="client", hosts=None):
        zk = KazooClient(hosts=hosts or self.secure_hosts(), timeout=10.0, use_ssl=True,
                         ca=self.pki.path("ca.crt"),
                         certfile=self.pki.path(cert + ".crt") if cert else None,
                         keyfile=self.pki.path(cert + ".key") if cert else None,
                         verify_certs=True)
        zk.start(timeout=15)
        return zk

    def plain_kazoo(self):
        zk = KazooClient(hosts=self.cluster.connect_string(), timeout=10.0)
        zk.start(timeout=15)
        return zk

    def cleanup(self):
        self.cluster.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def tc():
    t = TlsCluster()
    yield t
    t.cleanup()


@pytest.fixture(autouse=True)
def logs_on_failure(request, tc):
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(tc.cluster.dump_logs())


def stop(*clients):
    for zk in clients:
        zk.stop()
        zk.close()


# ---- peers ----


def test_peer_mutual_tls_cluster_elects_and_replicates(tc):
    for s in tc.cluster.servers.values():
        assert "peer links use mutual TLS" in s.log()
    leader = tc.cluster.wait_leader()
    zk = tc.plain_kazoo()
    try:
        zk.create("/peer-tls", b"replicated")
        # Every server applies it (read through each one's own port).
        for sid in sorted(tc.cluster.servers):
            one = KazooClient(hosts=tc.cluster.servers[sid].client_addr, timeout=10.0)
            one.start(timeout=15)
            try:
                tc.cluster.wait(lambda: one.exists("/peer-tls") is not None,
                                what="/peer-tls on server %d" % sid)
                assert one.get("/peer-tls")[0] == b"replicated"
            finally:
                stop(one)
    finally:
        stop(zk)
    # The peer port talks only TLS: a plaintext HELLO goes nowhere.
    s = socket.create_connection(("127.0.0.1", leader.peer_port), timeout=10)
    s.sendall(struct.pack(">II", 8, 0) + b"\x01" * 8)
    s.settimeout(10)
    try:
        assert s.recv(1) == b""
    except ConnectionResetError:
        pass
    s.close()
    wait_log(leader, "not TLS", timeout=15)


# ---- the secure client port ----


def test_kazoo_crud_watch_ephemeral_over_tls(tc):
    zk = tc.kazoo()
    watcher = tc.kazoo(cert=None)  # a client certificate is optional
    try:
        zk.create("/tls", b"v0")
        zk.create("/tls/a", b"1")
        assert zk.get("/tls/a")[0] == b"1"
        zk.set("/tls/a", b"2")
        assert zk.get("/tls/a")[0] == b"2"
        assert zk.get_children("/tls") == ["a"]
        fired = threading.Event()
        seen = []

        def on_change(event):
            seen.append(event)
            fired.set()

        watcher.get("/tls/a", watch=on_change)
        zk.set("/tls/a", b"3")
        assert fired.wait(15), "data watch did not fire over TLS"
        assert seen[0].path == "/tls/a" and seen[0].type == "CHANGED"
        # A frame far larger than one TLS record (16 KiB), both ways.
        big = bytes(range(256)) * 2000
        zk.create("/tls/big", big)
        watcher.sync("/tls")  # another session: catch up before reading
        assert watcher.get("/tls/big")[0] == big
        # An ephemeral lives as long as its TLS session.
        eph = tc.kazoo()
        eph.create("/tls/eph", b"e", ephemeral=True)
        zk.sync("/tls")
        assert zk.exists("/tls/eph") is not None
        stop(eph)
        tc.cluster.wait(lambda: zk.exists("/tls/eph") is None, what="ephemeral removed")
        zk.delete("/tls/a")
        assert zk.get_children("/tls") == ["big"]
        # The same data on the plaintext port, alongside.
        plain = tc.plain_kazoo()
        try:
            plain.sync("/tls")
            assert plain.get("/tls/big")[0] == big
        finally:
            stop(plain)
    finally:
        stop(zk, watcher)


def test_x509_acl_admits_the_certificate_holder_only(tc):
    holder = tc.kazoo()
    other = tc.kazoo(cert="other")
    anonymous = tc.kazoo(cert=None)
    plain = tc.plain_kazoo()
    try:
        holder.create("/x509", b"secret", acl=[make_acl("x509", CLIENT_DN, all=True)])
        acl, _ = holder.get_acls("/x509")
        assert [(a.id.scheme, a.id.id) for a in acl] == [("x509", CLIENT_DN)]
        assert holder.get("/x509")[0] == b"secret"
        holder.set("/x509", b"changed")
        for zk in (other, anonymous, plain):
            zk.sync("/x509")
            with pytest.raises(NoAuthError):
                zk.get("/x509")
            with pytest.raises(NoAuthError):
                zk.set("/x509", b"nope")
        # "auth" means the caller's certificate identity.
        other.create("/x509-auth", b"o", acl=[make_acl("auth", "", all=True)])
        acl, _ = other.get_acls("/x509-auth")
        assert [(a.id.scheme, a.id.id) for a in acl] == [("x509", OTHER_DN)]
        holder.sync("/x509-auth")
        with pytest.raises(NoAuthError):
            holder.get("/x509-auth")
        assert holder.get("/x509")[0] == b"changed"
    finally:
        stop(holder, other, anonymous, plain)


def test_x509_super_user_is_super_and_an_operator(tc):
    holder = tc.kazoo()
    admin = tc.kazoo(cert="admin")
    try:
        holder.create("/only-client", b"mine", acl=[make_acl("x509", CLIENT_DN, all=True)])
        admin.sync("/only-client")
        assert admin.get("/only-client")[0] == b"mine"  # super passes every ACL
        admin.set("/only-client", b"by admin")
        holder.sync("/only-client")
        assert holder.get("/only-client")[0] == b"by admin"
    finally:
        stop(holder, admin)
    # Operator requests (here: take a snapshot) on the secure port: the admin
    # certificate suffices; another certificate gets KEEL_AUTH.
    host, port = tc.secure[1].rsplit(":", 1)
    for cert, want in (("admin", 0), ("client", KEEL_AUTH)):
        ctx = ssl.create_default_context(cafile=tc.pki.path("ca.crt"))
        ctx.check_hostname = False
        ctx.load_cert_chain(tc.pki.path(cert + ".crt"), tc.pki.path(cert + ".key"))
        with ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=20)) as s:
            err, msg, _ = _admin_roundtrip(s, 4, b"")
            assert err == want, (cert, err, msg)


def test_plaintext_client_on_the_tls_port_is_refused(tc):
    zk = tc.kazoo()
    try:
        zk.create("/before", b"1")
        sid = 1
        host, port = tc.secure[sid].rsplit(":", 1)
        # A plaintext ConnectRequest, and then garbage, on the TLS port.
        for payload in (struct.pack(">iiqiq", 44, 0, 0, 30000, 0) + struct.pack(">i", 16)
                        + b"\0" * 16, b"\x16\x03\x01\xff\xff" + os.urandom(64)):
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(payload)
            s.settimeout(10)
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            s.close()
            # At most a TLS alert record (type 21), never a ZooKeeper reply.
            assert data == b"" or data[0] == 21, data[:16]
        wait_log(tc.cluster.servers[sid], "not TLS: a plaintext client on the TLS port?",
                 timeout=15)
        # A TLS client with a certificate from another CA is refused too.
        ctx = ssl.create_default_context(cafile=tc.pki.path("ca.crt"))
        ctx.check_hostname = False
        ctx.load_cert_chain(tc.pki.path("stranger.crt"), tc.pki.path("stranger.key"))
        raw = socket.create_connection((host, int(port)), timeout=10)
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            with ctx.wrap_socket(raw) as t:
                t.sendall(struct.pack(">i", 4) + b"ruok")
                if t.recv(16) == b"":
                    raise ConnectionResetError("closed")
        wait_log(tc.cluster.servers[sid], "certificate refused", timeout=15)
        metrics = urllib.request.urlopen(
            "http://127.0.0.1:%d/metrics" % tc.cluster.servers[sid].metrics_port,
            timeout=10).read().decode()
        failures = [line for line in metrics.splitlines()
                    if line.startswith("keel_tls_failures_total ")]
        assert failures and int(float(failures[0].split()[1])) >= 3, failures
        # Everyone else is still served, on both ports.
        zk.create("/after", b"2")
        plain = tc.plain_kazoo()
        try:
            plain.sync("/after")
            assert plain.get("/before")[0] == b"1"
            assert plain.get("/after")[0] == b"2"
        finally:
            stop(plain)
    finally:
        stop(zk)


# Debian's zookeeper.jar names its netty jars in its manifest but leaves out
# netty-resolver and netty-codec, which ClientCnxnSocketNetty needs (without
# them the client fails with NoClassDefFoundError
# io/netty/resolver/AddressResolverGroup, silently under zkCli's NOP logger).
# java takes the last -cp, so the flags below give the whole class path.
JAVA_CLASSPATH = ":".join("/usr/share/java/%s.jar" % j for j in (
    "zookeeper", "zookeeper-jute", "netty-resolver", "netty-codec"))


def recv_frame(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        assert chunk, "closed"
        head += chunk
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        assert chunk, "closed"
        body += chunk
    return body


def test_request_pipelined_behind_connect_request(tc):
    """Java's Netty client can send its first request right behind the
    ConnectRequest; the server activates the session while applying it and
    must serve that request after, not from inside the apply."""
    connect = struct.pack(">iqiq", 0, 0, 30000, 0) + struct.pack(">i", 16) + b"\0" * 16
    create = (struct.pack(">ii", 1, 1) + struct.pack(">i", 10) + b"/pipelined"
              + struct.pack(">i", 1) + b"p" + struct.pack(">i", 1)
              + struct.pack(">i", 31) + struct.pack(">i", 5) + b"world"
              + struct.pack(">i", 6) + b"anyone" + struct.pack(">i", 0))
    ctx = ssl.create_default_context(cafile=tc.pki.path("ca.crt"))
    ctx.check_hostname = False
    for sid in sorted(tc.secure):
        host, port = tc.secure[sid].rsplit(":", 1)
        path = b"/pipelined%d" % sid
        body = create.replace(struct.pack(">i", 10) + b"/pipelined",
                              struct.pack(">i", len(path)) + path)
        with ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=20)) as s:
            s.sendall(struct.pack(">i", len(connect)) + connect
                      + struct.pack(">i", len(body)) + body)
            rsp = recv_frame(s)
            assert struct.unpack(">i", rsp[4:8])[0] == 30000  # the negotiated timeout
            xid, _zxid, err = struct.unpack(">iqi", recv_frame(s)[:16])
            assert (xid, err) == (1, 0)
    zk = tc.kazoo()
    try:
        zk.sync("/")
        assert sorted(c for c in zk.get_children("/") if c.startswith("pipelined")) == [
            "pipelined1", "pipelined2", "pipelined3"]
    finally:
        stop(zk)


def java_tls_flags(tc):
    return " ".join([
        "-cp", "/etc/zookeeper/conf:" + JAVA_CLASSPATH,
        "-Dzookeeper.client.secure=true",
        "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
        "-Dzookeeper.ssl.keyStore.location=" + tc.pki.path("client.pem"),
        "-Dzookeeper.ssl.keyStore.type=PEM",
        "-Dzookeeper.ssl.trustStore.location=" + tc.pki.path("ca.crt"),
        "-Dzookeeper.ssl.trustStore.type=PEM",
    ])


@pytest.mark.skipif(not os.path.exists(ZKCLI), reason="Debian's zookeeper package is missing")
def test_zkcli_java_client_over_tls(tc):
    env = dict(os.environ, CLIENT_JVMFLAGS=java_tls_flags(tc))
    script = "\n".join([
        "create /java-tls hello",
        "get /java-tls",
        # zkCli splits ACLs at commas, so the DN comes in through "auth".
        "create /java-x509 held auth::cdrwa",
        "get /java-x509",
        "getAcl /java-x509",
        "quit",
    ]) + "\n"
    p = subprocess.run([ZKCLI, "-server", tc.secure_hosts()], input=script, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    out = p.stdout
    assert "Created /java-tls" in out, out[-4000:]
    assert "\nhello\n" in out, out[-4000:]
    assert "\nheld\n" in out, out[-4000:]  # the Java client's certificate is the x509 id
    # getAcl prints the id with its commas URL-encoded.
    assert "'x509,'" + CLIENT_DN.replace(",", "%2C") in out, out[-4000:]
    zk = tc.kazoo(cert="other")
    try:
        zk.sync("/java-tls")
        assert zk.get("/java-tls")[0] == b"hello"
        with pytest.raises(NoAuthError):
            zk.get("/java-x509")
    finally:
        stop(zk)


# ---- configuration ----


def test_tls_options_are_checked_and_secure_client_port_is_read(tc, tmp_path):
    pki = tc.pki
    cport, pport, sport = free_ports(3)
    base = [KEEL, "server", "--id", "1", "--data-dir", str(tmp_path / "d"), "--listen",
            "127.0.0.1:%d" % cport, "--peer-listen", "127.0.0.1:%d" % pport,
            "--cluster", "1=127.0.0.1:%d" % pport, "--insecure-peers",
            "--election-timeout-ms", "300", "--heartbeat-ms", "50"]
    bad = [
        (["--secure-listen", "127.0.0.1:%d" % sport], "--secure-listen needs --tls-cert"),
        (["--tls-cert", pki.path("server.crt"), "--tls-key", pki.path("server.key")],
         "need --secure-listen"),
        (["--peer-tls-cert", pki.path("peer.crt")], "needs all of --peer-tls-cert"),
        (["--secure-listen", "127.0.0.1:%d" % sport, "--tls-cert", pki.path("server.crt"),
          "--tls-key", pki.path("client.key")], pki.path("client.key")),
        (["--secure-listen", "127.0.0.1:%d" % sport, "--tls-cert", pki.path("missing.crt"),
          "--tls-key", pki.path("server.key")], pki.path("missing.crt")),
    ]
    for extra, message in bad:
        out = subprocess.run(base + extra, capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and message in out.stderr, (extra, out.stderr)
    # ZooKeeper's secureClientPort in a config file: TLS on --listen's host.
    conf = tmp_path / "keel.conf"
    conf.write_text("secureClientPort = %d\ntls-cert = %s\ntls-key = %s\n" % (
        sport, pki.path("server.crt"), pki.path("server.key")))
    proc = subprocess.Popen(base + ["--config", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        zk = tc.kazoo(cert=None, hosts="127.0.0.1:%d" % sport)
        try:
            zk.create("/from-config", b"1")
            assert zk.get("/from-config")[0] == b"1"
        finally:
            stop(zk)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "secure client port (TLS) on 127.0.0.1:%d" % sport in err


# ---- a peer from another CA (last: it restarts a server) ----


def test_peer_with_a_certificate_from_another_ca_is_refused(tc):
    cluster = tc.cluster
    victim = cluster.servers[3]
    victim.stop()
    victim.extra_args = tc.server_args(3, peer=peer_tls_args(tc.pki, "stranger", "other-ca"))
    victim.start()
    others = [cluster.servers[1], cluster.servers[2]]
    for s in others:
        wait_log(s, "certificate refused", timeout=30)
    # Two of three keep the cluster serving; the stranger never joins.
    zk = tc.kazoo(hosts=",".join(tc.secure[s.id] for s in others))
    try:
        zk.create("/while-refused", b"ok")
        assert zk.get("/while-refused")[0] == b"ok"
    finally:
        stop(zk)
    assert victim.alive()
    assert victim.mode() != "follower" and victim.mode() != "leader"
    # With its proper certificate it rejoins and catches up.
    victim.stop()
    victim.extra_args = tc.server_args(3)
    victim.start()
    one = KazooClient(hosts=victim.client_addr, timeout=10.0)
    one.start(timeout=30)
    try:
        cluster.wait(lambda: one.exists("/while-refused") is not None, timeout=30,
                     what="server 3 catching up over mutual TLS")
    finally:
        stop(one)
