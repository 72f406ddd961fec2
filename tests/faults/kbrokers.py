"""`keel broker` processes for the fault runner, behind kproxy.py.

Broker k listens on its own port L_k and registers the proxy port P_k
(`--advertised-port`), so every Kafka connection to it -- the workload's
clients and other brokers' replica fetches -- crosses the proxy, which can
cut or hold the links between two brokers (kproxy.py). Logs are kept across
restarts; data directories are never wiped (a broker's log is what the
checker compares).
"""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import harness
from harness import free_ports

HERE = os.path.dirname(os.path.abspath(__file__))

# Faster than the defaults so that a dead broker is fenced (and its
# leaderships move) within a few seconds of the fault.
BROKER_ARGS = ["--heartbeat-interval-ms", "500", "--fetch-interval-ms", "100",
               "--duplicate-id-timeout-ms", "8000", "--shutdown-timeout-ms", "5000"]
# Added to the servers' flags when a run has brokers.
SERVER_ARGS = ["--broker-session-timeout-ms", "3000"]


def listen_ports(count):
    """Ports for the brokers to listen on, below the kernel's ephemeral range
    (32768 and up here): a broker restarts on its port after every kill, and
    an ephemeral port may meanwhile be taken by any outgoing connection (the
    workload's clients make many). From [KEEL_FAULTS_PORT_BASE, +1000) when
    that is set (a range of one's own on a shared machine), else from
    [20000, 32768); each one free when chosen. The proxy ports stay bound
    for the whole run, so the kernel picks those."""
    base = int(os.environ.get("KEEL_FAULTS_PORT_BASE", "0"))
    lo, hi = (base, base + 1000) if base else (20000, 32768)
    return free_ports(count, lo, hi)


def metadata_leaders(port, topic, timeout=5.0):
    """{partition: leader} as the broker listening on `port` sees it: one
    Metadata v1 request, answered from that broker's own metadata image
    (a client library may ask any broker it knows)."""
    name = topic.encode()
    body = struct.pack(">hhih", 3, 1, 1, 5) + b"probe" + struct.pack(">ih", 1, len(name)) + name
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("metadata probe: connection closed")
            data += chunk
    pos = [8]                                       # size, correlation id

    def take(fmt):
        v = struct.unpack_from(fmt, data, pos[0])
        pos[0] += struct.calcsize(fmt)
        return v[0]

    def skip_str():
        n = take(">h")
        pos[0] += max(n, 0)
    for _ in range(take(">i")):                     # brokers
        take(">i")
        skip_str()
        take(">i")
        skip_str()
    take(">i")                                      # controller id
    out = {}
    for _ in range(take(">i")):                     # topics
        take(">h")
        skip_str()
        take(">b")
        for _ in range(take(">i")):                 # partitions
            take(">h")
            p, leader = take(">i"), take(">i")
            for _ in range(2):                      # replicas, isr
                n = take(">i")
                pos[0] += 4 * n
            out[p] = leader
    return out


class Broker:
    def __init__(self, brokers, bid, port, proxy_port):
        self.brokers = brokers
        self.id = bid
        self.port = port
        self.proxy_port = proxy_port
        self.data_dir = os.path.join(brokers.root, "broker%d" % bid)
        self.log_path = os.path.join(brokers.root, "broker%d.log" % bid)
        self.proc = None
        self.paused = False

    @property
    def addr(self):
        """Where clients reach it: the proxy."""
        return "127.0.0.1:%d" % self.proxy_port

    def start(self):
        args = [harness.KEEL, "broker", "--id", str(self.id),
                "--servers", self.brokers.cluster.connect_string(),
                "--data-dir", self.data_dir, "--port", str(self.port),
                "--advertised-port", str(self.proxy_port)] + BROKER_ARGS + \
            self.brokers.cluster.cli_auth()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        log.close()
        self.paused = False
        self.brokers.send_pids()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.paused = False

    def terminate(self, timeout=20):
        if self.alive():
            if self.paused:
                self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""


