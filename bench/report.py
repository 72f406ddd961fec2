#!/usr/bin/env python3
"""report.py — the machine probe and the report of bench/compare.sh.

  report.py probe DIR
      Prints a JSON description of this machine: CPU model and count,
      memory, kernel, the fdatasync latency of the file system holding DIR
      (where the servers keep their data), and the versions of java and of the
      ZooKeeper packages.
  report.py report --results FILE.jsonl --machine FILE.json --options JSON --out DIR
  report.py report --from-json bench/results/latest.json --out DIR   (re-render)
      Reads the raw runs written by compare.sh (one JSON object per line),
      takes the median over rounds per system and metric, and writes
      DIR/latest.md (the table), DIR/latest.json (table + raw runs + machine)
      and DIR/compare.png (gnuplot). Prints the table on stdout.

Only numbers present in the raw runs appear; a system or workload that did
not run shows "not measured" with the reason recorded in the raw run.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

# The two systems compared: first column / second column, ratio = first / second.
# compare.sh --calibrate pits a second ZooKeeper ensemble against the first.
NAMES = {"keel": "keel", "zookeeper": "ZooKeeper 3.8", "zookeeper2": "ZooKeeper 3.8 (2nd ensemble)"}
COLORS = {"keel": "#1f77b4", "zookeeper": "#ff7f0e", "zookeeper2": "#2ca02c"}

# (key, label, unit, target on the ratio keel / ZooKeeper: (comparison, bound, text) or None)
METRICS = [
    ("create_ops", "create throughput", "ops/s", (">=", 2.0, ">= 2")),
    ("create_p99", "create p99 latency", "ms", ("<", 1.0, "< 1")),
    ("set_ops", "set throughput", "ops/s", (">=", 2.0, ">= 2")),
    ("set_p99", "set p99 latency", "ms", ("<", 1.0, "< 1")),
    ("get_ops", "get throughput", "ops/s", (">=", 2.0, ">= 2")),
    ("get_p99", "get p99 latency", "ms", ("<", 1.0, "< 1")),
    ("mix_ops", "mix 90/10 throughput", "ops/s", None),
    ("mix_p99", "mix 90/10 p99 latency", "ms", None),
    ("sync_p50", "sync write latency p50 (1 client)", "ms", ("<", 1.0, "< 1")),
    ("sync_p99", "sync write latency p99 (1 client)", "ms", None),
    ("mem_rss", "memory per znode (RSS growth)", "B", ("<=", 1.0 / 3.0, "<= 1/3")),
    ("mem_heap", "memory per znode (ZK: live heap after full GC)", "B", ("<=", 1.0 / 3.0, "<= 1/3")),
    ("failover_median", "failover: kill -9 leader to first write, median", "ms", ("<=", 1.0, "<= 1")),
    ("failover_max", "failover: kill -9 leader to first write, max", "ms", None),
]
COMPARE = {">=": lambda r, b: r >= b, "<": lambda r, b: r < b, "<=": lambda r, b: r <= b}


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def fsync_latency_ms(directory, count=200):
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, b"\0" * (1 << 20))
        os.fsync(fd)
        samples = []
        for i in range(count):
            os.pwrite(fd, b"x" * 512, (i * 4096) % (1 << 20))
            start = time.perf_counter()
            os.fdatasync(fd)
            samples.append((time.perf_counter() - start) * 1000.0)
    finally:
        os.close(fd)
        os.unlink(path)
    samples.sort()
    return {"p50": round(samples[len(samples) // 2], 3), "p99": round(samples[int(len(samples) * 0.99) - 1], 3),
            "samples": count}


def probe(directory, note=""):
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0] \
        if shutil.which("java") else "not installed"
    versions = {}
    for pkg in ("zookeeper", "libzookeeper-mt-dev"):
        versions[pkg] = run(["dpkg-query", "-W", "-f=${Version}", pkg]) or "not installed"
    machine = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1048576, 1),
        "kernel": platform.release(),
        "filesystem": run(["findmnt", "-no", "FSTYPE", "-T", directory]) or run(["stat", "-f", "-c", "%T", directory]),
        "fdatasync_ms": fsync_latency_ms(directory),
        "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
        "java": java,
        "packages": versions,
        "git_commit": run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"]),
        "note": note,
    }
    json.dump(machine, sys.stdout, indent=1)
    print()


def load_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                runs.append(json.loads(line))
    return runs


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summarize(runs, system):
    """metric key -> value (or None), plus per-metric round values."""
    mine = [r for r in runs if r.get("system") == system and "result" in r]
    out, rounds = {}, {}

    def put(key, values):
        rounds[key] = values
        out[key] = median(values)

    for workload in ("create", "set", "get", "mix"):
        rs = [r["result"] for r in mine if r["workload"] == workload]
        put(workload + "_ops", [r["ops_per_s"] for r in rs if r.get("ops", 0) > 0])
        put(workload + "_p99", [r["lat_us"]["p99"] / 1000.0 for r in rs if r.get("ops", 0) > 0])
    rs = [r["result"] for r in mine if r["workload"] == "sync" and r["result"].get("ops", 0) > 0]
    put("sync_p50", [r["lat_us"]["p50"] / 1000.0 for r in rs])
    put("sync_p99", [r["lat_us"]["p99"] / 1000.0 for r in rs])
    fo = [r["result"].get("failover_ms") for r in mine if r["workload"] == "failover"]
    done = [v for v in fo if v is not None]
    rounds["failover_median"] = rounds["failover_max"] = done
    out["failover_median"] = median(done)
    out["failover_max"] = max(done) if done else None
    out["failover_failed"] = len(fo) - len(done)
    mem = [r for r in mine if r["workload"] == "memory"]
    out["mem_rss"] = out["mem_heap"] = None
    if mem:
        m = mem[-1]
        res = m["result"]
        created = res.get("ops", 0)
        out["mem_znodes"] = created
        before, after = m.get("rss_kib_before"), m.get("rss_kib_after")
        if before and after and created:
            out["mem_rss"] = mean([(a - b) * 1024.0 / created for a, b in zip(after, before) if a >= 0 and b >= 0])
        before, after = m.get("jvm_heap_used_kib_before"), m.get("jvm_heap_used_kib_after")
        if before and after and created:
            deltas = [(a - b) * 1024.0 / created for a, b in zip(after, before) if a >= 0 and b >= 0]
            out["mem_heap"] = mean(deltas)
        elif not system.startswith("zookeeper"):
            # keel has no garbage-collected heap: its RSS is the comparable figure.
            out["mem_heap"] = out["mem_rss"]
        out["mem_detail"] = {k: m.get(k, res.get(k)) for k in (
            "rss_kib_before", "rss_kib_after", "rss_kib_after_full_gc",
            "jvm_heap_used_kib_before", "jvm_heap_used_kib_after")}
    out["client_cpu_pct"] = {w: median([r["result"].get("client_cpu_pct") for r in mine if r["workload"] == w])
                             for w in ("create", "set", "get", "mix", "sync")}
    out["errors"] = sum(r["result"].get("errors_in_window", 0) for r in mine if r["workload"] != "failover")
    return out, rounds


def fmt(value, unit):
    if value is None:
        return "not measured"
    if unit == "ops/s" or unit == "B":
        return f"{value:,.0f}"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def table(summary, pair, with_targets=True):
    first, second = pair
    lines = [f"| metric | unit | {NAMES[first]} | {NAMES[second]} | ratio |" + (" target | met |" if with_targets else ""),
             "|---|---|---:|---:|---:|" + ("---|---|" if with_targets else "")]
    rows = []
    for key, label, unit, target in METRICS:
        k, z = summary[first].get(key), summary[second].get(key)
        ratio = k / z if k is not None and z else None
        target_text = target[2] if target else ""
        met = ""
        if target is not None:
            met = "—" if ratio is None else ("yes" if COMPARE[target[0]](ratio, target[1]) else "**no**")
        lines.append(f"| {label} | {unit} | {fmt(k, unit)} | {fmt(z, unit)} | "
                     f"{'%.2f' % ratio if ratio is not None else '—'} |" +
                     (f" {target_text} | {met} |" if with_targets else ""))
        rows.append({"metric": key, "label": label, "unit": unit, first: k, second: z,
                     "ratio": ratio, "target": target_text or None, "met": met or None})
    return "\n".join(lines), rows


def write_chart(summary, pair, out_dir):
    if not shutil.which("gnuplot"):
        return "gnuplot not installed; no chart"
    # gnuplot runs in out_dir, so the script and data name no absolute path.
    dat = "compare.dat"

    def val(system, key):
        v = summary[system].get(key)
        return "-" if v is None else f"{v:.3f}"

    blocks = [
        ("throughput", [("create", "create_ops"), ("set", "set_ops"), ("get", "get_ops"), ("mix", "mix_ops")]),
        ("p99", [("create", "create_p99"), ("set", "set_p99"), ("get", "get_p99"), ("mix", "mix_p99")]),
        ("sync", [("p50", "sync_p50"), ("p99", "sync_p99")]),
        ("failover", [("median", "failover_median"), ("max", "failover_max")]),
        ("memory", [("RSS growth", "mem_rss"), ("ZK live heap", "mem_heap")]),
    ]
    with open(os.path.join(out_dir, dat), "w") as f:
        for name, items in blocks:
            f.write(f"# {name}\n")
            for label, key in items:
                f.write(f'"{label}" {val(pair[0], key)} {val(pair[1], key)}\n')
            f.write("\n\n")
    titles = [
        "throughput, 8 sessions x 32 in flight, 100 B (ops/s, higher is better)",
        "p99 latency under that load (ms, lower is better)",
        "one client, synchronous set (ms, lower is better)",
        "failover: kill -9 leader to first write (ms, lower is better)",
        "memory per znode, 100 B values (bytes, lower is better)",
    ]
    plots = []
    for index, (title, (_, items)) in enumerate(zip(titles, blocks)):
        # A series without a single value is left out (gnuplot would warn).
        series = [(col, s) for col, s in ((2, pair[0]), (3, pair[1]))
                  if any(summary[s].get(key) is not None for _, key in items)]
        if not series:
            plots.append(f'set title "{title}"\nunset key\nplot "{dat}" index {index} using (0):xtic(1) notitle')
            continue
        parts = []
        for n, (col, system) in enumerate(series):
            source = f'"{dat}" index {index}' if n == 0 else f'"" index {index}'
            xtic = ":xtic(1)" if n == 0 else ""
            parts.append(f'{source} using {col}{xtic} title "{NAMES[system]}" lc rgb "{COLORS[system]}"')
        plots.append(f'set title "{title}"\nset key top right\nplot ' + ", ".join(parts))
    script = f"""
