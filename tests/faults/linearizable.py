"""Linearizability checking: the Wing & Gong search with Lowe's
just-in-time linearization and memoization, for one object at a time.

The history of one object is a list of operations, each with an invocation
time, a return time (None = unknown outcome: it may take effect at any point
after its invocation, or never) and a model step. A history is linearizable
if the operations can be put in one total order that (a) respects real time
(an operation that returned before another was invoked comes first), (b)
contains every operation with a known outcome and any subset of the
unknown ones, and (c) is legal for the sequential model.

The search walks an event list (calls and returns in time order) as a doubly
linked list. At a call it tries to linearize that operation now: if the model
accepts it and the pair (set of linearized ops, model state) has not been
seen before, the call and its return are lifted out of the list and the
search restarts from the front. Reaching a return whose op is not linearized
means a dead end: undo the last choice. Known-outcome operations that fail
definitely (e.g. a compare-and-set answered BadVersion) are ordinary
operations whose step checks the state without changing it. Unknown
operations have no return event, so they never force a backtrack and may be
left out; "took effect with a failure" equals "left out" because a failed
operation changes nothing.

Histories are checked per object (P-compositionality: a history is
linearizable iff its restriction to every object is).

Models are objects with init() and step(state, op) -> (ok, new_state);
states must be hashable.
"""

INF = float("inf")


class _Entry:
    __slots__ = ("op", "idx", "is_call", "time", "match", "prev", "next")

    def __init__(self, op, idx, is_call, time):
        self.op = op
        self.idx = idx
        self.is_call = is_call
        self.time = time
        self.match = None
        self.prev = None
        self.next = None


class Result:
    def __init__(self, ok, explored, stuck=None, frontier=None, states=None, best=0,
                 budget_exceeded=False):
        self.ok = ok
        self.explored = explored         # search steps taken
        self.stuck = stuck               # the known-outcome op no order could place
        self.frontier = frontier or []   # ops concurrent with it at the deepest point
        self.states = states or []       # model states reached at that point
        self.best = best                 # most known ops linearized at once
        self.budget_exceeded = budget_exceeded


def _build(ops):
    """Event list for `ops` (each a dict with t0, t1, and whether the
    outcome is known): calls before returns at equal times (the lenient
    reading: equal timestamps are concurrent)."""
    events = []
    for i, op in enumerate(ops):
        call = _Entry(op, i, True, op["t0"])
        events.append((op["t0"], 0, i, call))
        if op["outcome"] != "unknown":
            ret = _Entry(op, i, False, op["t1"])
            call.match = ret
            events.append((op["t1"], 1, i, ret))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    head = _Entry(None, -1, False, -INF)
    prev = head
    for _, _, _, e in events:
        prev.next = e
        e.prev = prev
        prev = e
    return head


def _lift(e):
    e.prev.next = e.next
    if e.next is not None:
        e.next.prev = e.prev
    m = e.match
    if m is not None:
        m.prev.next = m.next
        if m.next is not None:
            m.next.prev = m.prev


def _unlift(e):
    m = e.match
    if m is not None:
        m.prev.next = m
        if m.next is not None:
            m.next.prev = m
    e.prev.next = e
    if e.next is not None:
        e.next.prev = e


def check(model, ops, budget=5_000_000):
    """Checks one object's history. `ops` as in history.py; only "ok",
    "fail" and "unknown" outcomes should be passed (reads that did not
    complete should be dropped by the caller: they change nothing)."""
    head = _build(ops)
    remaining = sum(1 for o in ops if o["outcome"] != "unknown")
    state = model.init()
    linearized = 0
    cache = {(0, state)}
    stack = []
    entry = head.next
    explored = 0
    best = 0
    deepest = None  # (n linearized, stuck return entry, states)
    while True:
        if remaining == 0:
            return Result(True, explored, best=best)
        explored += 1
        if explored > budget:
            return Result(False, explored, best=best, budget_exceeded=True)
        if entry is not None and entry.is_call:
            ok, new_state = model.step(state, entry.op)
            if ok:
                lin = linearized | (1 << entry.idx)
                if (lin, new_state) not in cache:
                    cache.add((lin, new_state))
                    stack.append((entry, state))
                    state = new_state
                    linearized = lin
                    _lift(entry)
                    if entry.match is not None:
                        remaining -= 1
                    entry = head.next
                    continue
            entry = entry.next
            continue
        # A return of an op not linearized yet: this order is a dead end.
        n_lin = len(stack)
        known = sum(1 for e, _ in stack if e.match is not None)
        best = max(best, known)
        if entry is not None and (deepest is None or known > deepest[0]):
            deepest = (known, entry, {state})
        elif entry is not None and deepest is not None and known == deepest[0] \
                and entry is deepest[1]:
            deepest[2].add(state)
        if n_lin == 0:
            return _failure(head, deepest, explored, best)
        entry, state = stack.pop()
        linearized &= ~(1 << entry.idx)
        _unlift(entry)
        if entry.match is not None:
            remaining += 1
        entry = entry.next


def _failure(head, deepest, explored, best):
    if deepest is None:
        return Result(False, explored, best=best)
    _, stuck_entry, states = deepest
    stuck = stuck_entry.op
    # Ops overlapping the stuck one (invoked before it returned and not
    # returned before it was invoked): what a human needs to look at.
    frontier = []
    e = head.next
    seen = set()
    while e is not None:
        o = e.op
        if id(o) not in seen:
            seen.add(id(o))
            t1 = INF if o["outcome"] == "unknown" else o["t1"]
            if o is not stuck and o["t0"] <= stuck["t1"] and t1 >= stuck["t0"]:
                frontier.append(o)
        e = e.next
    return Result(False, explored, stuck=stuck, frontier=frontier,
                  states=sorted(states, key=repr)[:8], best=best)


class VersionedRegister:
    """A znode's (value, version), as sync+get, set and set-with-version see
    it. Values are unique strings per write, so reads pin down writes.

    ops:
      read   result [value, version]          legal iff state == result
      write  args [value]; result version     legal iff state.version+1 == it
             (unknown: the write may apply, giving version+1)
      cas    args [expected_version, value]; ok: result version = expected+1;
             fail (BadVersion): legal iff state.version != expected
    """

    def __init__(self, initial_value, initial_version=0):
        self.initial = (initial_value, initial_version)

    def init(self):
        return self.initial

    def step(self, state, op):
        value, version = state
        f = op["f"]
        outcome = op["outcome"]
        if f == "read":
            rv, rver = op["result"]
            return (rv == value and rver == version), state
        if f == "write":
            new = (op["args"][0], version + 1)
            if outcome == "ok":
                return op["result"] == version + 1, new
            return True, new
        if f == "cas":
            expected, new_value = op["args"]
            if outcome == "fail":
                return version != expected, state
            if version != expected:
                return False, state
            new = (new_value, version + 1)
            if outcome == "ok":
                return op["result"] == version + 1, new
            return True, new
        raise ValueError("register model: unknown op %r" % f)


def describe_state(state):
    return "(value=%r, version=%d)" % state
