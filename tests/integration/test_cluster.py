"""Real `keel server` processes on loopback: elections, failover, pauses,
restarts, membership changes and catching up by snapshot (issue 5)."""
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from kazoo.retry import KazooRetry

from harness import admin_call


def client(cluster, ids=None, timeout=10.0):
    zk = KazooClient(hosts=cluster.connect_string(ids), timeout=timeout,
                     connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5))
    zk.start(timeout=timeout)
    return zk


def write_until_ok(cluster, path, data, ids, deadline_s):
    """Creates `path` through the given servers, retrying until it is
    acknowledged; returns the time it took."""
    t0 = time.time()
    last = None
    while time.time() - t0 < deadline_s:
        zk = None
        try:
            zk = KazooClient(hosts=cluster.connect_string(ids), timeout=2.0)
            zk.start(timeout=2.0)
            try:
                zk.create(path, data)
            except NodeExistsError:
                pass
            return time.time() - t0
        except Exception as e:  # noqa: BLE001 - any failure is retried
            last = e
            time.sleep(0.02)
        finally:
            if zk is not None:
                try:
                    zk.stop()
                    zk.close()
                except Exception:  # noqa: BLE001
                    pass
    raise AssertionError("no acknowledged write within %.1fs: %r" % (deadline_s, last))


def roles(cluster):
    return {s.id: s.mode() for s in cluster.live()}


@pytest.mark.parametrize("size", [3, 5])
def test_exactly_one_leader(cluster_factory, size):
    c = cluster_factory(size)
    c.start()
    leader = c.wait_leader(timeout=15)
    # Stable: the same single leader a little later, everyone else follows.
    time.sleep(1.5)
    r = roles(c)
    assert list(r.values()).count("leader") == 1, r
    assert r[leader.id] == "leader"
    assert all(m == "follower" for sid, m in r.items() if sid != leader.id), r
    st = leader.status()
    assert st["role"] == "leader" and st["leader"] == leader.id
    assert len([m for m in st["members"] if m["role"] == "voter"]) == size
    # srvr carries a zxid line as ZooKeeper's does.
    assert "Zxid: 0x" in leader.srvr()


def test_kill_leader_new_leader_and_write_within_3s(cluster_factory):
    c = cluster_factory(3)
    c.start()
    old = c.wait_leader()
    zk = client(c)
    zk.create("/before", b"1")
    zk.stop()
    zk.close()
    old.kill()
    t0 = time.time()
    others = [s.id for s in c.servers.values() if s.id != old.id]
    took = write_until_ok(c, "/after-failover", b"2", others, deadline_s=10)
    new = c.wait_leader(timeout=5)
    elapsed = time.time() - t0
    print("failover: first acknowledged write %.3fs after kill -9 of leader %d "
          "(new leader %d)" % (took, old.id, new.id))
    assert new.id != old.id
    assert took <= 3.0, "failover took %.2fs" % took
    assert elapsed < 10
    # The old leader restarts and rejoins as a follower with all data.
    old.start()
    c.wait(lambda: old.mode() == "follower", timeout=10, what="old leader rejoins as follower")
    zk = client(c, ids=[old.id])
    zk.sync("/")
    assert zk.get("/before")[0] == b"1"
    assert zk.get("/after-failover")[0] == b"2"
    zk.stop()
    zk.close()


def test_paused_leader_steps_down(cluster_factory):
    c = cluster_factory(3)
    c.start()
    old = c.wait_leader()
    term_before = old.status()["term"]
    old.pause()
    # The others elect a new leader once the election timeout passes.
    new = c.wait_leader(timeout=10, exclude=(old.id,))
    assert new.id != old.id
    new_term = new.status()["term"]
    assert new_term > term_before
    others = [s.id for s in c.servers.values() if s.id != old.id]
    write_until_ok(c, "/during-pause", b"x", others, deadline_s=10)
    old.resume()
    # The old leader learns the newer term and follows; at no point do two
    # servers lead in the same term.
    c.wait(lambda: old.mode() == "follower", timeout=10, what="old leader steps down")
    st = {s.id: s.status() for s in c.live()}
    leaders = [(v["term"], sid) for sid, v in st.items() if v["role"] == "leader"]
    assert len(leaders) == 1, st
    assert all(v["term"] >= new_term for v in st.values())
    zk = client(c, ids=[old.id])
    zk.sync("/")
    assert zk.exists("/during-pause") is not None
    zk.stop()
    zk.close()


def test_no_two_leaders_per_term_under_repeated_pauses(cluster_factory):
    """Pause the leader several times; collect (term, leader) from every
    server's status each round: a term never has two different leaders."""
    c = cluster_factory(3)
    c.start()
    seen = {}
    for _ in range(4):
        leader = c.wait_leader(timeout=15)
        leader.pause()
        time.sleep(1.5)
        for s in c.live():
            try:
                st = s.status()
            except (OSError, AssertionError):
                continue
            if st["role"] == "leader":
                prev = seen.setdefault(st["term"], st["id"])
                assert prev == st["id"], "two leaders in term %d" % st["term"]
        leader.resume()
        c.wait(lambda: len(c.leaders()) == 1, timeout=10, what="one leader")
        for s in c.live():
            st = s.status()
            if st["role"] == "leader":
                prev = seen.setdefault(st["term"], st["id"])
                assert prev == st["id"], "two leaders in term %d" % st["term"]
    assert len(seen) >= 2


