"""Broker nemeses: the Nemesis (nemesis.py) with faults of `keel broker`
processes and of the links between them. The partition's leader and
followers are read from `keel topics describe` at the time of the fault.

  bkill-leader    kill -9 the leader broker of a random partition, restart
                  it after the hold
  bkill-follower  kill -9 a follower: a broker that leads no partition of
                  the topic, else (only in runs that also kill leaders)
                  a follower of a random partition that leads another
  bkill-all       kill -9 every broker at once, restart them all
  bpause          SIGSTOP a broker (the leader of a partition half of the
                  time), SIGCONT after the hold
  bpause-follower SIGSTOP a follower (chosen as for bkill-follower)
  bcut            cut a follower of a partition off from that partition's
                  leader on the Kafka port (kproxy.py: "drop" or "hold", both
                  directions); clients still reach both
  ctrl+leader     kill -9 the Raft leader server (the active controller) and
                  the leader broker of a partition at the same time
  ctrl+follower   kill -9 the Raft leader server and a follower (chosen as
                  for bkill-follower) at the same time
  bstale-hw       a follower whose high watermark is stale becomes leader
                  (KIP-101's case), on a partition with leader L and
                  followers B, A in that replica order, all in the ISR:
                  1. L's answers to A are held (A's fetches still reach L):
                     L acknowledges what A holds, A never hears the new HW;
                  2. L is killed, A's requests to B are held: the controller
                     elects B (first in the replica order), A must follow B
                     and decide where its log ends -- by asking B (epochs),
                     or, wrongly, by cutting at its stale HW -- but cannot
                     fetch back what it cut;
                  3. B is killed once A has dialed it: A, still in the ISR,
                     is elected; L and B restart and follow A.
                  A keeps every record B acknowledged only if it truncated
                  by epoch; cutting at the HW loses acknowledged records.
                  A run of steps that does not go as planned (another
                  leader elected, A dropped from the ISR first) is recorded
                  as "miss", healed, and is not a failure.

  gkill-coord     kill -9 the coordinator of the group workload's group
                  (kgroups.py): the leader of its __consumer_offsets
                  partition; restart it after the hold
  gpause-coord    SIGSTOP that coordinator, SIGCONT after the hold
  gcut-coord      hold the fetches of the coordinator's followers (its
                  offsets partition's other replicas) for a second while
                  the members commit, then kill -9 the coordinator and lift
                  the hold: a follower is elected with what it had fetched;
                  restart the coordinator after the hold

Mixes: "kafka" is every kind above but the g* ones; "groups" is those
three; "kafka-safe" only those that leave
every partition's leader alone (bkill-follower, bpause-follower, bcut,
ctrl+follower): with no replication, a leader's log is the only copy, and
these are the faults that must lose nothing even then.
"""
import signal
import struct
import time

import nemesis as nem

KAFKA = ["bkill-leader", "bkill-follower", "bkill-all", "bpause", "bpause-follower", "bcut",
         "ctrl+leader", "ctrl+follower", "bstale-hw"]
# The server-only nemesis, so that the runner imports one module for both.
Nemesis = nem.Nemesis

GROUPS = ["gkill-coord", "gpause-coord", "gcut-coord"]
LEADER_KINDS = ["bkill-leader", "bkill-all", "bpause", "ctrl+leader", "bstale-hw"] + GROUPS
# How long a step of bstale-hw waits for the controller (broker session
# timeout 3 s, kbrokers.SERVER_ARGS, on a busy machine).
STALE_HW_WAIT_S = 30.0
KAFKA_SAFE = ["bkill-follower", "bpause-follower", "bcut", "ctrl+follower"]


def parse_kinds(spec):
    """A comma list of server kinds, broker kinds and mixes (default, all,
    none, kafka, kafka-safe)."""
    kinds = []
    for tok in [t.strip() for t in spec.split(",") if t.strip()]:
        if tok == "kafka":
            add = KAFKA
        elif tok == "groups":
            add = GROUPS
        elif tok in GROUPS:
            add = [tok]
        elif tok == "kafka-safe":
            add = KAFKA_SAFE
        elif tok in KAFKA:
            add = [tok]
        else:
            add = nem.parse_kinds(tok)
        kinds += [k for k in add if k not in kinds]
    return kinds


def has_broker_kinds(kinds):
    return any(k in KAFKA or k in GROUPS for k in kinds)


def java_hash(s):
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (h * 31 + (data[i] << 8 | data[i + 1])) & 0xffffffff
    return h - (1 << 32) if h >= (1 << 31) else h


