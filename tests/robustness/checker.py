"""The history checker of the robustness suite: judges one recorded run
(tests/robustness/README.md has the format and every violation's definition).

    violations = check(history)      # [Violation(kind, message)], [] when it holds
    python3 checker.py history.json  # prints them; exit 1 when there is one

A history is what the workload saw (every request with its send and answer
times, every watch stream with every event and bookmark, the windows in which a
replica was cut off from etcd) plus the *truth*: every revision of etcd's key
space in the run, recorded by a watch straight on etcd, independent of
poolcoord. Every claim poolcoord made (an answer, a list, a watch event) is
judged against the truth.

Times are seconds of CLOCK_MONOTONIC (time.monotonic()), shared by every
process on the machine, so a lease duration measured by the server is
comparable with the workload's send and answer times.

Standard library only.
"""
import bisect
import json
import sys
from collections import defaultdict
from dataclasses import dataclass

# Every kind of violation this checker names, and what it means (the README
# says it at length; test_checker.py has a hand-made history for each).
KINDS = {
    "truth-incomplete": "the recorder of etcd's history missed revisions: nothing can be judged",
    "lost-write": "an acknowledged write is not in etcd's history at the resourceVersion it was "
                  "acknowledged with",
    "phantom-write": "a write refused with a definite 4xx is in etcd's history",
    "unknown-state": "a read or watch returned an object version that etcd never held",
    "stale-read": "a read without resourceVersion returned state older than a write acknowledged "
                  "before the read was sent",
    "list-inconsistent": "a list's items are not etcd's state of that kind at the list's "
                         "resourceVersion",
    "final-state": "after the run, a replica's list differs from etcd's final state",
    "two-holders-in-term": "one PoolLease term (uid, leaseTransitions) had two holders",
    "early-takeover": "a PoolLease changed holder less than leaseDurationSeconds after the "
                      "previous holder's last renewal was sent",
    "delegation-from-non-holder": "a DelegatedLease renewal or delete was accepted from a writer "
                                  "that did not hold the pool's current term",
    "watch-order": "a watch stream delivered a resourceVersion lower than one it delivered before",
    "watch-duplicate": "a watch stream delivered a resourceVersion twice, or one at or below the "
                       "resourceVersion it was started from",
    "watch-gap": "a watch stream skipped an event of its kind between its start and the last "
                 "resourceVersion it vouched for",
    "watch-wrong-event": "a watch event does not match etcd's history at its resourceVersion",
    "watch-stalled": "a watch stream open at the end never delivered its kind's final sentinel",
    "watch-delayed": "a watch event arrived longer after its write was acknowledged (or its "
                     "stream was opened) than the run allows",
    "cutoff-answered": "a replica cut off from etcd answered a write or a read without "
                       "resourceVersion with success",
    "replica-unavailable": "a replica that could reach a quorum failed every write longer than "
                           "the run allows",
}

WRITE_VERBS = ("create", "update", "delete")


@dataclass
class Violation:
    kind: str
    message: str

    def __str__(self):
        return f"{self.kind}: {self.message}"


class Truth:
    """etcd's history of the run: every event by revision and by key."""

    def __init__(self, events):
        self.events = sorted(events, key=lambda e: e["rev"])
        self.by_rev = {e["rev"]: e for e in self.events}
        self.by_key = defaultdict(list)       # (kind, name) -> events in revision order
        self.by_kind = defaultdict(list)      # kind -> revisions in order
        self.by_write = {}                    # write id -> event
        for e in self.events:
            self.by_key[(e["kind"], e["name"])].append(e)
            self.by_kind[e["kind"]].append(e["rev"])
            if e["type"] == "PUT" and e["obj"] and e["obj"].get("write"):
                self.by_write.setdefault(e["obj"]["write"], e)
        self._revs = {k: [e["rev"] for e in v] for k, v in self.by_key.items()}

    def at(self, kind, name, rev):
        """The key's last event at or before `rev`, or None (never written in the run)."""
        key = (kind, name)
        i = bisect.bisect_right(self._revs.get(key, []), rev)
        return self.by_key[key][i - 1] if i else None

    def previous(self, event):
        """The key's event before `event`, or None."""
        return self.at(event["kind"], event["name"], event["rev"] - 1)

    def state(self, kind, rev):
        """{name: event} of every object of `kind` that exists at `rev`."""
        out = {}
        for (k, name), events in self.by_key.items():
            if k != kind:
                continue
            e = self.at(k, name, rev)
            if e and e["type"] == "PUT":
                out[name] = e
        return out

    def later(self, kind, name, rev):
        """The key's events after `rev`."""
        key = (kind, name)
        i = bisect.bisect_right(self._revs.get(key, []), rev)
        return self.by_key[key][i:]

    def kind_between(self, kind, lo, hi):
        """Revisions of `kind`'s events in (lo, hi]."""
        revs = self.by_kind.get(kind, [])
        return revs[bisect.bisect_right(revs, lo):bisect.bisect_right(revs, hi)]


