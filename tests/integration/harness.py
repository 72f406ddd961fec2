"""Test harness: real `keel server` processes on loopback.

A Cluster owns N servers with their data directories under a temp dir, ports
picked free at start, and helpers to kill -9, pause (SIGSTOP), restart,
query roles through the four-letter words and the admin protocol, and wait
for conditions with deadlines. Every server's stderr goes to a log file that
is printed when a test fails (see conftest.py).

Every Cluster makes its own cluster secret (`keel secret generate`) and
starts its servers with it; admin_call(..., secret=) proves it to a server
as an operator would (docs/security.md). Servers answer every four-letter
word (--4lw-whitelist '*') unless a test sets its own list.
"""
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

KEEL = os.environ.get("KEEL", os.path.join(os.path.dirname(__file__), "..", "..", "build", "keel"))
ADMIN_MAGIC = 0x4B45454C


def free_ports(count, lo=20000, hi=32768):
    """Returns `count` distinct TCP ports on 127.0.0.1, each free when
    chosen, at random in [lo, hi): below the kernel's ephemeral range
    (32768 and up), where an outgoing connection's local port could take a
    server's port while it restarts ("address already in use")."""
    rng = random.SystemRandom()
    ports = []
    for _ in range(100 * count):
        p = rng.randrange(lo, hi)
        if p in ports:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            ports.append(p)
        except OSError:
            continue
        finally:
            s.close()
        if len(ports) == count:
            return ports
    raise RuntimeError("no %d free ports in [%d, %d)" % (count, lo, hi))


def four_letter(addr, word, timeout=2.0):
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks).decode(errors="replace")


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionError("closed")
        buf += b
    return buf


ADMIN_OP_AUTH_NONCE = 5
ADMIN_OP_AUTH = 6
KEEL_AUTH = 22  # enum keel_err


def make_secret(path):
    """Writes a fresh cluster secret to `path` (mode 0600); returns its bytes."""
    out = subprocess.run([KEEL, "secret", "generate"], capture_output=True, text=True,
                         check=True).stdout
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(out)
    return bytes.fromhex(out.strip())


def _admin_roundtrip(s, op, body):
    payload = struct.pack(">IBBQ", ADMIN_MAGIC, 1, op, 1) + body
    s.sendall(struct.pack(">I", len(payload)) + payload)
    (n,) = struct.unpack(">I", _recv_exact(s, 4))
    resp = _recv_exact(s, n)
    magic, _ver, _op, _rid, err, mlen = struct.unpack(">IBBQIH", resp[:20])
    assert magic == ADMIN_MAGIC
    msg = resp[20:20 + mlen].decode()
    return err, msg, resp[20 + mlen:]


def admin_operator_mac(secret, server_id, server_nonce, client_nonce):
    """The operator proof of src/node/peer_auth.h."""
    msg = b"keel-admin-auth-v2" + struct.pack(">Q", server_id) + server_nonce + client_nonce
    return hmac.new(secret, msg, hashlib.sha256).digest()


def admin_authenticate(s, secret=None, digest_auth=None):
    """Proves the secret (bytes) or a "super:PASSWORD" on an open admin
    connection; returns the AUTH reply (err, message, body)."""
    if secret is not None:
        err, msg, body = _admin_roundtrip(s, ADMIN_OP_AUTH_NONCE, b"")
        assert err == 0, msg
        server_nonce, (server_id,) = body[:32], struct.unpack(">Q", body[32:40])
        client_nonce = os.urandom(32)
        mac = admin_operator_mac(secret, server_id, server_nonce, client_nonce)
        return _admin_roundtrip(s, ADMIN_OP_AUTH, b"\x01" + client_nonce + mac)
    data = digest_auth.encode()
    return _admin_roundtrip(s, ADMIN_OP_AUTH, b"\x02" + struct.pack(">H", len(data)) + data)


