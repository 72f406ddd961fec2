"""SessionMoved on keel and on Apache ZooKeeper 3.8, raw frames.

A client's session is resumed on another server while its first
connection stays open. Observed on ZooKeeper 3.8: a write on the old
connection is refused by the leader and the old connection is closed
without a reply (the client sees ConnectionLoss). keel answers SessionMoved
(-118) and then closes (docs/zookeeper-compat.md, "SessionMoved"). On both,
the write is not applied, the old connection ends, and the session lives on
on its new connection.
"""
import struct

from test_bad_input import (CLOSED, OK, TIMEOUT, connect_body, create_body, frame, raw_socket,
                            recv_frame, reply, send, session, ustr, zreq)

SESSION_MOVED = -118
NO_NODE = -101


def test_write_on_a_connection_whose_session_moved(backend, path):
    a, b = backend.addrs[0], backend.addrs[1]
    old = raw_socket(a)
    send(old, frame(connect_body()))
    r = recv_frame(old)
    assert isinstance(r, bytes), r
    _proto, _timeout, sid = struct.unpack(">iiq", r[:16])
    (plen,) = struct.unpack(">i", r[16:20])
    passwd = r[20:20 + plen]
    new = session(b, sid=sid, passwd=passwd)
    try:
        if backend.kind == "keel":
            # The move reaches server 1 as a peer frame: wait for it.
            srv = backend.cluster.server_by_client_addr(a)
            backend.cluster.wait(
                lambda: "0x%x was resumed on another connection" % sid in srv.log(),
                what="server 1 hears that the session moved")
        send(old, zreq(7, 1, create_body(path + "-moved")))
        r = reply(old, timeout=10)
        if backend.kind == "keel":
            assert r[:2] == (7, SESSION_MOVED), r
            r = reply(old, timeout=10)
        assert r == CLOSED, r
        # Not applied; the session answers on its new connection.
        send(new, zreq(8, 3, ustr(path + "-moved") + b"\0"))
        got = reply(new, timeout=10)
        assert got not in (CLOSED, TIMEOUT) and got[0] == 8 and got[1] == NO_NODE, got
        send(new, zreq(9, 3, ustr("/") + b"\0"))
        assert reply(new, timeout=10)[:2] == (9, OK)
    finally:
        old.close()
        new.close()
