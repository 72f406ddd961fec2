"""The `keel` ZooKeeper-client commands and `keel shell` against a real
3-node keel cluster: CRUD with versions, sequential and ephemeral nodes
(their lifetime tied to the CLI's session), watches, ACLs with digest auth,
errors and exit statuses, the shell over a pipe, and a shell whose server is
killed -9 carrying on, same session, on another server.

Output formats checked here are the ones docs/cli.md documents.
"""
import base64
import hashlib
import os
import re
import select
import signal
import subprocess
import time

import pytest

from harness import KEEL, Cluster, free_ports


@pytest.fixture(scope="module")
def cluster(request):
    c = Cluster(3)
    c.start()
    c.wait_leader()
    yield c
    if request.session.testsfailed:
        print(c.dump_logs())
    c.cleanup()


def keel(cluster, *args, input=None, timeout=60, servers=None):
    """Runs `keel ARGS --servers ...`; returns the CompletedProcess."""
    cmd = [KEEL, *args, "--servers", servers or cluster.connect_string()]
    return subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)


def ok(cluster, *args, **kw):
    r = keel(cluster, *args, **kw)
    assert r.returncode == 0, "keel %s: rc %d\nstdout %s\nstderr %s" % (
        " ".join(args), r.returncode, r.stdout, r.stderr)
    return r.stdout