def _ok(op):
    return op["status"] is not None and 200 <= op["status"] < 300


def _definite_refusal(op):
    # 4xx answers say the write was not made (429 asks to retry: also not made).
    return op["status"] is not None and 400 <= op["status"] < 500


def _fresh_read(op):
    return op["verb"] in ("get", "list") and op.get("fresh")


def _describe(op):
    return (f"{op['id']} {op['verb']} {op['kind']}/{op.get('name') or ''} via {op['replica']} "
            f"[{op['t0']:.3f}, {op['t1']:.3f}] -> {op['status']} rv={op.get('rv')}")


def check_truth(h, truth, out):
    """The recorder saw every revision from its start to its end (it watches the
    whole key space, so revisions are consecutive)."""
    revs = [e["rev"] for e in truth.events]
    expected = list(range(h["truth_from"] + 1, h["truth_to"] + 1))
    seen = set(revs)
    missing = [r for r in expected if r not in seen]
    # Revisions outside the test's prefix carry no event of ours; the recorder
    # lists them under "other_revs" so that completeness can still be judged.
    missing = [r for r in missing if r not in set(h.get("other_revs", ()))]
    if missing or len(revs) != len(seen):
        out.append(Violation("truth-incomplete",
                             f"{len(missing)} revisions missing, e.g. {missing[:5]}; "
                             f"{len(revs) - len(seen)} repeated"))
        return False
    return True


def check_writes(h, truth, out):
    for op in h["ops"]:
        if op["verb"] not in WRITE_VERBS:
            continue
        ev = truth.by_rev.get(op.get("rv")) if op.get("rv") else None
        if _ok(op):
            if ev is None or (ev["kind"], ev["name"]) != (op["kind"], op["name"]):
                out.append(Violation("lost-write", f"{_describe(op)}: etcd has "
                                     f"{'nothing' if ev is None else ev['kind'] + '/' + ev['name']}"
                                     f" at that revision"))
            elif op["verb"] == "delete" and ev["type"] != "DELETE":
                out.append(Violation("lost-write", f"{_describe(op)}: etcd has a PUT there"))
            elif op["verb"] != "delete" and (ev["type"] != "PUT" or ev["obj"].get("write") != op["write"]):
                out.append(Violation("lost-write", f"{_describe(op)}: etcd has write "
                                     f"{(ev['obj'] or {}).get('write')} ({ev['type']}) there"))
        elif _definite_refusal(op) and op["verb"] != "delete":
            ev = truth.by_write.get(op["write"])
            if ev is not None:
                out.append(Violation("phantom-write", f"{_describe(op)}: yet etcd applied it at "
                                     f"revision {ev['rev']}"))


def _acked_before(h):
    """Per key, acknowledged writes sorted by answer time: [(t1, rv)]."""
    acked = defaultdict(list)
    for op in h["ops"]:
        if op["verb"] in WRITE_VERBS and _ok(op) and op.get("rv"):
            acked[(op["kind"], op["name"])].append((op["t1"], op["rv"]))
    for v in acked.values():
        v.sort()
    return acked


def _max_acked_before(acked_list, t):
    best = 0
    for t1, rv in acked_list:
        if t1 >= t:
            break
        best = max(best, rv)
    return best


