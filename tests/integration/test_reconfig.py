"""Dynamic reconfiguration through the ZooKeeper API (opcode 16) and
/zookeeper/config, modelled on kazoo's own TestReconfig
(kazoo/tests/test_client.py): as `super` (password `test`) add an observer
(a keel learner) and remove it; NoAuth without super; BadArguments on
garbage; BadVersion on a future from_config. Also: getConfig reads the
configuration in ZooKeeper's format, and a watch on /zookeeper/config
fires when it changes.
"""
import socket
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadArgumentsError, BadVersionError, NoAuthError

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # super:test


def reconfig_cluster(cluster_factory):
    c = cluster_factory(3, server_args=["--election-timeout-ms", "1000", "--heartbeat-ms",
                                        "100", "--super-digest", SUPER_DIGEST])
    c.start()
    leader = c.wait_leader()
    follower = next(s for s in c.servers.values() if s.id != leader.id)
    return c, leader, follower


def client(addr, **kw):
    zk = KazooClient(hosts=addr, timeout=10.0, **kw)
    zk.start(timeout=15)
    return zk


def stop(zk):
    try:
        zk.stop()
    finally:
        zk.close()


def version_of(data):
    last = data.decode().split("\n")[-1]
    assert last.startswith("version=")
    return int(last.split("=")[1], base=16)


def free_port():
    # A port nothing listens on: the leader's dials to it are refused at once.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_get_config_shows_the_members_in_zookeeper_format(cluster_factory):
    c, leader, follower = reconfig_cluster(cluster_factory)
    zk = client(follower.client_addr)
    try:
        data, stat = zk.get("/zookeeper/config")
        lines = data.decode().split("\n")
        for sid, srv in c.servers.items():
            port = srv.peer_addr.rsplit(":", 1)[1]
            assert "server.%d=%s:%s:participant" % (sid, srv.peer_addr, port) in lines
        assert version_of(data) == stat.mzxid > 0
    finally:
        stop(zk)


def test_reconfig_needs_super_or_the_cluster_credential(cluster_factory):
    _c, _leader, follower = reconfig_cluster(cluster_factory)
    zk = client(follower.client_addr)
    try:
        with pytest.raises(NoAuthError):
            zk.reconfig(joining="server.99=0.0.0.0:1234:2345:observer;3456",
                        leaving=None, new_members=None)
        with pytest.raises(NoAuthError):
            zk.reconfig(joining=None, leaving="1", new_members=None)
        assert len(zk.get("/zookeeper/config")[0].decode().split("\n")) == 4  # nothing changed
    finally:
        stop(zk)


def test_add_and_remove_an_observer_as_super(cluster_factory):
    c, leader, follower = reconfig_cluster(cluster_factory)
    zk = client(follower.client_addr, auth_data=[("digest", "super:test")])
    try:
        changed = threading.Event()
        zk.get("/zookeeper/config", watch=lambda ev: changed.set())
        joining = "server.100=0.0.0.0:%d:%d:observer;0.0.0.0:%d" % (
            free_port(), free_port(), free_port())
        data, stat = zk.reconfig(joining=joining, leaving=None, new_members=None)
        assert joining.encode() in data
        assert version_of(data) == stat.mzxid
        assert changed.wait(10), "the watch on /zookeeper/config did not fire"
        members = {m["id"]: m for m in leader.status()["members"]}
        assert members[100]["role"] == "learner"

        data, _stat = zk.reconfig(joining=None, leaving="100", new_members=None)
        assert joining.encode() not in data
        assert b"server.100=" not in data
        c.wait(lambda: 100 not in {m["id"] for m in leader.status()["members"]},
               what="server 100 leaves the membership")

        # A config number in the future: BadVersion.
        curver = version_of(data)
        with pytest.raises(BadVersionError):
            zk.reconfig(joining=joining, leaving=None, new_members=None,
                        from_config=curver + 1)
        # The current one is accepted (non-incremental form: the same
        # members plus the observer), then the observer goes again.
        members_now = [l for l in data.decode().split("\n") if l.startswith("server.")]
        data, _ = zk.reconfig(joining=None, leaving=None,
                              new_members=",".join(members_now + [joining]),
                              from_config=curver)
        assert joining.encode() in data
        data, _ = zk.reconfig(joining=None, leaving=None, new_members=",".join(members_now))
        assert b"server.100=" not in data
        # Every server serves the same configuration.
        for srv in c.servers.values():
            other = client(srv.client_addr)
            try:
                c.wait(lambda: other.get("/zookeeper/config")[0] == data, what="server %d's config" % srv.id)
            finally:
                stop(other)
    finally:
        stop(zk)


