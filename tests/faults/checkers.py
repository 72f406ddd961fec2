"""Checkers for a fault-injection history (see history.py for the records).

check_all(ops, final) runs every checker and returns a Report: a list of
anomalies (each a dict with the checker, a one-line summary and the
records that show it) and per-checker statistics. `final` holds what the
runner read after the cluster was healed (set members, counter, sequential
children, ephemerals left), see workloads.read_final().

Checkers and what they assume of the workload:

registers    linearizability per key (linearizable.py) of read (sync+get),
             write (set) and cas (set with version) on versioned registers
             whose initial value is recorded by a "reg-init" event.
set          adds are creates of unique children of /set; "set-read" ops
             are sync + getChildren. No acknowledged add may be missing from
             a read invoked after it returned or from the final read; no
             element may appear that was never attempted, or that was
             attempted with a certain failure, or before it was invoked.
counter      "incr" ops are get + set-with-version of value+1 on one znode
             (initial 0). Final value within [acknowledged, acknowledged +
             unknown], and value == version (every applied set increments
             both).
sequential   per worker, creates of sequential children under its own
             parent, one at a time. Acknowledged numbers strictly increase,
             never repeat, and the final children are exactly 0..M-1 with
             acknowledged <= M <= acknowledged + unknown.
ephemerals   "eph-create" (owner session known), "eph-read" (sync +
             getChildren of /eph), session ends ("session-close" ok,
             "session-expired" seen by the client, "session-abandon").
             An ephemeral may not be missing from a read while its session
             was provably alive after that read (a later successful create on
             the same session, invoked after the read returned); it may not be
             present in a read invoked after its session was known to have
             ended; and every ephemeral is gone at the end.
zxid         per client session, the last seen zxid never goes down, and
             the mzxid of a key it reads or writes never goes down.
"""
import collections

import linearizable
from history import OK, FAIL, UNKNOWN, fmt_op


class Report:
    def __init__(self):
        self.anomalies = []
        self.stats = collections.OrderedDict()

    def anomaly(self, checker, summary, ops=(), detail=None):
        self.anomalies.append({"checker": checker, "summary": summary,
                               "ops": [fmt_op(o) for o in ops], "detail": detail})

    @property
    def ok(self):
        return not self.anomalies

    def text(self, max_anomalies=20):
        lines = []
        for name, st in self.stats.items():
            lines.append("  %-11s %s" % (name, ", ".join("%s=%s" % kv for kv in st.items())))
        if self.ok:
            lines.append("  no anomalies")
        else:
            lines.append("  %d ANOMALIES:" % len(self.anomalies))
            for a in self.anomalies[:max_anomalies]:
                lines.append("  [%s] %s" % (a["checker"], a["summary"]))
                for o in a["ops"][:12]:
                    lines.append("      " + o)
                if a["detail"]:
                    for d in a["detail"][:12]:
                        lines.append("      " + d)
            if len(self.anomalies) > max_anomalies:
                lines.append("  ... %d more" % (len(self.anomalies) - max_anomalies))
        return "\n".join(lines)


def _by(ops, keyf):
    out = collections.OrderedDict()
    for o in ops:
        out.setdefault(keyf(o), []).append(o)
    return out


def _end(o):
    """Return time for ordering; unknown ops are open-ended."""
    return float("inf") if o["outcome"] == UNKNOWN or o["t1"] is None else o["t1"]


# ---- registers ----

