"""Unit tests of the fault-suite checkers on hand-made and generated
histories: correct histories pass, each kind of anomaly is reported."""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import checkers  # noqa: E402
import linearizable  # noqa: E402

_ids = iter(range(10 ** 9))


def op(f, t0, t1, outcome="ok", key="/r", args=None, result=None, w="w1", sid=None,
       zxid=None, mzxid=None):
    o = {"id": next(_ids), "w": w, "f": f, "key": key, "args": args, "t0": t0,
         "t1": t1 if outcome != "unknown" else None, "outcome": outcome,
         "result": result, "err": None if outcome == "ok" else "X", "zxid": zxid, "sid": sid}
    if mzxid is not None:
        o["mzxid"] = mzxid
    return o


def reg_check(ops, init="i"):
    return linearizable.check(linearizable.VersionedRegister(init), ops)


# ---- registers ----

def test_sequential_register_history_passes():
    h = [op("write", 0, 1, args=["a"], result=1),
         op("read", 2, 3, result=["a", 1]),
         op("cas", 4, 5, args=[1, "b"], result=2),
         op("cas", 6, 7, "fail", args=[1, "c"]),
         op("read", 8, 9, result=["b", 2])]
    assert reg_check(h).ok


def test_stale_read_is_caught():
    h = [op("write", 0, 1, args=["a"], result=1),
         op("read", 2, 3, result=["i", 0])]
    r = reg_check(h)
    assert not r.ok and r.stuck["f"] == "read"


def test_concurrent_writes_either_order():
    h = [op("write", 0, 5, args=["a"], result=2, w="w1"),
         op("write", 1, 4, args=["b"], result=1, w="w2"),
         op("read", 6, 7, result=["a", 2])]
    assert reg_check(h).ok
    h[2]["result"] = ["b", 2]
    assert not reg_check(h).ok


def test_unknown_write_may_apply_late_or_never():
    w = op("write", 0, None, "unknown", args=["a"])
    assert reg_check([w, op("read", 5, 6, result=["i", 0])]).ok
    assert reg_check([w, op("read", 5, 6, result=["a", 1])]).ok
    # ... but only once, and not before it was invoked.
    assert not reg_check([op("read", 0, 1, result=["a", 1]),
                          op("write", 2, None, "unknown", args=["a"])]).ok
    # Seen applied, it cannot un-apply.
    assert not reg_check([w, op("read", 5, 6, result=["a", 1]),
                          op("read", 7, 8, result=["i", 0])]).ok


def test_unknown_cas_counts_version():
    h = [op("cas", 0, None, "unknown", args=[0, "x"]),
         op("write", 5, 6, args=["y"], result=2)]
    assert reg_check(h).ok
    h[1]["result"] = 3
    assert not reg_check(h).ok


def test_failed_cas_needs_a_different_version():
    h = [op("cas", 0, 1, "fail", args=[0, "x"])]
    assert not reg_check(h).ok
    h = [op("write", 0, 3, args=["a"], result=1), op("cas", 1, 2, "fail", args=[0, "x"])]
    assert reg_check(h).ok


def _random_history(rng, n_ops, n_procs, unknown_rate):
    """Ops on an atomic register with random overlap; results computed at
    a random point inside each op. Returns the history."""
    state = ["i", 0]
    t = 0.0
    free_at = [0.0] * n_procs
    pending = []
    for i in range(n_ops):
        p = rng.randrange(n_procs)
        t0 = max(free_at[p], t) + rng.random()
        t = t0
        t1 = t0 + rng.random() * 4
        lp = rng.uniform(t0, t1)
        f = rng.choice(["read", "write", "cas"])
        unknown = f != "read" and rng.random() < unknown_rate
        applies = not unknown or rng.random() < 0.5
        pending.append((lp, i, p, f, t0, t1, unknown, applies))
        free_at[p] = t1 if not unknown else t1 + 10
    ops = []
    for lp, i, p, f, t0, t1, unknown, applies in sorted(pending):
        w = "w%d" % p
        if f == "read":
            ops.append(op("read", t0, t1, result=list(state), w=w))
        elif f == "write":
            v = "v%d" % i
            if applies:
                state = [v, state[1] + 1]
            ops.append(op("write", t0, None if unknown else t1,
                          "unknown" if unknown else "ok", args=[v], result=state[1], w=w))
        else:
            v = "v%d" % i
            expect = state[1] if rng.random() < 0.6 else state[1] + rng.choice([-1, 1])
            if unknown:
                if applies and expect == state[1]:
                    state = [v, state[1] + 1]
                ops.append(op("cas", t0, None, "unknown", args=[expect, v], w=w))
            elif expect == state[1]:
                state = [v, state[1] + 1]
                ops.append(op("cas", t0, t1, args=[expect, v], result=state[1], w=w))
            else:
                ops.append(op("cas", t0, t1, "fail", args=[expect, v], w=w))
    ops.sort(key=lambda o: o["t0"])
    return ops


def test_generated_linearizable_histories_pass_and_mutations_fail():
    rng = random.Random(7)
    caught = 0
    for trial in range(60):
        h = _random_history(rng, 40, 4, 0.15)
        r = reg_check(h)
        assert r.ok, "trial %d: %s" % (trial, r.stuck)
        # Corrupt one read's version: it can never match any state.
        reads = [o for o in h if o["f"] == "read"]
        if reads:
            bad = rng.choice(reads)
            bad["result"] = [bad["result"][0], bad["result"][1] + 100]
            assert not reg_check(h).ok
            caught += 1
    assert caught > 40


