"""The history checker against hand-made histories: one that holds (no
violation may be named in it), and for every violation the checker can name, a
copy of it with exactly that one fault, which must be caught as that kind and
as nothing else. Runs without etcd or poolcoord (ctest robustness/checker).
"""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checker import KINDS, check  # noqa: E402

U = "uid-pool-a"


def obj(write, holder=None, transitions=0, duration=2, renew=None, delegate=None, pool=None,
        observed=None, term=None, uid=U):
    return {"uid": uid, "write": write, "holder": holder, "transitions": transitions,
            "duration": duration, "renew": renew, "delegate": delegate, "pool": pool,
            "observed": observed, "term": term}


def put(rev, kind, name, o, create=None):
    return {"rev": rev, "kind": kind, "name": name, "type": "PUT", "create": create or rev, "obj": o}


def delete(rev, kind, name):
    return {"rev": rev, "kind": kind, "name": name, "type": "DELETE", "create": 0, "obj": None}


def op(i, user, replica, verb, kind, name, t0, t1, status, rv=None, write=None, o=None, fresh=True,
       items=None):
    rec = {"id": f"op#{i}", "user": user, "replica": replica, "verb": verb, "kind": kind, "name": name,
           "t0": t0, "t1": t1, "status": status, "fresh": fresh, "write": write, "rv": rv, "obj": o}
    if items is not None:
        rec["items"] = items
    return rec


PL, DL = "poolleases", "delegatedleases"


def base():
    """A run that holds: n1 leads pool-a and delegates n3; n2 takes over after
    n1's lease ran out (3 s after its last renewal was sent, lease 2 s) and
    delegates n3, then deletes its DelegatedLease; watches see it all."""
    pl1 = obj("n1#1", holder="n1", renew="r1", observed="o1")
    dl2 = obj("n1#2", holder="n3", delegate="n1", pool="pool-a", observed="d1", term=[U, 0])
    pl3 = obj("n1#3", holder="n1", renew="r3", observed="o3")
    dl4 = obj("n1#4", holder="n3", delegate="n1", pool="pool-a", observed="d4", term=[U, 0])
    pl5 = obj("n2#5", holder="n2", transitions=1, renew="r5", observed="o5")
    dl6 = obj("n2#6", holder="n3", delegate="n2", pool="pool-a", observed="d6", term=[U, 1])
    spl = obj("sentinel#pl", uid="uid-s1")
    sdl = obj("sentinel#dl", holder="sentinel", delegate="sentinel", pool="sentinel", observed="s",
              uid="uid-s2")
    truth = [put(1, PL, "pool-a", pl1), put(2, DL, "n3", dl2), put(3, PL, "pool-a", pl3, create=1),
             put(4, DL, "n3", dl4, create=2), put(5, PL, "pool-a", pl5, create=1),
             put(6, DL, "n3", dl6, create=2), delete(7, DL, "n3"), put(8, PL, "sentinel", spl),
             put(9, DL, "sentinel", sdl)]
    ops = [
        op(1, "n1", "r0", "create", PL, "pool-a", 10.0, 10.1, 201, 1, "n1#1", pl1),
        op(2, "n1", "r0", "create", DL, "n3", 10.2, 10.3, 201, 2, "n1#2", dl2),
        op(3, "n1", "r1", "update", PL, "pool-a", 11.0, 11.1, 200, 3, "n1#3", pl3),
        op(4, "n1", "r1", "update", DL, "n3", 11.2, 11.3, 200, 4, "n1#4", dl4),
        op(5, "n3", "r2", "update", DL, "n3", 11.4, 11.5, 403, None, "n3#10"),
        op(6, "n2", "r2", "update", PL, "pool-a", 13.9, 14.0, 200, 5, "n2#5", pl5),
        op(7, "n2", "r2", "update", DL, "n3", 14.2, 14.3, 200, 6, "n2#6", dl6),
        op(8, "n2", "r0", "delete", DL, "n3", 14.4, 14.5, 200, 7, None, dict(dl6)),
        op(9, "n1", "r0", "get", PL, "pool-a", 14.6, 14.7, 200, 5, None, pl5),
        op(10, "n1", "r1", "get", PL, "pool-a", 14.6, 14.7, 200, 3, None, pl3, fresh=False),
        op(11, "admin", "r1", "list", DL, None, 11.35, 11.4, 200, 4, items=[["n3", 4, "n1#4"]]),
        op(12, "n1", "r1", "get", DL, "n3", 100.5, 130.0, 503),   # r1 cut off: an error
        op(13, "n1", "r2", "update", PL, "pool-a", 50.0, 51.0, 503, None, "n1#11"),
        op(14, "n1", "r2", "update", PL, "pool-a", 52.0, 52.1, 409, None, "n1#12"),
        op(15, "admin", "r0", "create", PL, "sentinel", 15.0, 15.1, 201, 8, "sentinel#pl", spl),
        op(16, "admin", "r0", "create", DL, "sentinel", 15.2, 15.3, 201, 9, "sentinel#dl", sdl),
    ]
    ev = [["ADDED", 1, "pool-a", "n1#1", 10.1], ["MODIFIED", 3, "pool-a", "n1#3", 11.1],
          ["MODIFIED", 5, "pool-a", "n2#5", 14.0], ["BOOKMARK", 6, None, None, 14.2],
          ["ADDED", 8, "sentinel", "sentinel#pl", 15.1]]
    watches = [
        {"id": "w#1", "replica": "r0", "kind": PL, "start": 0, "t_open": 9.0, "events": ev,
         "end": "open-at-end"},
        {"id": "w#2", "replica": "r1", "kind": DL, "start": 0, "t_open": 9.0,
         "events": [["ADDED", 2, "n3", "n1#2", 10.3], ["MODIFIED", 4, "n3", "n1#4", 11.3]],
         "end": "closed"},
        {"id": "w#3", "replica": "r2", "kind": DL, "start": 4, "t_open": 12.0,
         "events": [["MODIFIED", 6, "n3", "n2#6", 14.3], ["DELETED", 7, "n3", "n2#6", 14.5],
                    ["ADDED", 9, "sentinel", "sentinel#dl", 15.3]],
         "end": "open-at-end"},
    ]
    return {"params": {"max_watch_delay": 15, "max_unavailable": 15}, "ops": ops, "watches": watches,
            "truth": truth, "truth_from": 0, "truth_to": 9, "other_revs": [],
            "cutoffs": [{"replica": "r1", "t0": 100.0, "t1": 140.0}], "excused": [], "faults": [],
            "sentinels": {PL: 8, DL: 9},
            "final": {"r0": {PL: {"rv": 9, "items": {"pool-a": 5, "sentinel": 8}},
                             DL: {"rv": 9, "items": {"sentinel": 9}}}}}


