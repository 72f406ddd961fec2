"""Read-only mode: a server cut off from the quorum serves reads to the
clients that accept a read-only server (ZooKeeper's readonlymode.enabled,
on by default in keel; --no-read-only turns it off).

Modelled on kazoo's own TestReadOnlyMode (kazoo/tests/test_connection.py):
a `read_only=True` client on a three-server cluster whose two other servers
stop moves to CONNECTED_RO, reads, gets NotReadOnlyCallError on writes, and
is back read-write once the quorum returns.
"""
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KeeperState

from harness import four_letter


def stop_client(zk):
    try:
        zk.stop()
    finally:
        zk.close()


def writes_again(zk, path):
    """True once `path` could be set and the client is read-write."""
    try:
        zk.set(path, b"after")
        return zk.client_state == KeeperState.CONNECTED
    except Exception:  # noqa: BLE001 — retried until the caller's deadline
        return False


def test_read_only_client_is_served_by_a_server_cut_off_from_the_quorum(cluster_factory):
    c = cluster_factory(3)
    c.start()
    c.wait_leader()
    lone = c.servers[1]
    zk = KazooClient(hosts=c.connect_string([1, 2, 3]), randomize_hosts=False,
                     read_only=True, timeout=10.0)
    zk.start(timeout=15)
    ro = threading.Event()

    @zk.add_listener
    def listen(_state):
        if zk.client_state == KeeperState.CONNECTED_RO:
            ro.set()

    try:
        zk.create("/ro", b"before")
        session = zk.client_id[0]
        assert zk.client_state == KeeperState.CONNECTED
        c.servers[2].kill()
        c.servers[3].kill()
        assert ro.wait(30), "the client never became CONNECTED_RO"
        assert zk.client_state == KeeperState.CONNECTED_RO
        # Its own session, resumed read-only.
        assert zk.client_id[0] == session
        assert four_letter(lone.client_addr, "isro") == "ro"
        # Reads are served from the local state.
        assert zk.get("/ro")[0] == b"before"
        assert "ro" in zk.get_children("/")
        # Writes and sync are refused.
        with pytest.raises(NotReadOnlyCallError):
            zk.create("/fred")
        with pytest.raises(NotReadOnlyCallError):
            zk.set("/ro", b"after")
        with pytest.raises(NotReadOnlyCallError):
            zk.sync("/ro")
        # A client that does not accept a read-only server is refused.
        rw_only = KazooClient(hosts=lone.client_addr, timeout=4.0)
        try:
            with pytest.raises(KazooTimeoutError):
                rw_only.start(timeout=4)
        finally:
            stop_client(rw_only)
        # A new read-only client gets a local session (never committed).
        fresh = KazooClient(hosts=lone.client_addr, read_only=True, timeout=10.0)
        try:
            fresh.start(timeout=15)
            assert fresh.client_state == KeeperState.CONNECTED_RO
            assert fresh.client_id[0] >> 62 == 1
            assert fresh.get("/ro")[0] == b"before"
        finally:
            stop_client(fresh)
        # The quorum returns: the client is read-write again, same session.
        ro.clear()
        c.servers[2].start()
        c.servers[3].start()
        c.wait_leader(timeout=30)

        c.wait(lambda: writes_again(zk, "/ro"), timeout=60, what="the client writes again")
        assert zk.client_id[0] == session
        assert zk.get("/ro")[0] == b"after"
        assert four_letter(lone.client_addr, "isro") == "rw"
    finally:
        stop_client(zk)


def test_no_read_only_refuses_every_client_without_a_quorum(cluster_factory):
    c = cluster_factory(3, server_args=["--election-timeout-ms", "1000", "--heartbeat-ms",
                                        "100", "--no-read-only"])
    lone = c.servers[1]
    lone.start()  # the other two never start: no leader, ever
    # Past the point where read-only mode would take clients.
    c.wait(lambda: "no leader for" in lone.log(), what="server 1 gives up on a leader")
    assert four_letter(lone.client_addr, "isro") == "ro"
    zk = KazooClient(hosts=lone.client_addr, read_only=True, timeout=4.0)
    try:
        with pytest.raises(KazooTimeoutError):
            zk.start(timeout=6)
    finally:
        stop_client(zk)


ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"  # Debian's zookeeper package (compat suite)


def test_java_client_read_only(cluster_factory):
    """Apache ZooKeeper's Java client (zkCli.sh -r: canBeReadOnly) on a
    server that has no quorum: ConnectedReadOnly, reads, NotReadOnly."""
    import subprocess
    c = cluster_factory(3)
    lone = c.servers[1]
    lone.start()  # the other two never start
    c.wait(lambda: "no leader for" in lone.log(), what="server 1 gives up on a leader")
    p = subprocess.run([ZKCLI, "-r", "-server", lone.client_addr],
                       input=b"ls /\ncreate /x y\nls /\n", stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    out = p.stdout.decode(errors="replace").splitlines()
    assert "WatchedEvent state:ConnectedReadOnly type:None path:null" in out, out
    assert out.count("[zookeeper]") == 2, out
    assert "Not a read-only call: /x" in out, out


def test_read_only_on_a_partitioned_server(cluster_factory):
    """The same through a network partition (loopback proxies on the peer
    links, netproxy.py): the cut-off follower serves a read-only client
    while the majority goes on writing; once healed, the client is back
    read-write on the same server and sees the majority's writes."""
    from netproxy import Network
    c = cluster_factory(3)
    net = Network(c)
    try:
        net.start()
        leader = c.wait_leader()
        follower = next(s for s in c.servers.values() if s.id != leader.id)
        zk = KazooClient(hosts=follower.client_addr, read_only=True, timeout=30.0)
        zk.start(timeout=15)
        ro = threading.Event()
        zk.add_listener(lambda _s: ro.set() if zk.client_state == KeeperState.CONNECTED_RO
                        else None)
        try:
            zk.create("/cut", b"before")
            session = zk.client_id[0]
            net.isolate(follower.id)
            assert ro.wait(30), "the client never became CONNECTED_RO"
            assert zk.get("/cut")[0] == b"before"
            with pytest.raises(NotReadOnlyCallError):
                zk.set("/cut", b"during")
            # The majority goes on.
            others = [i for i in c.servers if i != follower.id]
            maj = KazooClient(hosts=c.connect_string(others), timeout=10.0)
            maj.start(timeout=30)
            try:
                maj.create("/majority", b"kept")
            finally:
                stop_client(maj)
            net.heal()

            c.wait(lambda: writes_again(zk, "/cut"), timeout=60,
                   what="the client writes again")
            assert zk.client_id[0] == session
            zk.sync("/")
            assert zk.get("/majority")[0] == b"kept"
        finally:
            stop_client(zk)
    finally:
        net.close()
