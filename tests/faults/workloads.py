"""Client workloads of the fault suite: kazoo clients on threads, every
operation recorded in a History (see history.py for the record format and
checkers.py for what is checked).

Workers (each its own KazooClient, so its own session and connection,
with the servers listed starting at a different one so that clients spread
over leader and followers):

  RegisterWorker   read (sync + get), write (set), cas (set with the
                   version it last saw) on the registers of the current
                   generation; one session per server, ops spread over them
  SetWorker        creates unique children of the current set parent; now
                   and then sync + getChildren of it
  CounterWorker    get + set-with-version of value+1 on /counter
  SequentialWorker sequential creates under its own parent /seq/NAME
  SessionWorker    cycles of: open a session (half of them knowing one
                   server only), create ephemerals under /eph
                   (the creates prove the session alive), close it -- or,
                   every other cycle, a raw-protocol session that creates
                   ephemerals and then drops its socket without closing (a
                   crashed client: the session must expire)
  EphemeralReader  sync + getChildren of /eph
  Rotator          every `gen_seconds`, a new generation of registers and a
                   new set parent, so that each key's history stays short
                   enough for the linearizability search

Outcomes: a reply is "ok"; BadVersion (and NodeExists/NoNode) are certain
failures, "fail"; anything else -- ConnectionLoss, SessionExpired, our own
per-op timeout, unexpected exceptions -- is "unknown" for operations that
write, and "fail" for reads (a read that did not answer changed nothing and
is dropped by the checkers).
"""
import logging
import random
import socket
import struct
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, KazooException, NoNodeError,
                              NodeExistsError, SessionExpiredError)
from kazoo.protocol.serialization import Close, Connect, Create, ReplyHeader
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry
from kazoo.security import OPEN_ACL_UNSAFE

from history import FAIL, OK, UNKNOWN

# Certain failures. SessionExpiredError is one too: kazoo raises it only for
# requests it never sent (queued while reconnecting, or made after it saw
# the expiry); requests that were on the wire when a connection dropped get
# ConnectionLoss.
CERTAIN = (BadVersionError, NoNodeError, NodeExistsError, SessionExpiredError)

logging.getLogger("kazoo").setLevel(logging.CRITICAL)


class Config:
    def __init__(self, **kw):
        self.registers = 3          # keys per generation
        self.gen_seconds = 20.0
        self.reg_workers = 4
        self.set_workers = 2
        self.counter_workers = 2
        self.seq_workers = 2
        self.session_workers = 2
        self.op_timeout = 12.0      # our own bound on one request
        self.session_timeout = 10.0  # workers' kazoo sessions
        self.eph_session_timeout = 4.0
        self.think = 0.02           # pause between ops of one worker
        self.__dict__.update(kw)


class Run:
    """What workers share: the cluster, the history, the stop flag and the
    current generation."""

    def __init__(self, cluster, history, cfg, seed):
        self.cluster = cluster
        self.history = history
        self.cfg = cfg
        self.seed = seed
        self.stop = threading.Event()
        self.gen = None             # current generation number
        self.gen_lock = threading.Lock()
        self.errors = []            # unexpected exceptions in workers

    def reg_keys(self, gen):
        return ["/reg/g%d-%d" % (gen, k) for k in range(self.cfg.registers)]

    def set_parent(self, gen):
        return "/set/g%d" % gen


def new_client(hosts, timeout):
    retry = KazooRetry(max_tries=-1, delay=0.05, backoff=1.5, max_delay=1.0)
    return KazooClient(hosts=hosts, timeout=timeout, randomize_hosts=False,
                       connection_retry=retry, command_retry=None)


def _name(e):
    return type(e).__name__


