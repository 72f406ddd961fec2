"""Bad input on the client port, raw sockets against every server, on keel
and on Apache ZooKeeper 3.8.

Each case states what ZooKeeper 3.8 does (observed, not assumed): where it
returns an error code keel must return the same code; where it closes the
connection keel closes it too (a reset counts as a close). After every test
a kazoo client that stayed connected throughout still has its session and
its data, and new clients still connect to every server.
"""
import socket
import struct
import time

import pytest
from kazoo.client import KazooClient, KazooState
from conftest import ZooKeeperBackend

OK, MARSHALLING, UNIMPLEMENTED, BAD_ARGS = 0, -5, -6, -8
NO_NODE, NODE_EXISTS, INVALID_ACL, AUTH_FAILED, NO_WATCHER = -101, -110, -114, -115, -121
CLOSED, TIMEOUT = "closed", "timeout"
MAX_FRAME = 1048575  # jute.maxbuffer default (0xfffff)


# ---- raw jute helpers ----

def frame(b):
    return struct.pack(">i", len(b)) + b


def ustr(s):
    if s is None:
        return struct.pack(">i", -1)
    if isinstance(s, str):
        s = s.encode()
    return struct.pack(">i", len(s)) + s


def connect_body(proto=0, zxid=0, timeout_ms=10000, sid=0, passwd=b"\0" * 16, ro=b"\0"):
    return struct.pack(">iqiq", proto, zxid, timeout_ms, sid) + ustr(passwd) + ro


def zreq(xid, op, body=b""):
    return frame(struct.pack(">ii", xid, op) + body)


def open_acl():
    return struct.pack(">ii", 1, 31) + ustr("world") + ustr("anyone")


def create_body(path, data=b"d", acl=None, mode=0):
    return ustr(path) + ustr(data) + (open_acl() if acl is None else acl) + struct.pack(">i", mode)


def raw_socket(addr):
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def recv_frame(s, timeout=3.0):
    """The next frame's payload, CLOSED (EOF or reset) or TIMEOUT."""
    s.settimeout(timeout)
    try:
        head = _recv_exact(s, 4)
        if head is None:
            return CLOSED
        body = _recv_exact(s, struct.unpack(">i", head)[0])
        return CLOSED if body is None else body
    except socket.timeout:
        return TIMEOUT
    except (ConnectionResetError, BrokenPipeError):
        return CLOSED


def _recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def send(s, data):
    """Sends; a server that already closed (reset) is not an error here."""
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass


def session(addr, **kw):
    s = raw_socket(addr)
    send(s, frame(connect_body(**kw)))
    r = recv_frame(s)
    assert isinstance(r, bytes) and len(r) >= 36, r
    return s


def reply(s, timeout=3.0):
    """(xid, err, body length) of the next reply (notifications skipped), or
    CLOSED / TIMEOUT."""
    while True:
        r = recv_frame(s, timeout)
        if not isinstance(r, bytes):
            return r
        xid, _zxid, err = struct.unpack(">iqi", r[:16])
        if xid != -1:
            return (xid, err, len(r) - 16)


def call(addr, op, body, xid=5):
    """One request on a fresh session: its reply, and whether the connection
    still answers afterwards (True/False)."""
    s = session(addr)
    try:
        send(s, zreq(xid, op, body))
        r = reply(s)
        if r in (CLOSED, TIMEOUT):
            return r, False
        send(s, zreq(6, 3, ustr("/") + b"\0"))
        after = reply(s)
        return r, isinstance(after, tuple) and after[:2] == (6, OK)
    finally:
        s.close()


# ---- the guard: a client connected throughout, and health checks ----

@pytest.fixture(scope="module")
def guard(backend):
    zk = KazooClient(hosts=backend.hosts, timeout=10)
    zk.start(timeout=20)
    root = "/bad_input_guard"
    zk.ensure_path(root)
    zk.set(root, b"intact")
    zk.create(root + "/eph", b"mine", ephemeral=True)
    states = []
    zk.add_listener(states.append)
    zk.guard_root = root
    zk.guard_session = zk.client_id[0]
    zk.guard_states = states
    yield zk
    zk.stop()
    zk.close()


