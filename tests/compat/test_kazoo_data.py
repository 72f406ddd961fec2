"""kazoo against keel and ZooKeeper: znodes, stats, sequential, container
and TTL nodes, multi, ACLs, sync. Every assertion holds for both backends."""
import time

import pytest
from kazoo.exceptions import (AuthFailedError, BadArgumentsError, BadVersionError, ConnectionLoss,
                              InvalidACLError, NoAuthError, NoChildrenForEphemeralsError,
                              NodeExistsError, NoNodeError, NotEmptyError)
from kazoo.security import (ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions,
                            make_acl, make_digest_acl, make_digest_acl_credential)

import kazoo_ext as kx


# -- CRUD and stat -----------------------------------------------------------

def test_crud_and_stat(zk, path):
    assert zk.create(path, b"v1") == path
    st = zk.exists(path)
    assert (st.version, st.cversion, st.aversion) == (0, 0, 0)
    assert (st.numChildren, st.dataLength, st.ephemeralOwner) == (0, 2, 0)
    assert st.czxid == st.mzxid == st.pzxid
    assert st.ctime == st.mtime and st.ctime > 0
    assert zk.get(path) == (b"v1", st)

    st1 = zk.set(path, b"v22")
    assert st1.version == 1 and st1.dataLength == 3
    assert st1.czxid == st.czxid and st1.pzxid == st.pzxid and st1.mzxid > st.mzxid
    assert st1.mtime >= st.mtime and st1.ctime == st.ctime
    with pytest.raises(BadVersionError):
        zk.set(path, b"x", version=0)
    st2 = zk.set(path, b"", version=1)
    assert (st2.version, st2.dataLength) == (2, 0)
    assert zk.get(path)[0] == b""

    # A child changes the parent's cversion, numChildren and pzxid only.
    zk.create(path + "/c")
    cst = zk.exists(path + "/c")
    pst = zk.exists(path)
    assert (pst.cversion, pst.numChildren, pst.version) == (1, 1, 2)
    assert pst.pzxid == cst.czxid and pst.mzxid == st2.mzxid
    zk.delete(path + "/c")
    del_zxid = zk.last_zxid
    pst2 = zk.exists(path)
    assert (pst2.cversion, pst2.numChildren) == (2, 0)
    assert pst2.pzxid == del_zxid and pst2.pzxid > cst.czxid
    assert pst2.mzxid == st2.mzxid

    zk.delete(path, version=2)
    assert zk.exists(path) is None


