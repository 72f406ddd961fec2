"""kazoo's recipes against keel and ZooKeeper, with one client per server
where clients contend: Lock, Election, Party, Counter, Barrier,
DoubleBarrier, Queue, LockingQueue."""
import threading
import time

import pytest

from kazoo.exceptions import LockTimeout

import kazoo_ext as kx


@pytest.fixture(scope="module")
def clients(backend):
    """One client per server."""
    cs = [kx.client(a) for a in backend.addrs]
    yield cs
    for c in cs:
        c.stop()
        c.close()


def run_all(fns, timeout=60):
    errors = []

    def wrap(fn):
        try:
            fn()
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)
    ts = [threading.Thread(target=wrap, args=(fn,), daemon=True) for fn in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
        assert not t.is_alive(), "a recipe thread hung"
    if errors:
        raise errors[0]


def test_lock_contention(clients, path):
    clients[0].create(path + "/value", b"0", makepath=True)
    holders = []
    order = []
    guard = threading.Lock()
    rounds = 6

    def worker(i):
        c = clients[i]
        lock = c.Lock(path + "/lock", "client-%d" % i)
        for _ in range(rounds):
            with lock:
                with guard:
                    holders.append(i)
                    assert len(holders) == 1, "two holders: %r" % holders
                    order.append(i)
                v = int(c.get(path + "/value")[0])
                time.sleep(0.005)
                c.set(path + "/value", str(v + 1).encode())  # unversioned on purpose
                with guard:
                    holders.remove(i)
    run_all([lambda i=i: worker(i) for i in range(3)])
    clients[1].sync(path + "/value")
    assert int(clients[1].get(path + "/value")[0]) == 3 * rounds
    clients[2].sync(path + "/lock")
    assert sorted(order) == sorted(list(range(3)) * rounds)
    assert clients[2].get_children(path + "/lock") == []

    # contenders() lists waiting clients in their queue order.
    a = clients[0].Lock(path + "/lock2", "a")
    assert a.acquire(timeout=5)
    b = clients[1].Lock(path + "/lock2", "b")
    with pytest.raises(LockTimeout):
        b.acquire(timeout=0.5)
    got = []
    t = threading.Thread(target=lambda: got.append(b.acquire(timeout=20)))
    t.start()
    kx.wait_for(lambda: a.contenders() == ["a", "b"], 10, "b to queue behind a")
    a.release()
    t.join(20)
    assert got == [True] and b.contenders() == ["b"]
    b.release()


def test_election(clients, path):
    elected = []
    release = [threading.Event() for _ in range(3)]
    elections = [c.Election(path, "c%d" % i) for i, c in enumerate(clients)]

    def lead(i):
        elected.append(i)
        release[i].wait(30)

    threads = []
    for i, e in enumerate(elections):
        t = threading.Thread(target=e.run, args=(lead, i), daemon=True)
        t.start()
        threads.append(t)
        if i == 0:
            kx.wait_for(lambda: elected == [0], 10, "the first contender to lead")
        kx.wait_for(lambda: len(elections[0].contenders()) == i + 1, 10, "a contender")
    assert elections[2].contenders() == ["c0", "c1", "c2"]
    for k in range(3):
        assert len(elected) == k + 1
        release[elected[-1]].set()
        if k < 2:
            kx.wait_for(lambda: len(elected) == k + 2, 10, "the next leader")
    for t in threads:
        t.join(10)
    assert elected == [0, 1, 2]
    clients[0].sync(path)
    assert clients[0].get_children(path) == []


def test_party(backend, clients, path):
    parties = [c.Party(path, "m%d" % i) for i, c in enumerate(clients)]
    for p in parties:
        p.join()
    for c in clients:
        c.sync(path)
    for p in parties:
        assert sorted(p) == ["m0", "m1", "m2"] and len(p) == 3
    parties[1].leave()
    clients[2].sync(path)
    assert sorted(parties[2]) == ["m0", "m2"]
    shallow = [c.ShallowParty(path + "-s", "s%d" % i) for i, c in enumerate(clients)]
    for p in shallow:
        p.join()
    clients[0].sync(path + "-s")
    assert sorted(shallow[0]) == ["s0", "s1", "s2"]
    # Members are ephemeral: a closed client leaves its parties.
    c = kx.client(backend.addrs[0])
    c.Party(path, "gone").join()
    clients[0].sync(path)
    assert sorted(parties[0]) == ["gone", "m0", "m2"]
    c.stop()
    c.close()
    clients[0].sync(path)
    assert sorted(parties[0]) == ["m0", "m2"]


def test_counter(clients, path):
    c0 = clients[0].Counter(path)
    assert c0.value == 0
    c0 += 5
    c0 -= 2
    assert c0.value == 3 and c0.pre_value == 5 and c0.post_value == 3

    def bump(i):
        ctr = clients[i].Counter(path)
        for _ in range(10):
            ctr += 1
    run_all([lambda i=i: bump(i) for i in range(3)])
    clients[2].sync(path)
    assert clients[2].Counter(path).value == 33
    f = clients[1].Counter(path + "-f", default=0.5)
    f += 0.25
    clients[0].sync(path + "-f")
    assert clients[0].Counter(path + "-f", default=0.5).value == 0.75


def test_barrier(clients, path):
    b = clients[0].Barrier(path)
    b.create()
    clients[1].sync(path)
    assert clients[1].Barrier(path).wait(timeout=0.3) is False
    got = []
    t = threading.Thread(target=lambda: got.append(clients[1].Barrier(path).wait(20)))
    t.start()
    time.sleep(0.2)
    assert got == []
    b.remove()
    t.join(20)
    assert got == [True]
    assert clients[2].Barrier(path).wait(timeout=1) is True


def test_double_barrier(clients, path):
    entered, left = [], []
    gate = threading.Event()

    def member(i):
        db = clients[i].DoubleBarrier(path, 3, "d%d" % i)
        db.enter()
        entered.append((i, time.time()))
        gate.wait(20)
        db.leave()
        left.append(i)
    ts = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(2)]
    for t in ts:
        t.start()
    time.sleep(0.5)
    assert entered == []  # two of three: nobody enters
    t3 = threading.Thread(target=member, args=(2,), daemon=True)
    t3.start()
    kx.wait_for(lambda: len(entered) == 3, 20, "all three to enter")
    gate.set()
    for t in ts + [t3]:
        t.join(20)
    assert sorted(left) == [0, 1, 2]


