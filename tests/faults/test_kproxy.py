"""kproxy.py tells a broker's connection from a client's by the process
that owns the dialing socket, and cuts or holds only the links between
brokers: a child process registered as broker 2 is cut off from "broker 1"
(an echo server behind the proxy) by drop and by hold, while this test's own
connection (a client) keeps working throughout."""
import json
import os
import queue
import socket
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))

# The "broker 2" process: once told to, connects to the proxy, sends each stdin line,
# prints each echo; prints EOF when the connection is closed.
CHILD = r"""
import socket, sys, threading
sys.stdin.readline()  # go: our pid is registered with the proxy
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def rd():
    while True:
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        if not d:
            print("EOF", flush=True)
            return
        print(d.decode().strip(), flush=True)
print("UP", flush=True)
threading.Thread(target=rd, daemon=True).start()
for line in sys.stdin:
    try:
        s.sendall(line.encode())
    except OSError:
        pass
"""


def echo_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def serve(c):
        while True:
            d = c.recv(4096)
            if not d:
                return
            c.sendall(d)

    def accept():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return srv


class Proxy:
    def __init__(self, real_port):
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "kproxy.py"),
                                   "1=127.0.0.1:%d" % real_port],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1)
        self.port = json.loads(self.p.stdout.readline())["ports"]["1"]

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        reply = json.loads(self.p.stdout.readline())
        assert reply["ok"], reply
        return reply["stats"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


def client_echo(sock, text):
    sock.sendall(text.encode() + b"\n")
    sock.settimeout(10)
    return sock.recv(4096).decode().strip()


class Child:
    """A "broker 2" process, registered with the proxy before it dials; one
    thread reads its output lines into a queue."""

    def __init__(self, port, proxy):
        self.p = subprocess.Popen([sys.executable, "-c", CHILD, str(port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        proxy.send({"pids": {"2": self.p.pid}})
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        assert self.line(10) == "UP"

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.strip())

    def line(self, timeout):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def echo(self, text, timeout):
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()
        return self.line(timeout)

    def stop(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def test_cuts_and_holds_only_broker_links():
    srv = echo_server()
    proxy = Proxy(srv.getsockname()[1])
    child = None
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port))
        assert client_echo(client, "c1") == "c1"
        child = Child(proxy.port, proxy)
        assert child.echo("b1", 10) == "b1"
        # hold: the broker's bytes wait while the client's flow; lifted,
        # they arrive.
        stats = proxy.send({"rules": {"2>1": "hold", "1>2": "hold"}})
        assert stats["from_brokers"] == 1
        assert child.echo("b2", 2) is None
        assert client_echo(client, "c2") == "c2"
        proxy.send({"rules": {}})
        assert child.line(10) == "b2"
        # drop: the broker's connection is closed, the client's is not.
        proxy.send({"rules": {"2>1": "drop", "1>2": "drop"}})
        assert child.line(10) == "EOF"
        assert client_echo(client, "c3") == "c3"
        # A new connection from the cut broker is closed at once.
        child.stop()
        child = Child(proxy.port, proxy)
        assert child.line(10) == "EOF"
        child.stop()
        # Healed: it connects and echoes again.
        proxy.send({"rules": {}})
        child = Child(proxy.port, proxy)
        assert child.echo("b3", 10) == "b3"
        client.close()
    finally:
        if child is not None:
            child.stop()
        proxy.close()
        srv.close()
