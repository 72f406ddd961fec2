"""Unit tests of the consumer-group checker (kgcheck.py) on hand-made
histories and final reads: a correct run passes with its counts, and each
anomaly -- an acknowledged commit not visible to a later OffsetFetch (or to
the final one), a record skipped below the final committed offset, a
record given that differs from the log, a committed offset past the high
watermark, nothing acknowledged -- is reported."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import checkers  # noqa: E402
import kgcheck  # noqa: E402

_ids = iter(range(10 ** 9))


def op(f, t0, t1, outcome="ok", args=None, result=None, w="gm-0"):
    return {"id": next(_ids), "w": w, "f": f, "key": "faults-group", "args": args,
            "t0": t0, "t1": t1, "outcome": outcome, "result": result, "err": None,
            "zxid": None, "sid": None}


def commit(t0, t1, parts, outcome="ok"):
    return op("gcommit", t0, t1, outcome, {"parts": {str(p): o for p, o in parts.items()}})


def fetch(t0, t1, seen, outcome="ok"):
    return op("gfetch", t0, t1, outcome, None,
              {str(p): o for p, o in seen.items()} if outcome == "ok" else None, w="gobserver")


def produced(part, offset, value):
    return op("kproduce", 0.0, 0.1, "ok", {"p": "kp-0", "seq": offset, "v": value, "part": part},
              {"offset": offset}, w="kp-0")


LOG = {0: ["a", "b", "c", "d"], 1: ["x", "y"]}


def check(ops, committed, delivered, log=LOG):
    kfinal = {"consumed": {p: [[i, v] for i, v in enumerate(vs)] for p, vs in log.items()},
              "hw": {p: len(vs) for p, vs in log.items()}}
    kgfinal = {"committed": {str(p): o for p, o in committed.items()},
               "delivered": delivered}
    report = checkers.Report()
    kgcheck.check_group(ops, kgfinal, kfinal, report)
    return report


def summaries(report):
    return " | ".join(a["summary"] for a in report.anomalies)


def base_ops():
    ops = [produced(p, i, v) for p, vs in LOG.items() for i, v in enumerate(vs)]
    ops += [commit(1.0, 1.2, {0: 2}), fetch(1.5, 1.6, {0: 2, 1: -1001}),
            commit(2.0, 2.1, {0: 4, 1: 2}), commit(2.5, 2.6, {0: 9}, "fail"),
            commit(2.7, 2.8, {1: 7}, "unknown"), fetch(3.0, 3.5, {0: 4, 1: 2}),
            fetch(4.0, 9.0, {}, "fail")]
    return ops


DELIVERED = {"gm-0": [[0, 0, "a"], [0, 1, "b"], [0, 1, "b"], [0, 2, "c"]],
             "gm-1": [[0, 3, "d"], [1, 0, "x"], [1, 1, "y"]]}


def test_correct_run_passes_with_counts():
    r = check(base_ops(), {0: 4, 1: 2}, DELIVERED)
    assert r.ok, summaries(r)
    st = r.stats["group"]
    assert (st["commits"], st["commits_acknowledged"], st["commits_refused"],
            st["commits_unknown"]) == (4, 2, 1, 1)
    assert (st["fetches_answered"], st["delivered"], st["delivered_distinct"]) == (2, 7, 6)
    assert (st["commit_lost"], st["skipped"], st["misdelivered"]) == (0, 0, 0)
    assert "commit_lost=0" in kgcheck.summary_line(r.stats)


def test_an_acknowledged_commit_not_seen_later_is_lost():
    ops = base_ops() + [fetch(5.0, 5.1, {0: 2, 1: 2})]  # p0 back at 2 after 4 was acked
    r = check(ops, {0: 4, 1: 2}, DELIVERED)
    assert not r.ok
    assert "partition 0" in summaries(r) and "below 4 acknowledged" in summaries(r)
    assert r.stats["group"]["commit_lost"] == 1


def test_a_fetch_asked_before_the_ack_may_show_the_older_offset():
    # invoked at 1.9, before the commit of 4 was acknowledged at 2.1
    ops = base_ops() + [fetch(1.9, 2.2, {0: 2, 1: -1001})]
    r = check(ops, {0: 4, 1: 2}, DELIVERED)
    assert r.ok, summaries(r)


def test_the_final_committed_offsets_count_too():
    r = check(base_ops(), {0: 3, 1: 2}, DELIVERED)
    assert not r.ok
    assert "the final OffsetFetch" in summaries(r)


def test_a_record_below_the_final_offset_never_given_is_skipped():
    delivered = {"gm-0": [[0, 0, "a"], [0, 2, "c"], [0, 3, "d"]],
                 "gm-1": [[1, 0, "x"], [1, 1, "y"]]}
    r = check(base_ops(), {0: 4, 1: 2}, delivered)
    assert not r.ok
    assert "b@0/1" in summaries(r)
    assert r.stats["group"]["skipped"] == 1


def test_records_at_and_above_the_final_offset_need_not_be_given():
    ops = [o for o in base_ops() if not (o["f"] == "gcommit" and o["args"]["parts"] == {"0": 4,
                                                                                          "1": 2})]
    ops = [o for o in ops if not (o["f"] == "gfetch" and o["result"] == {"0": 4, "1": 2})]
    delivered = {"gm-0": [[0, 0, "a"], [0, 1, "b"]]}
    r = check(ops, {0: 2, 1: -1001}, delivered)
    assert r.ok, summaries(r)


def test_a_record_other_than_the_log_is_misdelivered():
    delivered = dict(DELIVERED, **{"gm-2": [[1, 1, "z"]]})
    r = check(base_ops(), {0: 4, 1: 2}, delivered)
    assert not r.ok
    assert "given ['y', 'z'], log 'y'" in summaries(r)


def test_committed_past_the_high_watermark():
    ops = base_ops() + [commit(6.0, 6.1, {1: 5})]
    r = check(ops, {0: 4, 1: 5}, DELIVERED)
    assert not r.ok
    assert "past the high watermark" in summaries(r)


def test_nothing_acknowledged_tested_nothing():
    ops = [commit(1.0, 1.2, {0: 2}, "unknown"), fetch(1.5, 1.6, {0: 2})]
    r = check(ops, {0: 2}, {"gm-0": [[0, 0, "a"], [0, 1, "b"]]})
    assert not r.ok
    assert "no commit was acknowledged" in summaries(r)