def test_register_checker_reports_inconclusive_search():
    rng = random.Random(3)
    h = _random_history(rng, 60, 5, 0.3)
    r = linearizable.check(linearizable.VersionedRegister("i"), h, budget=10)
    assert not r.ok and r.budget_exceeded


def test_check_registers_needs_init_and_reports():
    h = [op("reg-init", 0, 0, key="/r", args=["i"]),
         op("write", 1, 2, args=["a"], result=1, mzxid=5),
         op("read", 3, 4, result=["i", 0], mzxid=5)]
    rep = checkers.Report()
    checkers.check_registers(h, rep)
    assert len(rep.anomalies) == 1 and "not linearizable" in rep.anomalies[0]["summary"]


# ---- set ----

def test_set_lost_stale_and_unexpected():
    adds = [op("add", 0, 1, args=["e1", "/s"]), op("add", 0, 1, args=["e2", "/s"]),
            op("add", 0, None, "unknown", args=["e3", "/s"]),
            op("add", 0, 1, "fail", args=["e4", "/s"])]
    good = adds + [op("set-read", 2, 3, key="/s", result=["e1", "e2"])]
    rep = checkers.Report()
    checkers.check_set(good, {"set": ["e1", "e2", "e3"]}, rep)
    assert rep.ok, rep.text()
    rep = checkers.Report()
    checkers.check_set(adds + [op("set-read", 2, 3, key="/s", result=["e1"])],
                       {"set": ["e1", "e4", "zz"]}, rep)
    text = " | ".join(a["summary"] for a in rep.anomalies)
    assert "missing from a later read" in text
    assert "e2 LOST" in text
    assert "never-added" in text
    assert "add failed" in text


# ---- counter ----

def test_counter_bounds():
    incrs = [op("incr", i, i + 0.5, key="/c", args=[i, i + 1], result=i + 1) for i in range(5)]
    incrs.append(op("incr", 9, None, "unknown", key="/c", args=[5, 6]))
    for value, ok in ((5, True), (6, True), (4, False), (7, False)):
        rep = checkers.Report()
        checkers.check_counter(incrs, {"counter": (value, value)}, rep)
        assert rep.ok == ok, (value, rep.text())
    rep = checkers.Report()
    checkers.check_counter(incrs, {"counter": (5, 6)}, rep)
    assert not rep.ok


# ---- sequential ----

def test_sequential_numbering():
    def c(t, n, outcome="ok"):
        return op("seq-create", t, t + 0.5, outcome, key="/q/w1",
                  result="/q/w1/n-%010d" % n if outcome == "ok" else None)
    h = [c(0, 0), c(1, 1), c(2, 0, "unknown"), c(3, 3)]
    rep = checkers.Report()
    checkers.check_sequential(h, {"seq": {"/q/w1": ["n-%010d" % i for i in range(4)]}}, rep)
    assert rep.ok, rep.text()
    rep = checkers.Report()
    checkers.check_sequential(h, {"seq": {"/q/w1": ["n-%010d" % i for i in (0, 1, 3)]}}, rep)
    assert "not contiguous" in rep.text()
    rep = checkers.Report()
    checkers.check_sequential([c(0, 1), c(1, 1)],
                              {"seq": {"/q/w1": ["n-%010d" % i for i in (0, 1)]}}, rep)
    assert "acknowledged 2 times" in rep.text() and "lower number" in rep.text()


# ---- ephemerals ----

def test_ephemeral_vanishing_while_alive_and_outliving():
    sid = 0x10
    h = [op("eph-create", 0, 1, key="/eph", args=["a"], sid=sid),
         op("eph-read", 2, 3, key="/eph", result=[]),
         op("eph-create", 4, 5, key="/eph", args=["b"], sid=sid)]
    rep = checkers.Report()
    checkers.check_ephemerals(h, {"eph": []}, rep)
    assert "missing while its session" in rep.text()
    h = [op("eph-create", 0, 1, key="/eph", args=["a"], sid=sid),
         op("eph-read", 2, 3, key="/eph", result=["a"]),
         op("session-close", 4, 5, sid=sid),
         op("eph-read", 6, 7, key="/eph", result=["a"])]
    rep = checkers.Report()
    checkers.check_ephemerals(h, {"eph": []}, rep)
    assert "outlived" in rep.text() and len(rep.anomalies) == 1
    rep = checkers.Report()
    checkers.check_ephemerals(h[:3], {"eph": ["a"]}, rep)
    assert "left after" in rep.text()
    rep = checkers.Report()
    checkers.check_ephemerals(h[:3], {"eph": []}, rep)
    assert rep.ok


# ---- zxids ----

def test_zxid_regressions():
    h = [op("read", 0, 1, zxid=10, mzxid=4, sid=1), op("read", 2, 3, zxid=12, mzxid=4, sid=1),
         op("read", 4, 5, zxid=11, mzxid=4, sid=1),
         op("read", 6, 7, zxid=2, mzxid=1, sid=2)]  # a new session may start lower
    rep = checkers.Report()
    checkers.check_zxids(h, rep)
    assert len(rep.anomalies) == 1 and "went back" in rep.anomalies[0]["summary"]
    h = [op("read", 0, 1, zxid=10, mzxid=9, sid=1), op("read", 2, 3, zxid=12, mzxid=4, sid=1)]
    rep = checkers.Report()
    checkers.check_zxids(h, rep)
    assert "back in time" in rep.text()