def find(h, kind_or_list, pred):
    for x in kind_or_list:
        if pred(x):
            return x
    raise KeyError("not in the hand-made history")


def op_of(h, i):
    return find(h, h["ops"], lambda o: o["id"] == f"op#{i}")


def truth_at(h, rev):
    return find(h, h["truth"], lambda e: e["rev"] == rev)


def watch(h, wid):
    return find(h, h["watches"], lambda w: w["id"] == wid)


class Checker(unittest.TestCase):
    caught = set()

    def assertOnly(self, h, kind):
        got = check(h)
        kinds = {v.kind for v in got}
        self.assertEqual(kinds, {kind}, "\n".join(str(v) for v in got))
        Checker.caught.add(kind)
        print(f"  {kind}: {got[0]}")

    def test_base_holds(self):
        self.assertEqual([str(v) for v in check(base())], [])

    def test_truth_incomplete(self):
        h = base()
        h["truth"] = [e for e in h["truth"] if e["rev"] != 6]
        self.assertOnly(h, "truth-incomplete")

    def test_lost_write(self):
        # n1's DelegatedLease renewal n1#99 acknowledged at rv 4, where etcd
        # has another write: the acknowledged write is nowhere.
        h = base()
        op_of(h, 4)["write"] = "n1#99"
        self.assertOnly(h, "lost-write")

    def test_phantom_write(self):
        # The renewal in etcd at rv 4 was answered 409 Conflict.
        h = base()
        o = op_of(h, 4)
        o.update(status=409, rv=None, obj=None)
        self.assertOnly(h, "phantom-write")

    def test_unknown_state(self):
        # A read from the cache returns rv 3 with a write that is not etcd's there.
        h = base()
        op_of(h, 10)["obj"] = dict(op_of(h, 10)["obj"], write="n1#1")
        self.assertOnly(h, "unknown-state")

    def test_stale_read(self):
        # A read without resourceVersion, sent after n2's takeover (rv 5) was
        # acknowledged, returns rv 3.
        h = base()
        op_of(h, 9).update(rv=3, obj=copy.deepcopy(op_of(h, 3)["obj"]))
        self.assertOnly(h, "stale-read")

    def test_stale_read_not_found(self):
        # ... or claims the PoolLease, written at rv 5 and never deleted, is not there.
        h = base()
        op_of(h, 9).update(status=404, rv=None, obj=None)
        self.assertOnly(h, "stale-read")

    def test_list_inconsistent(self):
        # The list at rv 4 lacks n3's DelegatedLease.
        h = base()
        op_of(h, 11)["items"] = []
        self.assertOnly(h, "list-inconsistent")

    def test_final_state(self):
        # After the run r0 still lists n3's DelegatedLease, deleted at rv 7.
        h = base()
        h["final"]["r0"][DL]["items"]["n3"] = 6
        self.assertOnly(h, "final-state")

    def test_final_state_behind_acknowledged_writes(self):
        # r0's last list is etcd's state at rv 7, but rv 9 was acknowledged before.
        h = base()
        h["final"]["r0"][DL] = {"rv": 7, "items": {}}
        self.assertOnly(h, "final-state")

    def test_final_state_unavailable(self):
        h = base()
        h["final"]["r0"][DL] = None
        self.assertOnly(h, "final-state")

    def test_two_holders_in_term(self):
        # n2 takes the lease without raising leaseTransitions (term uid, 0 had n1).
        h = base()
        truth_at(h, 5)["obj"]["transitions"] = 0
        truth_at(h, 6)["obj"]["term"] = [U, 0]
        self.assertOnly(h, "two-holders-in-term")

    def test_early_takeover(self):
        # n2's takeover acknowledged 1.5 s after n1's last renewal was sent (lease 2 s).
        h = base()
        op_of(h, 6).update(t0=12.4, t1=12.5)
        self.assertOnly(h, "early-takeover")

    def test_delegation_from_non_holder(self):
        # n1, deposed at rv 5, renews n3's DelegatedLease at rv 6 in the new term.
        h = base()
        truth_at(h, 6)["obj"]["delegate"] = "n1"
        self.assertOnly(h, "delegation-from-non-holder")

    def test_delegation_in_an_old_term(self):
        # The renewal at rv 6 carries n2 but the term n1 held.
        h = base()
        truth_at(h, 6)["obj"]["term"] = [U, 0]
        self.assertOnly(h, "delegation-from-non-holder")

    def test_delete_from_non_holder(self):
        # n1 (deposed) deleted n3's DelegatedLease at rv 7.
        h = base()
        op_of(h, 8)["user"] = "n1"
        self.assertOnly(h, "delegation-from-non-holder")

    def test_watch_order(self):
        h = base()
        ev = watch(h, "w#1")["events"]
        ev[1], ev[2] = ev[2], ev[1]
        self.assertOnly(h, "watch-order")

    def test_watch_event_behind_a_bookmark(self):
        # A bookmark at 6 vouches for everything up to 6; rv 5 after it.
        h = base()
        ev = watch(h, "w#1")["events"]
        ev[2], ev[3] = ev[3], ev[2]
        self.assertOnly(h, "watch-order")

    def test_watch_duplicate(self):
        h = base()
        ev = watch(h, "w#1")["events"]
        ev.insert(2, list(ev[1]))
        self.assertOnly(h, "watch-duplicate")

    def test_resumed_watch_repeats(self):
        # Resumed from rv 4, the stream delivers rv 4 again.
        h = base()
        watch(h, "w#3")["events"].insert(0, ["MODIFIED", 4, "n3", "n1#4", 12.1])
        self.assertOnly(h, "watch-duplicate")

    def test_watch_gap(self):
        h = base()
        del watch(h, "w#1")["events"][1]
        self.assertOnly(h, "watch-gap")

    def test_resumed_watch_skips(self):
        # Resumed from rv 4, the stream starts at rv 7: rv 6 is lost between streams.
        h = base()
        del watch(h, "w#3")["events"][0]
        self.assertOnly(h, "watch-gap")

    def test_watch_gap_below_bookmark(self):
        # No event after rv 3 but a bookmark at 6: rv 5 was vouched for and not sent.
        h = base()
        w = watch(h, "w#1")
        w["events"] = w["events"][:2] + [w["events"][3]]
        w["end"] = "closed"
        self.assertOnly(h, "watch-gap")

    def test_watch_wrong_event(self):
        h = base()
        watch(h, "w#1")["events"][1][0] = "ADDED"
        self.assertOnly(h, "watch-wrong-event")

    def test_watch_other_kinds_revision_is_no_gap(self):
        # The DelegatedLease watch skips rv 3 and 5 (PoolLease writes): not gaps.
        # (The base history has that already; this says so by name.)
        self.assertEqual([str(v) for v in check(base())], [])

    def test_watch_stalled(self):
        # Open at the end, the stream never delivered the sentinel (rv 9).
        h = base()
        watch(h, "w#3")["events"].pop()
        self.assertOnly(h, "watch-stalled")

    def test_watch_delayed(self):
        h = base()
        watch(h, "w#1")["events"][2][4] = 14.0 + 20
        self.assertOnly(h, "watch-delayed")

    def test_watch_delayed_after_a_cut_healed(self):
        # r0 was cut off from etcd until 14.0: the event acknowledged during the
        # cut is owed from 14.0 on, and came 16 s later.
        h = base()
        h["excused"].append({"replica": "r0", "t0": 13.0, "t1": 14.0})
        watch(h, "w#1")["events"][2][4] = 14.0 + 16
        self.assertOnly(h, "watch-delayed")

    def test_watch_delay_counts_from_the_streams_opening(self):
        # A stream resumed 30 s after a write (its client was elsewhere) delivers
        # it at once: in time. 16 s after it opened would not be.
        h = base()
        w = watch(h, "w#3")
        w["t_open"] = 44.0
        for ev in w["events"]:
            ev[4] = 44.1
        self.assertEqual([str(v) for v in check(h)], [])
        w["events"][0][4] = 44.0 + 16
        self.assertOnly(h, "watch-delayed")

    def test_watch_delay_excused_while_cut_off(self):
        # ... and 13 s after the cut healed is in time, however long after the ack.
        h = base()
        h["excused"].append({"replica": "r0", "t0": 13.0, "t1": 30.0})
        watch(h, "w#1")["events"][2][4] = 30.0 + 13
        self.assertEqual([str(v) for v in check(h)], [])

    def test_replica_unavailable_excused_while_cut_off(self):
        h = base()
        op_of(h, 13).update(t0=30.0, t1=37.0)
        h["excused"].append({"replica": "r2", "t0": 29.0, "t1": 45.0})
        self.assertEqual([str(v) for v in check(h)], [])

    def test_cutoff_answered(self):
        # r1, cut off from etcd, answers a read without resourceVersion (with
        # the object's latest state, even).
        h = base()
        op_of(h, 12).update(name="sentinel", status=200, rv=9, obj=copy.deepcopy(op_of(h, 16)["obj"]))
        self.assertOnly(h, "cutoff-answered")

    def test_cutoff_answered_not_found(self):
        h = base()
        op_of(h, 12)["status"] = 404
        self.assertOnly(h, "cutoff-answered")

    def test_replica_unavailable(self):
        # r2 fails every write for 20 s while etcd had quorum.
        h = base()
        op_of(h, 13).update(t0=30.0, t1=37.0)
        self.assertOnly(h, "replica-unavailable")

    @classmethod
    def tearDownClass(cls):
        missing = set(KINDS) - cls.caught
        if missing:
            raise AssertionError(f"violations without a hand-made history: {sorted(missing)}")


if __name__ == "__main__":
    unittest.main(verbosity=1)