def check_registers(ops, report, budget=5_000_000):
    inits = {o["key"]: o["args"][0] for o in ops if o["f"] == "reg-init" and o["outcome"] == OK}
    reg = [o for o in ops if o["f"] in ("read", "write", "cas")]
    # Reads that did not complete told us nothing.
    reg = [o for o in reg if not (o["f"] == "read" and o["outcome"] != OK)]
    # Writes/cas that failed certainly with something other than BadVersion
    # (never seen in practice) changed nothing either.
    reg = [o for o in reg if not (o["outcome"] == FAIL and o["f"] != "cas")]
    keys = _by(reg, lambda o: o["key"])
    st = collections.OrderedDict(keys=len(keys), ops=len(reg),
                                 ok=sum(o["outcome"] == OK for o in reg),
                                 unknown=sum(o["outcome"] == UNKNOWN for o in reg),
                                 cas_fail=sum(o["outcome"] == FAIL for o in reg),
                                 explored=0)
    for key, kops in keys.items():
        if key not in inits:
            report.anomaly("registers", "%s: operations on a register never initialised" % key,
                           kops[:3])
            continue
        model = linearizable.VersionedRegister(inits[key], 0)
        res = linearizable.check(model, kops, budget=budget)
        st["explored"] += res.explored
        if res.ok:
            continue
        if res.budget_exceeded:
            report.anomaly("registers", "%s: search budget of %d steps exceeded (%d ops, "
                           "%d unknown): inconclusive" % (key, budget, len(kops),
                                                          sum(o["outcome"] == UNKNOWN
                                                              for o in kops)))
            continue
        detail = ["model states possible before it: " +
                  ", ".join(linearizable.describe_state(s) for s in res.states)]
        detail.append("linearized %d of %d known-outcome ops at best" % (
            res.best, sum(o["outcome"] != UNKNOWN for o in kops)))
        shown = [res.stuck] + sorted(res.frontier, key=lambda o: o["t0"])[:11]
        report.anomaly("registers", "%s: not linearizable; no order places %s" % (
            key, fmt_op(res.stuck)), shown, detail)
    report.stats["registers"] = st


# ---- set ----

def check_set(ops, final, report):
    """Adds carry args [element, parent]; set-read ops read one parent."""
    adds = [o for o in ops if o["f"] == "add"]
    by_elem = {o["args"][0]: o for o in adds}
    acked = {e for e, o in by_elem.items() if o["outcome"] == OK}
    failed = {e for e, o in by_elem.items() if o["outcome"] == FAIL}
    reads = [o for o in ops if o["f"] == "set-read" and o["outcome"] == OK]
    acked_by_parent = collections.defaultdict(list)
    for e in acked:
        acked_by_parent[by_elem[e]["args"][1]].append(by_elem[e])
    stale = 0
    for r in reads:
        present = set(r["result"])
        for e in present:
            a = by_elem.get(e)
            if a is None or a["args"][1] != r["key"]:
                report.anomaly("set", "read of %s shows %s which was never added there" % (
                    r["key"], e), [r])
            elif a["outcome"] == FAIL:
                report.anomaly("set", "read shows %s whose add failed" % e, [a, r])
            elif a["t0"] > r["t1"]:
                report.anomaly("set", "read shows %s before it was added" % e, [a, r])
        for a in acked_by_parent.get(r["key"], ()):
            if a["t1"] < r["t0"] and a["args"][0] not in present:
                stale += 1
                if stale <= 5:
                    report.anomaly("set", "acknowledged %s missing from a later read" %
                                   a["args"][0], [a, r])
    if stale > 5:
        report.anomaly("set", "%d more stale set reads" % (stale - 5))
    final_set = set(final.get("set", []))
    lost = sorted(acked - final_set)
    for e in lost[:10]:
        report.anomaly("set", "acknowledged %s LOST (missing from the final read)" % e,
                       [by_elem[e]])
    if len(lost) > 10:
        report.anomaly("set", "%d more acknowledged elements lost" % (len(lost) - 10))
    unexpected = sorted(final_set - set(by_elem))
    if unexpected:
        report.anomaly("set", "final read shows never-added elements: %s" % unexpected[:10])
    resurrected = sorted(final_set & failed)
    if resurrected:
        report.anomaly("set", "final read shows elements whose add failed: %s" %
                       resurrected[:10], [by_elem[e] for e in resurrected[:5]])
    if adds and "set" not in final:
        report.anomaly("set", "no final read of the set")
    report.stats["set"] = collections.OrderedDict(
        adds=len(adds), acked=len(acked), unknown=sum(o["outcome"] == UNKNOWN for o in adds),
        reads=len(reads), final=len(final_set), lost=len(lost),
        unknown_present=len(final_set & {e for e, o in by_elem.items()
                                          if o["outcome"] == UNKNOWN}))


# ---- counter ----

