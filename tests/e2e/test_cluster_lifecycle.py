"""Delegated heartbeats judged by the real node lifecycle controller
(kube-controller-manager 1.32, --node-monitor-grace-period given by --grace:
40s, the default before 1.32, or unset: 50 s), with poolcoord deployed from its
chart (defaults: taint after 40 s, forwarder resync 5 s) and stand-in kubelets
(tests/e2e/kube_cluster.py) in one pool whose leader's agent renews the
DelegatedLeases every 5 s through kube-apiserver.

One timeline, its scenarios side by side on different nodes:
  dl-a   cut off; its DelegatedLease renewed for grace + 30 s: stays Ready; then
         the delegation stops: Unknown within the grace period of the last
         forward; then a new delegation after that gap; then its kubelet returns:
         every mark and taint of ours goes.
  ctl-b  cut off, never delegated: Unknown one grace period after its last
         renewal, and tainted node.kubernetes.io/unreachable.
  ah-c   its kubelet's clock runs AHEAD s fast; delegated DELEGATE_AFTER s after
         its last renewal (whose renewTime then looks 1 s old): the first forward
         comes one renew interval after the renewal's true time, as
         kube-apiserver's managedFields time dates it, not AHEAD s later.
  ph-NN  (when flapping_nodes_never_go_unknown is among the cases: issue 11,
         defect 2) 20 nodes that were delegated once and came back (a flapping link), cut
         off again with the delegation starting 0, 0.5, ... 9.5 s after the
         kubelet's last renewal: none may go Unknown; the time from the last
         renewal to the first forward is reported (min/median/max).
The cases then judge what was recorded. Skipped (exit 77) without
kube-apiserver/kube-controller-manager binaries."""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import expect  # noqa: E402
from kube_cluster import (DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Kubelet, LeaseWatch,  # noqa: E402
                          NodeWatch, PoolLeader, parse_micro, run_cluster_cases,
                          run_scenarios, stop_parts, unknown_bound)

POOL = "edge"
LEADER = "ld-1"
TAINT = "node.openyurt.io/unschedulable:NoSchedule"
UNREACHABLE = "node.kubernetes.io/unreachable:NoSchedule"
MONITOR_PERIOD = 5.0   # kube-controller-manager's --node-monitor-period default
SLACK = 3.0            # watch delivery and scheduling on a busy 2-core machine
TAINT_AFTER = 40.0     # the chart's (and the server's) --delegation-taint-after default
PHASES = 20
AHEAD, DELEGATE_AFTER = 5.0, 6.0  # ah-c's clock, and when its delegation starts
RENEW_INTERVAL = 10.0  # the stand-in kubelets' and the chart's --kubelet-renew-interval


def ours(annotations):
    return sorted(k for k in annotations if k == DELEGATE or k.startswith("coordination.pool/"))


