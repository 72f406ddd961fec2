#!/usr/bin/env python3
"""The fault-injection run: a 3-server keel cluster behind the peer proxy,
kazoo workloads, the nemesis, then the checkers.

  runner.py run [--duration 90] [--seed N] [--nemesis default|all|none|k1,k2]
                [--keel build/keel] [--out DIR] [--expect-anomaly CHECKER]
                [--brokers 3 [--kafka JSON] [--kafka-idempotent] [--no-zk]
                 [--kafka-group N]]
  runner.py check DIR        re-check a saved run (history + final reads)

A run prints its seed first. At the end it heals every fault, reads the
final state, and runs every checker. A failing run (an anomaly, a worker
crash, a nemesis step that could not be carried out, servers that disagree)
keeps its directory: history.jsonl, final.json, nemesis.json, run.json,
report.txt and the servers' logs, and prints how to re-check and re-run it.

--expect-anomaly inverts the verdict for planted-bug builds: the run passes
only if that checker reports an anomaly (and fails if it finds none).

Environment: KEEL_FAULTS_SEED (the seed when --seed is not given),
KEEL_FAULTS_ARTIFACTS (where failing runs are kept; default the temp dir).

Exit status: 0 pass, 1 anomalies (or, with --expect-anomaly, none), 2 the
run itself broke (could not start the cluster, ...).
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checkers  # noqa: E402
import history as hist  # noqa: E402
import kcheck  # noqa: E402
import kgcheck  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

SERVER_ARGS = ["--election-timeout-ms", "1000", "--heartbeat-ms", "100",
               "--tick-ms", "500", "--min-session-timeout-ms", "1000",
               "--snapshot-entries", "3000", "--snapshot-trailing", "500"]


def log(msg):
    print(msg, flush=True)


def parse_duration(s):
    s = str(s).strip()
    mult = {"s": 1, "m": 60, "h": 3600}
    if s and s[-1] in mult:
        return float(s[:-1]) * mult[s[-1]]
    return float(s)


def summarize_ops(ops):
    by = {}
    for o in ops:
        d = by.setdefault(o["f"], {"ok": 0, "fail": 0, "unknown": 0})
        d[o["outcome"]] = d.get(o["outcome"], 0) + 1
    return by


def save_run(out, history_ops, final, nemesis_schedule, meta, report_text, cluster=None,
             brokers=None):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        for o in history_ops:
            f.write(json.dumps(o, sort_keys=True) + "\n")
    with open(os.path.join(out, "final.json"), "w") as f:
        json.dump(final, f, indent=1, sort_keys=True)
    with open(os.path.join(out, "nemesis.json"), "w") as f:
        json.dump(nemesis_schedule, f, indent=1)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write(report_text + "\n")
    if cluster is not None:
        logs = os.path.join(out, "logs")
        os.makedirs(logs, exist_ok=True)
        for s in cluster.servers.values():
            if os.path.exists(s.log_path):
                shutil.copy(s.log_path, logs)
        extra = [os.path.join(cluster.root, "netproxy.log")]
        if brokers is not None:
            extra += [b.log_path for b in brokers.brokers.values()]
            extra.append(os.path.join(brokers.root, "kproxy.log"))
        for p in extra:
            if os.path.exists(p):
                shutil.copy(p, logs)


LOG_ALARMS = ("assertion failed", "AddressSanitizer", "LeakSanitizer", "runtime error:",
              "ThreadSanitizer")


def scan_logs(cluster, brokers=None):
    """Assertion failures and sanitizer reports in the servers' and brokers'
    logs (a sanitizer build need not stop on them)."""
    out = []
    procs = [("server", s) for s in cluster.servers.values()]
    if brokers is not None:
        procs += [("broker", b) for b in brokers.brokers.values()]
    for what, s in procs:
        for line in s.log().splitlines():
            if any(a in line for a in LOG_ALARMS):
                out.append("%s %d log: %s" % (what, s.id, line.strip()[:300]))
                break
    return out


def check_everything(ops, final):
    report = checkers.check_all(ops, final)
    kcheck.check_kafka(ops, final.get("kafka"), report)
    kgcheck.check_group(ops, final.get("kgroup"), final.get("kafka"), report)
    return report


def verdict(report, expect):
    """(passed, message)."""
    if expect is None:
        return report.ok, ("PASS: no anomalies" if report.ok else
                           "FAIL: %d anomalies" % len(report.anomalies))
    hits = [a for a in report.anomalies if a["checker"] == expect]
    if hits:
        return True, "PASS: the planted bug was caught by the %s checker (%d anomalies)" % (
            expect, len(hits))
    return False, "FAIL: expected the %s checker to catch the planted bug; it did not" % expect


def cmd_check(args):
    ops = hist.load(os.path.join(args.dir, "history.jsonl"))
    with open(os.path.join(args.dir, "final.json")) as f:
        final = json.load(f)
    if "counter" in final and final["counter"] is not None:
        final["counter"] = tuple(final["counter"])
    report = check_everything(ops, final)
    log("re-check of %s: %d ops" % (args.dir, len(ops)))
    log(report.text())
    ok, msg = verdict(report, args.expect_anomaly)
    log(msg)
    return 0 if ok else 1


def cmd_run(args):
    # Imported here: `check` must work without kazoo.
    import knemesis as nem
    import workloads as wl
    from cluster import ProxiedCluster

    if args.seed is None and os.environ.get("KEEL_FAULTS_SEED"):
        args.seed = int(os.environ["KEEL_FAULTS_SEED"])
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    duration = parse_duration(args.duration)
    kinds = nem.parse_kinds(args.nemesis)
    if args.kafka_group and not args.brokers:
        raise SystemExit("--kafka-group needs --brokers")
    if nem.has_broker_kinds(kinds) and not args.brokers:
        raise SystemExit("broker nemeses (%s) need --brokers" % args.nemesis)
    keel = os.path.abspath(args.keel)
    log("keel faults: seed %d, %.0fs, nemesis %s, keel %s" % (
        seed, duration, ",".join(kinds) or "none", keel))
    rerun = "%s %s run --seed %d --duration %s --nemesis %s --keel %s%s" % (
        sys.executable, os.path.relpath(os.path.abspath(__file__)), seed, args.duration,
        args.nemesis, args.keel,
        (" --expect-anomaly " + args.expect_anomaly) if args.expect_anomaly else "")
    if args.brokers:
        rerun += " --brokers %d%s%s%s" % (
            args.brokers, " --kafka '%s'" % args.kafka if args.kafka else "",
            (" --kafka-idempotent" if args.kafka_idempotent else "") +
            (" --kafka-leaders " + args.kafka_leaders if args.kafka_leaders else ""),
            " --no-zk" if args.no_zk else "")
        if args.kafka_group:
            rerun += " --kafka-group %d" % args.kafka_group
    out = args.out or tempfile.mkdtemp(prefix="keel-faults-%d-" % seed,
                                       dir=os.environ.get("KEEL_FAULTS_ARTIFACTS"))
    cfg = wl.Config(**(json.loads(args.workload) if args.workload else {}))
    if args.no_zk:
        for k in ("reg_workers", "set_workers", "counter_workers", "seq_workers",
                  "session_workers"):
            setattr(cfg, k, 0)
    kcfg = None
    server_args = SERVER_ARGS + args.server_arg
    if args.brokers:
        import kbrokers
        import kworkload as kwl
        kcfg = kwl.KafkaConfig(**(json.loads(args.kafka) if args.kafka else {}))
        kcfg.idempotent = kcfg.idempotent or args.kafka_idempotent
        if args.kafka_leaders:
            kcfg.leaders = args.kafka_leaders
        server_args = SERVER_ARGS + kbrokers.SERVER_ARGS + args.server_arg
    root = tempfile.mkdtemp(prefix="keel-faults-cluster-")
    cluster = ProxiedCluster(3, server_args=server_args, root=root, keel=keel)
    brokers = kbrokers.Brokers(cluster, args.brokers, root) if args.brokers else None
    history = hist.History()
    run = wl.Run(cluster, history, cfg, seed)
    final = {}
    nemesis = None
    problems = []
    meta = {"seed": seed, "duration_s": duration, "nemesis": kinds, "keel": keel,
            "server_args": server_args, "workload": cfg.__dict__,
            "brokers": args.brokers, "kafka": kcfg.__dict__ if kcfg else None,
            "rerun": rerun}
    t_start = time.monotonic()
    try:
        cluster.start()
        cluster.wait_leader(60)
        zk = wl.new_client(cluster.connect_string(), 10.0)
        zk.start(timeout=60)
        wl.setup_tree(zk, run.stop)
        zk.stop()
        zk.close()
        rot = wl.Rotator(run)
        rot.start()
        workers = wl.make_workers(run)
        nem_args = (history, kinds, seed)
        nem_kw = dict(interval=(args.interval_min, args.interval_max),
                      hold=(args.hold_min, args.hold_max), log=log)
        if brokers is not None:
            brokers.start()
            brokers.wait_active(60)
            kwl.create_topic(brokers, kcfg, log=log)
            workers += kwl.make_producers(run, brokers, kcfg)
            if args.kafka_group:
                import kgroups
                members, gworkers = kgroups.make_workers(run, brokers, kcfg, args.kafka_group)
                workers += gworkers
            nemesis = nem.KafkaNemesis(cluster, brokers, kwl.TOPIC, *nem_args, **nem_kw)
        else:
            nemesis = nem.Nemesis(cluster, *nem_args, **nem_kw)
        for w in workers:
            w.start()
        nemesis.start()
        last = time.monotonic()
        while time.monotonic() - t_start < duration:
            time.sleep(1.0)
            if time.monotonic() - last >= args.progress:
                last = time.monotonic()
                log("  progress %6.0fs: %d ops, faults %s" % (
                    history.now(), len(history.ops), nemesis.counts))
        log("stopping the nemesis and healing the cluster")
        nemesis.stop()
        nemesis.join(300)
        if nemesis.is_alive():
            problems.append("the nemesis did not stop within 300s")
        nemesis.heal()
        if not nemesis.restore_members():
            problems.append("could not restore the membership")
        cluster.wait_leader(60)
        # Let the workers run a while on the healed cluster: what was held
        # back is delivered, and the histories end with fault-free ops.
        time.sleep(args.quiet)
        run.stop.set()
        # Every worker was told at once: one deadline for them all. A
        # planted-bug run (--expect-anomaly) waits less: its bug can leave a
        # request unanswered for good (servers that lost what they
        # acknowledged), and only the expected checker's verdict counts; an
        # op still open is closed as unknown below either way.
        deadline = time.monotonic() + (90 if args.expect_anomaly is None else 15)
        for w in workers + [rot]:
            w.join(max(0.0, deadline - time.monotonic()))
            if w.is_alive():
                problems.append("worker %s did not stop" % w.name)
        history.close_open()
        cluster.wait_leader(60)
        final = wl.read_final(cluster, run)
        if brokers is not None:
            final["kafka"] = kwl.read_final(brokers, kcfg, log=log)
            if args.kafka_group:
                final["kgroup"] = kgroups.read_final(brokers, kcfg, members, log=log)
        digests = wl.replica_digests(cluster)
        distinct = {json.dumps(d, sort_keys=True) for d in digests.values()}
        if len(digests) != len(cluster.servers) or len(distinct) != 1:
            problems.append("replicas disagree after the heal: %s" % json.dumps(
                digests, sort_keys=True)[:2000])
        problems += scan_logs(cluster, brokers)
        problems += ["worker error: " + e for e in run.errors]
        problems += ["nemesis: " + e for e in nemesis.failures]
    except Exception as e:  # noqa: BLE001
        problems.append("run broke: %r" % e)
        import traceback
        traceback.print_exc()
    finally:
        run.stop.set()
        if nemesis is not None:
            nemesis.stop()
    elapsed = time.monotonic() - t_start
    history.close_open()
    ops = history.ops
    report = check_everything(ops, final) if final else checkers.Report()
    for p in problems:
        report.anomaly("run", p)
    if not final:
        report.anomaly("run", "no final reads: the checkers could not run")
    faults = dict(nemesis.counts) if nemesis else {}
    meta.update(elapsed_s=round(elapsed, 1), ops=len(ops), faults=faults)
    lines = ["seed %d, %.0fs, %d ops, faults injected %s (%d in all)" % (
        seed, elapsed, len(ops), faults, sum(faults.values()))]
    for f, d in sorted(summarize_ops(ops).items()):
        lines.append("  %-15s ok=%d fail=%d unknown=%d" % (f, d["ok"], d["fail"], d["unknown"]))
    lines.append(report.text())
    if brokers is not None:
        lines.append(kcheck.summary_line(report.stats))
        if args.kafka_group:
            lines.append(kgcheck.summary_line(report.stats))
    ok, msg = verdict(report, args.expect_anomaly)
    lines.append(msg)
    text = "\n".join(lines)
    log(text)
    keep = not ok or args.keep or args.out
    if keep:
        save_run(out, ops, final, nemesis.schedule if nemesis else [], meta, text, cluster,
                 brokers)
        log("saved the run in %s" % out)
        log("  re-check: %s %s check %s%s" % (
            sys.executable, os.path.relpath(os.path.abspath(__file__)), out,
            (" --expect-anomaly " + args.expect_anomaly) if args.expect_anomaly else ""))
        log("  re-run:   %s" % rerun)
        log("  (a re-run repeats the seeded choices -- which faults, which ops -- not the "
            "timing)")
    else:
        shutil.rmtree(out, ignore_errors=True)
    if brokers is not None:
        brokers.stop()
    cluster.cleanup()
    broke = any(a["checker"] == "run" and a["summary"].startswith(("run broke", "no final"))
                for a in report.anomalies)
    if broke and args.expect_anomaly is None:
        return 2
    return 0 if ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--duration", default="90s")
    r.add_argument("--seed", type=int)
    r.add_argument("--nemesis", default="default")
    r.add_argument("--keel", default=os.path.join(REPO, "build", "keel"))
    r.add_argument("--out")
    r.add_argument("--keep", action="store_true", help="keep the run directory even on a pass")
    r.add_argument("--expect-anomaly")
    r.add_argument("--workload", help="JSON overrides of workloads.Config")
    r.add_argument("--server-arg", action="append", default=[],
                   help="extra `keel server` argument (repeat)")
    r.add_argument("--interval-min", type=float, default=2.0)
    r.add_argument("--interval-max", type=float, default=6.0)
    r.add_argument("--hold-min", type=float, default=2.0)
    r.add_argument("--hold-max", type=float, default=8.0)
    r.add_argument("--quiet", type=float, default=5.0,
                   help="seconds of fault-free workload after the heal")
    r.add_argument("--progress", type=float, default=60.0)
    r.add_argument("--brokers", type=int, default=0,
                   help="start N `keel broker`s and run the Kafka workload")
    r.add_argument("--kafka", help="JSON overrides of kworkload.KafkaConfig")
    r.add_argument("--kafka-idempotent", action="store_true",
                   help="producers with enable.idempotence=true (duplicates become anomalies)")
    r.add_argument("--kafka-leaders", choices=["spread", "one"],
                   help="spread: the controller places partition leaders (default); one: "
                   "one broker leads every partition")
    r.add_argument("--kafka-group", type=int, default=0, metavar="N",
                   help="N consumers in one group commit what they read (kgroups.py); "
                   "nemeses gkill-coord, gpause-coord target its coordinator")
    r.add_argument("--no-zk", action="store_true",
                   help="no ZooKeeper workers (the Kafka workload only)")
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--expect-anomaly")
    args = p.parse_args(argv)
    if args.cmd == "run":
        # --server-arg values start with "--": argparse wants them as
        # --server-arg=--flag; split "a b" into two.
        args.server_arg = [x for a in args.server_arg for x in a.split()]
        return cmd_run(args)
    return cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
