"""Network partitions between real servers (issue 5), made with loopback
proxies on every peer link (netproxy.py): a minority cannot commit, the
majority keeps going, and after healing everyone converges."""
import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from netproxy import Network


def connect(cluster, ids, timeout=5.0):
    zk = KazooClient(hosts=cluster.connect_string(ids), timeout=timeout)
    zk.start(timeout=timeout)
    return zk


def close(zk):
    try:
        zk.stop()
        zk.close()
    except Exception:  # noqa: BLE001
        pass


def test_minority_cannot_commit_and_heal_converges(cluster_factory):
    c = cluster_factory(5)
    net = Network(c)
    try:
        net.start()
        leader = c.wait_leader()
        zk = connect(c, list(c.servers))
        zk.create("/base", b"0")
        close(zk)

        # The old leader and one follower on the minority side.
        minority = [leader.id, next(i for i in c.servers if i != leader.id)]
        majority = [i for i in c.servers if i not in minority]
        # A session on the minority side, opened before the cut.
        zk_min = connect(c, [minority[1]])
        net.partition(minority, majority)

        # A write through the minority is never acknowledged.
        async_result = zk_min.create_async("/from-minority", b"lost")
        # The majority elects its own leader and commits.
        new = c.wait(lambda: next((s for s in c.live() if s.id in majority and
                                   s.mode() == "leader"), None), timeout=15,
                     what="a leader on the majority side")
        zk_maj = connect(c, majority)
        zk_maj.create("/from-majority", b"kept")
        close(zk_maj)
        # Check-quorum: the old leader steps down on its own.
        c.wait(lambda: c.servers[leader.id].mode() != "leader", timeout=10,
               what="isolated leader steps down")
        time.sleep(1.0)
        assert not (async_result.ready() and async_result.successful()), \
            "the minority acknowledged a write"
        term_new = new.status()["term"]

        net.heal()
        # Everyone converges on one leader and the same applied state.
        c.wait(lambda: len(c.leaders()) == 1 and all(s.mode() in ("leader", "follower")
                                                     for s in c.live()),
               timeout=20, what="one leader after healing")
        leader = c.wait_leader()

        def converged():
            commit = leader.status()["commit_index"]
            return all(s.status()["applied_index"] >= commit for s in c.live())

        c.wait(converged, timeout=20, what="every server applied the leader's commit")
        for sid in c.servers:
            zk = connect(c, [sid])
            zk.sync("/")
            assert zk.get("/from-majority")[0] == b"kept", sid
            assert zk.exists("/from-minority") is None, sid
            assert zk.get("/base")[0] == b"0"
            close(zk)
        assert leader.status()["term"] >= term_new
        try:
            close(zk_min)
        except Exception:  # noqa: BLE001
            pass
    finally:
        net.close()


def test_isolated_follower_rejoins(cluster_factory):
    c = cluster_factory(3)
    net = Network(c)
    try:
        net.start()
        leader = c.wait_leader()
        follower = next(s for s in c.servers.values() if s.id != leader.id)
        net.isolate(follower.id)
        others = [i for i in c.servers if i != follower.id]
        zk = connect(c, others)
        for i in range(100):
            zk.create("/p%03d" % i, b"v")
        close(zk)
        # Pre-vote: the isolated follower does not disturb the leader (its
        # term does not climb past the cluster's while cut off).
        time.sleep(3)
        assert c.servers[leader.id].mode() == "leader"
        term = leader.status()["term"]
        net.heal()
        c.wait(lambda: follower.status()["applied_index"] >= leader.status()["commit_index"],
               timeout=15, what="isolated follower catches up")
        assert leader.status()["term"] == term, "the rejoining follower forced an election"
        zk = connect(c, [follower.id])
        assert zk.exists("/p099") is not None
        close(zk)
    finally:
        net.close()


def test_clients_leave_a_server_cut_off_from_the_quorum(cluster_factory):
    """A server that knows no leader for twice the election timeout closes
    its clients' connections and refuses new ones (as a ZooKeeper server
    that loses its leader does): a client on it moves to a server in the
    quorum while its session lives, keeping its ephemeral node, instead of
    being held there with pings until the quorum expires it."""
    c = cluster_factory(3)
    net = Network(c)
    try:
        net.start()
        leader = c.wait_leader()
        follower = next(s for s in c.servers.values() if s.id != leader.id)
        order = [follower.id] + [i for i in c.servers if i != follower.id]
        zk = KazooClient(hosts=c.connect_string(order), timeout=10.0, randomize_hosts=False)
        zk.start(timeout=10)
        try:
            session = zk.client_id[0]
            zk.create("/owned", b"x", ephemeral=True)
            assert zk._connection._socket.getpeername()[1] == int(
                follower.client_addr.rsplit(":", 1)[1])
            net.isolate(follower.id)
            c.wait(lambda: "no leader for" in follower.log(), timeout=15,
                   what="the cut-off server gives up its clients")
            # The same session writes again through the quorum.
            def write_moved():
                try:
                    return zk.set("/owned", b"moved") is not None
                except KazooException:
                    return False
            c.wait(write_moved, timeout=15, what="the session writes through another server")
            assert zk.client_id[0] == session
            assert zk.get("/owned")[1].ephemeralOwner == session
            # A new client is refused by the cut-off server.
            lone = KazooClient(hosts=follower.client_addr, timeout=4.0)
            try:
                import pytest
                from kazoo.handlers.threading import KazooTimeoutError
                with pytest.raises(KazooTimeoutError):
                    lone.start(timeout=4)
            finally:
                lone.stop()
                lone.close()
            net.heal()
            c.wait(lambda: follower.mode() == "follower", timeout=15, what="rejoined")
        finally:
            close(zk)
    finally:
        net.close()
