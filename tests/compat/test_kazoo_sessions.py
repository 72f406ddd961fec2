"""kazoo against keel and ZooKeeper: sessions (ephemerals, reconnect, expiry,
moving to another server, passwords) and watches of every kind (one-shot,
persistent, recursive, removeWatches, setWatches after a reconnect).

A client that must lose its connection talks to one server through a
LinkProxy (tests/integration/netproxy.py): cutting it black-holes the
connection like a network partition; healing it closes the client's socket
so that the client reconnects at once."""
import threading
import time

import pytest
from kazoo.client import KazooState
from kazoo.exceptions import NoNodeError
from netproxy import LinkProxy

import kazoo_ext as kx
from kazoo_ext import CHANGED, CHILD, CREATED, DELETED


@pytest.fixture
def proxy(backend):
    """A proxy to a follower's client port (killing no server)."""
    proxies = []

    def make(i=None):
        if i is None:
            lead = backend.leader_index()
            i = next(j for j in range(3) if j != lead)
        port = int(backend.addrs[i].rsplit(":", 1)[1])
        p = LinkProxy(port)
        p.hosts = "127.0.0.1:%d" % p.port
        proxies.append(p)
        return p
    yield make
    for p in proxies:
        p.close()


class States:
    def __init__(self, c):
        self.seen = []
        self.cv = threading.Condition()
        c.add_listener(self._on)

    def _on(self, state):
        with self.cv:
            self.seen.append(state)
            self.cv.notify_all()

    def wait(self, state, after=0, timeout=20):
        """Waits for `state` at index `after` or later; returns the index
        just past it."""
        with self.cv:
            ok = self.cv.wait_for(lambda: state in self.seen[after:], timeout)
            assert ok, "no %s after %r: %r" % (state, self.seen[:after], self.seen)
            return self.seen.index(state, after) + 1


def bounce(p, states):
    """Drops the client's connection and waits until it is back."""
    n = len(states.seen)
    p.set_cut(True)
    p.set_cut(False)
    n = states.wait(KazooState.SUSPENDED, n)
    states.wait(KazooState.CONNECTED, n)


# -- sessions ----------------------------------------------------------------

def test_ephemeral_removed_on_close(zk, fresh, path):
    c = fresh()
    c.create(path, b"e", ephemeral=True)
    zk.sync(path)
    assert zk.exists(path).ephemeralOwner == c.client_id[0]
    seen = []
    ev = threading.Event()
    zk.exists(path, watch=lambda e: (seen.append(e.type), ev.set()))
    c.stop()
    c.close()
    # closeSession is committed before its reply: the node is gone already.
    zk.sync(path)
    assert zk.exists(path) is None
    assert ev.wait(5) and seen == ["DELETED"]


def test_ephemeral_survives_reconnect(zk, proxy, fresh, path):
    p = proxy()
    c = fresh(p.hosts)
    st = States(c)
    sid = c.client_id
    c.create(path, ephemeral=True)
    bounce(p, st)
    assert c.client_id == sid
    assert c.exists(path).ephemeralOwner == sid[0]
    zk.sync(path)
    assert zk.exists(path).ephemeralOwner == sid[0]
    c.set(path, b"after")
    zk.sync(path)
    assert zk.get(path)[0] == b"after"


def test_session_moves_when_its_server_dies(backend, zk, fresh, path):
    lead = backend.leader_index()
    i = next(j for j in range(3) if j != lead)
    order = [backend.addrs[i]] + [a for j, a in enumerate(backend.addrs) if j != i]
    c = fresh(",".join(order), randomize_hosts=False)
    st = States(c)
    assert c._connection._socket.getpeername()[1] == int(backend.addrs[i].rsplit(":", 1)[1])
    sid = c.client_id
    c.create(path, b"mine", ephemeral=True)
    backend.kill(i)
    try:
        n = st.wait(KazooState.SUSPENDED)
        st.wait(KazooState.CONNECTED, n)
        assert c.client_id == sid
        port = c._connection._socket.getpeername()[1]
        assert "127.0.0.1:%d" % port != backend.addrs[i]
        assert c.exists(path).ephemeralOwner == sid[0]
        c.set(path, b"moved")
        zk.sync(path)
        data, stat = zk.get(path)
        assert data == b"moved" and stat.ephemeralOwner == sid[0]
    finally:
        backend.restart(i)


def test_session_expiry(zk, proxy, fresh, path):
    p = proxy()
    c = fresh(p.hosts, timeout=2.0)
    st = States(c)
    old = c.client_id
    c.create(path, ephemeral=True)
    # `zk` may be on another server, which serves reads from what it has
    # applied (both backends): see the ephemeral there before the cut, or a
    # read that lags the create looks like an expiry that came too soon.
    zk.sync(path)
    assert zk.exists(path) is not None
    p.set_cut(True)
    # The servers expire the session by themselves (2 s, and a few ticks).
    t0 = time.time()
    kx.wait_for(lambda: zk.exists(path) is None, 15, "the ephemeral of the expired session to go")
    assert time.time() - t0 > 1.0  # not before the session timeout
    p.set_cut(False)
    st.wait(KazooState.LOST)
    # kazoo then opens a new session on its own.
    kx.wait_for(lambda: c.connected and c.client_id and c.client_id[0] != old[0], 15,
                "a new session")
    assert c.exists(path) is None


