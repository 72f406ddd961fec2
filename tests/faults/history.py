"""Operation histories of a fault-injection run.

Every client operation is one record (a dict) with:

  id       unique integer, in invocation order
  w        the worker that issued it (a string, e.g. "reg-2")
  f        what it did: read, write, cas, add, set-read, incr, seq-create,
           eph-create, eph-read, session-open, session-close, ...
  key      the znode path it is about (or None)
  args     its arguments (JSON values)
  t0       invocation time, seconds on the run's monotonic clock
  t1       completion time (None while it is open)
  outcome  "ok"      it took effect and this is its result,
           "fail"    it certainly did not take effect (e.g. BadVersion),
           "unknown" it may or may not take effect, now or at ANY later
                     time (ConnectionLoss, timeouts, ops open at the end)
  result   what the server answered for an "ok" (JSON values)
  err      the exception name for "fail"/"unknown"
  zxid     the client's last seen zxid right after the op (kazoo's
           last_zxid), for the monotonicity check
  sid      the session id the op ran on when known
  mzxid    for ops on a register: the mzxid of the znode read or written

One clock for the whole run: time.monotonic() relative to History.start.
Records are kept in memory (a run of 30 minutes makes a few hundred
thousand, well under 100 MB) and written as JSON lines by save().
Thread-safe: workers on many threads append at once.
"""
import json
import threading
import time

OK = "ok"
FAIL = "fail"
UNKNOWN = "unknown"


class History:
    def __init__(self, start=None):
        self.start = start if start is not None else time.monotonic()
        self._lock = threading.Lock()
        self._next_id = 0
        self.ops = []

    def now(self):
        return time.monotonic() - self.start

    def invoke(self, worker, f, key=None, args=None, sid=None):
        """Starts an op; returns its record (fill it with complete())."""
        with self._lock:
            op = {"id": self._next_id, "w": worker, "f": f, "key": key, "args": args,
                  "t0": self.now(), "t1": None, "outcome": None, "result": None,
                  "err": None, "zxid": None, "sid": sid}
            self._next_id += 1
            self.ops.append(op)
        return op

    def complete(self, op, outcome, result=None, err=None, zxid=None, sid=None, mzxid=None):
        op["t1"] = self.now()
        op["outcome"] = outcome
        op["result"] = result
        op["err"] = err
        op["zxid"] = zxid
        if mzxid is not None:
            op["mzxid"] = mzxid
        if sid is not None:
            op["sid"] = sid
        return op

    def event(self, worker, f, key=None, args=None, result=None, sid=None):
        """An instantaneous, certain observation (e.g. a client saw its
        session expire): t0 == t1, outcome ok."""
        op = self.invoke(worker, f, key, args, sid)
        return self.complete(op, OK, result, sid=sid)

    def close_open(self):
        """Ops still open at the end have an unknown outcome."""
        with self._lock:
            for op in self.ops:
                if op["outcome"] is None:
                    op["outcome"] = UNKNOWN
                    op["err"] = "open at end of run"

    def save(self, path):
        with self._lock:
            ops = list(self.ops)
        with open(path, "w") as f:
            for op in ops:
                f.write(json.dumps(op, sort_keys=True) + "\n")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def ok_ops(ops, f=None):
    return [o for o in ops if o["outcome"] == OK and (f is None or o["f"] == f)]


def fmt_op(op):
    """One line for reports."""
    t1 = "open" if op["outcome"] == UNKNOWN or op["t1"] is None else "%.3f" % op["t1"]
    return "#%d %s %s %s args=%s -> %s %s%s [%.3f..%s]" % (
        op["id"], op["w"], op["f"], op.get("key"), json.dumps(op.get("args")),
        op["outcome"], json.dumps(op.get("result")),
        (" (" + op["err"] + ")") if op.get("err") else "", op["t0"], t1)