def test_reconfig_bad_input(cluster_factory):
    _c, _leader, follower = reconfig_cluster(cluster_factory)
    zk = client(follower.client_addr, auth_data=[("digest", "super:test")])
    try:
        for joining, leaving, new_members in [
                ("some thing", None, None),
                ("server.100=0.0.0.0:notaport:2:observer", None, None),
                ("server.100=0.0.0.0:1:2:referee", None, None),
                (None, "77", None),                    # not a member
                (None, "one", None),
                ("server.5=127.0.0.1:1:2", None, "server.5=127.0.0.1:1:2"),  # both forms
                (None, None, None),                    # nothing to do
        ]:
            with pytest.raises(BadArgumentsError):
                zk.reconfig(joining=joining, leaving=leaving, new_members=new_members)
    finally:
        stop(zk)


ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"  # Debian's zookeeper package (compat suite)


def test_zkcli_reconfig_add_and_remove(cluster_factory):
    """Apache ZooKeeper's own shell: `reconfig -add/-remove` and `config`."""
    import subprocess
    c, _leader, follower = reconfig_cluster(cluster_factory)
    observer = "server.100=127.0.0.1:%d:%d:observer;127.0.0.1:%d" % (
        free_port(), free_port(), free_port())
    script = ("addauth digest super:test\nreconfig -add %s\nreconfig -remove 100\nconfig\n"
              % observer)
    p = subprocess.run([ZKCLI, "-server", follower.client_addr], input=script.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = [ln for ln in p.stdout.decode(errors="replace").splitlines()
           if ln.startswith(("server.", "version=", "Committed"))]
    members = ["server.%d=%s:%s:participant" % (sid, s.peer_addr, s.peer_addr.rsplit(":", 1)[1])
               for sid, s in sorted(c.servers.items())]
    assert out[0] == "Committed new configuration:", out
    assert out[1:5] == members + [observer], out
    added = int(out[5].split("=")[1], 16)
    assert out[6] == "Committed new configuration:", out
    assert out[7:10] == members, out
    removed = int(out[10].split("=")[1], 16)
    assert removed > added
    # `config` reads the same configuration back.
    assert out[11:] == members + ["version=%x" % removed], out


def test_a_participant_that_never_comes_is_refused(cluster_factory):
    """A new voter that is not running never catches up: after the step's
    deadline (30 s) the reconfig answers NewConfigNoQuorum, as ZooKeeper
    does when the new servers are not there, and the learner keel added
    for it is taken back."""
    from kazoo.exceptions import NewConfigNoQuorumError
    c, leader, follower = reconfig_cluster(cluster_factory)
    zk = client(follower.client_addr, auth_data=[("digest", "super:test")])
    try:
        joining = "server.50=127.0.0.1:%d:%d:participant" % (free_port(), free_port())
        with pytest.raises(NewConfigNoQuorumError):
            zk.reconfig(joining=joining, leaving=None, new_members=None)
        c.wait(lambda: 50 not in {m["id"] for m in leader.status()["members"]}, timeout=30,
               what="the learner for server 50 is taken back")
        # This server's copy follows (it may apply the removal a little later).
        c.wait(lambda: b"server.50=" not in zk.get("/zookeeper/config")[0],
               what="/zookeeper/config without server 50")
    finally:
        stop(zk)