def admin_call(addr, op, body=b"", timeout=10.0, secret=None, digest_auth=None):
    """One admin request, as an operator when `secret` (bytes) or
    `digest_auth` is given; returns (err, message, body)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        if secret is not None or digest_auth is not None:
            err, msg, rest = admin_authenticate(s, secret, digest_auth)
            if err != 0:
                return err, msg, rest
        return _admin_roundtrip(s, op, body)


class Server:
    def __init__(self, cluster, sid, client_port, peer_port, metrics_port):
        self.cluster = cluster
        self.id = sid
        self.client_port = client_port
        self.peer_port = peer_port
        self.metrics_port = metrics_port
        self.data_dir = os.path.join(cluster.root, "node%d" % sid)
        self.log_path = os.path.join(cluster.root, "node%d.log" % sid)
        self.proc = None
        self.paused = False
        self.extra_args = []
        self.preexec = None  # e.g. lower the server's RLIMIT_NOFILE

    @property
    def client_addr(self):
        return "127.0.0.1:%d" % self.client_port

    @property
    def peer_addr(self):
        return "127.0.0.1:%d" % self.peer_port

    def start(self, join=False, cluster_arg=None):
        os.makedirs(self.data_dir, exist_ok=True)
        args = [KEEL, "server", "--id", str(self.id), "--data-dir", self.data_dir,
                "--listen", self.client_addr, "--peer-listen", self.peer_addr,
                "--metrics-listen", "127.0.0.1:%d" % self.metrics_port,
                "--cluster", cluster_arg or self.cluster.cluster_arg(),
                "--cluster-secret-file", self.cluster.secret_file, "--4lw-whitelist", "*"]
        if join:
            args.append("--join")
        args += self.cluster.server_args + self.extra_args
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, preexec_fn=self.preexec)
        log.close()
        self.paused = False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.paused = False

    def stop(self, timeout=15):
        """SIGTERM, then the exit status (None if it was not running)."""
        if not self.alive():
            return None
        self.signal_stop()
        return self.wait_stopped(timeout)

    def signal_stop(self):
        """SIGTERM (with SIGCONT first if paused); wait_stopped waits."""
        if self.alive():
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
                self.paused = False
            self.proc.terminate()

    def wait_stopped(self, timeout=15):
        """The exit status; kill -9 and AssertionError after `timeout`."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("server %d did not stop on SIGTERM" % self.id)

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def wipe(self):
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def status(self, timeout=3.0):
        err, msg, body = admin_call(self.client_addr, 1, timeout=timeout)
        assert err == 0, msg
        return json.loads(body)

    def srvr(self):
        return four_letter(self.client_addr, "srvr")

    def mode(self):
        """The Mode: line of srvr, or None when unreachable."""
        try:
            for line in self.srvr().splitlines():
                if line.startswith("Mode:"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            return None
        return None

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""


_CLUSTERS = []  # every Cluster made in this process, for cluster_secret_of


def cluster_secret_of(addr):
    """The secret of the cluster whose server listens on `addr`, or None."""
    for c in reversed(_CLUSTERS):
        for s in c.servers.values():
            if s.client_addr == addr:
                return c.secret
    return None


def wait_log(server, text, timeout=5.0):
    """Waits until `text` appears in the server's log."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in server.log():
            return True
        time.sleep(0.05)
    raise AssertionError("%r not in server %d's log:\n%s" % (text, server.id,
                                                            server.log()[-3000:]))


def session_credential(secret, session_id, passwd):
    """The cluster credential a broker proves on its ZooKeeper session
    (addauth "keel"; node/peer_auth.h)."""
    msg = b"keel-session-auth-v1" + struct.pack(">Q", session_id & (2**64 - 1)) + passwd
    return hmac.new(secret, msg, hashlib.sha256).digest()


class Cluster:
    def __init__(self, size, server_args=None, root=None):
        _CLUSTERS.append(self)
        self.root = root or tempfile.mkdtemp(prefix="keel-it-")
        self.server_args = server_args or ["--election-timeout-ms", "1000",
                                           "--heartbeat-ms", "100"]
        self.servers = {}
        os.makedirs(self.root, exist_ok=True)
        self.secret_file = os.path.join(self.root, "cluster.secret")
        self.secret = make_secret(self.secret_file)
        for sid in range(1, size + 1):
            self.add_server(sid)

    def admin(self, addr, op, body=b"", timeout=10.0):
        """admin_call as this cluster's operator."""
        return admin_call(addr, op, body, timeout=timeout, secret=self.secret)

    def cli_auth(self):
        """The keel CLI's credential flags for this cluster."""
        return ["--cluster-secret-file", self.secret_file]

    def add_server(self, sid):
        # Ports are free when picked but not reserved: never hand out one
        # that another server of this cluster already has.
        used = {p for s in self.servers.values()
                for p in (s.client_port, s.peer_port, s.metrics_port)}
        ports = free_ports(3)
        while used & set(ports):
            ports = free_ports(3)
        srv = Server(self, sid, *ports)
        self.servers[sid] = srv
        return srv

    def cluster_arg(self, ids=None):
        ids = ids if ids is not None else sorted(self.servers)
        return ",".join("%d=%s" % (i, self.servers[i].peer_addr) for i in ids)

    def connect_string(self, ids=None):
        ids = ids if ids is not None else sorted(self.servers)
        return ",".join(self.servers[i].client_addr for i in ids)

    def start(self, ids=None):
        for sid in (ids or sorted(self.servers)):
            self.servers[sid].start()

    def live(self):
        return [s for s in self.servers.values() if s.alive() and not s.paused]

    def leaders(self):
        return [s for s in self.live() if s.mode() == "leader"]

    def wait_leader(self, timeout=15.0, exclude=()):
        deadline = time.time() + timeout
        while time.time() < deadline:
            leaders = [s for s in self.leaders() if s.id not in exclude]
            if len(leaders) == 1:
                # Everyone live agrees on the leader id.
                return leaders[0]
            time.sleep(0.05)
        raise AssertionError("no single leader within %.1fs: %s" % (
            timeout, {s.id: s.mode() for s in self.live()}))

    def wait(self, cond, timeout=15.0, what="condition", interval=0.05):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                last = cond()
                if last:
                    return last
            except (OSError, AssertionError, ValueError) as e:
                last = e
            time.sleep(interval)
        raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))

    def stop(self):
        """SIGTERM to every server at once, then waits for each (a server's
        shutdown does not wait for its peers)."""
        live = [s for s in self.servers.values() if s.alive()]
        for s in live:
            s.signal_stop()
        for s in live:
            try:
                s.wait_stopped()
            except AssertionError:
                pass
            if s.alive():
                s.kill()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def dump_logs(self, tail=80):
        out = []
        for s in self.servers.values():
            lines = s.log().splitlines()[-tail:]
            out.append("---- server %d (%s) ----\n%s" % (s.id, s.log_path, "\n".join(lines)))
        return "\n".join(out)

    def server_by_client_addr(self, addr):
        """The Server whose client address is `addr` ("127.0.0.1:PORT")."""
        for s in self.servers.values():
            if s.client_addr == addr:
                return s
        raise KeyError(addr)