set terminal pngcairo size 1800,900 font ",11" noenhanced
set output "compare.png"
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.15, 0
set multiplot layout 2,3 title "{NAMES[pair[0]]} vs {NAMES[pair[1]]}, 3 servers each on loopback, same machine, {summary['date']} (a missing bar: not measured)"
""" + "\n".join(plots) + "\nunset multiplot\n"
    gp = os.path.join(out_dir, "compare.gp")
    with open(gp, "w") as f:
        f.write(script)
    res = subprocess.run(["gnuplot", "compare.gp"], capture_output=True, text=True, cwd=out_dir)
    return res.stderr.strip() or None


def report(args):
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        runs, machine, options = saved["runs"], saved["machine"], saved["options"]
    else:
        if not (args.results and args.machine and args.options):
            sys.exit("report: need --results, --machine and --options, or --from-json")
        runs = load_runs(args.results)
        with open(args.machine) as f:
            machine = json.load(f)
        options = json.loads(args.options)
    pair = tuple(options["systems"].split(",")[:2])
    if len(pair) != 2 or any(p not in NAMES for p in pair):
        pair = ("keel", "zookeeper")
    calibration = pair[0].startswith("zookeeper")
    summary, rounds = {}, {}
    for system in pair:
        summary[system], rounds[system] = summarize(runs, system)
    summary["date"] = machine["date_utc"]
    md_table, rows = table(summary, pair, with_targets=not calibration)
    failures = [r for r in runs if "error" in r]
    start_errors = {r["system"]: r["error"] for r in failures if r.get("workload") == "start"}

    notes = []
    for system in pair:
        if system in start_errors:
            notes.append(f"- **{system} was not measured**: it did not start ({start_errors[system]}).")
        elif not any(r.get("system") == system for r in runs):
            notes.append(f"- **{system} was not measured**: not selected for this run.")
    for r in failures:
        if r.get("workload") == "event":
            notes.append(f"- {r['system']}: {r['error']}")
        elif r.get("workload") != "start":
            notes.append(f"- {r['system']} {r['workload']} round {r['round']}: {r['error']}")
    for system in pair:
        s = summary[system]
        if s.get("failover_failed"):
            notes.append(f"- {system}: {s['failover_failed']} failover run(s) saw no successful write within 60 s.")
        if s.get("errors"):
            notes.append(f"- {system}: {s['errors']} request errors inside measurement windows.")
    cpu = {s: summary[s]["client_cpu_pct"] for s in pair}
    fs = machine["fdatasync_ms"]
    header = [
        f"# {NAMES[pair[0]]} vs {NAMES[pair[1]]} — " +
        ("calibration: the same system twice, so every ratio shows the noise of this machine and method"
         if calibration else "latest comparison"),
        "",
        f"Measured {machine['date_utc']} by `bench/compare.sh{' --quick' if options.get('quick') else ''}` "
        f"(commit {machine.get('git_commit') or '?'}). Every number below is a measurement from this run; "
        "ratio = first column / second column; "
        "\"not measured\" means the system or workload did not run." +
        (f" Build: {machine['note']}." if machine.get("note") else ""),
        "",
        f"Machine: {machine['cpus']} x {machine['cpu']}, {machine['memory_gib']} GiB, Linux {machine['kernel']}, "
        f"data on {machine['filesystem']} (fdatasync p50 {fs['p50']} ms, p99 {fs['p99']} ms), "
        f"load average at start {' '.join(machine['loadavg_at_start'])}. "
        f"{machine['java']}; zookeeper {machine['packages']['zookeeper']}, "
        f"C client libzookeeper-mt {machine['packages']['libzookeeper-mt-dev']}; ZooKeeper JVM options "
        f"`{options['zk_jvm_opts']}`, forceSync=yes.",
        "",
        f"Runs: after {options.get('prime_s', 0)} s + {options.get('prime_s', 0)} s of unmeasured priming load per system, "
        f"{options['rounds']} rounds per workload and system, alternating; {options['duration_s']} s measured "
        f"after {options['warmup_s']} s warm-up; {options['sessions']} sessions x {options['inflight']} in flight, "
        f"{options['value_bytes']} B values; medians over rounds. Memory: {options['znodes']:,} znodes; "
        f"failover: {options['failovers']} kills per system.",
        "",
    ]
    footer = ["", "Client CPU (keel-zkbench, % of one core, median per workload): " +
              "; ".join(f"{s}: " + ", ".join(f"{w} {v:.0f}" for w, v in cpu[s].items() if v is not None)
                        for s in pair if any(v is not None for v in cpu[s].values())), ""]
    if notes:
        footer += ["Notes:", ""] + notes + [""]
    chart_note = write_chart(summary, pair, args.out)
    if chart_note:
        footer += [f"Chart: {chart_note}", ""]
    md = "\n".join(header + [md_table] + footer)
    with open(os.path.join(args.out, "latest.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "latest.json"), "w") as f:
        json.dump({"machine": machine, "options": options, "table": rows, "summary": summary,
                   "rounds": rounds, "runs": runs}, f, indent=1)
    print(md)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("probe")
    p.add_argument("dir")
    p.add_argument("--note", default="")
    r = sub.add_parser("report")
    r.add_argument("--results")
    r.add_argument("--machine")
    r.add_argument("--options")
    r.add_argument("--from-json", help="re-render from a latest.json written before")
    r.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "probe":
        probe(args.dir, args.note)
    else:
        report(args)


if __name__ == "__main__":
    main()
