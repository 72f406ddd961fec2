"""SessionMoved: a connection whose session was resumed elsewhere.

A ZooKeeper client that loses its connection reconnects, with its session
id and password, to any server. The connection it left may still be open
(a half-dead socket, a slow server): from then on that connection does not
own the session, and a request sent on it is refused with SessionMoved
(-118) and the connection is closed, as a ZooKeeper server tears it down.
Raw frames, so that the old connection can be kept open on purpose.
"""
import socket
import struct

from harness import RawZk, _recv_exact

SESSION_MOVED = -118
OP_EXISTS = 3
OP_GET_DATA = 4


class Resumed(RawZk):
    """A second connection that resumes an existing session."""

    def __init__(self, addr, session_id, passwd, timeout=10.0):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.xid = 0
        body = struct.pack(">iqiq", 0, 0, 10000, session_id)
        body += struct.pack(">i", len(passwd)) + passwd + b"\0"
        self._send(body)
        resp = self._recv()
        _ver, self.timeout_ms, self.session_id = struct.unpack(">iiq", resp[:16])
        assert self.timeout_ms > 0, "resume refused"
        assert self.session_id == session_id


def path_body(path, watch=False):
    p = path.encode()
    return struct.pack(">i", len(p)) + p + (b"\1" if watch else b"\0")


def closed(sock):
    """True once the server has closed the socket (EOF)."""
    sock.settimeout(10)
    try:
        _recv_exact(sock, 1)
    except (ConnectionError, OSError, AssertionError, struct.error):
        return True
    return False


def assert_moved(old):
    err, _zxid, _body = old.call(OP_EXISTS, path_body("/"))
    assert err == SESSION_MOVED
    assert closed(old.sock)


def test_session_moved_to_another_server(cluster_factory):
    c = cluster_factory(3)
    c.start()
    c.wait_leader()
    a, b = c.servers[1], c.servers[2]
    old = RawZk(a.client_addr, cluster_auth=False)
    try:
        err, _zxid, _ = old.call(OP_EXISTS, path_body("/"))
        assert err == 0
        new = Resumed(b.client_addr, old.session_id, old.passwd)
        try:
            c.wait(lambda: "0x%x was resumed on another connection" % old.session_id
                   in a.log(), what="server 1 hears that the session moved")
            assert_moved(old)
            # The session itself lives on, on its new connection.
            err, _zxid, _ = new.call(OP_GET_DATA, path_body("/zookeeper"))
            assert err == 0
        finally:
            new.close()
    finally:
        old.sock.close()


def test_session_moved_to_another_connection_of_the_same_server(cluster_factory):
    c = cluster_factory(3)
    c.start()
    c.wait_leader()
    a = c.servers[3]
    old = RawZk(a.client_addr, cluster_auth=False)
    try:
        new = Resumed(a.client_addr, old.session_id, old.passwd)
        try:
            assert_moved(old)
            err, _zxid, _ = new.call(OP_EXISTS, path_body("/"))
            assert err == 0
        finally:
            new.close()
    finally:
        old.sock.close()
