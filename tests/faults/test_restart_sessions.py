"""Regression test for a bug the fault suite found: sessions must survive a
restart of the whole cluster.

Each server stamps the log entries it proposes with (its id, a request id)
and answers the waiting client when it applies an entry carrying its own
id and a request id it is waiting for. Request ids used to restart at 1 in
every process, so after a restart a server re-applying its old entries from
the log matched them to NEW requests with the same ids: a reconnecting
client waiting on a handshake barrier got the old entry's result as its
ConnectResponse (timeout 0: "session expired"), and a new write could get
the reply of an old one.

Three clients, each pinned to its own server (after another short session
on that server, so that the first request ids of every server belong to
entries of someone else), write so that every server's log holds entries it
proposed; then kill -9 of every server, restart, and every client must go
on with its own session (no SessionExpired, the same session id) and see
its own last write. Three rounds.
"""
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cluster import ProxiedCluster  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from kazoo.retry import KazooRetry  # noqa: E402

logging.getLogger("kazoo").setLevel(logging.CRITICAL)

ARGS = ["--election-timeout-ms", "1000", "--heartbeat-ms", "100", "--tick-ms", "500",
        "--min-session-timeout-ms", "1000"]


def client(hosts):
    return KazooClient(hosts=hosts, timeout=10, randomize_hosts=False,
                       connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=1.5,
                                                   max_delay=1.0))


def test_sessions_survive_whole_cluster_restart():
    c = ProxiedCluster(3, server_args=ARGS, keel=os.environ.get("KEEL"))
    zks = []
    try:
        c.start()
        c.wait_leader(30)
        for sid in sorted(c.servers):
            # Another session first, so that this server's first request
            # ids belong to someone else's entries.
            other = client(c.servers[sid].client_addr)
            other.start(timeout=30)
            other.create("/other%d" % sid, b"")
            other.stop()
            other.close()
        for sid in sorted(c.servers):
            zk = client(c.servers[sid].client_addr)  # only this server
            zk.start(timeout=30)
            zk.ensure_path("/r%d" % sid)
            zks.append(zk)
        expired = []
        for rnd in range(3):
            sessions = [zk.client_id[0] for zk in zks]
            for i, zk in enumerate(zks):
                for k in range(100):
                    zk.set("/r%d" % (i + 1), b"%d-%d" % (rnd, k))
            for s in c.servers.values():
                s.kill()
            time.sleep(0.5)
            for s in c.servers.values():
                s.start()
            for i, zk in enumerate(zks):
                deadline = time.monotonic() + 60
                while True:
                    try:
                        data, _ = zk.get("/r%d" % (i + 1))
                        break
                    except Exception as e:  # noqa: BLE001
                        if type(e).__name__ == "SessionExpiredError":
                            expired.append((rnd, i + 1, hex(sessions[i])))
                            break
                        assert time.monotonic() < deadline, "no answer in 60s: %r" % e
                        time.sleep(0.2)
                if expired and expired[-1][:2] == (rnd, i + 1):
                    continue
                assert data == b"%d-99" % rnd
                assert zk.client_id[0] == sessions[i]
        assert not expired, "sessions reported expired after a restart " \
            "(round, server, session): %s" % expired
    finally:
        for zk in zks:
            try:
                zk.stop()
                zk.close()
            except Exception:  # noqa: BLE001
                pass
        c.cleanup()