def test_queue(clients, path):
    q = clients[0].Queue(path)
    q.put(b"first")
    q.put(b"urgent", priority=1)
    q.put(b"x", priority=200)
    q.put(b"y", priority=200)
    q.put(b"second")
    assert len(q) == 5
    got = []
    for i in range(5):
        clients[i % 3].sync(path)
        got.append(clients[i % 3].Queue(path).get())
    assert got == [b"urgent", b"first", b"second", b"x", b"y"]
    assert q.get() is None and len(q) == 0


def test_locking_queue(clients, path):
    q0 = clients[0].LockingQueue(path)
    q0.put(b"a")
    q0.put(b"b", priority=50)
    q0.put_all([b"c"], priority=10)
    assert len(q0) == 3
    q1 = clients[1].LockingQueue(path)
    clients[1].sync(path)
    assert q1.get(timeout=5) == b"c"
    # While q1 holds its item, another consumer gets the next one.
    q2 = clients[2].LockingQueue(path)
    clients[2].sync(path)
    assert q2.get(timeout=5) == b"b"
    assert q1.release() is True  # put back, not consumed
    assert q2.consume() is True
    # Reads are served by each client's own server: sync before reading
    # what a client on another server did.
    clients[0].sync(path)
    assert q0.get(timeout=5) == b"c"
    assert q0.consume() is True
    clients[1].sync(path)
    assert q1.get(timeout=5) == b"a"
    assert q1.consume() is True
    clients[0].sync(path)
    assert len(q0) == 0
    clients[2].sync(path)
    assert q2.get(timeout=0.3) is None
