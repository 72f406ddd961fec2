"""A harness Cluster whose servers talk to each other through netproxy.py.

Every server k listens for peers on its own port R_k (--peer-listen), but
every server's --cluster, and every `keel members add`, names the proxy port
P_k instead, so all Raft traffic crosses the proxy and partition() can cut
or hold any link. Clients connect to the client ports directly.

Proxy ports are fixed for the whole run: they are in the replicated address
book.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import harness  # noqa: E402
from harness import Cluster, free_ports  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))


class ProxiedCluster(Cluster):
    def __init__(self, size, server_args=None, root=None, keel=None):
        if keel is not None:
            harness.KEEL = keel
        super().__init__(size, server_args=server_args, root=root)
        self.proxy_ports = dict(zip(sorted(self.servers), free_ports(size)))
        self.proxy = None
        self.rules = {}
        self.proxy_log = open(os.path.join(self.root, "netproxy.log"), "ab")

    def proxy_addr(self, sid):
        return "127.0.0.1:%d" % self.proxy_ports[sid]

    def cluster_arg(self, ids=None):
        ids = ids if ids is not None else sorted(self.servers)
        return ",".join("%d=%s" % (i, self.proxy_addr(i)) for i in ids)

    def start_proxy(self):
        args = [sys.executable, os.path.join(HERE, "netproxy.py")]
        for sid, srv in sorted(self.servers.items()):
            args.append("%d=%s@%d" % (sid, srv.peer_addr, self.proxy_ports[sid]))
        self.proxy = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self.proxy_log, text=True, bufsize=1)
        line = self.proxy.stdout.readline()
        if not line:
            raise RuntimeError("netproxy did not start (see %s)" % self.proxy_log.name)
        ports = {int(k): v for k, v in json.loads(line)["ports"].items()}
        assert ports == self.proxy_ports, (ports, self.proxy_ports)

    def partition(self, rules):
        """Replaces the proxy's rules: {(a, b): "drop" | "hold"} for bytes
        from server a to server b. {} heals everything."""
        self.rules = dict(rules)
        msg = {"rules": {"%d>%d" % k: v for k, v in rules.items()}}
        self.proxy.stdin.write(json.dumps(msg) + "\n")
        self.proxy.stdin.flush()
        reply = json.loads(self.proxy.stdout.readline())
        if not reply.get("ok"):
            raise RuntimeError("netproxy: %s" % reply)
        return reply

    def start(self, ids=None):
        if self.proxy is None:
            self.start_proxy()
        super().start(ids)

    def client_hosts(self, first=None):
        """Connect string with the servers in a rotated order starting at
        `first` (kazoo then tries them in that order)."""
        ids = sorted(self.servers)
        if first is not None:
            i = ids.index(first)
            ids = ids[i:] + ids[:i]
        return ",".join(self.servers[i].client_addr for i in ids)

    def keel_cli(self, *args, timeout=60):
        """Runs `keel ARGS --servers ...`; returns (exit code, output)."""
        cmd = [harness.KEEL] + list(args) + ["--servers", self.connect_string()]
        if args and args[0] in ("members", "leader", "snapshot"):
            cmd += self.cli_auth()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            return p.returncode, (p.stdout + p.stderr).strip()
        except subprocess.TimeoutExpired:
            return -1, "timed out after %ds" % timeout

    def leader_status(self):
        """The status JSON of the server that is leader, or None."""
        for s in self.live():
            try:
                st = s.status(timeout=2.0)
            except (OSError, AssertionError, ValueError):
                continue
            if st.get("role") == "leader":
                return st
        return None

    def stop(self):
        super().stop()
        if self.proxy is not None and self.proxy.poll() is None:
            try:
                self.proxy.stdin.close()
                self.proxy.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proxy.kill()
                self.proxy.wait()

    def wait_members(self, want, timeout=60.0):
        """Waits until the leader reports exactly the voters `want`."""
        def check():
            st = self.leader_status()
            if st is None:
                return False
            voters = sorted(m["id"] for m in st["members"] if m["role"] == "voter")
            return voters == sorted(want) and st
        return self.wait(check, timeout=timeout, what="voters %s" % sorted(want), interval=0.2)


def wait_until(cond, timeout, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception:
            pass
        time.sleep(interval)
    return None