def members(leader):
    return {m["id"]: m["role"] for m in leader.status()["members"]}


def test_membership_grow_shrink_replace_remove_leader(cluster_factory):
    c = cluster_factory(3)
    c.start()
    leader = c.wait_leader()
    zk = client(c)
    for i in range(50):
        zk.create("/m%d" % i, b"v")
    zk.stop()
    zk.close()
    # Grow 3 -> 5: new servers start empty with --join, then `members add`.
    for sid in (4, 5):
        s = c.add_server(sid)
        s.start(join=True)
        err, msg, _ = c.admin(leader.client_addr, 2,
                                 bytes([1]) + sid.to_bytes(8, "big") +
                                 len(s.peer_addr).to_bytes(2, "big") + s.peer_addr.encode(),
                                 timeout=60)
        assert err == 0, msg
    leader = c.wait_leader()
    assert members(leader) == {1: "voter", 2: "voter", 3: "voter", 4: "voter", 5: "voter"}
    zk = client(c, ids=[5])
    zk.sync("/")
    assert len([ch for ch in zk.get_children("/") if ch.startswith("m")]) == 50
    zk.stop()
    zk.close()

    # Shrink 5 -> 3 by removing two followers.
    for sid in [s for s in (4, 5)]:
        leader = c.wait_leader()
        err, msg, _ = c.admin(leader.client_addr, 2,
                                 bytes([4]) + sid.to_bytes(8, "big") + b"\x00\x00",
                                 timeout=30)
        assert err == 0, msg
        c.servers[sid].stop()
    leader = c.wait_leader()
    assert set(members(leader)) == {1, 2, 3}

    # Replace a member whose data dir was wiped: remove it, wipe, rejoin.
    victim = next(s for s in c.servers.values() if s.id != leader.id and s.id <= 3)
    victim.kill()
    err, msg, _ = c.admin(leader.client_addr, 2,
                             bytes([4]) + victim.id.to_bytes(8, "big") + b"\x00\x00", timeout=30)
    assert err == 0, msg
    victim.wipe()
    victim.start(join=True)
    err, msg, _ = c.admin(leader.client_addr, 2,
                             bytes([1]) + victim.id.to_bytes(8, "big") +
                             len(victim.peer_addr).to_bytes(2, "big") + victim.peer_addr.encode(),
                             timeout=60)
    assert err == 0, msg
    zk = client(c, ids=[victim.id])
    zk.sync("/")
    assert zk.exists("/m49") is not None
    zk.stop()
    zk.close()

    # Remove the leader itself: it steps down, the rest elect a leader and
    # keep committing.
    leader = c.wait_leader()
    err, msg, _ = c.admin(leader.client_addr, 2,
                             bytes([4]) + leader.id.to_bytes(8, "big") + b"\x00\x00", timeout=30)
    assert err == 0, msg
    rest = [s.id for s in c.live() if s.id != leader.id and s.id <= 3]
    new = c.wait_leader(timeout=15, exclude=(leader.id,))
    assert new.id in rest
    write_until_ok(c, "/after-leader-removed", b"1", rest, deadline_s=10)
    assert set(members(new)) == set(rest)


def test_lagging_follower_catches_up_by_snapshot(cluster_factory):
    c = cluster_factory(3, server_args=["--snapshot-entries", "500", "--snapshot-trailing", "50"])
    c.start()
    leader = c.wait_leader()
    lagger = next(s for s in c.servers.values() if s.id != leader.id)
    lagger.stop()
    up = [s.id for s in c.servers.values() if s.id != lagger.id]
    zk = client(c, ids=up)
    for i in range(1500):
        zk.create("/s%04d" % i, b"x" * 20)
    zk.stop()
    zk.close()
    leader = c.wait_leader()
    c.wait(lambda: leader.status()["snapshot_index"] > 0, timeout=20, what="leader snapshot")
    lagger.start()
    c.wait(lambda: lagger.status()["applied_index"] >= leader.status()["commit_index"] - 5,
           timeout=30, what="lagging follower caught up")
    assert "installed" in lagger.log() or "installing snapshot" in lagger.log()
    zk = client(c, ids=[lagger.id])
    assert len(zk.get_children("/")) >= 1500
    assert zk.get("/s1499")[0] == b"x" * 20
    zk.stop()
    zk.close()


def test_graceful_shutdown_and_restart_keeps_data(cluster_factory):
    c = cluster_factory(3)
    c.start()
    c.wait_leader()
    zk = client(c)
    zk.create("/persist", b"yes")
    zk.stop()
    zk.close()
    for s in c.servers.values():
        assert s.stop() == 0
        assert "shutting down" in s.log()
    c.start()
    c.wait_leader()
    zk = client(c)
    assert zk.get("/persist")[0] == b"yes"
    zk.stop()
    zk.close()
