"""The nemesis: faults injected into a running ProxiedCluster, one at a
time, on a seeded schedule, each recorded (start, end, target, details) in
the schedule list that a failing run saves.

Kinds (the default mix keeps a minority faulty at once -- with 3 servers,
at most one server is down, paused or cut off at any time):

  kill       kill -9 a server, restart it after the hold time
  pause      SIGSTOP, SIGCONT after the hold time
  isolate    cut one server off from the others through the proxy, either
             "drop" (connections closed and refused) or "hold" (bytes held
             back, delivered late when healed)
  link       cut a single link between two servers (both still reach the
             third: a non-transitive partition)
  oneway     hold the bytes of one direction of one link only
  member     remove a server, wipe it, start it again with --join and add
             it back (`members add`, or `add-learner` then `promote`)
  transfer   leader transfer to a random follower
  killall    kill -9 every server at once, restart them all (not in the
             default mix: the "all" mix adds it)

Kinds come in rounds: each kind once per round, in a seeded shuffled order.
Targets: "the leader" half of the time (found with srvr: `Mode: leader`),
otherwise a random server.

Clock jumps are not injected: moving the wall clock needs root and changes
it for every process on the machine, and keel's timeouts run on the
monotonic clock, which no process may move.
"""
import random
import signal
import threading
import time

MINORITY = ["kill", "pause", "isolate", "link", "oneway", "member", "transfer"]
ALL = MINORITY + ["killall"]


def parse_kinds(spec):
    if spec in ("default", "minority"):
        return list(MINORITY)
    if spec == "all":
        return list(ALL)
    if spec == "none":
        return []
    kinds = [k.strip() for k in spec.split(",") if k.strip()]
    for k in kinds:
        if k not in ALL:
            raise ValueError("unknown nemesis kind %r (have %s)" % (k, ", ".join(ALL)))
    return kinds