class Worker(threading.Thread):
    def __init__(self, run, name, first_server):
        super().__init__(name=name, daemon=True)
        self.run_ = run
        self.h = run.history
        self.cfg = run.cfg
        self.wname = name
        self.first = first_server
        self.rng = random.Random("%s/%s" % (run.seed, name))
        self.zk = None
        self.n = 0

    def connect(self, timeout=None, hosts=None):
        hosts = hosts or self.run_.cluster.client_hosts(self.first)
        zk = new_client(hosts, timeout or self.cfg.session_timeout)
        while not self.run_.stop.is_set():
            try:
                zk.start(timeout=15)
                return zk
            except Exception:
                time.sleep(0.5)
        return zk

    def sid(self):
        return self.zk._session_id if self.zk is not None else None

    def zxid(self):
        return self.zk.last_zxid

    def wait(self, a):
        return a.get(timeout=self.cfg.op_timeout)

    def finish(self, op, fn, writes=True):
        """Runs fn() -> (result, mzxid) and completes `op` by its outcome.
        The op's sid is the session it ran on, None if that changed
        meanwhile (the zxid check is per session: kazoo starts a new
        session's last_zxid at 0)."""
        sid = self.sid()
        try:
            result, mzxid = fn()
        except SessionExpiredError as e:
            time.sleep(0.2)  # kazoo makes a new session meanwhile
            return self.h.complete(op, FAIL, err=_name(e))
        except CERTAIN as e:
            return self.h.complete(op, FAIL, err=_name(e), zxid=self.zxid())
        except Exception as e:  # noqa: BLE001 -- every other outcome is unknown
            return self.h.complete(op, UNKNOWN if writes else FAIL, err=_name(e))
        op["sid"] = sid if self.sid() == sid else None
        return self.h.complete(op, OK, result, zxid=self.zxid(), mzxid=mzxid)

    def run(self):
        try:
            self.zk = self.connect()
            self.setup()
            while not self.run_.stop.is_set():
                self.step()
                if self.cfg.think:
                    time.sleep(self.rng.uniform(0, 2 * self.cfg.think))
        except Exception as e:  # noqa: BLE001
            self.run_.errors.append("%s: %r" % (self.wname, e))
            raise
        finally:
            self.teardown()

    def setup(self):
        pass

    def teardown(self):
        if self.zk is not None:
            try:
                self.zk.stop()
                self.zk.close()
            except Exception:
                pass

    def step(self):
        raise NotImplementedError


class RegisterWorker(Worker):
    """One session per server (each client knows only its server), and each
    op on a random one that is connected: every server, the leader and a
    cut-off follower alike, keeps serving reads and writes. The zxid check
    runs per (worker, server) client: records are named NAME@sSERVER."""

    def run(self):
        self.seen = {}
        self.clients = {}
        try:
            for sid, srv in sorted(self.run_.cluster.servers.items()):
                zk = new_client(srv.client_addr, self.cfg.session_timeout)
                zk.start_async()
                self.clients[sid] = zk
            while not self.run_.stop.is_set():
                live = [sid for sid, zk in self.clients.items() if zk.connected]
                if not live or self.run_.gen is None:
                    time.sleep(0.1)
                    continue
                sid = self.rng.choice(live)
                self.zk = self.clients[sid]
                self.step("%s@s%d" % (self.wname, sid))
                if self.cfg.think:
                    time.sleep(self.rng.uniform(0, 2 * self.cfg.think))
        except Exception as e:  # noqa: BLE001
            self.run_.errors.append("%s: %r" % (self.wname, e))
            raise
        finally:
            for zk in self.clients.values():
                try:
                    zk.stop()
                    zk.close()
                except Exception:  # noqa: BLE001
                    pass

    def step(self, w):
        key = self.rng.choice(self.run_.reg_keys(self.run_.gen))
        r = self.rng.random()
        self.n += 1
        value = "%s-%d" % (self.wname, self.n)
        zk = self.zk
        if r < 0.4:
            op = self.h.invoke(w, "read", key)

            def read():
                self.wait(zk.sync_async(key))
                data, stat = self.wait(zk.get_async(key))
                self.seen[key] = stat.version
                return [data.decode(), stat.version], stat.mzxid
            self.finish(op, read, writes=False)
        elif r < 0.7:
            op = self.h.invoke(w, "write", key, [value])

            def write():
                stat = self.wait(zk.set_async(key, value.encode()))
                self.seen[key] = stat.version
                return stat.version, stat.mzxid
            self.finish(op, write)
        else:
            expect = self.seen.get(key, 0)
            op = self.h.invoke(w, "cas", key, [expect, value])

            def cas():
                stat = self.wait(zk.set_async(key, value.encode(), version=expect))
                self.seen[key] = stat.version
                return stat.version, stat.mzxid
            self.finish(op, cas)


class SetWorker(Worker):
    def step(self):
        gen = self.run_.gen
        if gen is None:
            time.sleep(0.1)
            return
        parent = self.run_.set_parent(gen)
        zk = self.zk
        if self.rng.random() < 0.15:
            op = self.h.invoke(self.wname, "set-read", parent)

            def read():
                self.wait(zk.sync_async(parent))
                return sorted(self.wait(zk.get_children_async(parent))), None
            self.finish(op, read, writes=False)
            return
        self.n += 1
        elem = "%s-%d" % (self.wname, self.n)
        op = self.h.invoke(self.wname, "add", parent, [elem, parent])
        self.finish(op, lambda: (self.wait(zk.create_async(parent + "/" + elem, b"")), None))