def check_counter(ops, final, report):
    incrs = [o for o in ops if o["f"] == "incr"]
    if not incrs and "counter" not in final:
        return
    acked = sum(o["outcome"] == OK for o in incrs)
    unknown = sum(o["outcome"] == UNKNOWN for o in incrs)
    value, version = final.get("counter", (None, None))
    st = collections.OrderedDict(incrs=len(incrs), acked=acked, unknown=unknown,
                                 cas_fail=sum(o["outcome"] == FAIL for o in incrs),
                                 final=value)
    report.stats["counter"] = st
    if value is None:
        report.anomaly("counter", "no final read of the counter")
        return
    if not acked <= value <= acked + unknown:
        report.anomaly("counter", "final value %d outside [acknowledged %d, acknowledged + "
                       "unknown %d]" % (value, acked, acked + unknown))
    if value != version:
        report.anomaly("counter", "final value %d but version %d (every applied increment "
                       "bumps both)" % (value, version))
    # Acknowledged increments each wrote a distinct value.
    seen = collections.defaultdict(list)
    for o in incrs:
        if o["outcome"] == OK:
            seen[o["args"][1]].append(o)
    for v, os_ in seen.items():
        if len(os_) > 1:
            report.anomaly("counter", "two acknowledged increments both wrote %d" % v, os_)


# ---- sequential ----

def _seqno(name):
    return int(name.rsplit("-", 1)[1])


def check_sequential(ops, final, report):
    creates = [o for o in ops if o["f"] == "seq-create"]
    workers = _by(creates, lambda o: o["key"])
    st = collections.OrderedDict(parents=len(workers), creates=len(creates),
                                 acked=sum(o["outcome"] == OK for o in creates),
                                 unknown=sum(o["outcome"] == UNKNOWN for o in creates))
    report.stats["sequential"] = st
    finals = final.get("seq", {})
    for parent, cops in workers.items():
        acked = [o for o in cops if o["outcome"] == OK]
        unknown = sum(o["outcome"] == UNKNOWN for o in cops)
        nums = collections.Counter(_seqno(o["result"]) for o in acked)
        for n, c in nums.items():
            if c > 1:
                report.anomaly("sequential", "%s: number %d acknowledged %d times" % (
                    parent, n, c), [o for o in acked if _seqno(o["result"]) == n])
        # One worker creates one at a time: consecutive acknowledged creates
        # must get increasing numbers (the rest follows by transitivity).
        acked.sort(key=lambda o: o["t0"])
        for a, b in zip(acked, acked[1:]):
            if a["t1"] < b["t0"] and _seqno(a["result"]) >= _seqno(b["result"]):
                report.anomaly("sequential", "%s: later create got a lower number" %
                               parent, [a, b])
        if parent not in finals:
            report.anomaly("sequential", "%s: no final listing" % parent)
            continue
        present = sorted(_seqno(c) for c in finals[parent])
        m = len(present)
        if present != list(range(m)):
            missing = sorted(set(range(present[-1] + 1 if present else 0)) - set(present))
            report.anomaly("sequential", "%s: final numbers not contiguous from 0 "
                           "(missing %s)" % (parent, missing[:10]))
        pset = set(present)
        for a in acked:
            if _seqno(a["result"]) not in pset:
                report.anomaly("sequential", "%s: acknowledged %s missing at the end" % (
                    parent, a["result"]), [a])
        if not len(acked) <= m <= len(acked) + unknown:
            report.anomaly("sequential", "%s: %d children at the end, but %d acknowledged "
                           "and %d unknown creates" % (parent, m, len(acked), unknown))


# ---- sessions and ephemerals ----