def check_reads(h, truth, out):
    acked = _acked_before(h)
    all_acked = sorted((t1, rv) for v in acked.values() for t1, rv in v)
    for op in h["ops"]:
        if op["verb"] == "get" and op["status"] in (200, 404):
            key = (op["kind"], op["name"])
            if op["status"] == 200:
                ev = truth.by_rev.get(op["rv"])
                obj = op.get("obj") or {}
                if (ev is None or (ev["kind"], ev["name"]) != key or ev["type"] != "PUT"
                        or ev["obj"].get("write") != obj.get("write")):
                    out.append(Violation("unknown-state", f"{_describe(op)}: write {obj.get('write')}"
                                         f" is not etcd's version at that revision"))
                    continue
            if not op.get("fresh"):
                continue
            floor = _max_acked_before(acked.get(key, []), op["t0"])
            if not floor:
                continue
            if op["status"] == 200 and op["rv"] < floor:
                out.append(Violation("stale-read", f"{_describe(op)}: a write acknowledged "
                                     f"before it has rv {floor}"))
            elif op["status"] == 404:
                at_floor = truth.by_rev.get(floor)
                deleted_later = any(e["type"] == "DELETE" for e in truth.later(*key, floor - 1))
                if at_floor and at_floor["type"] == "PUT" and not deleted_later:
                    out.append(Violation("stale-read", f"{_describe(op)}: the object exists since "
                                         f"rv {floor}, acknowledged before the read, and was "
                                         f"never deleted"))
        elif op["verb"] == "list" and op["status"] == 200:
            items = {name: rv for name, rv, _ in op["items"]}
            writes = {name: w for name, _, w in op["items"]}
            want = truth.state(op["kind"], op["rv"])
            if {n: e["rev"] for n, e in want.items()} != items or any(
                    e["obj"].get("write") != writes[n] for n, e in want.items()):
                extra = sorted(set(items) - set(want))[:3]
                missing = sorted(set(want) - set(items))[:3]
                changed = sorted(n for n in set(want) & set(items)
                                 if want[n]["rev"] != items[n] or want[n]["obj"].get("write") != writes[n])[:3]
                out.append(Violation("list-inconsistent", f"{_describe(op)}: extra {extra}, "
                                     f"missing {missing}, other versions {changed}"))
            if op.get("fresh"):
                floor = _max_acked_before(all_acked, op["t0"])
                if op["rv"] < floor:
                    out.append(Violation("stale-read", f"{_describe(op)}: list at rv {op['rv']} "
                                         f"older than rv {floor}, acknowledged before it was sent"))


def check_final(h, truth, out):
    """After the run every replica lists each kind as etcd had it at the list's
    revision, and that revision covers every acknowledged write (later writes,
    the DelegatedLease GC's, may follow: the list is judged at its own rv)."""
    last_acked = max((op["rv"] for op in h["ops"]
                      if op["verb"] in WRITE_VERBS and _ok(op) and op.get("rv")), default=0)
    for replica, kinds in h.get("final", {}).items():
        for kind, got in kinds.items():
            if got is None:
                out.append(Violation("final-state", f"{replica} could not list {kind} after the run"))
                continue
            want = {n: e["rev"] for n, e in truth.state(kind, got["rv"]).items()}
            items = got["items"]
            if got["rv"] < last_acked or want != items:
                extra = sorted(set(items.items()) - set(want.items()))[:3]
                missing = sorted(set(want.items()) - set(items.items()))[:3]
                out.append(Violation("final-state", f"{replica} lists {kind} at rv {got['rv']} "
                                     f"(last acknowledged write: rv {last_acked}) without {missing}"
                                     f" and with {extra} against etcd's state there"))


def _by_write(h):
    """write id -> the request that carried it."""
    return {op["write"]: op for op in h["ops"] if op.get("write")}


def check_terms(h, truth, out):
    sent = _by_write(h)
    for (kind, name), events in truth.by_key.items():
        if kind != "poolleases":
            continue
        holders = {}          # (uid, transitions) -> holder
        last_renewal = None   # (holder, t0 of the request, duration) of the last renewal
        prev = None
        for e in events:
            if e["type"] == "DELETE":
                prev, last_renewal = None, None
                continue
            o = e["obj"]
            term = (o.get("uid"), o.get("transitions"))
            holder = o.get("holder") or ""
            if holder:
                other = holders.setdefault(term, holder)
                if other != holder:
                    out.append(Violation("two-holders-in-term", f"poolleases/{name} term {term}: "
                                         f"{other} and then {holder} (rev {e['rev']})"))
            took_over = (prev is not None and prev["obj"].get("holder")
                         and holder and holder != prev["obj"]["holder"]
                         and prev["obj"].get("uid") == o.get("uid"))
            if took_over and last_renewal and last_renewal[0] == prev["obj"]["holder"]:
                t = sent.get(o.get("write"))
                if t and t["status"] is not None:  # its answer bounds its commit from above
                    elapsed = t["t1"] - last_renewal[1]
                    if elapsed < last_renewal[2]:
                        out.append(Violation(
                            "early-takeover", f"poolleases/{name}: {holder} took the lease from "
                            f"{prev['obj']['holder']} (rev {e['rev']}) {elapsed:.3f}s after that "
                            f"holder's last renewal was sent; leaseDurationSeconds "
                            f"{last_renewal[2]}"))
            renewed = prev is None or o.get("renew") != prev["obj"].get("renew") or holder != (
                prev["obj"].get("holder") or "")
            if holder and renewed:
                t = sent.get(o.get("write"))
                if t:
                    last_renewal = (holder, t["t0"], o.get("duration") or 0)
                else:
                    # A renewal whose request is unknown: no bound can be given.
                    last_renewal = None
            elif not holder:
                last_renewal = None
            prev = e


