"""Abuse resistance (issue 18): one careless or hostile client cannot
starve, stall or crash the cluster. Each scenario of the issue, at a scale
and with limits low enough to run in seconds; each checks that the server
keeps serving the other clients, stays within a stated memory bound and
loses nothing."""
import resource
import socket
import struct
import threading
import time
import urllib.request

from kazoo.client import KazooClient

from harness import RawZk, four_letter

BASE_ARGS = ["--election-timeout-ms", "1000", "--heartbeat-ms", "100"]


def kazoo(addrs, timeout=10.0):
    zk = KazooClient(hosts=addrs, timeout=timeout)
    zk.start(timeout=timeout)
    return zk


def metrics(server):
    """The server's /metrics as {name: value} (unlabelled samples)."""
    url = "http://127.0.0.1:%d/metrics" % server.metrics_port
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split()
            out[name] = float(value)
    return out


def rss_kb(server):
    with open("/proc/%d/status" % server.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def open_conn(server, source="127.0.0.1", timeout=5.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", server.client_port))
    return s


def closed_by_server(sock, timeout):
    """True if the server closes `sock` within `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True  # reset


def ruok(server):
    return four_letter(server.client_addr, "ruok", timeout=3.0)


def connect_request():
    body = struct.pack(">iqiq", 0, 0, 10000, 0) + struct.pack(">i", 16) + b"\0" * 16 + b"\0"
    return struct.pack(">I", len(body)) + body


def single(cluster_factory, *args):
    c = cluster_factory(1, server_args=BASE_ARGS + list(args))
    c.start()
    return c, c.wait_leader(timeout=15)


def test_close_session_of_many_descending_ephemerals(cluster_factory):
    """30,000 ephemerals named in descending order, then closeSession: the
    servers apply it in well under a second, another client's requests stay
    fast, and the leader is not lost (the old insertion sort made this
    quadratic: 5-11 s frozen at 60,000)."""
    c = cluster_factory(3, server_args=BASE_ARGS)
    c.start()
    leader = c.wait_leader(timeout=15)
    owner = kazoo(c.connect_string())
    other = kazoo(c.connect_string())
    n, batch = 30000, 1000
    owner.create("/eph")
    for start in range(0, n, batch):
        t = owner.transaction()
        for i in range(start, min(start + batch, n)):
            t.create("/eph/n%08d" % (n - 1 - i), ephemeral=True)
        assert all(r is True or isinstance(r, str) for r in t.commit())
    other.sync("/eph")  # other may be on another server: catch up first
    assert len(other.get_children("/eph")) == n
    before = leader.status()

    # Another client's latency, measured from before the close until every
    # ephemeral is gone on its server.
    worst = [0.0]
    done = threading.Event()

    def probe():
        while not done.is_set():
            r0 = time.time()
            other.exists("/eph")
            worst[0] = max(worst[0], time.time() - r0)

    t = threading.Thread(target=probe)
    t.start()
    time.sleep(0.2)
    owner.stop()  # closeSession
    t0 = time.time()
    while len(other.get_children("/eph")) > 0:
        assert time.time() - t0 < 20, "ephemerals not deleted"
    time.sleep(0.2)
    done.set()
    t.join(10)
    worst = worst[0]
    owner.close()
    # Measured with the heapsort: ~0.1 s worst; the bound leaves room for a
    # loaded machine and is far below the seconds a quadratic sort takes.
    print("closeSession of %d descending ephemerals: worst other-client latency %.3fs" % (n, worst))
    assert worst < 1.5, "another client waited %.2fs" % worst
    after = leader.status()
    assert after["role"] == "leader" and after["leader"] == leader.id
    assert after["term"] == before["term"], (before["term"], after["term"])
    for s in c.servers.values():
        assert s.alive()
    other.create("/after", b"x")
    assert other.get("/after")[0] == b"x"
    other.stop()
    other.close()


def test_idle_connection_flood(cluster_factory):
    """Idle connections from one address are capped (maxClientCnxns) and
    closed after connect_timeout_ms; new clients and ruok are served."""
    c, srv = single(cluster_factory, "--maxClientCnxns", "20", "--connect_timeout_ms", "1500")
    flood = []
    for _ in range(300):
        try:
            flood.append(open_conn(srv, source="127.0.0.2"))
        except OSError:
            pass
    # Beyond 20, the server accepted and closed at once.
    time.sleep(0.5)
    m = metrics(srv)
    assert m["keel_client_refused_per_ip_total"] >= 250, m["keel_client_refused_per_ip_total"]
    mntr = dict(line.split("\t", 1) for line in
                four_letter(srv.client_addr, "mntr").splitlines() if "\t" in line)
    assert int(mntr["zk_connection_rejected"]) >= 250
    # Others are served meanwhile.
    assert ruok(srv) == "imok"
    zk = kazoo(srv.client_addr)
    zk.create("/served", b"1")
    # The idle ones that were admitted are closed after the deadline.
    t0 = time.time()
    closed = sum(1 for s in flood if closed_by_server(s, max(0.1, 4.0 - (time.time() - t0))))
    assert closed == len(flood), "%d of %d idle connections still open" % (
        len(flood) - closed, len(flood))
    m = metrics(srv)
    assert m["keel_client_connect_timeouts_total"] >= 20
    assert zk.get("/served")[0] == b"1"  # the session that did connect stays
    for s in flood:
        s.close()
    # A second wave from that address is admitted again: the counts were released.
    again = [open_conn(srv, source="127.0.0.2") for _ in range(20)]
    time.sleep(0.3)
    assert metrics(srv)["keel_client_refused_per_ip_total"] == m["keel_client_refused_per_ip_total"]
    for s in again:
        s.close()
    zk.stop()
    zk.close()


def test_truncated_header_and_partial_connect_are_closed(cluster_factory):
    """A truncated length, a partial ConnectRequest, and (after a session)
    a partial frame: each closed after its deadline; the server keeps serving."""
    c, srv = single(cluster_factory, "--connect_timeout_ms", "1000", "--frame-timeout-ms", "1500")
    truncated = open_conn(srv)
    truncated.sendall(b"\x00\x00")
    partial_connect = open_conn(srv)
    partial_connect.sendall(connect_request()[:20])
    raw = RawZk(srv.client_addr)
    raw.sock.sendall(struct.pack(">I", 100) + b"\0" * 10)  # a request frame, cut short
    t0 = time.time()
    assert closed_by_server(truncated, 4.0)
    assert closed_by_server(partial_connect, 4.0)
    first = time.time() - t0
    assert first < 3.0, first
    assert closed_by_server(raw.sock, 5.0)
    m = metrics(srv)
    assert m["keel_client_connect_timeouts_total"] >= 2
    assert m["keel_client_frame_timeouts_total"] >= 1
    assert ruok(srv) == "imok"
    zk = kazoo(srv.client_addr)
    zk.create("/ok", b"1")
    # A connection that is slow but keeps finishing frames is not cut off.
    slow = RawZk(srv.client_addr)
    for _ in range(4):
        err, _zxid, _body = slow.call(3, struct.pack(">i", 3) + b"/ok" + b"\0")
        assert err == 0
        time.sleep(0.6)
    slow.close()
    zk.stop()
    zk.close()


def test_partial_frames_memory_is_bounded(cluster_factory):
    """Connections announcing 1 MiB frames hold only what they sent, and all
    partial frames together stay within client-read-budget-bytes (16 MiB
    here): RSS grows by less than 40 MiB while 150 connections try to park
    1 MiB - 1 byte each (150 MiB without the bounds)."""
    budget = 16 << 20
    c, srv = single(cluster_factory, "--maxClientCnxns", "0",
                    "--client-read-budget-bytes", str(budget), "--frame-timeout-ms", "60000")
    zk = kazoo(srv.client_addr)
    zk.create("/data", b"1")
    base = rss_kb(srv)
    # Announce-only: 200 headers of 1 MiB - 1 with 10 bytes each.
    announced = []
    for _ in range(200):
        s = open_conn(srv)
        s.sendall(struct.pack(">I", (1 << 20) - 1) + b"\0" * 10)
        announced.append(s)
    time.sleep(0.5)
    grown = rss_kb(srv) - base
    print("200 connections announcing 1 MiB frames: RSS +%d KiB" % grown)
    assert grown < 10 * 1024, "announce-only connections took %d KiB" % grown
    # Real bytes: 150 connections each send all but the last byte of a
    # frame of the largest size (1 MiB - 1).
    chunk = struct.pack(">I", (1 << 20) - 1) + b"\0" * ((1 << 20) - 2)
    hogs = []
    for _ in range(150):
        s = open_conn(srv)
        s.setblocking(False)
        hogs.append([s, memoryview(chunk)])
    deadline = time.time() + 20
    while any(len(v) > 0 for _s, v in hogs) and time.time() < deadline:
        for h in hogs:
            if len(h[1]) == 0:
                continue
            try:
                n = h[0].send(h[1][:65536])
                h[1] = h[1][n:]
            except BlockingIOError:
                pass
            except OSError:
                h[1] = h[1][:0]  # closed by the server: over the budget
    time.sleep(0.5)
    m = metrics(srv)
    grown = rss_kb(srv) - base
    assert m["keel_client_read_buffer_bytes"] <= budget
    assert m["keel_client_read_budget_refusals_total"] > 0
    print("150 connections parking 1 MiB - 2 bytes each: RSS +%d KiB, %d closed by the budget"
          % (grown, m["keel_client_read_budget_refusals_total"]))
    assert grown < 40 * 1024, "RSS grew %d KiB" % grown
    # Others are served, and nothing acknowledged was lost.
    assert ruok(srv) == "imok"
    assert zk.get("/data")[0] == b"1"
    zk.set("/data", b"2")
    for s in announced:
        s.close()
    for s, _v in hogs:
        s.close()
    zk2 = kazoo(srv.client_addr)
    assert zk2.get("/data")[0] == b"2"
    zk2.stop()
    zk2.close()
    zk.stop()
    zk.close()


def exists_watch(raw, path):
    p = path.encode()
    err, _zxid, _body = raw.call(3, struct.pack(">i", len(p)) + p + b"\1")
    return err


def test_watch_bytes_budget(cluster_factory):
    """Watches count their path bytes against a per-connection budget
    (1 MiB here): 100 KB paths are refused with QuotaExceeded (-125) past
    it, RSS stays flat, and the connection and the others keep working."""
    c, srv = single(cluster_factory, "--max-watch-bytes-per-connection", str(1 << 20))
    base = rss_kb(srv)
    raw = RawZk(srv.client_addr)
    errs = [exists_watch(raw, "/" + ("%04d" % i) + "w" * 100000) for i in range(40)]
    assert errs[:10] == [-101] * 10, errs[:10]  # NoNode: watched (10 x 100 KB fits)
    assert set(errs[10:]) == {-125}, errs[10:]  # QuotaExceeded beyond 1 MiB
    grown = rss_kb(srv) - base
    print("40 watches on 100 KB paths (10 admitted): RSS +%d KiB" % grown)
    assert grown < 20 * 1024, "RSS grew %d KiB" % grown
    # The connection still works, and another connection has its own budget.
    err, _zxid, _body = raw.call(3, struct.pack(">i", 1) + b"/" + b"\0")
    assert err == 0
    other = RawZk(srv.client_addr)
    assert exists_watch(other, "/" + "x" * 100000) == -101
    other.close()
    raw.close()
    assert ruok(srv) == "imok"


def test_metrics_slowloris(cluster_factory):
    """Slow metrics connections are capped and closed by the request and
    idle deadlines; the endpoint answers again once they are gone."""
    c, srv = single(cluster_factory, "--max-metrics-connections", "10",
                    "--metrics-request-timeout-ms", "1500", "--metrics-idle-timeout-ms", "800")
    slow = []
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", srv.metrics_port), timeout=5)
        s.sendall(b"GET /met")
        slow.append(s)
    t0 = time.time()
    closed = sum(1 for s in slow if closed_by_server(s, max(0.1, 4.0 - (time.time() - t0))))
    assert closed == len(slow), "%d slow metrics connections still open" % (len(slow) - closed)
    for s in slow:
        s.close()
    # A connection that keeps trickling bytes still hits the request deadline.
    trickle = socket.create_connection(("127.0.0.1", srv.metrics_port), timeout=5)
    t0 = time.time()
    cut = False
    for ch in b"GET /metrics HTTP/1.0\r\nX-Pad: " + b"a" * 200:
        try:
            trickle.sendall(bytes([ch]))
        except OSError:
            cut = True
            break
        time.sleep(0.1)
        if time.time() - t0 > 5:
            break
    cut = cut or closed_by_server(trickle, 1.0)
    assert cut and time.time() - t0 < 4.0
    trickle.close()
    m = metrics(srv)
    assert m["keel_metrics_refused_total"] >= 150, m["keel_metrics_refused_total"]
    assert m["keel_metrics_timeouts_total"] >= 10
    assert ruok(srv) == "imok"


def low_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_fd_exhaustion_keeps_storage_and_peers(cluster_factory):
    """One server of three runs at `ulimit -n 256`; 400 connections flood
    it. Clients are refused before the descriptor reserve, the server stays
    up, and writes through it (small WAL segments: new files) still commit."""
    c = cluster_factory(3, server_args=BASE_ARGS + ["--maxClientCnxns", "0",
                                                    "--max-packet-bytes", "65536",
                                                    "--segment-bytes", "262144"])
    victim = c.servers[1]
    victim.preexec = low_nofile
    c.start()
    c.wait_leader(timeout=15)
    zk = kazoo(victim.client_addr)
    zk.create("/fd", b"0")
    flood = []
    for _ in range(400):
        try:
            flood.append(open_conn(victim))
        except OSError:
            break
    time.sleep(0.5)
    # Writes through the flooded server: the WAL rolls over to new segments.
    for i in range(300):
        zk.create("/fd/n%04d" % i, b"x" * 4000)
    assert victim.alive()
    assert "Too many open files" not in victim.log()
    for s in flood:
        s.close()
    # (The metrics port is refused too while the flood holds the fds.)
    m = c.wait(lambda: metrics(victim), timeout=10, what="metrics after the flood")
    assert m["keel_fd_limit"] == 256
    assert m["keel_client_refused_fd_reserve_total"] > 0
    other = kazoo(c.servers[2].client_addr)
    assert len(other.get_children("/fd")) == 300
    other.stop()
    other.close()
    # Once the flood is gone, the server takes new clients again.
    zk2 = c.wait(lambda: kazoo(victim.client_addr, timeout=3.0), timeout=10,
                 what="a new client on the flooded server")
    assert zk2.get("/fd")[0] == b"0"
    zk2.stop()
    zk2.close()
    zk.stop()
    zk.close()
    assert victim.alive()


def test_fairness_heavy_reads_do_not_starve_others(cluster_factory):
    """One client pipelines getChildren of a node with 50,000 children (a
    ~450 KB reply each, 32 in flight); another client's getData p99 stays
    within a few getChildren times, because each connection's turn ends
    after client-output-per-turn-bytes of replies. Without the turn cap the
    other client waits for the whole pipeline (measured: p99 29 ms against
    a bound of 22 ms, max 63 ms; with it: p99 9-11 ms)."""
    import argparse
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import abuse  # bench/abuse.py: the same scenario as the benchmark

    c, srv = single(cluster_factory)
    abuse.populate(srv.client_addr, "/big", 50000)
    raw = RawZk(srv.client_addr)
    body = struct.pack(">i", 4) + b"/big" + b"\0"
    costs = []
    for _ in range(7):
        t0 = time.perf_counter()
        err, _z, _b = raw.call(8, body)
        costs.append(time.perf_counter() - t0)
        assert err == 0
    raw.close()
    one = sorted(costs)[3]  # median time of one getChildren, quiet
    args = argparse.Namespace(duration=2.5, pipeline=32)
    bound_ms = 8 * one * 1000 + 10
    # The bound compares a quiet measurement with a loaded one, so another
    # process's burst on a busy 2-core machine can spoil one round: up to
    # three rounds, one within the bound. Without the turn cap every round
    # is over it (the other client waits for the whole pipeline).
    rounds = []
    for _ in range(3):
        abused = abuse.measure(srv.client_addr, args, True)
        print("getChildren %.1f ms; other client under abuse: %s; bound %.1f ms" % (
            one * 1000, abused, bound_ms))
        assert abused["abuser_replies_per_s"] > 0
        assert abused["count"] > 50
        rounds.append(abused["p99_ms"])
        if abused["p99_ms"] < bound_ms:
            break
    assert min(rounds) < bound_ms, (rounds, bound_ms)
    assert srv.alive()
    assert ruok(srv) == "imok"


def test_unread_replies_are_bounded_server_wide(cluster_factory):
    """A client that pipelines getChildren of 20,000 children and never
    reads: its unsent replies count against client-output-budget-bytes
    (4 MiB here); past it the connection is closed, the bytes are given
    back, and another client is served throughout."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import abuse  # bench/abuse.py

    c, srv = single(cluster_factory, "--client-output-budget-bytes", str(4 << 20))
    abuse.populate(srv.client_addr, "/big", 20000)
    hog = RawZk(srv.client_addr)
    hog.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    req = struct.pack(">ii", 7, 8) + struct.pack(">i", 4) + b"/big" + b"\0"
    hog.sock.sendall((struct.pack(">I", len(req)) + req) * 200)  # ~36 MB of replies
    zk = kazoo(srv.client_addr)
    m = c.wait(lambda: (lambda m: m if m["keel_client_output_budget_refusals_total"] >= 1
                        else None)(metrics(srv)), timeout=20, what="the hog closed")
    assert zk.get("/small")[0] == b"hello"
    hog.sock.close()
    m = c.wait(lambda: (lambda m: m if m["keel_client_output_bytes"] < (1 << 20)
                        else None)(metrics(srv)), timeout=10, what="output given back")
    assert m["keel_client_output_bytes"] < (1 << 20)
    assert ruok(srv) == "imok"
    zk.stop()
    zk.close()