class RawZk:
    """A minimal ZooKeeper-protocol client for requests kazoo cannot send
    (keel extension opcodes >= 1000, see docs/controller.md): one session,
    one request at a time. Watch events and pings are skipped.

    The session proves the cluster credential (which registrations,
    heartbeats and AlterPartition need) when it knows the secret of the
    cluster at `addr`; cluster_auth=False, or a wrong `secret`, to test the
    refusals."""

    def __init__(self, addr, session_timeout_ms=10000, timeout=10.0, cluster_auth=True,
                 secret=None):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.xid = 0
        body = struct.pack(">iqiq", 0, 0, session_timeout_ms, 0)
        body += struct.pack(">i", 16) + b"\0" * 16 + b"\0"
        self._send(body)
        resp = self._recv()
        _ver, self.timeout_ms, self.session_id = struct.unpack(">iiq", resp[:16])
        if self.timeout_ms <= 0:
            raise ConnectionError("session refused")
        (plen,) = struct.unpack(">i", resp[16:20])
        self.passwd = resp[20:20 + plen]
        secret = secret if secret is not None else cluster_secret_of(addr)
        self.auth_err = None
        if cluster_auth and secret:
            self.auth_err = self.add_auth(
                "keel", session_credential(secret, self.session_id, self.passwd))

    def add_auth(self, scheme, cred):
        """addauth; returns the reply's error (0: accepted)."""
        s = scheme.encode()
        self._send(struct.pack(">iii", -4, 100, 0) + struct.pack(">i", len(s)) + s +
                   struct.pack(">i", len(cred)) + cred)
        while True:
            resp = self._recv()
            xid, _zxid, err = struct.unpack(">iqi", resp[:16])
            if xid == -4:
                return err

    def _send(self, payload):
        self.sock.sendall(struct.pack(">I", len(payload)) + payload)

    def _recv(self):
        (n,) = struct.unpack(">I", _recv_exact(self.sock, 4))
        return _recv_exact(self.sock, n)

    def call(self, opcode, body=b""):
        """Sends one request; returns (err, zxid, body) of its reply."""
        self.xid += 1
        self._send(struct.pack(">ii", self.xid, opcode) + body)
        while True:
            resp = self._recv()
            xid, zxid, err = struct.unpack(">iqi", resp[:16])
            if xid in (-1, -2):  # a watch event or a ping reply
                continue
            assert xid == self.xid, "reply xid %d for request %d" % (xid, self.xid)
            return err, zxid, resp[16:]

    def close(self):
        try:
            self.xid += 1
            self._send(struct.pack(">ii", self.xid, -11))
            self._recv()
        except OSError:
            pass
        self.sock.close()