def offsets_partition(group, count):
    """Kafka's __consumer_offsets partition of a group."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % count


class KafkaNemesis(nem.Nemesis):
    def __init__(self, cluster, brokers, topic, *args, **kw):
        super().__init__(cluster, *args, **kw)
        self.brokers = brokers
        self.topic = topic
        # A run whose kinds never touch a leader (kafka-safe) must not
        # touch one by way of a "follower" that leads another partition.
        self.leader_safe = not any(k in self.kinds for k in LEADER_KINDS)

    def run_kind(self, kind):
        getattr(self, "do_" + kind.replace("-", "_").replace("+", "_"))()

    # ---- who leads ----

    def layout(self):
        parts = self.brokers.describe(self.topic)
        if not parts:
            raise RuntimeError("topics describe %s failed" % self.topic)
        return parts

    def leaders(self):
        return sorted({p["leader"] for p in self.layout().values() if p["leader"] >= 0})

    def followers(self):
        """Brokers that lead no partition; if there are none and the run
        kills leaders anyway, the followers of a random partition."""
        parts = self.layout()
        leaders = {p["leader"] for p in parts.values()}
        cand = [b for b in sorted(self.brokers.brokers) if b not in leaders]
        if cand or self.leader_safe:
            return cand
        p = parts[self.rng.choice(sorted(parts))]
        return [b for b in p["replicas"] if b != p["leader"]]

    def raft_leader(self):
        ls = self.cluster.leaders()
        return ls[0].id if len(ls) == 1 else None

    # ---- kinds ----

    def _kill_restart(self, kind, bids, **info):
        self.record(kind, "start", brokers=bids, **info)
        for b in bids:
            self.brokers.brokers[b].kill()
        self.sleep(self.hold_time())
        for b in bids:
            self.brokers.brokers[b].start()
        self.record(kind, "end", brokers=bids)

    def do_bkill_leader(self):
        leaders = self.leaders()
        if not leaders:
            self.record("bkill-leader", "skip", reason="no partition has a leader")
            return
        self._kill_restart("bkill-leader", [self.rng.choice(leaders)])

    def do_bkill_follower(self):
        cand = self.followers()
        if not cand:
            self.record("bkill-follower", "skip", reason="every broker leads a partition")
            return
        self._kill_restart("bkill-follower", [self.rng.choice(cand)])

    def do_bkill_all(self):
        bs = self.brokers.brokers
        self.record("bkill-all", "start")
        for b in bs.values():
            if b.alive():
                b.proc.send_signal(signal.SIGKILL)
        for b in bs.values():
            b.kill()
        self.sleep(self.rng.uniform(0.5, 3.0))
        for b in bs.values():
            b.start()
        self.record("bkill-all", "end")

    def _pause(self, kind, bid, why):
        b = self.brokers.brokers[bid]
        if not b.alive():
            b.start()
        self.record(kind, "start", broker=bid, target=why)
        b.pause()
        self.sleep(self.hold_time())
        b.resume()
        self.record(kind, "end", broker=bid)

    def do_bpause(self):
        leaders = self.leaders()
        if leaders and self.rng.random() < 0.5:
            self._pause("bpause", self.rng.choice(leaders), "leader")
        else:
            self._pause("bpause", self.rng.choice(sorted(self.brokers.brokers)), "random")

    def do_bpause_follower(self):
        cand = self.followers()
        if not cand:
            self.record("bpause-follower", "skip", reason="every broker leads a partition")
            return
        self._pause("bpause-follower", self.rng.choice(cand), "follower")

    def do_bcut(self):
        parts = self.layout()
        choices = [(p, d["leader"], f) for p, d in sorted(parts.items()) if d["leader"] >= 0
                   for f in d["replicas"] if f != d["leader"]]
        if not choices:
            self.record("bcut", "skip", reason="no partition with a leader and a follower")
            return
        p, leader, follower = self.rng.choice(choices)
        mode = self.rng.choice(["drop", "hold"])
        self.record("bcut", "start", partition=p, leader=leader, follower=follower, mode=mode)
        self.brokers.partition({(leader, follower): mode, (follower, leader): mode})
        self.sleep(self.hold_time())
        self.brokers.partition({})
        self.record("bcut", "end", leader=leader, follower=follower)

    def _ctrl_and(self, kind, bids):
        sid = self.raft_leader()
        if sid is None or not bids:
            self.record(kind, "skip", reason="no raft leader" if sid is None else
                        "no broker to kill")
            return
        bid = self.rng.choice(bids)
        srv = self.cluster.servers[sid]
        b = self.brokers.brokers[bid]
        self.record(kind, "start", server=sid, broker=bid)
        srv.proc.send_signal(signal.SIGKILL)
        if b.alive():
            b.proc.send_signal(signal.SIGKILL)
        srv.kill()
        b.kill()
        self.sleep(self.hold_time())
        srv.start()
        b.start()
        self.record(kind, "end", server=sid, broker=bid)

    def do_ctrl_leader(self):
        self._ctrl_and("ctrl+leader", self.leaders())

    def do_ctrl_follower(self):
        self._ctrl_and("ctrl+follower", self.followers())

    def _wait_new_leader(self, p, old, timeout=STALE_HW_WAIT_S):
        """Partition p's leader once it is neither `old` nor none (None on a
        timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stop_.is_set():
            d = self.brokers.describe(self.topic).get(p)
            if d and d["leader"] >= 0 and d["leader"] != old:
                return d["leader"]
            time.sleep(0.2)
        return None

    def _wait_for(self, cond, timeout=STALE_HW_WAIT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stop_.is_set():
            try:
                if cond():
                    return True
            except (OSError, struct.error):
                pass
            time.sleep(0.2)
        return False

    def do_bstale_hw(self):
        kind = "bstale-hw"
        choices = []
        for p, d in sorted(self.layout().items()):
            rest = [r for r in d["replicas"] if r != d["leader"]]
            if d["leader"] >= 0 and len(rest) >= 2 and sorted(d["isr"]) == sorted(d["replicas"]):
                choices.append((p, d["leader"], rest[0], rest[1]))
        if not choices:
            self.record(kind, "skip", reason="no partition with a leader and a full ISR")
            return
        p, lead, nxt, stale = self.rng.choice(choices)
        bs = self.brokers.brokers
        self.record(kind, "start", partition=p, leader=lead, next_leader=nxt, follower=stale)
        try:
            self._stale_hw_steps(kind, p, lead, nxt, stale)
        finally:
            self.brokers.partition({})
            for b in (lead, nxt):
                if not bs[b].alive():
                    bs[b].start()
        self.record(kind, "end", partition=p)

    def _stale_hw_steps(self, kind, p, lead, nxt, stale):
        import kbrokers  # after the runner has put the harness on the path
        bs = self.brokers.brokers
        self.brokers.partition({(lead, stale): "hold"})
        self.sleep(1.0)  # the producers keep writing: L acknowledges past A's HW
        self.brokers.partition({(lead, stale): "hold", (stale, nxt): "hold"})
        bs[lead].kill()
        got = self._wait_new_leader(p, lead)
        if got != nxt:
            self.record(kind, "miss", step="elect B", leader=got)
            return
        # A's own image names B, and A is connected to B: its next request
        # to B (within one long poll of the answer it may be waiting for)
        # decides where its log ends.
        if not self._wait_for(lambda: kbrokers.metadata_leaders(
                bs[stale].port, self.topic).get(p) == nxt):
            self.record(kind, "miss", step="A learns B leads")
            return
        if not self._wait_for(lambda: (stale, nxt) in self.brokers.open_links()):
            self.record(kind, "miss", step="A dials B")
            return
        self.sleep(1.0)
        self.record(kind, "kill B", broker=nxt)
        bs[nxt].kill()
        got = self._wait_new_leader(p, nxt)
        self.record(kind, "elected" if got == stale else "miss", step="elect A", leader=got)

    def coordinator(self):
        """(broker, offsets partition) coordinating the group workload's
        group, or None before __consumer_offsets exists or while the
        partition has no leader."""
        import kgroups
        parts = self.brokers.describe("__consumer_offsets")
        if not parts:
            return None
        p = offsets_partition(kgroups.GROUP, len(parts))
        leader = parts[p]["leader"]
        return (leader, p, parts[p]) if leader >= 0 else None

    def do_gkill_coord(self):
        c = self.coordinator()
        if c is None:
            self.record("gkill-coord", "skip", reason="no coordinator")
            return
        self._kill_restart("gkill-coord", [c[0]], offsets_partition=c[1])

    def do_gpause_coord(self):
        c = self.coordinator()
        if c is None:
            self.record("gpause-coord", "skip", reason="no coordinator")
            return
        self._pause("gpause-coord", c[0], "coordinator of offsets partition %d" % c[1])

    def do_gcut_coord(self):
        c = self.coordinator()
        if c is None:
            self.record("gcut-coord", "skip", reason="no coordinator")
            return
        coord, part, d = c
        followers = [b for b in d["isr"] if b != coord]
        self.record("gcut-coord", "start", broker=coord, offsets_partition=part,
                    followers=followers)
        self.brokers.partition({(f, coord): "hold" for f in followers})
        self.sleep(1.0)  # the members commit meanwhile
        self.brokers.brokers[coord].kill()
        self.brokers.partition({})
        self.sleep(self.hold_time())
        self.brokers.brokers[coord].start()
        self.record("gcut-coord", "end", broker=coord)

    # ---- crashes and healing ----

    def check_crashes(self):
        super().check_crashes()
        for b in self.brokers.brokers.values():
            if b.proc is None or b.proc.poll() is None:
                continue
            tail = b.log().splitlines()[-5:]
            self.failures.append("broker %d exited by itself with status %s; last log "
                                 "lines: %s" % (b.id, b.proc.returncode, tail))
            self.record("crash", "seen", broker=b.id, rc=b.proc.returncode)
            b.start()

    def heal(self):
        super().heal()
        try:
            self.brokers.partition({})
        except Exception as e:  # noqa: BLE001
            self.failures.append("heal broker partition: %r" % e)
        for b in self.brokers.brokers.values():
            if b.alive() and b.paused:
                b.resume()
            if not b.alive():
                b.start()
