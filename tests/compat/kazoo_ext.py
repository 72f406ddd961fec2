"""Helpers for the kazoo part of the compatibility suite.

Debian's python3-kazoo is 2.8.0: it has no API for container or TTL nodes,
persistent watches (addWatch), removeWatches or setWatches (kazoo never
re-registers watches on the server after a reconnect; it keeps its watcher
callbacks locally). These requests are sent here through kazoo's own
connection (`KazooClient._call`) with request classes written like kazoo's
in kazoo/protocol/serialization.py, so the wire format is kazoo's jute
encoding. `RawEvents` records every notification a client receives, as
(type, path), before kazoo dispatches it.
"""
import collections
import queue
import struct
import time

from kazoo.client import KazooClient as _KazooClient
from kazoo.exceptions import EXCEPTIONS, ZookeeperError
from kazoo.protocol.serialization import Create2, int_struct, long_struct, write_string

# Watch event types on the wire (Watcher.Event.EventType).
CREATED, DELETED, CHANGED, CHILD = 1, 2, 3, 4
# AddWatchMode
PERSISTENT, PERSISTENT_RECURSIVE = 0, 1
# WatcherType for removeWatches
W_CHILDREN, W_DATA, W_ANY = 1, 2, 3
# CreateMode flags
CONTAINER = 4
PERSISTENT_WITH_TTL = 5
PERSISTENT_SEQUENTIAL_WITH_TTL = 6


if -121 not in EXCEPTIONS:
    class NoWatcherError(ZookeeperError):
        code = -121
    EXCEPTIONS[-121] = NoWatcherError
else:
    NoWatcherError = EXCEPTIONS[-121]


class CreateContainer(collections.namedtuple("CreateContainer", "path data acl flags")):
    type = 19
    serialize = Create2.serialize
    deserialize = Create2.deserialize


class CreateTTL(collections.namedtuple("CreateTTL", "path data acl flags ttl")):
    type = 21

    def serialize(self):
        b = bytearray(Create2(self.path, self.data, self.acl, self.flags).serialize())
        b.extend(long_struct.pack(self.ttl))
        return b

    deserialize = Create2.deserialize


class AddWatch(collections.namedtuple("AddWatch", "path mode")):
    type = 106

    def serialize(self):
        return bytearray(write_string(self.path) + int_struct.pack(self.mode))

    @classmethod
    def deserialize(cls, buf, offset):
        return True


class RemoveWatches(collections.namedtuple("RemoveWatches", "path watcher_type")):
    type = 18

    def serialize(self):
        return bytearray(write_string(self.path) + int_struct.pack(self.watcher_type))

    @classmethod
    def deserialize(cls, buf, offset):
        return True


def _string_vector(items):
    b = bytearray(int_struct.pack(len(items)))
    for s in items:
        b.extend(write_string(s))
    return b


class SetWatches(collections.namedtuple("SetWatches", "relative_zxid data exist child")):
    type = 101

    def serialize(self):
        b = bytearray(long_struct.pack(self.relative_zxid))
        for v in (self.data, self.exist, self.child):
            b.extend(_string_vector(v))
        return b

    @classmethod
    def deserialize(cls, buf, offset):
        return True


def call(zk, request, timeout=10):
    """Sends one raw request through kazoo's connection, returns its result."""
    res = zk.handler.async_result()
    zk._call(request, res)
    return res.get(timeout=timeout)


def default_acl():
    from kazoo.security import OPEN_ACL_UNSAFE
    return OPEN_ACL_UNSAFE


def create_container(zk, path, data=b""):
    return call(zk, CreateContainer(path, data, default_acl(), CONTAINER))


def create_ttl(zk, path, ttl_ms, data=b"", sequential=False):
    flags = PERSISTENT_SEQUENTIAL_WITH_TTL if sequential else PERSISTENT_WITH_TTL
    return call(zk, CreateTTL(path, data, default_acl(), flags, ttl_ms))


class RawEvents:
    """Records every watch notification `zk` receives as (type, path)."""

    def __init__(self, zk):
        self.q = queue.Queue()
        conn = zk._connection
        orig = conn._read_watch_event

        def hook(buf, offset):
            typ, _state = struct.unpack_from("!ii", buf, offset)
            plen = struct.unpack_from("!i", buf, offset + 8)[0]
            p = bytes(buf[offset + 12:offset + 12 + plen]).decode()
            self.q.put((typ, p))
            return orig(buf, offset)

        conn._read_watch_event = hook

    def get(self, timeout=5.0):
        return self.q.get(timeout=timeout)

    def drain(self, quiet=0.5):
        """Every event that arrives until none has for `quiet` seconds."""
        out = []
        while True:
            try:
                out.append(self.q.get(timeout=quiet))
            except queue.Empty:
                return out


# The options every client gets while the backend is keel-tls (kazoo's
# use_ssl, ca, certfile, keyfile, verify_certs) or keel-sasl (sasl_options),
# see conftest.py; empty otherwise. A test may override one (sasl_options=None).
TLS = {}


class KazooClient(_KazooClient):
    """kazoo's client, with the backend's TLS or SASL options."""

    def __init__(self, *args, **kw):
        for k, v in TLS.items():
            kw.setdefault(k, v)
        super().__init__(*args, **kw)


def client(hosts, timeout=10.0, **kw):
    zk = KazooClient(hosts=hosts, timeout=timeout, **kw)
    zk.start(timeout=15)
    return zk


def wait_for(cond, timeout=10.0, what="condition", interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + what)