@pytest.fixture(autouse=True)
def _healthy_after(request):
    yield
    node = request
    if "guard" not in node.fixturenames:
        return
    backend = node.getfixturevalue("backend")
    zk = node.getfixturevalue("guard")
    # the guard's session never dropped, and its data and ephemeral are there
    assert zk.state == KazooState.CONNECTED
    assert zk.guard_states == [], "guard saw %s" % zk.guard_states
    assert zk.client_id[0] == zk.guard_session
    assert zk.get(zk.guard_root)[0] == b"intact"
    assert zk.get(zk.guard_root + "/eph")[0] == b"mine"
    # every server still takes new sessions and answers
    for addr in backend.addrs:
        s = session(addr)
        send(s, zreq(1, 4, ustr(zk.guard_root) + b"\0"))
        r = recv_frame(s)
        assert isinstance(r, bytes) and struct.unpack(">iqi", r[:16])[2] == OK, (addr, r)
        assert b"intact" in r
        s.close()


# ---- before the handshake ----

PRE_CONNECT = {
    "garbage": b"\x13\x37garbage-bytes-here\xff\xfe" * 3,
    "huge-length": struct.pack(">I", 0x7fffffff),
    "negative-length": struct.pack(">I", 0xffffffff),
    "min-negative-length": struct.pack(">I", 0x80000000),
    "zero-length": struct.pack(">I", 0),
    "request-before-connect": zreq(1, 4, ustr("/") + b"\0"),
    "short-connect": frame(b"\0\0\0\0\0\0"),
    "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(PRE_CONNECT))
def test_bad_bytes_before_connect_close(backend, guard, case):
    # ZooKeeper closes the connection without a reply.
    for addr in backend.addrs:
        s = raw_socket(addr)
        send(s, PRE_CONNECT[case])
        assert recv_frame(s) == CLOSED, (case, addr)
        s.close()


def test_truncated_frames(backend, guard):
    for addr in backend.addrs:
        # a frame cut short, then the client goes away
        s = raw_socket(addr)
        send(s, struct.pack(">i", 100) + b"x" * 10)
        s.close()
        # a frame cut short on a live session: no reply, the rest never comes
        s = session(addr)
        send(s, struct.pack(">i", 40) + struct.pack(">ii", 7, 4) + b"\0\0")
        assert recv_frame(s, timeout=1.0) == TIMEOUT
        s.close()
        # a length prefix alone on a live session
        s = session(addr)
        send(s, struct.pack(">i", 4096))
        s.close()


def test_huge_length_after_connect_closes(backend, guard):
    for addr in backend.addrs:
        for n in (0x7fffffff, -1, -0x80000000, MAX_FRAME + 1):
            s = session(addr)
            send(s, struct.pack(">i", n) + b"\0" * 64)
            assert recv_frame(s) == CLOSED, (addr, n)
            s.close()


# ---- after the handshake ----

@pytest.mark.parametrize("opcode", [999, 10, 55, 0, -3, 0x7fffffff])
def test_unknown_opcode_unimplemented_then_close(backend, guard, opcode):
    # ZooKeeper answers ReplyHeader{xid, err=Unimplemented} and closes. The
    # reference's close races the next request it has already read (seen
    # once on a loaded machine: it answered the exists that followed), so
    # it gets three tries to show the close; keel must close every time.
    tries = 3 if isinstance(backend, ZooKeeperBackend) else 1
    for addr in backend.addrs:
        closed = False
        for _ in range(tries):
            r, alive = call(addr, opcode, b"abc")
            assert r == (5, UNIMPLEMENTED, 0), addr
            if not alive:
                closed = True
                break
        assert closed, addr


def test_second_connect_request_on_a_session(backend, guard):
    # A ConnectRequest read as a request: xid 0 (protocolVersion), opcode 0
    # (high half of lastZxidSeen) -> Unimplemented.
    s = session(backend.addrs[0])
    send(s, frame(connect_body()))
    assert reply(s) == (0, UNIMPLEMENTED, 0)
    s.close()


# (name, path, create, exists, setData, delete) -> error, as ZooKeeper 3.8
# answers: writes validate the path (after looking up the parent), reads mostly
# just find nothing
EXISTS, GET_DATA, CREATE, DELETE, SET_DATA, GET_CHILDREN = 3, 4, 1, 2, 5, 8
PATH_CASES = [
    ("empty", "", BAD_ARGS, OK, BAD_ARGS, BAD_ARGS),
    ("no-leading-slash", "noslash", BAD_ARGS, NO_NODE, BAD_ARGS, BAD_ARGS),
    ("double-slash", "//", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("dot", "/.", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("dotdot", "/..", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("nul", "/a\0b", BAD_ARGS, BAD_ARGS, BAD_ARGS, BAD_ARGS),
    ("control-char", "/a\x01b", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("del", "/a\x7fb", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("c1-control", "/a\u009fb", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("private-use", "/a\uf8ffb", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("noncharacter", "/a\ufffeb", BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    ("surrogate", "/a\ud800b".encode("utf-8", "surrogatepass"),
     BAD_ARGS, NO_NODE, BAD_ARGS, NO_NODE),
    # below a missing parent, create says NoNode before it looks at the name
    ("trailing-slash", "/nonexistent_parent/", NO_NODE, NO_NODE, BAD_ARGS, NO_NODE),
    ("inner-double-slash", "/nonexistent_parent//b", NO_NODE, NO_NODE, BAD_ARGS, NO_NODE),
    ("inner-dot", "/nonexistent_parent/./b", NO_NODE, NO_NODE, BAD_ARGS, NO_NODE),
]


@pytest.mark.parametrize("case", PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_invalid_paths(backend, guard, case):
    _name, p, create_err, exists_err, set_err, delete_err = case
    addr = backend.addrs[0]
    r, alive = call(addr, CREATE, create_body(p))
    assert r[:2] == (5, create_err) and alive
    r, alive = call(addr, EXISTS, ustr(p) + b"\0")
    assert r[:2] == (5, exists_err) and alive
    r, alive = call(addr, SET_DATA, ustr(p) + ustr(b"q") + struct.pack(">i", -1))
    assert r[:2] == (5, set_err) and alive
    r, alive = call(addr, DELETE, ustr(p) + struct.pack(">i", -1))
    assert r[:2] == (5, delete_err) and alive


def test_invalid_paths_in_writes(backend, guard):
    addr = backend.addrs[0]
    assert call(addr, DELETE, ustr("/") + struct.pack(">i", -1)) == ((5, BAD_ARGS, 0), True)
    assert call(addr, DELETE, ustr("/zookeeper") + struct.pack(">i", -1)) == ((5, BAD_ARGS, 0), True)
    assert call(addr, 7, ustr("x") + open_acl() + struct.pack(">i", -1)) == ((5, BAD_ARGS, 0), True)
    assert call(addr, 13, ustr("x") + struct.pack(">i", -1)) == ((5, BAD_ARGS, 0), True)
    assert call(addr, CREATE, create_body("/")) == ((5, NODE_EXISTS, 0), True)
    # a bad path inside a multi fails the multi (reported per op, not as an error header)
    multi = (struct.pack(">i?i", 1, False, -1) + create_body("/bad_multi_ok")
             + struct.pack(">i?i", 1, False, -1) + create_body("bad")
             + struct.pack(">i?i", -1, True, -1))
    r, alive = call(addr, 14, multi)
    assert r[:2] == (5, OK) and alive
    assert guard.exists("/bad_multi_ok") is None


def test_malformed_bodies(backend, guard):
    addr = backend.addrs[1]
    cases = {
        "truncated-exists": (EXISTS, b"\x00\x00"),
        "garbage-getdata": (GET_DATA, b"\xff\xff\xff\x00abc"),
        "negative-string-length": (EXISTS, struct.pack(">i", -5) + b"\0"),
        "huge-string-length": (EXISTS, struct.pack(">i", 0x7fffff00) + b"\0"),
        "null-path-create": (CREATE, create_body(None)),
        "huge-acl-count": (CREATE, create_body("/aclhuge", acl=struct.pack(">i", 0x7fffffff))),
        "multi-truncated": (14, struct.pack(">i?i", 1, False, -1) + ustr("/mt")),
        "multi-no-terminator": (14, struct.pack(">i?i", 2, False, -1) + ustr("/nonexistent")
                                + struct.pack(">i", -1)),
        "multi-empty-body": (14, b""),
        "multi-with-sync": (14, struct.pack(">i?i", 9, False, -1) + ustr("/")
                            + struct.pack(">i?i", -1, True, -1)),
        "multi-unknown-op": (14, struct.pack(">i?i", 999, False, -1)
                             + struct.pack(">i?i", -1, True, -1)),
        "addwatch-bad-mode": (106, ustr("/") + struct.pack(">i", 7)),
    }
    for name, (op, body) in sorted(cases.items()):
        r, alive = call(addr, op, body)
        assert r[:2] == (5, MARSHALLING), name
        assert alive, name


def test_bad_acls_and_modes(backend, guard):
    addr = backend.addrs[2]

    def acl(scheme, ident, perms=31):
        return struct.pack(">ii", 1, perms) + ustr(scheme) + ustr(ident)
    cases = {
        "empty-acl": (create_body("/bad_acl1", acl=struct.pack(">i", 0)), INVALID_ACL),
        "null-acl": (create_body("/bad_acl2", acl=struct.pack(">i", -1)), INVALID_ACL),
        "unknown-scheme": (create_body("/bad_acl3", acl=acl("nosuch", "x")), INVALID_ACL),
        "digest-no-colon": (create_body("/bad_acl4", acl=acl("digest", "nocolon")), INVALID_ACL),
        "bad-ip": (create_body("/bad_acl5", acl=acl("ip", "999.1.1.1")), INVALID_ACL),
        "mode-negative": (create_body("/bad_mode1", mode=-1), BAD_ARGS),
        "mode-77": (create_body("/bad_mode2", mode=77), BAD_ARGS),
    }
    for name, (body, err) in sorted(cases.items()):
        r, alive = call(addr, CREATE, body)
        assert r[:2] == (5, err), name
        assert alive, name
    for p in ("/bad_acl1", "/bad_acl2", "/bad_acl3", "/bad_acl4", "/bad_acl5", "/bad_mode1",
              "/bad_mode2"):
        assert guard.exists(p) is None, p


@pytest.mark.parametrize("scheme,auth", [("nosuch", b"x"), ("world", b"anyone")])
def test_bad_auth_fails_and_closes(backend, guard, scheme, auth):
    s = session(backend.addrs[0])
    send(s, zreq(-4, 100, struct.pack(">i", 0) + ustr(scheme) + ustr(auth)))
    assert reply(s) == (-4, AUTH_FAILED, 0)
    assert recv_frame(s) == CLOSED
    s.close()


@pytest.mark.parametrize("token", [b"", b"junk"])
def test_sasl_without_a_mechanism(backend, guard, token):
    # Neither backend has a SASL login configured: ZooKeeper answers a sasl
    # request (opcode 102) OK with a null token (length -1) and keeps the
    # connection; keel does the same (docs/security.md).
    r, alive = call(backend.addrs[0], 102, struct.pack(">i", len(token)) + token)
    assert r == (5, OK, 4)
    assert alive


def test_truncated_auth_packet(backend, guard):
    # ZooKeeper closes; keel may instead answer MarshallingError to the auth
    # xid. Either way the session gets no identity and nothing else breaks.
    s = session(backend.addrs[0])
    send(s, zreq(-4, 100, struct.pack(">i", 0)))
    r = reply(s)
    assert r == CLOSED or r == (-4, MARSHALLING, 0)
    s.close()


def test_oversized_values(backend, guard):
    # header 8 + path "/bad_big" 4+8 + data 4+n + acl 27 + mode 4
    overhead = 8 + 12 + 4 + 27 + 4
    addr = backend.addrs[1]
    # exactly jute.maxbuffer: accepted
    r, alive = call(addr, CREATE, create_body("/bad_big", b"z" * (MAX_FRAME - overhead)))
    assert r[:2] == (5, OK) and alive
    # one byte more, 1 MiB + 1 KiB, 2 MiB: ZooKeeper closes the connection
    for total in (MAX_FRAME + 1, MAX_FRAME + 1025, 2 << 20):
        s = session(addr)
        send(s, zreq(5, CREATE, create_body("/bad_big2", b"z" * (total - overhead))[:]))
        assert reply(s) == CLOSED, total
        s.close()
    s = session(addr)
    send(s, zreq(5, SET_DATA, ustr(guard.guard_root) + ustr(b"y" * (2 << 20))
                    + struct.pack(">i", -1)))
    assert reply(s) == CLOSED
    s.close()
    assert guard.exists("/bad_big2") is None
    assert guard.get("/bad_big")[1].dataLength == MAX_FRAME - overhead
    guard.delete("/bad_big")


def test_odd_connect_requests(backend, guard):
    addr = backend.addrs[0]

    def connect(**kw):
        s = raw_socket(addr)
        send(s, frame(connect_body(**kw)))
        r = recv_frame(s)
        s.close()
        if not isinstance(r, bytes):
            return r
        proto, timeout_ms, sid = struct.unpack(">iiq", r[:16])
        return (timeout_ms, sid, len(r))
    # timeouts outside [min, max] are clamped
    t_min = connect(timeout_ms=1)[0]
    assert t_min > 0
    assert connect(timeout_ms=0)[0] == t_min
    assert connect(timeout_ms=-1)[0] == t_min
    t_max = connect(timeout_ms=0x7fffffff)[0]
    assert 10000 <= t_max < 0x7fffffff
    # a client that has seen a zxid the server has not: refused, closed
    assert connect(zxid=1 << 60) == CLOSED
    # an unknown session id: timeout 0 (expired), no session
    assert connect(sid=0x123456789)[:2] == (0, 0)
    # odd but harmless fields are accepted
    for kw in ({"proto": 99}, {"proto": -1}, {"zxid": -5}, {"passwd": b"p" * 1000},
               {"passwd": None}, {"ro": b"\0extra-junk"}):
        r = connect(**kw)
        assert isinstance(r, tuple) and r[1] != 0 and r[2] == 37, kw
    # without the trailing readOnly byte (pre-3.4 client): the answer has none either
    r = connect(ro=b"")
    assert isinstance(r, tuple) and r[1] != 0 and r[2] == 36


def test_many_bad_clients_at_once(backend, guard):
    # A burst of misbehaving connections across all servers.
    socks = []
    for i in range(30):
        addr = backend.addrs[i % len(backend.addrs)]
        s = raw_socket(addr)
        send(s, [PRE_CONNECT["garbage"], PRE_CONNECT["huge-length"],
                 struct.pack(">i", 100) + b"x"][i % 3])
        socks.append(s)
    time.sleep(0.2)
    for s in socks:
        s.close()


@pytest.mark.parametrize("p,check_err,remove_err", [
    ("bad", MARSHALLING, NO_WATCHER),
    ("a/b", NO_WATCHER, NO_WATCHER),
    (None, MARSHALLING, NO_WATCHER),
    ("", NO_WATCHER, NO_WATCHER),
    ("/nonexistent", NO_WATCHER, NO_WATCHER),
    ("//", NO_WATCHER, NO_WATCHER),
], ids=["relative", "relative-nested", "null", "empty", "absent", "double-slash"])
def test_watch_probes_with_bad_paths(backend, guard, p, check_err, remove_err):
    # checkWatches (17) walks the path up to the root in ZooKeeper and fails
    # on a null path or one without any "/"; removeWatches (18) only finds
    # nothing.
    for wtype in (1, 2, 3):
        r, alive = call(backend.addrs[0], 17, ustr(p) + struct.pack(">i", wtype))
        assert r[:2] == (5, check_err) and alive, wtype
        r, alive = call(backend.addrs[0], 18, ustr(p) + struct.pack(">i", wtype))
        assert r[:2] == (5, remove_err) and alive, wtype
