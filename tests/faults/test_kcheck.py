"""Unit tests of the Kafka checker (kcheck.py) on hand-made histories and
final reads, and of the segment reader the final reads use: a correct run
passes, and each anomaly -- lost, misplaced, duplicated (idempotent mode),
divergent, gaps, reordering, phantoms -- is reported and counted."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import checkers  # noqa: E402
import kcheck  # noqa: E402
import kworkload  # noqa: E402

_ids = iter(range(10 ** 9))


def send(prod, seq, part, offset=None, outcome="ok"):
    """A kproduce op: acknowledged at `offset`, or unknown."""
    v = "%s-%d" % (prod, seq)
    return {"id": next(_ids), "w": prod, "f": "kproduce", "key": "faults/%d" % part,
            "args": {"p": prod, "seq": seq, "v": v, "part": part}, "t0": float(seq),
            "t1": float(seq) + 0.5, "outcome": outcome,
            "result": {"offset": offset} if outcome == "ok" else None,
            "err": None if outcome == "ok" else "_MSG_TIMED_OUT", "zxid": None, "sid": None}


def run_check(ops, consumed, replicas=None, hw=None, idempotent=False):
    """consumed: {partition: [values in offset order]} (offsets 0..);
    replicas: {broker: {partition: [values]}}, default: every broker holds
    exactly the consumed log."""
    cons = {p: [[i, v] for i, v in enumerate(vs)] for p, vs in consumed.items()}
    if replicas is None:
        replicas = {b: dict(consumed) for b in (1, 2, 3)}
    reps = {b: {p: [[i, v] for i, v in enumerate(vs)] for p, vs in parts.items()}
            for b, parts in replicas.items()}
    hw = hw if hw is not None else {p: len(vs) for p, vs in consumed.items()}
    report = checkers.Report()
    kcheck.check_kafka(ops, {"hw": hw, "consumed": cons, "replicas": reps,
                             "idempotent": idempotent}, report)
    return report


def kinds(report):
    return " | ".join(a["summary"] for a in report.anomalies)


def correct_history():
    """Two producers on two partitions; one unknown send that did land,
    one that did not."""
    ops = [send("a", 0, 0, 0), send("b", 0, 0, 1), send("a", 1, 1, 0),
           send("a", 2, 0, 2), send("b", 1, 1, None, "unknown"),
           send("b", 2, 1, 2), send("a", 3, 0, None, "unknown")]
    consumed = {0: ["a-0", "b-0", "a-2"], 1: ["a-1", "b-1", "b-2"]}
    return ops, consumed


def test_correct_run_passes_with_counts():
    ops, consumed = correct_history()
    r = run_check(ops, consumed)
    assert r.ok, kinds(r)
    st = r.stats["kafka"]
    assert st["acknowledged"] == 5 and st["unacknowledged"] == 2
    assert (st["lost"], st["duplicated"], st["divergent"], st["reordered"]) == (0, 0, 0, 0)
    assert "lost=0" in kcheck.summary_line(r.stats)


def test_lost_acknowledged_record_is_reported():
    ops, consumed = correct_history()
    consumed[1] = ["a-1", "b-1"]             # b-2 acknowledged at 1/2, gone
    r = run_check(ops, consumed)
    assert not r.ok
    assert r.stats["kafka"]["lost"] == 1
    assert "LOST" in kinds(r) and "b-2@1/2" in kinds(r)


def test_record_at_another_offset_is_misplaced():
    ops, consumed = correct_history()
    consumed[0] = ["b-0", "a-0", "a-2"]      # a-0 acknowledged at 0, found at 1
    r = run_check(ops, consumed)
    assert r.stats["kafka"]["misplaced"] == 2  # a-0 and b-0 swapped
    assert "not at their acknowledged offset" in kinds(r)


def test_acknowledged_without_an_offset_must_be_in_its_partition():
    ops, consumed = correct_history()
    ops.append(send("c", 0, 0, None))        # delivered, offset not reported
    consumed[0].append("c-0")
    r = run_check(ops, consumed)
    assert r.ok, kinds(r)
    assert r.stats["kafka"]["acked_offset_unknown"] == 1
    consumed[0].pop()
    consumed[1].append("c-0")                # in another partition
    r = run_check(ops, consumed)
    assert r.stats["kafka"]["misplaced"] == 1, kinds(r)
    consumed[1].pop()                        # nowhere
    r = run_check(ops, consumed)
    assert r.stats["kafka"]["lost"] == 1, kinds(r)


def test_duplicates_count_and_fail_only_idempotent_runs():
    ops, consumed = correct_history()
    consumed[0] = ["a-0", "b-0", "a-2", "a-2"]
    r = run_check(ops, consumed)
    assert r.stats["kafka"]["duplicated"] == 1
    assert r.stats["kafka"]["duplicated_acknowledged"] == 1
    assert r.ok, kinds(r)                    # a plain producer's retry may do this
    r = run_check(ops, consumed, idempotent=True)
    assert not r.ok and "more than once by idempotent" in kinds(r)


def test_divergent_replicas_below_hw_are_reported():
    ops, consumed = correct_history()
    reps = {1: dict(consumed), 2: dict(consumed),
            3: {0: ["a-0", "a-2", "b-0"], 1: consumed[1]}}
    r = run_check(ops, consumed, replicas=reps)
    assert r.stats["kafka"]["divergent"] == 2
    assert "different records" in kinds(r)


def test_difference_above_hw_and_short_replicas_are_not_divergence():
    ops, consumed = correct_history()
    reps = {1: {0: consumed[0] + ["a-3"], 1: consumed[1]},   # unacked tail above HW
            2: {0: consumed[0][:1], 1: []},                   # a lagging follower
            3: {0: consumed[0] + ["zz-9"], 1: consumed[1]}}
    r = run_check(ops, consumed, replicas=reps)
    assert r.stats["kafka"]["divergent"] == 0
    assert not any("different records" in a["summary"] for a in r.anomalies)


def test_gap_in_offsets_is_reported():
    ops, consumed = correct_history()
    r = checkers.Report()
    cons = {0: [[0, "a-0"], [1, "b-0"], [3, "a-2"]], 1: [[0, "a-1"], [1, "b-1"], [2, "b-2"]]}
    kcheck.check_kafka(ops, {"hw": {0: 4, 1: 3}, "consumed": cons, "replicas": {},
                             "idempotent": False}, r)
    assert "not dense" in kinds(r)


def test_gap_in_a_replica_log_is_reported():
    ops, consumed = correct_history()
    r = checkers.Report()
    cons = {p: [[i, v] for i, v in enumerate(vs)] for p, vs in consumed.items()}
    reps = {1: cons, 2: {0: [[0, "a-0"], [2, "a-2"]], 1: cons[1]}}
    kcheck.check_kafka(ops, {"hw": {0: 3, 1: 3}, "consumed": cons, "replicas": reps,
                             "idempotent": False}, r)
    assert len(r.anomalies) == 1, kinds(r)
    assert "broker 2 partition 0: its log's offsets are not" in kinds(r)


def test_short_read_against_hw_is_reported():
    ops, consumed = correct_history()
    r = run_check(ops, consumed, hw={0: 5, 1: 3})
    assert "high watermark is 5" in kinds(r)


def test_unacknowledged_record_out_of_order_is_reported():
    ops, consumed = correct_history()
    ops.append(send("b", 3, 1, None, "unknown"))
    consumed[1] = ["a-1", "b-3", "b-1", "b-2"]   # b-3 before b-1 and b-2
    r = run_check(ops, consumed)
    assert r.stats["kafka"]["reordered"] >= 1
    assert "comes after its seq 3" in kinds(r)


def test_retried_batch_repeated_after_itself_is_in_order():
    ops, consumed = correct_history()
    consumed[1] = ["a-1", "b-1", "b-2", "b-1", "b-2"]
    r = run_check(ops, consumed)
    assert r.stats["kafka"]["reordered"] == 0
    assert r.ok, kinds(r)


def test_phantom_record_is_reported():
    ops, consumed = correct_history()
    consumed[0] = consumed[0] + ["x-1"]
    r = run_check(ops, consumed)
    assert "no producer sent" in kinds(r)


def test_a_run_without_acknowledgements_tested_nothing():
    ops = [send("a", 0, 0, None, "unknown")]
    r = run_check(ops, {0: []})
    assert "no record was acknowledged" in kinds(r)


def test_no_final_reads_is_an_anomaly():
    ops, _ = correct_history()
    r = checkers.Report()
    kcheck.check_kafka(ops, None, r)
    assert "no final reads" in kinds(r)


# ---- the segment reader ----

def zigzag(n):
    n = (n << 1) ^ (n >> 63)
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def batch(base, values, attrs=0):
    recs = b""
    for i, v in enumerate(values):
        body = (b"\x00" + zigzag(0) + zigzag(i) + zigzag(-1) +
                (zigzag(-1) if v is None else zigzag(len(v)) + v) + zigzag(0))
        recs += zigzag(len(body)) + body
    after_len = struct.pack(">iBI", 7, 2, 0) + struct.pack(
        ">hiqqqhii", attrs, len(values) - 1, 0, 0, -1, -1, -1, len(values)) + recs
    return struct.pack(">qi", base, len(after_len)) + after_len


def test_parse_batches_reads_offsets_and_values_and_stops_at_a_torn_tail():
    data = batch(0, [b"a-0", b"b-0"]) + batch(2, [b"x" * 300]) + batch(3, [None])
    got = kworkload.parse_batches(data)
    assert got == [(0, "a-0"), (1, "b-0"), (2, "x" * 300), (3, None)]
    assert kworkload.parse_batches(data + batch(4, [b"c"])[:20]) == got
    assert kworkload.parse_batches(data[:-1]) == got[:3]


def test_parse_batches_skips_control_batches():
    data = batch(0, [b"a"]) + batch(1, [b"ctl"], attrs=0x20) + batch(2, [b"b"])
    assert kworkload.parse_batches(data) == [(0, "a"), (2, "b")]