def check_delegation(h, truth, out):
    sent = _by_write(h)
    for e in truth.events:
        if e["kind"] != "delegatedleases" or e["type"] != "PUT":
            continue
        o = e["obj"]
        prev = truth.previous(e)
        renewal = prev is None or prev["type"] == "DELETE" or prev["obj"].get("observed") != o.get("observed")
        if not renewal:
            continue  # a status write (the GC's expired mark) accepts no delegation
        pl = truth.at("poolleases", o.get("pool"), e["rev"])
        plo = pl["obj"] if pl and pl["type"] == "PUT" else None
        term = o.get("term") or [None, None]
        writer = sent[o["write"]]["user"] if o.get("write") in sent else None
        if writer == "admin":
            continue  # system:masters may repair any lease
        why = None
        if plo is None:
            why = "the pool has no PoolLease"
        elif plo.get("holder") != o.get("delegate"):
            why = f"the pool's holder is {plo.get('holder')!r}"
        elif [plo.get("uid"), plo.get("transitions")] != list(term):
            why = f"its term is {term}, the pool's {[plo.get('uid'), plo.get('transitions')]}"
        elif writer and writer != o.get("delegate"):
            why = f"sent by {writer}"
        if why:
            out.append(Violation("delegation-from-non-holder", f"delegatedleases/{e['name']} "
                                 f"rev {e['rev']} delegate {o.get('delegate')!r}: {why}"))
    for op in h["ops"]:
        if op["verb"] != "delete" or op["kind"] != "delegatedleases" or not _ok(op):
            continue
        pool = (op.get("obj") or {}).get("pool")
        pl = truth.at("poolleases", pool, op["rv"]) if pool else None
        holder = pl["obj"].get("holder") if pl and pl["type"] == "PUT" else None
        if holder != op.get("user"):
            out.append(Violation("delegation-from-non-holder", f"{_describe(op)}: deleted by "
                                 f"{op.get('user')!r} while {pool}'s holder was {holder!r}"))


def _event_matches(ev, t):
    """Whether watch event `ev` ([type, rv, name, write]) is etcd's event `t`."""
    etype, _, name, write = ev[:4]
    if name != t["name"]:
        return False
    if t["type"] == "DELETE":
        return etype == "DELETED"
    want = "ADDED" if t["create"] == t["rev"] else "MODIFIED"
    return etype == want and write == t["obj"].get("write")


def _excused(h):
    """replica -> [(t0, t1)]: when the run's fault kept it from etcd (killed, cut
    off); what it owes from those times it owes from t1 on."""
    out = defaultdict(list)
    for x in h.get("excused", []):
        out[x["replica"]].append((x["t0"], x["t1"]))
    return out


def _owed_from(windows, t):
    """`t`, or the end of the excused window it falls in."""
    for a, b in windows:
        if a <= t <= b:
            return b
    return t