class CounterWorker(Worker):
    PATH = "/counter"

    def step(self):
        zk = self.zk
        try:
            data, stat = self.wait(zk.get_async(self.PATH))
        except Exception:
            time.sleep(0.1)
            return
        value = int(data)
        op = self.h.invoke(self.wname, "incr", self.PATH, [stat.version, value + 1])

        def incr():
            st = self.wait(zk.set_async(self.PATH, str(value + 1).encode(), version=stat.version))
            return st.version, None
        self.finish(op, incr)


class SequentialWorker(Worker):
    def setup(self):
        self.parent = "/seq/" + self.wname
        ensure(self.zk, self.parent, self.run_.stop)

    def step(self):
        zk = self.zk
        op = self.h.invoke(self.wname, "seq-create", self.parent)
        self.finish(op, lambda: (self.wait(zk.create_async(self.parent + "/n-", b"",
                                                           sequence=True)), None))


class EphemeralReader(Worker):
    def step(self):
        zk = self.zk
        op = self.h.invoke(self.wname, "eph-read", "/eph")

        def read():
            self.wait(zk.sync_async("/eph"))
            return sorted(self.wait(zk.get_children_async("/eph"))), None
        self.finish(op, read, writes=False)
        time.sleep(self.rng.uniform(0.1, 0.4))


class SessionWorker(Worker):
    """Sessions with ephemerals. Worker names change per session (the zxid
    check is per client object): NAME.CYCLE."""

    def run(self):
        cycle = 0
        try:
            while not self.run_.stop.is_set():
                cycle += 1
                if cycle % 2 == 0:
                    self.raw_cycle(cycle)
                else:
                    self.kazoo_cycle(cycle)
        except Exception as e:  # noqa: BLE001
            self.run_.errors.append("%s: %r" % (self.wname, e))
            raise

    def kazoo_cycle(self, cycle):
        w = "%s.%d" % (self.wname, cycle)
        # Every other kazoo session knows one server only: when that server
        # is down or cut off longer than the session timeout, the session
        # expires and the client is told so when it gets back.
        hosts = None
        if cycle % 4 == 3:
            ids = sorted(self.run_.cluster.servers)
            hosts = self.run_.cluster.servers[self.rng.choice(ids)].client_addr
        zk = self.zk = self.connect(timeout=self.cfg.eph_session_timeout, hosts=hosts)
        if self.run_.stop.is_set():
            self.teardown()
            return
        h = self.h
        orig = zk._session_callback

        def on_state(state, zk=zk):
            if state == KeeperState.EXPIRED_SESSION and zk._session_id:
                h.event(w, "session-expired", sid=zk._session_id)
            orig(state)
        zk._session_callback = on_state
        h.event(w, "session-open", sid=zk._session_id)
        for i in range(self.rng.randint(3, 8)):
            if self.run_.stop.is_set():
                break
            name = "%s-%d" % (w, i)
            before = zk._session_id
            op = h.invoke(w, "eph-create", "/eph", [name], sid=before)
            try:
                self.wait(zk.create_async("/eph/" + name, b"", ephemeral=True))
                h.complete(op, OK, zxid=zk.last_zxid,
                           sid=before if zk._session_id == before else None)
                if zk._session_id != before:
                    op["sid"] = None  # the owner is not certain
            except CERTAIN as e:
                h.complete(op, FAIL, err=_name(e))
            except Exception as e:  # noqa: BLE001
                h.complete(op, UNKNOWN, err=_name(e))
            time.sleep(self.rng.uniform(0.1, 0.5))
        sid = zk._session_id
        op = h.invoke(w, "session-close", sid=sid)
        reply = watch_close_reply(zk)
        try:
            zk.stop()
            zk.close()
        except Exception as e:  # noqa: BLE001
            h.complete(op, UNKNOWN, err=_name(e))
        else:
            # kazoo ends in state CLOSED whether or not the server answered
            # the closeSession: only its reply says the session is over.
            if reply.get("err") == 0 and reply.get("sid") == sid:
                h.complete(op, OK, sid=sid)
            else:
                h.complete(op, UNKNOWN, err="closeSession reply %r" % (reply,))
        self.zk = None

    def raw_cycle(self, cycle):
        """A session that is never closed: the client 'crashes'."""
        w = "%s.%d" % (self.wname, cycle)
        ids = sorted(self.run_.cluster.servers)
        srv = self.run_.cluster.servers[self.rng.choice(ids)]
        try:
            raw = RawSession(srv.client_addr, int(self.cfg.eph_session_timeout * 1000))
        except Exception:
            time.sleep(0.5)
            return
        h = self.h
        h.event(w, "session-open", sid=raw.session_id)
        try:
            for i in range(self.rng.randint(1, 4)):
                name = "%s-%d" % (w, i)
                op = h.invoke(w, "eph-create", "/eph", [name], sid=raw.session_id)
                try:
                    err = raw.create_ephemeral("/eph/" + name)
                except Exception as e:  # noqa: BLE001
                    h.complete(op, UNKNOWN, err=_name(e))
                    break
                if err == 0:
                    h.complete(op, OK, sid=raw.session_id)
                else:
                    h.complete(op, FAIL if err in (-101, -110) else UNKNOWN, err="err %d" % err)
                time.sleep(self.rng.uniform(0.05, 0.3))
        finally:
            raw.abandon()
            h.event(w, "session-abandon", sid=raw.session_id)