class Brokers:
    """N brokers of a ProxiedCluster and their proxy."""

    def __init__(self, cluster, count, root):
        self.cluster = cluster
        self.root = root
        self.proxy = None
        self.proxy_lock = threading.Lock()  # one command and its answer at a time
        self.rules = {}
        self.proxy_log = open(os.path.join(root, "kproxy.log"), "ab")
        listen = listen_ports(count)
        proxied = free_ports(count)
        self.brokers = {i + 1: Broker(self, i + 1, listen[i], proxied[i])
                        for i in range(count)}

    def bootstrap(self):
        return ",".join(b.addr for b in self.brokers.values())

    def start_proxy(self):
        args = [sys.executable, os.path.join(HERE, "kproxy.py")]
        for bid, b in sorted(self.brokers.items()):
            args.append("%d=127.0.0.1:%d@%d" % (bid, b.port, b.proxy_port))
        self.proxy = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self.proxy_log, text=True, bufsize=1)
        line = self.proxy.stdout.readline()
        if not line:
            raise RuntimeError("kproxy did not start (see %s)" % self.proxy_log.name)

    def _control(self, msg):
        if self.proxy is None:
            return None
        with self.proxy_lock:
            self.proxy.stdin.write(json.dumps(msg) + "\n")
            self.proxy.stdin.flush()
            reply = json.loads(self.proxy.stdout.readline())
        if not reply.get("ok"):
            raise RuntimeError("kproxy: %s" % reply)
        return reply

    def send_pids(self):
        self._control({"pids": {str(b.id): b.proc.pid for b in self.brokers.values()
                                if b.alive()}})

    def partition(self, rules):
        """Replaces the proxy's rules: {(a, b): "drop" | "hold"} for bytes
        from broker a to broker b. {} heals everything."""
        self.rules = dict(rules)
        return self._control({"rules": {"%d>%d" % k: v for k, v in rules.items()}})

    def open_links(self):
        """The (a, b) pairs of brokers with a connection from a to b through
        the proxy now."""
        reply = self._control({"stats": True}) or {}
        return {tuple(int(x) for x in k.split(">"))
                for k in reply.get("stats", {}).get("open", [])}

    def start(self):
        if self.proxy is None:
            self.start_proxy()
        for b in self.brokers.values():
            b.start()

    def stop(self):
        for b in self.brokers.values():
            b.kill()
        if self.proxy is not None and self.proxy.poll() is None:
            try:
                self.proxy.stdin.close()
                self.proxy.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proxy.kill()
                self.proxy.wait()
        self.proxy_log.close()

    def keel(self, *args, timeout=30):
        """`keel ARGS --servers ...`: (exit code, stdout + stderr)."""
        cmd = [harness.KEEL] + list(args) + ["--servers", self.cluster.connect_string()]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            return p.returncode, (p.stdout + p.stderr).strip()
        except subprocess.TimeoutExpired:
            return -1, "timed out after %ds" % timeout

    def states(self):
        """{id: state} from `keel brokers` (active, fenced, ...)."""
        rc, out = self.keel("brokers")
        if rc != 0:
            return {}
        st = {}
        for line in out.splitlines():
            m = re.match(r"Broker: (\d+)\tEpoch: \d+\tRack: \S+\tState: (\w+)", line)
            if m:
                st[int(m.group(1))] = m.group(2)
        return st

    def describe(self, topic):
        """{partition: {leader, replicas, isr, epoch}} from `keel topics
        describe` ({} when it fails)."""
        rc, out = self.keel("topics", "describe", topic)
        if rc != 0:
            return {}
        parts = {}
        for line in out.splitlines():
            m = re.match(r"\tTopic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+|none)\t"
                         r"Replicas: ([\d,]*)\tIsr: ([\d,]*)\tLeaderEpoch: (\d+)", line)
            if not m:
                continue
            ints = [[int(x) for x in g.split(",") if x] for g in (m.group(4), m.group(5))]
            leader = -1 if m.group(3) == "none" else int(m.group(3))
            parts[int(m.group(2))] = {"leader": leader, "replicas": ints[0], "isr": ints[1],
                                      "epoch": int(m.group(6))}
        return parts

    def wait(self, cond, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                v = cond()
                if v:
                    return v
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.2)
        raise RuntimeError("timed out after %.0fs waiting for %s" % (timeout, what))

    def wait_active(self, timeout=60):
        ids = sorted(self.brokers)
        return self.wait(lambda: sorted(k for k, v in self.states().items()
                                        if v == "active") == ids,
                         timeout, "brokers %s active" % ids)
