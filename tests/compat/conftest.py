"""Fixtures of the compatibility suite.

`backend` is a running 3-server ensemble, once keel and once Apache
ZooKeeper 3.8 (Debian's `zookeeper` package, through scripts/zk-ensemble.sh):
every test that takes it runs against both, so each assertion is checked
against the reference implementation too. A test that exercises something
keel does deliberately differently (see DESIGN.md) says so and looks at
`backend.kind`.

Two more backends run the kazoo suites (TLS_MODULES) again: keel-tls with
every client on keel's secure client port and the peers in mutual TLS, and
keel-sasl with every client authenticated by SASL DIGEST-MD5.

Set KEEL_COMPAT_BACKENDS=keel (or =keel-tls, =keel-sasl, =zookeeper) to run
one side only while developing; CI runs all four.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import Cluster, four_letter, free_ports  # noqa: E402

ZK_ENSEMBLE = os.path.join(ROOT, "scripts", "zk-ensemble.sh")
BACKENDS = [b for b in os.environ.get("KEEL_COMPAT_BACKENDS",
                                      "keel,keel-tls,keel-sasl,zookeeper").split(",") if b]
# keel-tls runs the kazoo suites again with every client on the secure
# client port (TLS, peer mutual TLS), keel-sasl with every client
# authenticated by SASL; the suites of other clients do not take them
# (tests/integration/test_tls.py and test_sasl.py cover zkCli over TLS and
# SASL; Debian's C client has no SSL).
TLS_MODULES = ("test_kazoo_data", "test_kazoo_recipes", "test_kazoo_sessions")


class KeelBackend:
    """A 3-server keel cluster."""

    kind = "keel"

    # tickTime 500 ms as in the ZooKeeper ensemble below (session timeouts
    # from 1 s to 10 s), and container/TTL housekeeping every 500 ms like
    # ZooKeeper's znode.container.checkIntervalMs below.
    # maxClientCnxns 0 as the reference ensemble runs (scripts/zk-ensemble.sh):
    # every test connects from 127.0.0.1, and the suite's many clients would
    # otherwise meet the per-address cap on one backend and not the other.
    SERVER_ARGS = ["--election-timeout-ms", "1000", "--heartbeat-ms", "100",
                   "--tick-ms", "500", "--housekeeping-ms", "500", "--maxClientCnxns", "0"]

    def __init__(self, extra_args=()):
        self.cluster = Cluster(3, server_args=list(self.SERVER_ARGS) + list(extra_args))
        self.cluster.start()
        self.cluster.wait_leader(timeout=30)
        self.addrs = [self.cluster.servers[i].client_addr for i in sorted(self.cluster.servers)]
        self.hosts = ",".join(self.addrs)

    def mode(self, i):
        return self.cluster.servers[i + 1].mode()

    def leader_index(self):
        return self.cluster.wait_leader().id - 1

    def kill(self, i):
        self.cluster.servers[i + 1].kill()

    def restart(self, i):
        self.cluster.servers[i + 1].start()
        self.wait_ready()

    def wait_ready(self, timeout=30):
        self.cluster.wait_leader(timeout=timeout)

    def logs(self):
        return self.cluster.dump_logs()

    def close(self):
        self.cluster.cleanup()


class KeelTlsBackend(KeelBackend):
    """The same cluster with TLS everywhere: peer links in mutual TLS, and
    `hosts`/`addrs` are the secure client ports; every kazoo client made
    through kazoo_ext uses TLS and verifies the servers' certificates."""

    kind = "keel"

    def __init__(self):
        from test_tls import Pki, peer_tls_args
        import kazoo_ext as kx
        self.root = tempfile.mkdtemp(prefix="keel-compat-tls-")
        pki = Pki(self.root)
        self.cluster = Cluster(3, server_args=list(self.SERVER_ARGS))
        used = {p for s in self.cluster.servers.values()
                for p in (s.client_port, s.peer_port, s.metrics_port)}
        secure = {}
        for sid, s in self.cluster.servers.items():
            port = free_ports(1)[0]
            while port in used:
                port = free_ports(1)[0]
            used.add(port)
            secure[sid] = "127.0.0.1:%d" % port
            s.extra_args = ["--secure-listen", secure[sid], "--tls-cert", pki.path("server.crt"),
                            "--tls-key", pki.path("server.key"),
                            "--tls-ca", pki.path("ca.crt")] + peer_tls_args(pki)
        self.cluster.start()
        self.cluster.wait_leader(timeout=30)
        self.addrs = [secure[i] for i in sorted(secure)]
        self.hosts = ",".join(self.addrs)
        # No client certificate: with one, the connection would also carry an
        # x509 identity, and "auth" ACLs would accept it (as in ZooKeeper),
        # which the suites' expectations (taken without TLS) do not include.
        # tests/integration/test_tls.py covers client certificates.
        kx.TLS.update(use_ssl=True, ca=pki.path("ca.crt"), verify_certs=True)

    def close(self):
        import kazoo_ext as kx
        kx.TLS.clear()
        super().close()
        shutil.rmtree(self.root, ignore_errors=True)