def check_ephemerals(ops, final, report):
    creates = [o for o in ops if o["f"] == "eph-create"]
    reads = [o for o in ops if o["f"] == "eph-read" and o["outcome"] == OK]
    by_name = {o["args"][0]: o for o in creates}
    # Session ends: the earliest time the session was certainly over.
    ended = {}
    for o in ops:
        if o["f"] in ("session-close", "session-expired") and o["outcome"] == OK:
            sid = o["sid"]
            ended[sid] = min(ended.get(sid, float("inf")), o["t1"])
    # Proof of life: successful creates on a session, by invocation time.
    alive = collections.defaultdict(list)
    for o in creates:
        if o["outcome"] == OK and o["sid"] is not None:
            alive[o["sid"]].append(o)
    for lst in alive.values():
        lst.sort(key=lambda o: o["t0"])
    last_alive = {sid: lst[-1]["t0"] for sid, lst in alive.items()}
    vanished = outlived = 0
    for r in reads:
        present = set(r["result"])
        for name in present:
            c = by_name.get(name)
            if c is None:
                report.anomaly("ephemerals", "read shows %s which was never created" % name, [r])
                continue
            if c["outcome"] == FAIL:
                report.anomaly("ephemerals", "read shows %s whose create failed" % name, [c, r])
            if c["t0"] > r["t1"]:
                report.anomaly("ephemerals", "read shows %s before its create" % name, [c, r])
            end = ended.get(c["sid"])
            if end is not None and end < r["t0"]:
                outlived += 1
                if outlived <= 5:
                    report.anomaly("ephemerals", "%s outlived its session 0x%x (ended at "
                                   "%.3f)" % (name, c["sid"], end), [c, r])
        for sid, t in last_alive.items():
            if t <= r["t1"]:
                continue  # no proof the session lived past this read
            for c in alive[sid]:
                if c["t1"] >= r["t0"] or c["args"][0] in present:
                    continue
                later = next(a for a in alive[sid] if a["t0"] > r["t1"])
                vanished += 1
                if vanished <= 5:
                    report.anomaly("ephemerals", "%s missing while its session 0x%x was "
                                   "alive" % (c["args"][0], sid), [c, r, later])
    left = final.get("eph")
    if left is None:
        report.anomaly("ephemerals", "no final read of /eph")
    elif left:
        report.anomaly("ephemerals", "ephemerals left after every session ended: %s" %
                       sorted(left)[:10], [by_name[n] for n in sorted(left)[:5] if n in by_name])
    report.stats["ephemerals"] = collections.OrderedDict(
        sessions=len({o["sid"] for o in creates if o["sid"] is not None}),
        creates=len(creates), acked=sum(o["outcome"] == OK for o in creates),
        reads=len(reads),
        closed=sum(1 for o in ops if o["f"] == "session-close" and o["outcome"] == OK),
        expired_seen=sum(1 for o in ops if o["f"] == "session-expired"),
        abandoned=sum(1 for o in ops if o["f"] == "session-abandon"),
        left=len(left or []))


# ---- zxid monotonicity ----

def check_zxids(ops, report):
    """Per client and session (a new session starts from zxid 0 in kazoo,
    and ZooKeeper promises nothing across sessions)."""
    bad = 0
    checked = 0
    ops = [o for o in ops if o.get("sid") is not None]
    for (w, _), wops in _by(ops, lambda o: (o["w"], o["sid"])).items():
        last = None
        last_key = {}
        for o in sorted(wops, key=lambda o: o["t0"]):
            if o["outcome"] != OK:
                continue
            z = o.get("zxid")
            if z is not None and z > 0:
                checked += 1
                if last is not None and z < last[0]:
                    bad += 1
                    if bad <= 5:
                        report.anomaly("zxid", "%s: last seen zxid went back from 0x%x to "
                                       "0x%x" % (w, last[0], z), [last[1], o])
                last = (z, o) if last is None or z >= last[0] else last
            m = o.get("mzxid")
            if m is not None and o["key"] is not None:
                prev = last_key.get(o["key"])
                if prev is not None and m < prev[0]:
                    bad += 1
                    if bad <= 5:
                        report.anomaly("zxid", "%s: %s went back in time (mzxid 0x%x after "
                                       "0x%x)" % (w, o["key"], m, prev[0]), [prev[1], o])
                if prev is None or m >= prev[0]:
                    last_key[o["key"]] = (m, o)
    report.stats["zxid"] = collections.OrderedDict(checked=checked, regressions=bad)


def check_all(ops, final, budget=5_000_000):
    report = Report()
    check_registers(ops, report, budget)
    check_set(ops, final, report)
    check_counter(ops, final, report)
    check_sequential(ops, final, report)
    check_ephemerals(ops, final, report)
    check_zxids(ops, report)
    return report