def check_watches(h, truth, out):
    max_delay = h["params"].get("max_watch_delay")
    excused = _excused(h)
    acked_at = {op["write"]: op["t1"] for op in h["ops"] if op.get("write") and _ok(op)}
    sentinel = h.get("sentinels", {})
    for w in h["watches"]:
        label = f"watch {w['id']} ({w['kind']} via {w['replica']} from rv {w['start']})"
        last, vouched = w["start"], w["start"]
        delivered = set()
        for ev in w["events"]:
            etype, rv = ev[0], ev[1]
            if etype == "BOOKMARK":
                if rv < vouched:
                    out.append(Violation("watch-order", f"{label}: bookmark {rv} after {vouched}"))
                vouched = max(vouched, rv)
                continue
            if rv <= w["start"] or rv in delivered:
                out.append(Violation("watch-duplicate", f"{label}: {etype} rv {rv} again"))
                continue
            if rv < last or rv <= vouched:
                out.append(Violation("watch-order", f"{label}: {etype} rv {rv} after rv {max(last, vouched)}"))
            delivered.add(rv)
            last, vouched = max(last, rv), max(vouched, rv)
            t = truth.by_rev.get(rv)
            if t is None or t["kind"] != w["kind"] or not _event_matches(ev, t):
                out.append(Violation("watch-wrong-event", f"{label}: {etype} {ev[2]} rv {rv} "
                                     f"write {ev[3]}; etcd has "
                                     f"{'nothing' if t is None else t['type'] + ' ' + t['kind'] + '/' + t['name']}"))
                continue
            if max_delay and t["type"] == "PUT":
                acked = acked_at.get(t["obj"].get("write"))
                # Owed from the answer, or from when the stream was opened (a
                # stream resumed later delivers what it missed at once), or
                # from when its replica could reach etcd again.
                owed = (_owed_from(excused[w["replica"]], max(acked, w["t_open"]))
                        if acked is not None else None)
                if owed is not None and ev[4] - owed > max_delay:
                    since = ("its write was acknowledged" if owed == acked else
                             "the stream was opened" if owed == w["t_open"] else
                             f"{w['replica']} could reach etcd again")
                    out.append(Violation("watch-delayed", f"{label}: rv {rv} arrived "
                                         f"{ev[4] - owed:.1f}s after {since} (at most {max_delay}s)"))
        missing = [r for r in truth.kind_between(w["kind"], w["start"], vouched) if r not in delivered]
        if missing:
            out.append(Violation("watch-gap", f"{label}: {len(missing)} events up to rv {vouched} "
                                 f"not delivered, first {missing[:5]}"))
        if w["end"] == "open-at-end" and sentinel.get(w["kind"]) and vouched < sentinel[w["kind"]]:
            out.append(Violation("watch-stalled", f"{label}: at rv {vouched} when stopped; the "
                                 f"sentinel is rv {sentinel[w['kind']]}"))


def check_cutoffs(h, out):
    for c in h.get("cutoffs", []):
        for op in h["ops"]:
            if op["replica"] != c["replica"] or op["t0"] < c["t0"] or op["t1"] > c["t1"]:
                continue
            if op["verb"] in WRITE_VERBS or _fresh_read(op):
                if _ok(op) or (op["verb"] == "get" and op["status"] == 404):
                    out.append(Violation("cutoff-answered", f"{_describe(op)}: sent and answered "
                                         f"while {c['replica']} was cut off from etcd "
                                         f"[{c['t0']:.3f}, {c['t1']:.3f}]"))


def check_availability(h, out):
    bound = h["params"].get("max_unavailable")
    if not bound:
        return
    excused = _excused(h)
    by_replica = defaultdict(list)
    for op in h["ops"]:
        if op["verb"] in WRITE_VERBS:
            by_replica[op["replica"]].append(op)
    for replica, ops in by_replica.items():
        ops.sort(key=lambda o: o["t0"])
        failing_since = None
        for op in ops:
            if any(a <= op["t0"] <= b for a, b in excused[replica]):
                failing_since = None
                continue
            if _ok(op) or _definite_refusal(op):
                if failing_since is not None and op["t0"] - failing_since > bound:
                    out.append(Violation("replica-unavailable", f"{replica}: every write failed from "
                                         f"{failing_since:.3f} to {op['t0']:.3f} "
                                         f"({op['t0'] - failing_since:.1f}s, at most {bound}s)"))
                failing_since = None
            elif failing_since is None:
                failing_since = op["t0"]
        if failing_since is not None and ops and ops[-1]["t1"] - failing_since > bound:
            out.append(Violation("replica-unavailable", f"{replica}: every write failed from "
                                 f"{failing_since:.3f} to the end ({ops[-1]['t1'] - failing_since:.1f}s)"))


def check(h):
    """Every violation in history `h` (a dict as the workload writes it)."""
    truth = Truth(h["truth"])
    out = []
    if not check_truth(h, truth, out):
        return out
    check_writes(h, truth, out)
    check_reads(h, truth, out)
    check_final(h, truth, out)
    check_terms(h, truth, out)
    check_delegation(h, truth, out)
    check_watches(h, truth, out)
    check_cutoffs(h, out)
    check_availability(h, out)
    return out


def main(argv):
    if len(argv) != 2:
        print("usage: checker.py history.json", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        h = json.load(f)
    violations = check(h)
    for v in violations:
        print(v)
    print(f"{len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