def test_session_password(backend, zk, proxy, fresh, path):
    # c goes through a proxy that is cut before `good` takes the session
    # over: otherwise c reconnects and takes it back, and the two clients
    # trade the session (both servers drop the older connection).
    # The wrong password is tried on the other servers only: ZooKeeper drops
    # a server's connections of a session when a reconnect for it arrives,
    # before it checks the password, so on c's own server the attempt
    # would also bounce c.
    i = next(j for j in range(3) if j != backend.leader_index())
    p = proxy(i)
    c = fresh(p.hosts)
    sid, pwd = c.client_id
    c.create(path, ephemeral=True)
    bad_pwd = bytes(b ^ 0xFF for b in pwd)
    others = ",".join(a for j, a in enumerate(backend.addrs) if j != i)
    bad = kx.KazooClient(hosts=others, client_id=(sid, bad_pwd), timeout=10.0)
    bst = States(bad)
    try:
        bad.start(timeout=15)
        # The server refuses the session (as expired); kazoo then starts a
        # session of its own.
        assert bst.seen == [KazooState.CONNECTED]
        assert bad.client_id[0] != sid
    finally:
        bad.stop()
        bad.close()
    assert c.client_id == (sid, pwd) and c.exists(path).ephemeralOwner == sid
    # The right password takes the session over; closing it there removes
    # the ephemeral.
    p.set_cut(True)
    good = kx.KazooClient(hosts=backend.hosts, client_id=(sid, pwd), timeout=10.0)
    good.start(timeout=15)
    assert good.client_id[0] == sid
    good.sync(path)
    assert good.exists(path).ephemeralOwner == sid
    good.stop()
    good.close()
    kx.wait_for(lambda: zk.exists(path) is None, 10, "ephemeral of the closed session gone")
    # Heal the link: c's black-holed socket is closed, so closing c after
    # the test does not wait out its read timeout for an answer to its
    # close request (some 6 s per backend).
    p.set_cut(False)


# -- watches -----------------------------------------------------------------

def test_one_shot_watches_fire_once(zk, fresh, path):
    w = fresh()
    ev = kx.RawEvents(w)
    zk.create(path, b"0")
    w.sync(path)
    cbs = []
    w.get(path, watch=lambda e: cbs.append(("data", e.type, e.path)))
    w.exists(path, watch=lambda e: cbs.append(("exists", e.type, e.path)))
    w.exists(path + "/n", watch=lambda e: cbs.append(("new", e.type, e.path)))
    w.get_children(path, watch=lambda e: cbs.append(("child", e.type, e.path)))
    zk.set(path, b"1")
    zk.set(path, b"2")
    zk.create(path + "/n")
    zk.create(path + "/m")
    zk.delete(path + "/n")
    # One event per kind of watch and connection, the first change only.
    assert ev.drain() == [(CHANGED, path), (CREATED, path + "/n"), (CHILD, path)]
    assert sorted(cbs) == sorted([("data", "CHANGED", path), ("exists", "CHANGED", path),
                                  ("new", "CREATED", path + "/n"), ("child", "CHILD", path)])

    # A delete fires data and child watches on the node as one NodeDeleted,
    # and the parent's child watch.
    w.sync(path)
    w.get(path + "/m", watch=lambda e: None)
    w.get_children(path + "/m", watch=lambda e: None)
    w.get_children(path, watch=lambda e: None)
    zk.delete(path + "/m")
    got = ev.drain()
    assert sorted(got) == sorted([(DELETED, path + "/m"), (CHILD, path)])
    # setData on a node with only a child watch fires nothing.
    w.get_children(path, watch=lambda e: None)
    zk.set(path, b"3")
    assert ev.drain() == []
    zk.create(path + "/z")
    assert ev.drain() == [(CHILD, path)]
    # exists() on a missing node, then create + delete: Created only.
    w.exists(path + "/q", watch=lambda e: None)
    zk.create(path + "/q")
    zk.delete(path + "/q")
    assert ev.drain() == [(CREATED, path + "/q")]