class Env:
    def __init__(self, binary):
        ap = argparse.ArgumentParser()
        ap.add_argument("--grace", default="", help="--node-monitor-grace-period (default: kcm's, 50s)")
        a, _ = ap.parse_known_args()
        self.grace = float(a.grace.rstrip("s")) if a.grace else 50.0
        self.phases = any(c.__name__ == "flapping_nodes_never_go_unknown" for c in CASES)
        self.cluster = KubeCluster(grace=a.grace or None)
        self.threads, self.errors, self.results = [], [], {}
        try:
            self.pc = ChartInstall(self.cluster, binary)
            self.nodes = [LEADER, "dl-a", "ctl-b", "ah-c"] + ([f"ph-{i:02d}" for i in range(PHASES)] if self.phases else [])
            self.kubelets = {n: Kubelet(self.cluster, n, {POOL_LABEL: POOL}).register().start() for n in self.nodes}
            self.nw, self.lw = NodeWatch(self.cluster), LeaseWatch(self.cluster)
            self.nw.wait("every Node Ready", lambda: all(self.nw.status(n) == "True" for n in self.nodes), 60)
            self.leader = PoolLeader(self.cluster, LEADER, POOL)
            self.t0 = time.time()
            self.run([("dl-a", self.delegated_node), ("ctl-b", self.control_node),
                      ("ah-c", self.clock_ahead_node)] +
                     ([("phases", self.flapping_nodes)] if self.phases else []))
            print(f"timeline: {time.time() - self.t0:.0f} s at grace {self.grace:.0f} s", flush=True)
        except BaseException:
            self.stop()
            raise

    def run(self, scenarios):
        run_scenarios(scenarios, self.errors)

    def forwards(self, node, after):
        """renewTimes (s) of the Lease versions after `after` that its kubelet did not write."""
        own = {parse_micro(r) for r in self.kubelets[node].renewals}
        return [r for r, _ in self.lw.renewals(node, after) if all(abs(r - o) > 1e-6 for o in own)]

    def marks_gone(self, node):
        latest = self.lw.latest(node)
        taints = self.nw.current_taints(node)
        return (self.nw.status(node) == "True" and latest is not None and not ours(latest[2])
                and TAINT not in taints and UNREACHABLE not in taints)

    # --- scenarios (threads)
    def delegated_node(self):
        r, k, g = self.results.setdefault("dl-a", {}), self.kubelets["dl-a"], self.grace
        r["cut"] = k.cut_off()
        self.leader.delegate("dl-a")
        r["start"] = self.leader.first_write["dl-a"]
        time.sleep(max(0.0, r["start"] + g + 30 - time.time()))
        r["stop"] = time.time()
        self.leader.undelegate("dl-a")
        r["last_dl_write"] = self.leader.last_write["dl-a"]
        r["unknown"] = self.nw.wait("dl-a Unknown after its delegation stopped",
                                    lambda: self.nw.first("dl-a", "Unknown", after=r["stop"]),
                                    self.leader.dl_duration + g + 30)
        r["forwards"] = [f for f in self.forwards("dl-a", r["cut"]) if f <= r["unknown"]]
        # A new delegation after a gap longer than the grace period (defect 3).
        time.sleep(2)
        r["resume"] = time.time()
        self.leader.delegate("dl-a")
        time.sleep(12)
        r["resumed_lease"] = self.lw.latest("dl-a")
        r["events"] = self.cluster.kubectl_json("get", "events", "-n", "default",
                                                "--field-selector", "involvedObject.name=dl-a")["items"]
        self.leader.undelegate("dl-a", delete=True)
        r["back"] = time.time()
        k.come_back()
        self.nw.wait("dl-a back: Ready, and no mark or taint of ours", lambda: self.marks_gone("dl-a"), 40)
        r["clean"] = time.time()

    def control_node(self):
        r, k = self.results.setdefault("ctl-b", {}), self.kubelets["ctl-b"]
        r["cut"] = k.cut_off()
        r["unknown"] = self.nw.wait("ctl-b Unknown", lambda: self.nw.first("ctl-b", "Unknown", after=r["cut"]),
                                    self.grace + 30)
        r["unreachable"] = self.nw.wait("ctl-b tainted unreachable",
                                        lambda: self.nw.first_taint("ctl-b", UNREACHABLE, after=r["cut"]), 30)
        k.come_back()
        self.nw.wait("ctl-b back: Ready, untainted", lambda: self.marks_gone("ctl-b"), 40)

    def clock_ahead_node(self):
        r, k = self.results.setdefault("ah-c", {}), self.kubelets["ah-c"]
        r["cut"] = k.cut_off(ahead=AHEAD)
        time.sleep(max(0.0, r["cut"] + DELEGATE_AFTER - time.time()))
        self.leader.delegate("ah-c")
        r["start"] = self.leader.first_write["ah-c"]
        r["first_forward"] = self.lw.wait("ah-c forwarded", lambda: min(self.forwards("ah-c", r["cut"]), default=None),
                                          RENEW_INTERVAL + AHEAD + 15)
        self.leader.undelegate("ah-c", delete=True)
        k.come_back()
        self.nw.wait("ah-c back: Ready, and no mark or taint of ours", lambda: self.marks_gone("ah-c"), 40)

    def flapping_nodes(self):
        names = [f"ph-{i:02d}" for i in range(PHASES)]
        prep_errors = []

        def prepare(n):
            # Delegated once, then its kubelet came back: the flapping link.
            try:
                cut = self.kubelets[n].cut_off()
                self.leader.delegate(n)
                self.lw.wait(f"{n} forwarded once", lambda: self.forwards(n, cut), 30)
                self.leader.undelegate(n, delete=True)
                self.kubelets[n].come_back()
                self.lw.wait(f"{n} cleaned up after its kubelet came back",
                             lambda: (lambda v: v and not ours(v[2]))(self.lw.latest(n)), 30)
            except Exception as e:
                prep_errors.append(f"{n}: {e}")
        threads = [threading.Thread(target=prepare, args=(n,), daemon=True) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        if prep_errors:
            raise AssertionError("preparing the flapping nodes: " + "; ".join(prep_errors))
        base = time.time() + 1
        res = self.results.setdefault("phases", {})

        def phase(i, n):
            time.sleep(max(0.0, base + i * 0.05 - time.time()))
            cut = self.kubelets[n].cut_off()
            time.sleep(max(0.0, cut + i * 10.0 / PHASES - time.time()))
            self.leader.delegate(n)
            res[n] = {"cut": cut, "start": self.leader.first_write[n]}
            time.sleep(max(0.0, cut + self.grace + 25 - time.time()))
            res[n]["unknown"] = self.nw.first(n, "Unknown", after=cut)
            fw = self.forwards(n, cut)
            res[n]["first_forward"] = min(fw) - cut if fw else None
            self.leader.undelegate(n, delete=True)
        threads = [threading.Thread(target=phase, args=(i, n), daemon=True) for i, n in enumerate(names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)

    def logs(self):
        return ("\n".join(self.errors) + "\nleader agent errors: " + "; ".join(self.leader.errors[:5])
                if hasattr(self, "leader") else "") + "\n" + self.cluster.logs()

    def stop(self):
        stop_parts(self, "kubelets", "leader", "nw", "lw", "cluster")


def result(env, key):
    expect(key in env.results and not [e for e in env.errors if e.startswith(key.split("/")[0])],
           f"scenario {key} did not finish: {env.errors}")
    return env.results[key]


# --- cases

def delegated_node_stays_ready(env):
    r = result(env, "dl-a")
    held = r["stop"] - r["cut"]
    expect(held >= env.grace + 25, f"delegated for only {held:.0f} s")
    expect(env.nw.first("dl-a", "Unknown", after=r["cut"]) >= r["stop"],
           f"dl-a went Unknown {env.nw.first('dl-a', 'Unknown', after=r['cut']) - r['cut']:.1f} s after its "
           f"kubelet's last renewal, while its DelegatedLease was renewed")
    gaps = [b - a for a, b in zip([r["cut"]] + r["forwards"], r["forwards"]) if b <= r["stop"]]
    print(f"  dl-a: first forward {r['forwards'][0] - r['cut']:.1f} s after the kubelet's last renewal, "
          f"longest gap between forwards {max(gaps):.1f} s ({len(gaps)} forwards while delegated)")
    expect(max(gaps) < env.grace / 2, f"the cloud Lease went {max(gaps):.1f} s without a renewal")


def control_node_goes_unknown_and_unreachable(env):
    r = result(env, "ctl-b")
    after = r["unknown"] - r["cut"]
    print(f"  ctl-b: Unknown {after:.1f} s after its kubelet's last renewal (grace {env.grace:.0f} s), "
          f"unreachable taint {r['unreachable'] - r['cut']:.1f} s after")
    expect(env.grace - 1 <= after <= unknown_bound(env.grace, MONITOR_PERIOD) + SLACK, f"Unknown after {after:.1f} s")


def delegated_node_follows_when_delegation_stops(env):
    r = result(env, "dl-a")
    last = r["forwards"][-1]
    after = r["unknown"] - last
    print(f"  dl-a: delegation stopped; last forward {last - r['last_dl_write']:.1f} s after the last "
          f"DelegatedLease write; Unknown {after:.1f} s after the last forward")
    expect(env.grace - 1 <= after <= unknown_bound(env.grace, MONITOR_PERIOD) + SLACK, f"Unknown {after:.1f} s after it")
    expect(last <= r["last_dl_write"] + env.leader.dl_duration + 5 + SLACK,
           "forwarded after the DelegatedLease had expired")


def kubelet_return_removes_every_mark(env):
    r = result(env, "dl-a")
    print(f"  dl-a: Ready and clean {r['clean'] - r['back']:.1f} s after its kubelet came back")
    for node in ("dl-a", "ctl-b"):
        expect(env.marks_gone(node), f"{node}: {env.nw.status(node)}, taints {env.nw.current_taints(node)}, "
                                     f"lease annotations {env.lw.latest(node)}")


def delegated_node_tainted_after_threshold(env):
    """Defect 1: the taint goes on (a patch, which the chart's RBAC grants) once the
    node has been delegated for --delegation-taint-after, and no forward fails."""
    r = result(env, "dl-a")
    t = env.nw.first_taint("dl-a", TAINT, after=r["start"])
    expect(t is not None and t <= r["stop"], "dl-a was never tainted while delegated")
    # The delegation begins with its first forward (delegated-since on the cloud
    # Lease), one kubelet renew interval after the kubelet's last renewal.
    began = r["forwards"][0]
    print(f"  dl-a: tainted {t - began:.1f} s after its first forward ({t - r['start']:.1f} s after the "
          f"first DelegatedLease write)")
    expect(TAINT_AFTER - 1 <= t - began <= TAINT_AFTER + 5 + SLACK, f"tainted {t - began:.1f} s after it")
    errors = env.pc.metric("poolcoord_forward_errors_total")
    expect(errors == 0, f"poolcoord_forward_errors_total = {errors}")


def resumed_delegation_starts_anew(env):
    """Defect 3: a delegation after a gap longer than the grace period is a new one:
    a new start time and a DelegationStarted Event, not the old delegation's."""
    r = result(env, "dl-a")
    _, _, ann = r["resumed_lease"]
    since = ann.get("coordination.pool/delegated-since")
    expect(since is None or parse_micro(since) >= r["resume"] - 1,
           f"delegated-since {since} is the old delegation's (resumed at {r['resume']:.1f})")
    started = [e for e in r["events"] if e["reason"] == "DelegationStarted"]
    expect(len(started) >= 2, f"DelegationStarted events: {len(started)} for two delegations")


def first_forward_of_a_kubelet_clock_ahead_is_on_time(env):
    """The first forward after a renewal written by a kubelet clock running ahead is
    dated by kube-apiserver's managedFields time of that write: one renew
    interval after it (up to 1 s early: that time has whole seconds), not AHEAD s
    later."""
    r = result(env, "ah-c")
    after = r["first_forward"] - r["cut"]
    print(f"  ah-c: clock {AHEAD:.0f} s ahead, delegated {r['start'] - r['cut']:.1f} s after its last renewal; "
          f"first forward {after:.1f} s after that renewal (renew interval {RENEW_INTERVAL:.0f} s)")
    expect(RENEW_INTERVAL - 1.5 <= after <= RENEW_INTERVAL + SLACK / 2,
           f"first forward {after:.1f} s after the renewal (by its renewTime: "
           f"{RENEW_INTERVAL + AHEAD - DELEGATE_AFTER + 1:.0f} s wait at most)")


def flapping_nodes_never_go_unknown(env):
    """Defect 2, over 20 phases of the kubelet's last renewal: the first forward
    comes soon enough that no node goes Unknown."""
    res = result(env, "phases")
    expect(len(res) == PHASES, f"{len(res)} of {PHASES} phases ran")
    firsts = [v["first_forward"] for v in res.values() if v["first_forward"] is not None]
    unknown = {n: v["unknown"] - v["cut"] for n, v in res.items() if v["unknown"] is not None}
    for n, v in sorted(res.items()):
        ff = f"{v['first_forward']:.1f}" if v["first_forward"] is not None else "none"
        print(f"  {n}: delegation from {v['start'] - v['cut']:.1f} s, first forward {ff} s after the last "
              f"renewal" + (f", Unknown at {unknown[n]:.1f} s" if n in unknown else ""))
    if firsts:
        print(f"  first forward after the kubelet's last renewal over {len(firsts)} phases: "
              f"min {min(firsts):.1f} s, median {statistics.median(firsts):.1f} s, max {max(firsts):.1f} s "
              f"(grace {env.grace:.0f} s)")
    expect(len(firsts) == PHASES, f"{PHASES - len(firsts)} nodes were never forwarded")
    expect(not unknown, f"{len(unknown)} nodes went Unknown: {unknown}")
    expect(max(firsts) < env.grace / 2, f"a first forward came {max(firsts):.1f} s after the last renewal")


CASES = [delegated_node_stays_ready, control_node_goes_unknown_and_unreachable,
         delegated_node_follows_when_delegation_stops, kubelet_return_removes_every_mark,
         delegated_node_tainted_after_threshold, resumed_delegation_starts_anew,
         first_forward_of_a_kubelet_clock_ahead_is_on_time, flapping_nodes_never_go_unknown]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