class KeelSaslBackend(KeelBackend):
    """The same cluster with SASL DIGEST-MD5 users (--sasl-users-file):
    every kazoo client made through kazoo_ext authenticates as `compat`
    when it connects (kazoo's sasl_options), so the kazoo suites run on
    SASL sessions."""

    kind = "keel"

    def __init__(self):
        import kazoo_ext as kx
        self.root = tempfile.mkdtemp(prefix="keel-compat-sasl-")
        users = os.path.join(self.root, "users")
        with open(users, "w") as f:
            f.write("compat:compat-secret\n")
        super().__init__(extra_args=["--sasl-users-file", users])
        kx.TLS.update(sasl_options={"mechanism": "DIGEST-MD5", "username": "compat",
                                    "password": "compat-secret"})

    def close(self):
        import kazoo_ext as kx
        kx.TLS.clear()
        super().close()
        shutil.rmtree(self.root, ignore_errors=True)


class ZooKeeperBackend:
    """A 3-server Apache ZooKeeper 3.8 ensemble (tickTime 500 ms so that
    the smallest session timeout, 2 ticks, is 1 s; keel runs with --tick-ms 500 to match)."""

    kind = "zookeeper"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="keel-compat-zk-")
        # extendedTypesEnabled: TTL nodes; checkIntervalMs: how often empty
        # containers and expired TTL nodes are deleted (default 60 s).
        env = dict(os.environ, ZK_TICK_MS="500",
                   ZK_JVM_OPTS="-Xmx512m -XX:+UseSerialGC"
                   " -Dzookeeper.extendedTypesEnabled=true"
                   " -Dznode.container.checkIntervalMs=500")
        self.env = env
        out = subprocess.run([ZK_ENSEMBLE, "start", "3", self.dir], env=env, check=True,
                             stdout=subprocess.PIPE, timeout=180).stdout.decode().strip()
        self.hosts = out.splitlines()[-1]
        self.addrs = self.hosts.split(",")

    def _zk(self, *args, check=True):
        return subprocess.run([ZK_ENSEMBLE, *args], env=self.env, check=check,
                              stdout=subprocess.PIPE, timeout=120).stdout.decode().strip()

    def mode(self, i):
        try:
            for line in four_letter(self.addrs[i], "srvr").splitlines():
                if line.startswith("Mode:"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            return None
        return None

    def leader_index(self):
        return int(self._zk("leader", self.dir)) - 1

    def kill(self, i):
        self._zk("kill", self.dir, str(i + 1))
        time.sleep(0.2)

    def restart(self, i):
        self._zk("restart", self.dir, str(i + 1))
        self.wait_ready()

    def wait_ready(self, timeout=60):
        self._zk("wait", self.dir, str(timeout))

    def logs(self):
        out = []
        for i in range(1, 4):
            p = os.path.join(self.dir, "zk%d" % i, "server.log")
            try:
                with open(p, errors="replace") as f:
                    lines = f.read().splitlines()[-60:]
            except OSError:
                lines = []
            out.append("---- zookeeper %d ----\n%s" % (i, "\n".join(lines)))
        return "\n".join(out)

    def close(self):
        self._zk("stop", self.dir, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def pytest_collection_modifyitems(config, items):
    """keel-tls is for the kazoo suites only (TLS_MODULES)."""
    keep, drop = [], []
    for item in items:
        cs = getattr(item, "callspec", None)
        if (cs is not None and cs.params.get("backend") in ("keel-tls", "keel-sasl")
                and item.module.__name__ not in TLS_MODULES):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    b = {"keel": KeelBackend, "keel-tls": KeelTlsBackend, "keel-sasl": KeelSaslBackend,
         "zookeeper": ZooKeeperBackend}[request.param]()
    b.failed = False
    yield b
    if b.failed:
        print(b.logs())
    b.close()


@pytest.fixture(autouse=True)
def _mark_backend_failure(request):
    yield
    if "backend" in request.fixturenames:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            request.getfixturevalue("backend").failed = True


@pytest.fixture(scope="module")
def zk(backend):
    """One kazoo client per module and backend (tests/compat/kazoo_ext.py)."""
    import kazoo_ext as kx
    c = kx.client(backend.hosts)
    yield c
    c.stop()
    c.close()


@pytest.fixture
def fresh(backend):
    """Kazoo clients opened by one test, closed after it."""
    import kazoo_ext as kx
    clients = []

    def make(hosts=None, **kw):
        c = kx.client(hosts or backend.hosts, **kw)
        clients.append(c)
        c.sync("/")  # see what the test wrote before, whatever the server
        return c
    yield make
    for c in clients:
        c.stop()
        c.close()


@pytest.fixture
def path(request):
    """A fresh znode path per test (suites share one ensemble per module)."""
    name = request.node.name.replace("[", "_").replace("]", "").replace("/", "_")
    return "/t_%s_%d" % (name, int(time.time() * 1000) % 1000000)


def keel_build():
    return os.environ.get("KEEL_BUILD", os.path.join(ROOT, "build"))