def stat_fields(text):
    """zkCli's Stat block as a dict of strings."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+) = (.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def wait_for(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def exists(cluster, path):
    r = keel(cluster, "stat", path)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode == 0


class Shell:
    """An interactive `keel shell` driven line by line through pipes. Its
    stdout is read unbuffered (os.read) so that select() sees every line."""

    def __init__(self, cluster, *extra):
        self.proc = subprocess.Popen(
            [KEEL, "shell", "--servers", cluster.connect_string(), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pending = b""

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def readline(self, timeout=15):
        deadline = time.time() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.time()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            assert ready, "no output from the shell within %ss" % timeout
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            assert chunk, "the shell closed its stdout"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()

    def read_stderr(self, timeout):
        """Whatever the shell writes to stderr within `timeout` seconds."""
        out = b""
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                break
            ready, _, _ = select.select([self.proc.stderr], [], [], left)
            if not ready:
                break
            chunk = os.read(self.proc.stderr.fileno(), 65536)
            if not chunk:
                break
            out += chunk
        return out.decode(errors="replace")

    def ask(self, line, timeout=15):
        self.send(line)
        return self.readline(timeout)

    def session(self):
        """(session id, server address) from the `session` command."""
        words = self.ask("session").split()
        assert words[0] == "session", words
        return words[1], words[6]

    def close(self):
        if self.proc.poll() is None:
            self.send("quit")
            self.proc.wait(15)
        return self.proc.returncode


def test_crud_and_versions(cluster):
    assert ok(cluster, "create", "/crud", "v1") == "Created /crud\n"
    assert ok(cluster, "get", "/crud") == "v1\n"
    st = stat_fields(ok(cluster, "stat", "/crud"))
    assert st["dataVersion"] == "0"
    assert st["dataLength"] == "2"
    assert st["ephemeralOwner"] == "0x0"
    assert st["cZxid"].startswith("0x")

    ok(cluster, "set", "/crud", "v2", "--version", "0")
    r = keel(cluster, "set", "/crud", "v3", "--version", "0")
    assert r.returncode == 1
    assert r.stderr.strip() == "version No is not valid : /crud"
    out = ok(cluster, "get", "/crud", "--stat")
    assert out.startswith("v2\n")
    assert stat_fields(out)["dataVersion"] == "1"

    ok(cluster, "create", "/crud/b")
    ok(cluster, "create", "/crud/a", "x y")
    assert ok(cluster, "get", "/crud/a") == "x y\n"
    assert ok(cluster, "ls", "/crud") == "a\nb\n"
    out = ok(cluster, "ls", "/crud", "--stat")
    assert out.startswith("a\nb\n")
    assert stat_fields(out)["numChildren"] == "2"

    r = keel(cluster, "delete", "/crud")
    assert r.returncode == 1
    assert r.stderr.strip() == "Node not empty: /crud"
    ok(cluster, "delete", "/crud/a", "--version", "0")
    assert ok(cluster, "ls", "/crud", "--recursive") == "/crud\n/crud/b\n"
    ok(cluster, "delete", "/crud", "--recursive")
    assert not exists(cluster, "/crud")


def test_sequential(cluster):
    ok(cluster, "create", "/seq")
    made = []
    for _ in range(3):
        out = ok(cluster, "create", "/seq/job-", "payload", "--sequential")
        m = re.match(r"^Created (/seq/job-(\d{10}))\n$", out)
        assert m, out
        made.append(m.group(1))
    numbers = [int(p[-10:]) for p in made]
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    assert ok(cluster, "ls", "/seq").split() == [p.rsplit("/", 1)[1] for p in made]
    ok(cluster, "delete", "/seq", "--recursive")


def test_create_with_parents(cluster):
    # One multi: the ancestors and the node, all or nothing.
    assert ok(cluster, "create", "/pa/pb/pc", "leaf", "--parents") == "Created /pa/pb/pc\n"
    assert ok(cluster, "get", "/pa/pb/pc") == "leaf\n"
    assert ok(cluster, "get", "/pa") == "\n"
    out = ok(cluster, "create", "/pa/pb/q-", "--parents", "--sequential")
    assert out == "Created /pa/pb/q-0000000001\n"
    r = keel(cluster, "create", "/pa/pb/pc", "--parents")
    assert r.returncode == 1 and r.stderr.strip() == "Node already exists: /pa/pb/pc"
    ok(cluster, "delete", "/pa", "--recursive")


def test_ttl_and_container_nodes(cluster):
    assert ok(cluster, "create", "/ttl", "t", "--ttl", "60000") == "Created /ttl\n"
    out = ok(cluster, "create", "/ttl-s-", "--ttl", "60000", "--sequential")
    assert re.match(r"^Created /ttl-s-\d{10}\n$", out), out
    assert ok(cluster, "create", "/box", "--container") == "Created /box\n"
    assert exists(cluster, "/box")
    r = keel(cluster, "create", "/bad", "--container", "--ephemeral")
    assert r.returncode == 2
    r = keel(cluster, "create", "/bad", "--ttl", "0")
    assert r.returncode == 2
    ok(cluster, "delete", "/ttl")
    ok(cluster, "delete", out.split()[1])
    ok(cluster, "delete", "/box")


def test_errors_and_exit_codes(cluster):
    r = keel(cluster, "get", "/missing")
    assert r.returncode == 1 and r.stderr.strip() == "Node does not exist: /missing"
    ok(cluster, "create", "/dup")
    r = keel(cluster, "create", "/dup")
    assert r.returncode == 1 and r.stderr.strip() == "Node already exists: /dup"
    r = keel(cluster, "create", "/no/parent")
    assert r.returncode == 1 and r.stderr.strip() == "Node does not exist: /no/parent"
    r = keel(cluster, "get", "relative/path")
    assert r.returncode == 1 and "Invalid path string" in r.stderr
    ok(cluster, "delete", "/dup")
    # usage errors
    for args in (["get"], ["get", "/a", "/b"], ["get", "/a", "--bogus"], ["set", "/a"],
                 ["set", "/a", "x", "--version", "two"], ["acl", "frob", "/"],
                 ["delete", "/a", "--recursive", "--version", "3"]):
        r = keel(cluster, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert "usage: keel" in r.stderr
    for cmd in ("get", "set", "create", "delete", "ls", "stat", "watch", "acl", "shell"):
        r = subprocess.run([KEEL, cmd, "--help"], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and r.stdout.startswith("usage: keel " + cmd), cmd
    # nothing listening: a clear message, exit 1, within the timeout
    (port,) = free_ports(1)
    start = time.time()
    r = keel(cluster, "get", "/", "--timeout-ms", "1500", servers="127.0.0.1:%d" % port)
    assert r.returncode == 1
    assert "cannot connect" in r.stderr and "ConnectionLoss" in r.stderr
    assert "no server answered with a working quorum" in r.stderr
    assert time.time() - start < 10


def test_ephemeral_lives_with_the_cli_process(cluster):
    # --hold keeps the session; SIGTERM closes it and the node goes at once.
    hold = subprocess.Popen([KEEL, "create", "/eph-hold", "--ephemeral", "--hold",
                             "--servers", cluster.connect_string()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert hold.stdout.readline() == "Created /eph-hold\n"
        st = stat_fields(ok(cluster, "stat", "/eph-hold"))
        assert st["ephemeralOwner"] != "0x0"
        time.sleep(1.0)
        assert exists(cluster, "/eph-hold")
        hold.send_signal(signal.SIGTERM)
        assert hold.wait(15) == 0
    finally:
        if hold.poll() is None:
            hold.kill()
    assert not exists(cluster, "/eph-hold")

    # Without --hold the command's session ends with it.
    r = keel(cluster, "create", "/eph-once", "--ephemeral")
    assert r.returncode == 0 and "note:" in r.stderr
    assert not exists(cluster, "/eph-once")

    # A shell killed -9 leaves its session to expire: the node stays for
    # about the session timeout, then the leader removes it.
    sh = Shell(cluster, "--session-timeout-ms", "4000")
    try:
        assert sh.ask("create -e /eph-shell") == "Created /eph-shell"
        session_id, _server = sh.session()
        st = stat_fields(ok(cluster, "stat", "/eph-shell"))
        assert int(st["ephemeralOwner"], 16) == int(session_id, 16)
        sh.proc.kill()
        sh.proc.wait(10)
        killed_at = time.time()
        assert exists(cluster, "/eph-shell")
        wait_for(lambda: not exists(cluster, "/eph-shell"), 20, "the ephemeral to expire")
        assert time.time() - killed_at >= 2.0  # not removed before the timeout ran
    finally:
        if sh.proc.poll() is None:
            sh.proc.kill()


def test_watch_prints_events(cluster):
    watch = subprocess.Popen([KEEL, "watch", "/wt", "--count", "3",
                              "--servers", cluster.connect_string()],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watch.stderr.readline().startswith("watching /wt")
        ok(cluster, "create", "/wt", "a")
        ok(cluster, "set", "/wt", "b")
        ok(cluster, "delete", "/wt")
        out, err = watch.communicate(timeout=20)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, err
    assert out.splitlines() == ["NodeCreated /wt", "NodeDataChanged /wt", "NodeDeleted /wt"]

    rec = subprocess.Popen([KEEL, "watch", "/wr", "--recursive", "--count", "3",
                            "--servers", cluster.connect_string()],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert rec.stderr.readline().startswith("watching /wr and below")
        ok(cluster, "create", "/wr")
        ok(cluster, "create", "/wr/child", "c")
        ok(cluster, "set", "/wr/child", "d")
        out, err = rec.communicate(timeout=20)
    finally:
        if rec.poll() is None:
            rec.kill()
    assert rec.returncode == 0, err
    assert out.splitlines() == ["NodeCreated /wr", "NodeCreated /wr/child",
                                "NodeDataChanged /wr/child"]
    ok(cluster, "delete", "/wr", "--recursive")


def test_acl_and_digest_auth(cluster):
    digest = base64.b64encode(hashlib.sha1(b"bob:secret").digest()).decode()
    ok(cluster, "create", "/guarded", "g")
    assert ok(cluster, "acl", "get", "/guarded") == "world:anyone:cdrwa\n"
    ok(cluster, "acl", "set", "/guarded", "digest:bob:%s:cdrwa,world:anyone:r" % digest)
    # Without ADMIN the digest is masked, as ZooKeeper 3.8 does.
    assert ok(cluster, "acl", "get", "/guarded").splitlines() == [
        "digest:bob:x:cdrwa", "world:anyone:r"]
    assert ok(cluster, "acl", "get", "/guarded", "--auth", "digest:bob:secret").splitlines() == [
        "digest:bob:%s:cdrwa" % digest, "world:anyone:r"]
    assert ok(cluster, "get", "/guarded") == "g\n"  # world may read
    r = keel(cluster, "set", "/guarded", "h")
    assert r.returncode == 1
    assert r.stderr.strip() == "Authentication is not valid : /guarded"
    ok(cluster, "set", "/guarded", "h", "--auth", "digest:bob:secret")
    assert ok(cluster, "get", "/guarded") == "h\n"
    r = keel(cluster, "acl", "set", "/guarded", "world:anyone:cdrwa", "--version", "7")
    assert r.returncode == 1  # no ADMIN without auth (or a bad version)
    ok(cluster, "acl", "set", "/guarded", "world:anyone:cdrwa", "--auth", "digest:bob:secret")
    ok(cluster, "delete", "/guarded")
    r = keel(cluster, "acl", "set", "/", "world:anyone:xyz")
    assert r.returncode == 2 and "bad permissions" in r.stderr


def test_shell_over_a_pipe(cluster):
    script = "\n".join([
        "# comments and blank lines are skipped",
        "",
        "create /sh one",
        "get /sh",
        'set /sh "two words"',
        "get -s /sh",
        "create -s /sh/n- x",
        "create -e /sh/e",
        "ls /sh",
        "stat /missing",
        "delete /sh",
        "sync /sh",
        "getAcl /sh",
        "frobnicate",
        "deleteall /sh",
        "create /sh-end",
        "quit",
        "get /never-run",
    ]) + "\n"
    r = subprocess.run([KEEL, "shell", "--servers", cluster.connect_string()], input=script,
                       capture_output=True, text=True, timeout=60)
    out = r.stdout.splitlines()
    assert out[0] == "Created /sh"
    assert out[1] == "one"
    assert out[2] == "two words"
    st = stat_fields(r.stdout)
    assert st["dataVersion"] == "1" and st["dataLength"] == "9"
    assert "Created /sh/n-0000000000" in out
    assert "Created /sh/e" in out
    assert "[e, n-0000000000]" in out
    assert "Sync is OK" in out
    assert "'world,'anyone" in out and ": cdrwa" in out
    assert out[-1] == "Created /sh-end"
    assert "Node does not exist: /missing" in r.stderr
    assert "Node not empty: /sh" in r.stderr
    assert "Unknown command: frobnicate" in r.stderr
    assert "never-run" not in r.stderr + r.stdout
    assert r.returncode == 0  # the last command before quit succeeded
    assert not exists(cluster, "/sh")
    ok(cluster, "delete", "/sh-end")

    # End of input also ends the shell (and its session); the status is the
    # last command's.
    r = subprocess.run([KEEL, "shell", "--servers", cluster.connect_string()],
                       input="create -e /sh-eph\nget /nope\n", capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.strip() == "Created /sh-eph"
    assert r.returncode == 1
    assert not exists(cluster, "/sh-eph")


def test_shell_watch_events(cluster):
    sh = Shell(cluster)
    try:
        assert sh.ask("create /sw v") == "Created /sw"
        assert sh.ask("get -w /sw") == "v"
        ok(cluster, "set", "/sw", "w")
        lines = [sh.readline() for _ in range(4)]
        assert lines == ["", "WATCHER::", "",
                         "WatchedEvent state:SyncConnected type:NodeDataChanged path:/sw"]
        # The one-shot watch is spent: another change prints nothing more.
        ok(cluster, "set", "/sw", "x")
        sh.send("deleteall /sw")
        # The next line on stdout is this create's, not a second event.
        assert sh.ask("create /sw-done") == "Created /sw-done"
        sh.send("delete /sw-done")
    finally:
        sh.send("quit")
        sh.proc.wait(15)


def test_shell_survives_kill_of_its_server(cluster_factory):
    c = cluster_factory(3)
    c.start()
    c.wait_leader()
    sh = Shell(c, "--session-timeout-ms", "8000")
    try:
        assert sh.ask("create /k v") == "Created /k"
        assert sh.ask("create -e /k/eph") == "Created /k/eph"
        session_id, server = sh.session()
        # The watch set before the kill must be re-set on the new server.
        assert sh.ask("get -w /k") == "v"
        victim = c.server_by_client_addr(server)
        victim.kill()
        c.wait_leader(exclude=(victim.id,), timeout=20)
        # The next command goes to another server, same session.
        assert sh.ask("get /k", timeout=30) == "v"
        session2, server2 = sh.session()
        assert session2 == session_id
        assert server2 != server
        assert sh.ask("ls /k") == "[eph]"
        # The re-set watch fires for a change made after the move.
        others = ",".join(s.client_addr for s in c.servers.values() if s.id != victim.id)
        ok(c, "set", "/k", "w", servers=others)
        lines = [sh.readline() for _ in range(4)]
        assert lines[3] == "WatchedEvent state:SyncConnected type:NodeDataChanged path:/k"
        assert sh.close() == 0
    finally:
        if sh.proc.poll() is None:
            sh.proc.kill()
    # quit closed the session: its ephemeral is gone.
    others = ",".join(s.client_addr for s in c.servers.values() if s.alive())
    r = keel(c, "ls", "/k", servers=others)
    assert r.returncode == 0 and r.stdout == ""
    # One-shot commands given all three servers (the dead one included, in
    # random order) fail over to a live one.
    for _ in range(6):
        assert ok(c, "get", "/k", "--timeout-ms", "5000") == "w\n"


def test_shell_reports_an_expired_session(cluster):
    sh = Shell(cluster, "--session-timeout-ms", "4000")
    try:
        assert sh.ask("create -e /expiring") == "Created /expiring"
        sh.proc.send_signal(signal.SIGSTOP)  # silent: no pings
        try:
            wait_for(lambda: not exists(cluster, "/expiring"), 30, "the session to expire")
        finally:
            sh.proc.send_signal(signal.SIGCONT)
        # Back, the client reconnects, the server says the session is gone,
        # and commands fail with SessionExpired from then on.
        deadline = time.time() + 20
        err = ""
        while "Session expired" not in err:
            assert time.time() < deadline, err
            sh.send("get /")
            err += sh.read_stderr(1.0)
        assert "WatchedEvent state:Expired type:None path:null" in err
        sh.send("quit")
        assert sh.proc.wait(15) == 1  # the last command failed
    finally:
        if sh.proc.poll() is None:
            sh.proc.kill()
            sh.proc.wait(10)