class Nemesis(threading.Thread):
    def __init__(self, cluster, history, kinds, seed, interval=(2.0, 6.0), hold=(2.0, 8.0),
                 log=print):
        super().__init__(name="nemesis", daemon=True)
        self.cluster = cluster
        self.history = history
        self.kinds = kinds
        self.rng = random.Random("nemesis/%s" % seed)
        self.interval = interval
        self.hold = hold
        self.stop_ = threading.Event()
        self.schedule = []
        self.counts = {}
        self.failures = []   # nemesis actions that did not work out
        self.log = log
        self._round = []

    def now(self):
        return self.history.now()

    def record(self, kind, phase, **info):
        ev = dict(t=round(self.now(), 3), kind=kind, phase=phase, **info)
        self.schedule.append(ev)
        self.log("  nemesis %7.2fs %-8s %-5s %s" % (
            ev["t"], kind, phase, " ".join("%s=%s" % kv for kv in sorted(info.items()))))

    def run(self):
        try:
            while not self.stop_.is_set():
                if self.stop_.wait(self.rng.uniform(*self.interval)):
                    break
                self.check_crashes()
                if not self.kinds:
                    continue
                kind = self.next_kind()
                self.counts[kind] = self.counts.get(kind, 0) + 1
                try:
                    self.run_kind(kind)
                except Exception as e:  # noqa: BLE001
                    self.failures.append("%s: %r" % (kind, e))
                    self.record(kind, "error", error=repr(e)[:200])
                    self.heal()
        finally:
            self.heal()

    def run_kind(self, kind):
        getattr(self, "do_" + kind)()

    def next_kind(self):
        """Kinds in rounds: every kind once per round, in a seeded shuffled
        order, so that even a short run sees each of them."""
        if not self._round:
            self._round = list(self.kinds)
            self.rng.shuffle(self._round)
        return self._round.pop()

    def hold_time(self):
        # Short enough to see the fault end before the run does.
        return self.rng.uniform(*self.hold)

    def sleep(self, s):
        # Faults end on time even when the run stops meanwhile.
        time.sleep(s)

    def target(self):
        ids = sorted(self.cluster.servers)
        if self.rng.random() < 0.5:
            leaders = [s.id for s in self.cluster.leaders()]
            if len(leaders) == 1:
                return leaders[0], "leader"
        return self.rng.choice(ids), "random"

    # ---- kinds ----

    def do_kill(self):
        sid, why = self.target()
        srv = self.cluster.servers[sid]
        self.record("kill", "start", server=sid, target=why)
        srv.kill()
        self.sleep(self.hold_time())
        srv.start()
        self.record("kill", "end", server=sid)

    def do_pause(self):
        sid, why = self.target()
        srv = self.cluster.servers[sid]
        if not srv.alive():
            srv.start()
        self.record("pause", "start", server=sid, target=why)
        srv.pause()
        self.sleep(self.hold_time())
        srv.resume()
        self.record("pause", "end", server=sid)

    def do_isolate(self):
        sid, why = self.target()
        mode = self.rng.choice(["drop", "hold"])
        rules = {}
        for o in self.cluster.servers:
            if o != sid:
                rules[(sid, o)] = mode
                rules[(o, sid)] = mode
        self.record("isolate", "start", server=sid, target=why, mode=mode)
        self.cluster.partition(rules)
        self.sleep(self.hold_time())
        self.cluster.partition({})
        self.record("isolate", "end", server=sid)

    def do_link(self):
        a, b = self.rng.sample(sorted(self.cluster.servers), 2)
        mode = self.rng.choice(["drop", "hold"])
        self.record("link", "start", a=a, b=b, mode=mode)
        self.cluster.partition({(a, b): mode, (b, a): mode})
        self.sleep(self.hold_time())
        self.cluster.partition({})
        self.record("link", "end", a=a, b=b)

    def do_oneway(self):
        sid, why = self.target()
        other = self.rng.choice([o for o in sorted(self.cluster.servers) if o != sid])
        a, b = (sid, other) if self.rng.random() < 0.5 else (other, sid)
        self.record("oneway", "start", src=a, dst=b, target=why)
        self.cluster.partition({(a, b): "hold"})
        self.sleep(self.hold_time())
        self.cluster.partition({})
        self.record("oneway", "end", src=a, dst=b)

    def do_transfer(self):
        st = self.cluster.leader_status()
        if st is None:
            self.record("transfer", "skip", reason="no leader")
            return
        to = self.rng.choice([m["id"] for m in st["members"]
                              if m["id"] != st["id"] and m["role"] == "voter"])
        self.record("transfer", "start", leader=st["id"], to=to)
        rc, out = self.cluster.keel_cli("leader", "transfer", str(to), timeout=30)
        # The CLI may report a failure for a transfer that happened (a
        # follower forwarding the request sees the leader change it caused):
        # record who leads afterwards too.
        deadline = time.monotonic() + 5
        leader = None
        while leader is None and time.monotonic() < deadline:
            st = self.cluster.leader_status()
            leader = st["id"] if st else None
            if leader is None:
                time.sleep(0.1)
        self.record("transfer", "end", rc=rc, leader_after=leader,
                    out=out.replace("\n", " | ")[:200])

    def do_killall(self):
        self.record("killall", "start")
        # All at once, as a power cut would: SIGKILL every server first,
        # reap them after (killing one by one leaves the others time to
        # write what they hold).
        for s in self.cluster.servers.values():
            if s.alive():
                s.proc.send_signal(signal.SIGKILL)
        for s in self.cluster.servers.values():
            s.kill()
        self.sleep(self.rng.uniform(0.5, 3.0))
        for s in self.cluster.servers.values():
            s.start()
        self.record("killall", "end")

    def do_member(self):
        ids = sorted(self.cluster.servers)
        sid, why = self.target()
        variant = self.rng.choice(["add", "learner"])
        self.record("member", "start", server=sid, target=why, variant=variant)
        rc, out = self._cli_retry("members", "remove", str(sid))
        if rc != 0:
            raise RuntimeError("members remove %d: %s" % (sid, out))
        self.cluster.wait_members([i for i in ids if i != sid], timeout=60)
        self.record("member", "removed", server=sid)
        srv = self.cluster.servers[sid]
        srv.kill()
        srv.wipe()
        srv.start(join=True)
        self.sleep(self.rng.uniform(0.5, 2.0))
        addr = "%d=%s" % (sid, self.cluster.proxy_addr(sid))
        if variant == "add":
            rc, out = self._cli_retry("members", "add", addr)
        else:
            rc, out = self._cli_retry("members", "add-learner", addr)
            if rc == 0:
                self.sleep(self.rng.uniform(0.5, 3.0))
                rc, out = self._cli_retry("members", "promote", str(sid))
        if rc != 0:
            raise RuntimeError("members add %s: %s" % (addr, out))
        self.cluster.wait_members(ids, timeout=60)
        self.record("member", "end", server=sid)

    def _cli_retry(self, *args, attempts=8):
        rc, out = -1, ""
        for _ in range(attempts):
            rc, out = self.cluster.keel_cli(*args, timeout=60)
            if rc == 0:
                return rc, out
            self.record("member", "retry", cmd=" ".join(args), rc=rc, out=out[:160])
            time.sleep(1.0)
        return rc, out

    def check_crashes(self):
        """Between faults every server runs: one that exited was not stopped
        by us -- a crash (assertion, signal) or someone outside the run.
        Recorded as a failure, then restarted."""
        for s in self.cluster.servers.values():
            if s.proc is None or s.proc.poll() is None:
                continue
            rc = s.proc.returncode
            tail = s.log().splitlines()[-5:]
            outside = any("received SIGTERM" in line or "received SIGINT" in line
                          for line in tail)
            what = ("stopped from outside the run (SIGTERM/SIGINT in its log)" if outside
                    else "exited by itself with status %s" % rc)
            self.failures.append("server %d %s; last log lines: %s" % (s.id, what, tail))
            self.record("crash", "seen", server=s.id, rc=rc, outside=outside)
            s.start()

    # ---- healing ----

    def heal(self):
        """Ends every fault: proxy rules cleared, paused servers resumed,
        dead servers restarted, every server a voter again."""
        try:
            self.cluster.partition({})
        except Exception as e:  # noqa: BLE001
            self.failures.append("heal partition: %r" % e)
        for s in self.cluster.servers.values():
            if s.alive() and s.paused:
                s.resume()
            if not s.alive():
                s.start()

    def restore_members(self, timeout=120.0):
        """After a failed membership change: add back whoever is missing."""
        ids = sorted(self.cluster.servers)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.cluster.leader_status()
            if st is None:
                time.sleep(0.5)
                continue
            roles = {m["id"]: m["role"] for m in st["members"]}
            missing = [i for i in ids if roles.get(i) != "voter"]
            if not missing:
                return True
            for sid in missing:
                if roles.get(sid) == "learner":
                    self._cli_retry("members", "promote", str(sid), attempts=2)
                else:
                    srv = self.cluster.servers[sid]
                    srv.kill()
                    srv.wipe()
                    srv.start(join=True)
                    time.sleep(1.0)
                    self._cli_retry("members", "add",
                                    "%d=%s" % (sid, self.cluster.proxy_addr(sid)), attempts=2)
            time.sleep(1.0)
        return False

    def stop(self):
        self.stop_.set()