def test_errors(zk, path):
    with pytest.raises(NoNodeError):
        zk.get(path)
    with pytest.raises(NoNodeError):
        zk.set(path, b"x")
    with pytest.raises(NoNodeError):
        zk.delete(path)
    with pytest.raises(NoNodeError):
        zk.get_children(path)
    with pytest.raises(NoNodeError):
        zk.create(path + "/a/b")
    assert zk.exists(path) is None
    zk.create(path + "/a/b", makepath=True)
    with pytest.raises(NodeExistsError):
        zk.create(path + "/a")
    with pytest.raises(NotEmptyError):
        zk.delete(path + "/a")
    with pytest.raises(BadVersionError):
        zk.delete(path + "/a/b", version=5)
    with pytest.raises(BadVersionError):
        zk.set_acls(path + "/a/b", OPEN_ACL_UNSAFE, version=3)
    zk.create(path + "/eph", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create(path + "/eph/child")
    est = zk.exists(path + "/eph")
    assert est.ephemeralOwner == zk.client_id[0]
    zk.delete(path, recursive=True)
    assert zk.exists(path) is None


def test_get_children_with_stat(zk, path):
    zk.create(path, b"p")
    names = ["b", "a", "c1", "zz"]
    for n in names:
        zk.create(path + "/" + n, n.encode())
    children, st = zk.get_children(path, include_data=True)
    assert sorted(children) == sorted(names)
    assert st == zk.exists(path)
    assert (st.numChildren, st.cversion, st.dataLength) == (4, 4, 1)
    assert sorted(zk.get_children(path)) == sorted(names)
    assert zk.get_children(path + "/a") == []


def test_sequential(zk, path):
    zk.create(path)
    assert zk.create(path + "/s-", sequence=True) == path + "/s-0000000000"
    zk.create(path + "/plain")  # cversion 2 now
    assert zk.create(path + "/s-", sequence=True) == path + "/s-0000000002"
    # A delete bumps the visible cversion but not the sequence counter,
    # which counts creates only (ZooKeeper's persisted cversion).
    zk.delete(path + "/plain")
    assert zk.exists(path).cversion == 4
    e = zk.create(path + "/e-", ephemeral=True, sequence=True)
    assert e == path + "/e-0000000003"
    assert zk.exists(e).ephemeralOwner == zk.client_id[0]
    # No prefix: the name is just the counter.
    assert zk.create(path + "/", sequence=True) == path + "/0000000004"
    assert zk.exists(path).cversion == 6
    assert sorted(zk.get_children(path)) == ["0000000004", "e-0000000003",
                                             "s-0000000000", "s-0000000002"]
    zk.create(path + "/big")
    for i in range(3):
        zk.create(path + "/big/x")
        zk.delete(path + "/big/x")
    assert zk.exists(path + "/big").cversion == 6
    assert zk.create(path + "/big/q", sequence=True) == path + "/big/q0000000003"


def test_large_values(zk, fresh, backend, path):
    big = bytes(range(256)) * 4000  # 1,024,000 bytes
    zk.create(path, big)
    data, st = zk.get(path)
    assert data == big and st.dataLength == len(big)
    near = b"\x5a" * (1024 * 1024 - 1024)
    st = zk.set(path, near)
    assert st.dataLength == len(near)
    assert zk.get(path)[0] == near
    # Read back through every server.
    for a in backend.addrs:
        c = fresh(a)
        c.sync(path)
        assert c.get(path)[0] == near


def test_oversized_request(zk, fresh, path):
    """A request over jute.maxbuffer (1 MiB - 1) + 1 KiB closes the
    connection in both (the client sees ConnectionLoss); nothing is
    written. The largest create that fits leaves len(path) + 57 bytes of
    request (header, path, ACL, flags) around the data."""
    c = fresh()
    most = 1048528 - len(path)
    c.create(path, b"m" * most)
    assert c.get(path)[1].dataLength == most
    c.delete(path)
    with pytest.raises(ConnectionLoss):
        c.create(path, b"m" * (most + 1))
    with pytest.raises(ConnectionLoss):
        c.create(path, b"m" * (1024 * 1024))
    kx.wait_for(lambda: c.connected, 15, "the client to reconnect")
    c.sync(path)
    assert c.exists(path) is None
    c.create(path, b"small")
    with pytest.raises(ConnectionLoss):
        c.set(path, b"m" * (1024 * 1024))
    kx.wait_for(lambda: c.connected, 15, "the client to reconnect")
    assert c.get(path)[0] == b"small"


def test_container_nodes(zk, path):
    p, st = kx.create_container(zk, path)
    assert p == path
    # ZooKeeper keeps a container's kind in ephemeralOwner internally but
    # shows clients 0.
    assert st.ephemeralOwner == 0 and zk.exists(path).ephemeralOwner == 0
    # A container that never had a child is kept.
    time.sleep(1.5)
    assert zk.exists(path) is not None
    zk.create(path + "/c", b"x")
    time.sleep(1.5)
    assert zk.exists(path) is not None  # not empty
    zk.delete(path + "/c")
    kx.wait_for(lambda: zk.exists(path) is None, 15, "empty container to be deleted")


def test_ttl_nodes(zk, path):
    zk.create(path)
    p, st = kx.create_ttl(zk, path + "/t", 1000, b"ttl")
    assert p == path + "/t"
    assert st.ephemeralOwner == 0  # the TTL is not shown to clients
    s, st2 = kx.create_ttl(zk, path + "/s-", 60000, sequential=True)
    assert s == path + "/s-0000000001"
    with pytest.raises(BadArgumentsError):
        kx.create_ttl(zk, path + "/zero", 0)
    with pytest.raises(BadArgumentsError):
        kx.call(zk, kx.CreateTTL(path + "/notttl", b"", OPEN_ACL_UNSAFE, 0, 1000))
    # A TTL node with a child stays; once empty and idle past its TTL it goes.
    kx.create_ttl(zk, path + "/tc", 1000)
    zk.create(path + "/tc/child")
    kx.wait_for(lambda: zk.exists(path + "/t") is None, 15, "expired TTL node to be deleted")
    assert zk.exists(path + "/tc") is not None
    assert zk.exists(s) is not None  # TTL not reached
    zk.delete(path + "/tc/child")
    kx.wait_for(lambda: zk.exists(path + "/tc") is None, 15, "emptied TTL node to be deleted")


# -- multi -------------------------------------------------------------------

def _kinds(results):
    return [type(r).__name__ if isinstance(r, Exception) else r for r in results]


def test_multi_commit(zk, path):
    zk.create(path, b"0")
    t = zk.transaction()
    t.create(path + "/a", b"a")
    t.create(path + "/s-", sequence=True)
    t.set_data(path, b"1", version=0)
    t.check(path, 1)
    t.delete(path + "/a")
    res = t.commit()
    assert len(res) == 5
    assert res[0] == path + "/a"
    assert res[1] == path + "/s-0000000001"
    assert res[2].version == 1 and res[2].dataLength == 1
    assert res[3] is True and res[4] is True
    assert zk.get_children(path) == ["s-0000000001"]
    st = zk.exists(path)
    assert (st.version, st.cversion) == (1, 3)
    # All ops of one multi share one zxid.
    assert st.mzxid == st.pzxid == res[2].mzxid


def test_multi_all_or_nothing(zk, path):
    zk.create(path, b"0")
    t = zk.transaction()
    t.create(path + "/a")
    t.set_data(path, b"x")
    t.delete(path + "/missing")
    t.create(path + "/b")
    t.check(path, 0)
    res = t.commit()
    assert _kinds(res) == ["RolledBackError", "RolledBackError", "NoNodeError",
                           "RuntimeInconsistency", "RuntimeInconsistency"]
    assert zk.get(path)[0] == b"0"
    assert zk.get_children(path) == []
    assert zk.exists(path).cversion == 0

    t = zk.transaction()
    t.create(path + "/a")
    t.check(path, 7)
    res = t.commit()
    assert _kinds(res) == ["RolledBackError", "BadVersionError"]
    assert zk.exists(path + "/a") is None

    # Errors that depend on earlier ops of the same multi.
    t = zk.transaction()
    t.create(path + "/a")
    t.create(path + "/a/b")
    t.delete(path + "/a")
    res = t.commit()
    assert _kinds(res) == ["RolledBackError", "RolledBackError", "NotEmptyError"]
    t = zk.transaction()
    t.create(path + "/a")
    t.create(path + "/a")
    res = t.commit()
    assert _kinds(res) == ["RolledBackError", "NodeExistsError"]
    t = zk.transaction()
    t.set_data(path, b"y", version=0)
    t.set_data(path, b"z", version=0)
    res = t.commit()
    assert _kinds(res) == ["RolledBackError", "BadVersionError"]
    assert zk.get(path) == (b"0", zk.exists(path))
    assert zk.exists(path).version == 0


# -- ACLs --------------------------------------------------------------------

def test_acl_world_and_digest(zk, fresh, backend, path):
    zk.create(path)
    acls, st = zk.get_acls(path)
    assert acls == OPEN_ACL_UNSAFE and st.aversion == 0
    digest = make_digest_acl("alice", "secret", all=True)
    zk.create(path + "/d", b"hidden", acl=[digest])
    zk.create(path + "/r", b"readonly", acl=READ_ACL_UNSAFE)

    anon = fresh()
    assert anon.exists(path + "/d") is not None  # exists checks no ACL
    with pytest.raises(NoAuthError):
        anon.get(path + "/d")
    with pytest.raises(NoAuthError):
        anon.set(path + "/d", b"x")
    with pytest.raises(NoAuthError):
        anon.get_children(path + "/d")
    with pytest.raises(NoAuthError):
        anon.create(path + "/d/c")
    with pytest.raises(NoAuthError):
        anon.set_acls(path + "/d", OPEN_ACL_UNSAFE)
    # getACL without READ/ADMIN is refused too.
    with pytest.raises(NoAuthError):
        anon.get_acls(path + "/d")
    assert anon.get(path + "/r")[0] == b"readonly"
    with pytest.raises(NoAuthError):
        anon.set(path + "/r", b"x")
    # Deleting needs DELETE on the parent, not on the node.
    anon.create(path + "/d2", acl=[make_digest_acl("alice", "secret", read=True)])
    anon.delete(path + "/d2")

    # Wrong password: add_auth succeeds, access is still refused.
    wrong = fresh(auth_data=[("digest", "alice:wrong")])
    with pytest.raises(NoAuthError):
        wrong.get(path + "/d")

    alice = fresh(auth_data=[("digest", "alice:secret")])
    assert alice.get(path + "/d")[0] == b"hidden"
    alice.set(path + "/d", b"mine")
    alice.create(path + "/d/c")
    acls, st = alice.get_acls(path + "/d")
    assert acls == [digest] and st.aversion == 0

    # setACL with versions.
    with pytest.raises(BadVersionError):
        alice.set_acls(path + "/d", OPEN_ACL_UNSAFE, version=1)
    st = alice.set_acls(path + "/d", [digest, ACL(Permissions.READ, Id("world", "anyone"))],
                        version=0)
    assert st.aversion == 1
    anon.sync(path)
    assert anon.get(path + "/d")[0] == b"mine"
    with pytest.raises(NoAuthError):
        anon.set(path + "/d", b"x")
    # Children of a node without DELETE for us cannot be deleted.
    with pytest.raises(NoAuthError):
        anon.delete(path + "/d/c")
    alice.delete(path + "/d/c")
    # CREATE but no DELETE on the parent: the child can be made, not deleted.
    zk.create(path + "/rc", acl=[make_acl("world", "anyone", read=True, create=True)])
    anon.create(path + "/rc/c")
    with pytest.raises(NoAuthError):
        anon.delete(path + "/rc/c")


def test_acl_auth_scheme_and_ip(zk, fresh, path):
    zk.create(path)
    # Without SASL even on the keel-sasl backend: "auth" expands to every
    # authenticated id of the session, a SASL one included.
    anon = fresh(sasl_options=None)
    with pytest.raises(InvalidACLError):
        anon.create(path + "/auth", acl=[ACL(Permissions.ALL, Id("auth", ""))])
    bob = fresh(auth_data=[("digest", "bob:pw")], sasl_options=None)
    bob.create(path + "/auth", b"b", acl=[ACL(Permissions.ALL, Id("auth", ""))])
    anon.sync(path)
    acls, _ = bob.get_acls(path + "/auth")
    assert acls == [ACL(Permissions.ALL, Id("digest", make_digest_acl_credential("bob", "pw")))]
    with pytest.raises(NoAuthError):
        anon.get(path + "/auth")

    zk.create(path + "/ip", b"i", acl=[make_acl("ip", "127.0.0.1", read=True)])
    anon.sync(path)
    assert anon.get(path + "/ip")[0] == b"i"
    with pytest.raises(NoAuthError):
        anon.set(path + "/ip", b"x")
    zk.create(path + "/net", b"n", acl=[make_acl("ip", "127.0.0.0/8", all=True)])
    anon.set(path + "/net", b"m")
    zk.create(path + "/other", b"o", acl=[make_acl("ip", "10.1.2.0/24", all=True)])
    anon.sync(path)
    with pytest.raises(NoAuthError):
        anon.get(path + "/other")


def test_acl_invalid(zk, path):
    zk.create(path)
    bad = [
        [ACL(Permissions.ALL, Id("nosuchscheme", "x"))],
        [ACL(Permissions.ALL, Id("digest", "nocolon"))],
        [ACL(Permissions.ALL, Id("ip", "300.1.1.1"))],
        [ACL(Permissions.ALL, Id("ip", "1.2.3.4/40"))],
        [ACL(Permissions.ALL, Id("world", "somebody"))],
        [ACL(Permissions.READ, Id("world", "anyone")), ACL(Permissions.ALL, Id("bad", "x"))],
    ]
    for acl in bad:
        with pytest.raises(InvalidACLError):
            zk.create(path + "/x", acl=acl)
        with pytest.raises(InvalidACLError):
            zk.set_acls(path, acl)
    with pytest.raises(InvalidACLError):
        zk.set_acls(path, [])  # (kazoo sends its default ACL for create(acl=[]))
    assert zk.exists(path + "/x") is None
    assert zk.get_acls(path) == (OPEN_ACL_UNSAFE, zk.exists(path))
    assert zk.exists(path).aversion == 0


def test_auth_failed_bad_scheme(backend, path):
    c = kx.KazooClient(hosts=backend.hosts, timeout=10.0)
    c.start(timeout=15)
    try:
        sid = c.client_id[0]
        with pytest.raises(AuthFailedError):
            c.add_auth("nosuchscheme", "whatever")
        # The server drops the connection after AuthFailed; kazoo forgets
        # the session (state AUTH_FAILED), then, being still started, opens a
        # new one. Which of the two we see is a race, in both backends.
        kx.wait_for(lambda: c.client_id is None or c.client_id[0] != sid, 10,
                    "the connection to be dropped")
    finally:
        c.stop()
        c.close()


# -- sync --------------------------------------------------------------------

def test_sync_then_read_elsewhere(fresh, backend, path):
    w = fresh(backend.addrs[0])
    readers = [fresh(a) for a in backend.addrs[1:]]
    w.create(path, b"0")
    for i in range(1, 21):
        w.set(path, str(i).encode())
        r = readers[i % 2]
        r.sync(path)
        got = int(r.get(path)[0])
        if backend.kind == "keel":
            assert got == i  # sync is a quorum barrier (ReadIndex): linearizable
        else:
            # ZooKeeper's sync is not a barrier its leader confirms with a
            # quorum (keel is deliberately stronger, DESIGN.md): a loaded
            # ZooKeeper 3.8 has served the previous value here.
            assert got <= i
