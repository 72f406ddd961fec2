"""The Kafka checker: what acks=all producers were told against what the
partition logs hold after the run (docs/testing-faults.md).

Inputs: the history's "kproduce" ops (kworkload.py) -- args {"p": producer,
"seq": n, "v": value, "part": partition}, outcome ok with result
{"offset": o} (the broker acknowledged the record at offset o), or unknown
(an error or no answer: the record may or may not be in the log) -- and the
final reads (`final["kafka"]`):

  hw        {partition: high watermark} from the leader after the heal
  consumed  {partition: [[offset, value], ...]} a consumer's read of the
            partition from the start to the end (below the high watermark)
  replicas  {broker: {partition: [[offset, value], ...]}} each broker's own
            log, read from its files (every record, also above the HW)
  idempotent  whether the producers had enable.idempotence=true
  isr_complete  whether every replica was in the ISR when the logs were read

It checks, per partition:
  lost        an acknowledged record is not in the consumed log at all;
  misplaced   an acknowledged record is there, but not at the offset it was
              acknowledged at (a delivery report may carry no offset:
              librdkafka's idempotent producer reports some records
              persisted without one; such a record must be in its own
              partition, and is counted as acked_offset_unknown);
  duplicated  a record appears at more than one offset. Always counted; an
              anomaly with idempotent producers (a plain producer's retry of
              a batch whose answer was lost legitimately writes it twice;
              with idempotence that must not happen);
  divergent   two logs (the consumed one, every broker's) hold different
              records at the same offset below the high watermark;
  dense       the consumed offsets run 0, 1, 2, ... up to the high
              watermark with no gap, and every broker's log runs 0, 1, 2, ...;
  order       per producer, the records of a partition appear in the order
              they were sent (their first appearances: a plain producer's
              retry may repeat a batch after itself), acknowledged or not;
  phantom     a record no producer sent.
A run in which no record was acknowledged is an anomaly too (it tested
nothing).
"""
import collections

from history import OK

PRODUCE = "kproduce"


def _intkeys(d):
    return {int(k): v for k, v in (d or {}).items()}


def _first_gap(offs):
    for i, off in enumerate(offs):
        if off != i:
            return "offset %d at position %d (after %s)" % (off, i, offs[max(0, i - 3):i])
    return "none"