def watch_close_reply(zk):
    """Returns a dict that gets the error code of the closeSession reply
    (and the session it was for) when kazoo reads it."""
    seen = {}
    conn = zk._connection
    orig = conn._read_response

    def read_response(header, buffer, offset):
        try:
            request = zk._pending[0][0]
        except IndexError:
            request = None
        if isinstance(request, Close):
            seen["err"] = header.err
            seen["sid"] = zk._session_id
        return orig(header, buffer, offset)
    conn._read_response = read_response
    return seen


class RawSession:
    """A minimal ZooKeeper client on one socket: connect, create ephemerals,
    and drop the socket without closeSession."""

    def __init__(self, addr, timeout_ms):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.xid = 0
        req = Connect(0, 0, timeout_ms, 0, b"\x00" * 16, False).serialize()
        self._send(req)
        body = self._recv()
        resp, _ = Connect.deserialize(bytes(body), 0)
        if resp.time_out <= 0:
            raise RuntimeError("session refused")
        self.session_id = resp.session_id

    def _send(self, payload):
        self.sock.sendall(struct.pack(">i", len(payload)) + bytes(payload))

    def _recv(self):
        n = struct.unpack(">i", self._exact(4))[0]
        return self._exact(n)

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            b = self.sock.recv(n - len(buf))
            if not b:
                raise ConnectionError("closed")
            buf += b
        return buf

    def create_ephemeral(self, path):
        """Returns the reply's error code (0 = created)."""
        self.xid += 1
        req = Create(path, b"", OPEN_ACL_UNSAFE, 1)  # flags 1: ephemeral
        self._send(struct.pack(">ii", self.xid, req.type) + bytes(req.serialize()))
        while True:
            body = self._recv()
            header, _ = ReplyHeader.deserialize(body, 0)
            if header.xid == self.xid:
                return header.err
            # (watch events, pings: not expected here)

    def abandon(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Rotator(threading.Thread):
    """Makes a new generation of registers and a set parent every
    gen_seconds, and records each register's initial value."""

    def __init__(self, run):
        super().__init__(name="rotator", daemon=True)
        self.run_ = run

    def run(self):
        zk = new_client(self.run_.cluster.connect_string(), 10.0)
        try:
            zk.start(timeout=30)
            gen = 0
            while not self.run_.stop.is_set():
                if self.make(zk, gen):
                    self.run_.gen = gen
                    gen += 1
                    self.run_.stop.wait(self.run_.cfg.gen_seconds)
                else:
                    time.sleep(0.5)
        except Exception as e:  # noqa: BLE001
            self.run_.errors.append("rotator: %r" % e)
        finally:
            try:
                zk.stop()
                zk.close()
            except Exception:
                pass

    def make(self, zk, gen):
        h = self.run_.history
        try:
            for key in self.run_.reg_keys(gen):
                init = "init-" + key
                ensure(zk, key, self.run_.stop, init.encode())
                data, stat = zk.get(key)
                if data.decode() != init or stat.version != 0:
                    raise RuntimeError("%s: fresh register reads %r v%d" % (
                        key, data, stat.version))
                h.event("rotator", "reg-init", key, [init])
            ensure(zk, self.run_.set_parent(gen), self.run_.stop)
            return True
        except KazooException:
            return False


def ensure(zk, path, stop, data=b""):
    """Creates `path` (and parents) if missing, retrying through faults."""
    while not stop.is_set():
        try:
            zk.ensure_path(path.rsplit("/", 1)[0] or "/")
            zk.create(path, data)
            return
        except NodeExistsError:
            return
        except KazooException:
            time.sleep(0.2)
    raise KazooException("stopped")


def setup_tree(zk, stop):
    for p in ("/reg", "/set", "/seq", "/eph"):
        ensure(zk, p, stop)
    ensure(zk, CounterWorker.PATH, stop, b"0")


def make_workers(run):
    cfg = run.cfg
    ids = sorted(run.cluster.servers)
    workers = []
    k = 0

    def add(cls, count, prefix):
        nonlocal k
        for i in range(count):
            workers.append(cls(run, "%s-%d" % (prefix, i), ids[k % len(ids)]))
            k += 1
    add(RegisterWorker, cfg.reg_workers, "reg")
    add(SetWorker, cfg.set_workers, "set")
    add(CounterWorker, cfg.counter_workers, "ctr")
    add(SequentialWorker, cfg.seq_workers, "seq")
    add(SessionWorker, cfg.session_workers, "sess")
    add(EphemeralReader, 1 if cfg.session_workers else 0, "ephr")
    return workers


def children_or_none(zk, path):
    """path's children, or None if the node is gone."""
    try:
        return zk.get_children(path)
    except NoNodeError:
        return None


def read_final(cluster, run, timeout=120.0):
    """After the cluster is healed: the set, the counter, the sequential
    parents, and /eph once every session is over (ephemerals of crashed
    clients go when their sessions expire). Retries through hiccups. A node
    of the tree that is gone (a server that loses acknowledged writes can
    lose the whole tree) is read as it is: a set with no members, no
    counter, no listing of a sequential parent, no /eph; the checkers
    report what that loses."""
    stop = threading.Event()
    zk = new_client(cluster.connect_string(), 10.0)
    zk.start(timeout=60)
    try:
        final = {}
        deadline = time.monotonic() + timeout
        while True:
            try:
                zk.sync("/")
                members = []
                for g in children_or_none(zk, "/set") or []:
                    members += children_or_none(zk, "/set/" + g) or []
                final["set"] = sorted(members)
                try:
                    data, stat = zk.get(CounterWorker.PATH)
                    final["counter"] = (int(data), stat.version)
                except NoNodeError:
                    final.pop("counter", None)
                seq = {}
                for p in children_or_none(zk, "/seq") or []:
                    kids = children_or_none(zk, "/seq/" + p)
                    if kids is not None:
                        seq["/seq/" + p] = sorted(kids)
                final["seq"] = seq
                break
            except KazooException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        # Ephemerals: every session is closed or abandoned; wait for expiry.
        eph_deadline = time.monotonic() + max(30.0, 6 * run.cfg.eph_session_timeout)
        while True:
            try:
                zk.sync("/eph")
                left = zk.get_children("/eph")
            except NoNodeError:
                left = None
                break
            except KazooException:
                left = None
            if left == [] or time.monotonic() > eph_deadline:
                break
            time.sleep(0.5)
        final["eph"] = sorted(left) if left is not None else None
        return final
    finally:
        stop.set()
        zk.stop()
        zk.close()


def replica_digests(cluster):
    """Per live server: sync, then what it holds of the test tree. After a
    heal every server must hold the same thing."""
    out = {}
    for sid, srv in sorted(cluster.servers.items()):
        if not srv.alive():
            continue
        zk = KazooClient(hosts=srv.client_addr, timeout=10.0, connection_retry=None,
                         command_retry=None)
        try:
            zk.start(timeout=20)
            zk.sync("/")
            d = {}
            d["counter"] = zk.get(CounterWorker.PATH)[0].decode()
            for g in sorted(zk.get_children("/reg")):
                data, stat = zk.get("/reg/" + g)
                d["/reg/" + g] = (data.decode(), stat.version, stat.mzxid)
            for g in sorted(zk.get_children("/set")):
                d["/set/" + g] = len(zk.get_children("/set/" + g))
            for p in sorted(zk.get_children("/seq")):
                d["/seq/" + p] = len(zk.get_children("/seq/" + p))
            out[sid] = d
        except Exception as e:  # noqa: BLE001
            out[sid] = "unreadable: %r" % e
        finally:
            try:
                zk.stop()
                zk.close()
            except Exception:
                pass
    return out
