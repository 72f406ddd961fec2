"""The consumer-group checker (kgroups.py has the workload and the history
records). Inputs: the "gcommit" and "gfetch" ops, the "kproduce" ops, and
the final reads: `final["kgroup"]` (the group's committed offsets after the
members stopped, every member's deliveries) and `final["kafka"]` (the
consumed log of every partition).

It checks, per partition:
  commit lost    a committed offset the coordinator acknowledged is not
                 visible later: an OffsetFetch (the observer's, or the final
                 one) invoked after a commit of offset O was acknowledged
                 answers less than O. The members commit in order (their
                 positions only grow, and a member commits what it read
                 before its partitions can move: kgroups.py), so offsets
                 never go backwards; a coordinator failover that loses a
                 commit shows here;
  skipped        an acknowledged record below the group's final committed
                 offset that no member was given: the group moved past it
                 without reading it;
  misdelivered   a member was given, at an offset, a record other than the
                 one the log holds there;
  beyond         the final committed offset is past the partition's high
                 watermark.
A run in which no commit was acknowledged, or no OffsetFetch answered, is
an anomaly too (it tested nothing).
"""
import collections

from history import OK

COMMIT = "gcommit"
FETCH = "gfetch"
PRODUCE = "kproduce"
NO_OFFSET = -1001


def _ints(d):
    return {int(k): v for k, v in (d or {}).items()}


def _commit_bounds(commits):
    """[(t1, partition, offset)] of acknowledged commits, by time."""
    out = []
    for o in commits:
        for p, off in _ints(o["args"]["parts"]).items():
            out.append((o["t1"], p, off))
    out.sort()
    return out


def _backwards(bounds, observations, max_listed, report):
    """observations: [(t0, label, {p: offset})]. Counts (and reports) the
    partitions an observation shows below a commit acknowledged before it
    was asked."""
    n = 0
    i = 0
    best = {}                                    # p -> (offset, t1)
    for t0, label, seen in sorted(observations, key=lambda x: x[0]):
        while i < len(bounds) and bounds[i][0] < t0:
            t1, p, off = bounds[i]
            if off > best.get(p, (NO_OFFSET, 0))[0]:
                best[p] = (off, t1)
            i += 1
        for p, (off, t1) in sorted(best.items()):
            got = seen.get(p, NO_OFFSET)
            if got < off:
                n += 1
                if n <= max_listed:
                    report.anomaly("group", "partition %d: %s at %.3fs shows committed offset "
                                   "%d, below %d acknowledged at %.3fs: an acknowledged commit "
                                   "was lost" % (p, label, t0, got, off, t1))
    return n


def check_group(ops, kgfinal, kfinal, report, max_listed=10):
    commits = [o for o in ops if o["f"] == COMMIT]
    fetches = [o for o in ops if o["f"] == FETCH]
    if not commits and not kgfinal:
        return
    st = collections.OrderedDict()
    report.stats["group"] = st
    if not kgfinal:
        report.anomaly("group", "no final reads of the group")
        return
    acked = [o for o in commits if o["outcome"] == OK]
    st["commits"] = len(commits)
    st["commits_acknowledged"] = len(acked)
    st["commits_refused"] = sum(1 for o in commits if o["outcome"] == "fail")
    st["commits_unknown"] = sum(1 for o in commits if o["outcome"] == "unknown")
    answered = [o for o in fetches if o["outcome"] == OK]
    st["fetches_answered"] = len(answered)
    if not acked:
        report.anomaly("group", "no commit was acknowledged: nothing was tested")
    if fetches and not answered:
        report.anomaly("group", "no OffsetFetch was answered during the run")

    final = _ints(kgfinal.get("committed"))
    end = max([o["t1"] for o in ops if o.get("t1") is not None] or [0]) + 1.0
    obs = [(o["t0"], "OffsetFetch #%d" % o["id"], _ints(o["result"])) for o in answered]
    obs.append((end, "the final OffsetFetch", final))
    st["commit_lost"] = _backwards(_commit_bounds(acked), obs, max_listed, report)

    # What the log holds, and what the producers were told.
    log = {}
    for p, recs in _ints((kfinal or {}).get("consumed")).items():
        for off, v in recs:
            log[(p, off)] = v
    hw = _ints((kfinal or {}).get("hw"))
    delivered = collections.defaultdict(set)     # (p, off) -> {value}
    count = 0
    for recs in (kgfinal.get("delivered") or {}).values():
        for p, off, v in recs:
            delivered[(p, off)].add(v)
            count += 1
    st["delivered"] = count
    st["delivered_distinct"] = len(delivered)
    misdelivered = [(k, vs) for k, vs in sorted(delivered.items())
                    if k in log and any(v != log[k] for v in vs)]
    st["misdelivered"] = len(misdelivered)
    if misdelivered:
        report.anomaly("group", "%d offsets where a member was given another record than the "
                       "log holds, e.g. %s" % (len(misdelivered), "; ".join(
                           "partition %d offset %d: given %s, log %r" % (k[0], k[1], sorted(vs),
                                                                         log[k])
                           for k, vs in misdelivered[:max_listed])))
    skipped = []
    for o in ops:
        if o["f"] != PRODUCE or o["outcome"] != OK:
            continue
        p = o["args"]["part"]
        off = (o.get("result") or {}).get("offset")
        if off is None or off >= final.get(p, NO_OFFSET):
            continue
        if o["args"]["v"] not in delivered.get((p, off), ()):
            skipped.append(o)
    st["skipped"] = len(skipped)
    if skipped:
        report.anomaly("group", "%d acknowledged records below the final committed offset "
                       "were never given to a member, e.g. %s" % (len(skipped), ", ".join(
                           "%s@%d/%s" % (o["args"]["v"], o["args"]["part"], o["result"]["offset"])
                           for o in skipped[:max_listed])), skipped[:max_listed])
    beyond = {p: (off, hw[p]) for p, off in final.items() if p in hw and off > hw[p]}
    st["beyond_hw"] = len(beyond)
    if beyond:
        report.anomaly("group", "final committed offsets past the high watermark: %s" % beyond)
    st["final_committed"] = dict(sorted(final.items()))


def summary_line(stats):
    g = stats.get("group") or {}
    return ("group: commits acknowledged=%s (of %s) fetches=%s delivered=%s commit_lost=%s "
            "skipped=%s misdelivered=%s" % (
                g.get("commits_acknowledged"), g.get("commits"), g.get("fetches_answered"),
                g.get("delivered"), g.get("commit_lost"), g.get("skipped"),
                g.get("misdelivered")))