def check_kafka(ops, kfinal, report, max_listed=10):
    """Adds anomalies and the "kafka" statistics to `report`."""
    sends = [o for o in ops if o["f"] == PRODUCE]
    if not sends and not kfinal:
        return
    st = collections.OrderedDict()
    report.stats["kafka"] = st
    if not kfinal:
        report.anomaly("kafka", "no final reads of the partitions")
        return
    idempotent = bool(kfinal.get("idempotent"))
    hw = _intkeys(kfinal.get("hw"))
    consumed = _intkeys(kfinal.get("consumed"))
    replicas = {int(b): _intkeys(parts) for b, parts in (kfinal.get("replicas") or {}).items()}
    by_value = {}
    for o in sends:
        by_value[o["args"]["v"]] = o
    acked = [o for o in sends if o["outcome"] == OK]
    st["sent"] = len(sends)
    st["acknowledged"] = len(acked)
    st["unacknowledged"] = len(sends) - len(acked)
    if sends and not acked:
        report.anomaly("kafka", "no record was acknowledged: the producers never worked, "
                       "nothing was tested")

    # Where each value is in the consumed logs.
    where = collections.defaultdict(list)        # value -> [(partition, offset)]
    at = {}                                      # (partition, offset) -> value
    for p, recs in sorted(consumed.items()):
        for off, v in recs:
            where[v].append((p, off))
            at[(p, off)] = v
    st["consumed"] = len(at)

    # dense: offsets 0..n-1, in order, reaching the high watermark.
    for p, recs in sorted(consumed.items()):
        offs = [off for off, _ in recs]
        if offs != list(range(len(offs))):
            report.anomaly("kafka", "partition %d: consumed offsets are not dense and in "
                           "order: %s" % (p, _first_gap(offs)))
        if p in hw and len(offs) != hw[p]:
            report.anomaly("kafka", "partition %d: read %d records but the high watermark "
                           "is %d" % (p, len(offs), hw[p]))

    # Every broker's own log is dense too (no retention, no compaction).
    for b, parts in sorted(replicas.items()):
        for p, recs in sorted(parts.items()):
            offs = [off for off, _ in recs]
            if offs != list(range(len(offs))):
                report.anomaly("kafka", "broker %d partition %d: its log's offsets are not "
                               "0, 1, 2, ...: %s" % (b, p, _first_gap(offs)))

    # lost / misplaced.
    lost, misplaced = [], []
    offset_unknown = 0
    for o in acked:
        v = o["args"]["v"]
        p = o["args"]["part"]
        off = (o.get("result") or {}).get("offset")
        if off is None:
            offset_unknown += 1
            if any(wp == p for wp, _ in where.get(v, ())):
                continue
        elif at.get((p, off)) == v:
            continue
        (misplaced if where.get(v) else lost).append(o)
    st["acked_offset_unknown"] = offset_unknown
    st["lost"] = len(lost)
    st["misplaced"] = len(misplaced)
    if lost:
        report.anomaly("kafka", "%d acknowledged records LOST (not in the log), e.g. %s" % (
            len(lost), ", ".join("%s@%d/%s" % (o["args"]["v"], o["args"]["part"],
                                               (o.get("result") or {}).get("offset"))
                                 for o in lost[:max_listed])), lost[:max_listed])
    if misplaced:
        report.anomaly("kafka", "%d acknowledged records not at their acknowledged offset, "
                       "e.g. %s" % (len(misplaced), ", ".join(
                           "%s acked @%d/%s, found at %s" % (
                               o["args"]["v"], o["args"]["part"],
                               (o.get("result") or {}).get("offset"), where[o["args"]["v"]])
                           for o in misplaced[:max_listed])), misplaced[:max_listed])

    # duplicated / phantom.
    dups = {v: w for v, w in where.items() if len(w) > 1}
    acked_values = {o["args"]["v"] for o in acked}
    st["duplicated"] = len(dups)
    st["duplicated_acknowledged"] = sum(1 for v in dups if v in acked_values)
    if dups and idempotent:
        report.anomaly("kafka", "%d records written more than once by idempotent producers, "
                       "e.g. %s" % (len(dups), ", ".join(
                           "%s at %s" % (v, w) for v, w in sorted(dups.items())[:max_listed])))
    phantoms = sorted(v for v in where if v not in by_value)
    st["phantom"] = len(phantoms)
    if phantoms:
        report.anomaly("kafka", "%d records in the log that no producer sent, e.g. %s" % (
            len(phantoms), phantoms[:max_listed]))

    # order: per producer and partition, first appearances in sent order.
    reordered = 0
    for p, recs in sorted(consumed.items()):
        seen = set()
        last = {}                                # producer -> (seq, offset)
        for off, v in recs:
            o = by_value.get(v)
            if o is None or v in seen:
                continue
            seen.add(v)
            prod, seq = o["args"]["p"], o["args"]["seq"]
            prev = last.get(prod)
            if prev is not None and seq < prev[0]:
                reordered += 1
                if reordered <= max_listed:
                    report.anomaly("kafka", "partition %d: producer %s's seq %d at offset %d "
                                   "comes after its seq %d at offset %d" % (
                                       p, prod, seq, off, prev[0], prev[1]),
                                   [by_value[v]])
            else:
                last[prod] = (seq, off)
    st["reordered"] = reordered

    # divergent: any two logs disagree at an offset below the HW.
    logs = {"consumer": consumed}
    for b, parts in sorted(replicas.items()):
        logs["broker %d" % b] = parts
    divergent = 0
    examples = []
    for p in sorted(set(hw) | set(consumed)):
        limit = hw.get(p, len(consumed.get(p, [])))
        views = {}
        for name, parts in logs.items():
            views[name] = {off: v for off, v in parts.get(p, []) if off < limit}
        offsets = set()
        for m in views.values():
            offsets |= set(m)
        for off in sorted(offsets):
            held = {name: m[off] for name, m in views.items() if off in m}
            if len(set(held.values())) > 1:
                divergent += 1
                if len(examples) < max_listed:
                    examples.append("partition %d offset %d: %s" % (p, off, held))
        for name, m in views.items():
            if name != "consumer" and p in replicas.get(int(name.split()[1]), {}):
                st.setdefault("replica_records_below_hw", {})["%s/p%d" % (
                    name.split()[1], p)] = len(m)
    st["divergent"] = divergent
    if divergent:
        report.anomaly("kafka", "%d offsets below the high watermark where logs hold "
                       "different records%s, e.g. %s" % (
                           divergent, "" if kfinal.get("isr_complete", True) else
                           " (read before every replica was back in the ISR)",
                           "; ".join(examples)))
    st["hw"] = dict(sorted(hw.items()))


def summary_line(stats):
    """The counts the notes quote."""
    k = stats.get("kafka") or {}
    return ("kafka: acknowledged=%s lost=%s duplicated=%s (of them acknowledged %s) "
            "divergent=%s misplaced=%s reordered=%s" % (
                k.get("acknowledged"), k.get("lost"), k.get("duplicated"),
                k.get("duplicated_acknowledged"), k.get("divergent"), k.get("misplaced"),
                k.get("reordered")))