def test_persistent_watches(zk, fresh, path):
    w = fresh()
    ev = kx.RawEvents(w)
    zk.create(path + "/p", makepath=True)
    zk.create(path + "/r")
    w.sync(path)
    assert kx.call(w, kx.AddWatch(path + "/p", kx.PERSISTENT)) is True
    assert kx.call(w, kx.AddWatch(path + "/r", kx.PERSISTENT_RECURSIVE)) is True
    zk.set(path + "/p", b"1")
    zk.set(path + "/p", b"2")
    zk.create(path + "/p/c")
    zk.create(path + "/p/c/deep")
    zk.set(path + "/p/c", b"x")
    zk.delete(path + "/p/c/deep")
    zk.delete(path + "/p/c")
    zk.delete(path + "/p")
    zk.create(path + "/p")
    assert ev.drain() == [(CHANGED, path + "/p"), (CHANGED, path + "/p"),
                          (CHILD, path + "/p"), (CHILD, path + "/p"),
                          (DELETED, path + "/p"), (CREATED, path + "/p")]
    zk.create(path + "/r/a")
    zk.set(path + "/r/a", b"1")
    zk.create(path + "/r/a/b")
    zk.set(path + "/r", b"r")
    zk.delete(path + "/r/a/b")
    t = zk.transaction()
    t.create(path + "/r/m1")
    t.set_data(path + "/r/a", b"2")
    t.commit()
    assert ev.drain() == [(CREATED, path + "/r/a"), (CHANGED, path + "/r/a"),
                          (CREATED, path + "/r/a/b"), (CHANGED, path + "/r"),
                          (DELETED, path + "/r/a/b"), (CREATED, path + "/r/m1"),
                          (CHANGED, path + "/r/a")]
    # removeWatches: persistent watches go with WatcherType.Any.
    assert kx.call(w, kx.RemoveWatches(path + "/p", kx.W_ANY)) is True
    assert kx.call(w, kx.RemoveWatches(path + "/r", kx.W_ANY)) is True
    zk.set(path + "/p", b"3")
    zk.create(path + "/r/a/c")
    assert ev.drain() == []
    with pytest.raises(kx.NoWatcherError):
        kx.call(w, kx.RemoveWatches(path + "/p", kx.W_ANY))


def test_remove_one_shot_watches(zk, fresh, path):
    w = fresh()
    ev = kx.RawEvents(w)
    zk.create(path)
    w.sync(path)
    w.get(path, watch=lambda e: None)
    w.get_children(path, watch=lambda e: None)
    with pytest.raises(kx.NoWatcherError):
        kx.call(w, kx.RemoveWatches(path + "/none", kx.W_DATA))
    assert kx.call(w, kx.RemoveWatches(path, kx.W_DATA)) is True
    with pytest.raises(kx.NoWatcherError):
        kx.call(w, kx.RemoveWatches(path, kx.W_DATA))
    zk.set(path, b"1")
    zk.create(path + "/c")
    assert ev.drain() == [(CHILD, path)]  # the child watch stayed
    w.get_children(path, watch=lambda e: None)
    assert kx.call(w, kx.RemoveWatches(path, kx.W_CHILDREN)) is True
    zk.create(path + "/d")
    assert ev.drain() == []


def test_set_watches_after_reconnect(zk, proxy, fresh, path):
    """kazoo 2.8 does not re-register watches itself (it drops its watcher
    callbacks on disconnect): the SetWatches request is sent by hand, with
    the zxid the client had seen before it lost its connection."""
    p = proxy()
    w = fresh(p.hosts)
    st = States(w)
    ev = kx.RawEvents(w)
    for n in ("a", "c", "d", "e"):
        zk.create("%s/%s" % (path, n), makepath=True)
    w.sync(path)
    w.get(path + "/a", watch=lambda e: None)
    w.exists(path + "/b", watch=lambda e: None)
    w.get_children(path + "/c", watch=lambda e: None)
    w.get(path + "/d", watch=lambda e: None)
    w.get(path + "/e", watch=lambda e: None)
    w.get_children(path + "/e", watch=lambda e: None)
    rel = w.last_zxid
    n = len(st.seen)
    p.set_cut(True)
    zk.set(path + "/a", b"1")
    zk.create(path + "/b")
    zk.create(path + "/c/x")
    zk.delete(path + "/d")
    p.set_cut(False)
    n = st.wait(KazooState.SUSPENDED, n)
    st.wait(KazooState.CONNECTED, n)
    assert ev.drain(0.3) == []  # nothing is watched on the new connection yet
    kx.call(w, kx.SetWatches(rel, [path + "/a", path + "/d", path + "/e"],
                             [path + "/b"], [path + "/c", path + "/e"]))
    got = ev.drain()
    assert sorted(got) == sorted([(CHANGED, path + "/a"), (CREATED, path + "/b"),
                                  (CHILD, path + "/c"), (DELETED, path + "/d")])
    # The unchanged node's watches are registered again and fire later.
    zk.set(path + "/e", b"1")
    zk.create(path + "/e/k")
    assert ev.drain() == [(CHANGED, path + "/e"), (CHILD, path + "/e")]
    # A SetWatches of a watch whose path is now gone: NodeDeleted at once.
    kx.call(w, kx.SetWatches(w.last_zxid, [path + "/gone"], [], []))
    assert ev.drain() == [(DELETED, path + "/gone")]
    with pytest.raises(NoNodeError):
        w.get(path + "/gone")
