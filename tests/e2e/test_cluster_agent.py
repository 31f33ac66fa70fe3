"""poolcoord-agent on the real control plane (issue 14): kube-apiserver,
kube-controller-manager (--node-monitor-grace-period 40s, --node-monitor-period
2s) and etcd from tests/e2e/kube_cluster.py, poolcoord deployed from its chart,
one network namespace per edge node running the real poolcoord-agent with the
node's own client certificate, and a stand-in kubelet per node (in the test
process) that renews the node's Lease while the node's cloud link is up.

Network: every node namespace has two links, made and removed by the test (root
only; skipped otherwise):
  cloud  a veth to the host's cloud bridge (10.<c>.0.0/24, host 10.<c>.0.1): its
         only way to kube-apiserver, which listens on 0.0.0.0 with the bridge
         address in its certificate; "cut off" = this link down;
  LAN    a veth to its pool's bridge (172.<l>.<pool>.0/24, host .254), the pool's
         LAN; the Node's InternalIP is its address there. The test reaches each
         agent's /metrics through it, and plays a rogue pool member on it.

One timeline, its scenarios side by side (pool "alpha", 6 nodes, and pool
"bravo", 3 nodes), judged by the real node lifecycle controller:
  a cut-off member stays Ready (no unreachable taint) for 3 x the grace period,
  and gets node.openyurt.io/unschedulable; back, every mark of ours goes;
  a cut-off member that then dies, and a reachable one that dies, go NotReady
  within grace + 2 heartbeat intervals (+ the controller's monitor period);
  the leader's agent is killed: another member takes over and the cut-off
  member's Lease never goes a grace period without a renewal;
  a restarted agent is heard again within one heartbeat interval;
  forged, replayed, foreign-pool, oversized and malformed datagrams from the
  LAN are dropped by reason and change nothing;
  an agent that starts cut off knows its peers from its peer cache;
  a whole pool cut off at once: every member goes NotReady (the known limit).
"""
import base64
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import issue_cert, make_ca  # noqa: E402
from kube_cluster import (DELEGATE, POOL_LABEL, ChartInstall, KubeCluster, Kubelet, LeaseWatch,  # noqa: E402
                          NodeWatch, Process, parse_micro, run_cluster_cases, run_scenarios, stop_parts,
                          unknown_bound)
from kube_nodes import LAUNCHER, Network as Net, scrape  # noqa: E402

GRACE = 40.0
MONITOR_PERIOD = 2.0       # --node-monitor-period given to kube-controller-manager
INTERVAL = 5.0             # the agents' --heartbeat-interval (their default)
SLACK = 4.0                # watch delivery and scheduling on a busy 2-core machine
HEARTBEAT_PORT = 10270
HEALTH_PORT = 10271
TAINT = "node.openyurt.io/unschedulable:NoSchedule"
UNREACHABLE = "node.kubernetes.io/unreachable:NoSchedule"
ALPHA = ["a1", "a2", "a3", "a4", "a5", "a6"]
BRAVO = ["b1", "b2", "b3"]
PROBE = "a-probe"  # the rogue member (the test itself) in pool alpha


def openssl_bytes(*args, stdin=None):
    p = subprocess.run(["openssl", *args], input=stdin, capture_output=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])}: {p.stderr.decode(errors='replace')[-500:]}")
    return p.stdout


class Agent:
    """One poolcoord-agent in a node's namespace."""

    def __init__(self, env, name, ns, ip, binary=None):
        self.env, self.name, self.ns, self.ip = env, name, ns, ip
        self.cache = tempfile.mkdtemp(prefix=f"agent-{name}-", dir=env.cluster.workdir)
        cert, key = env.cluster.pki.node(name)
        self.args = ["ip", "netns", "exec", ns, binary or env.agent_bin,
                     f"--server=https://{env.net.cloud_host}:{env.cluster.port}",
                     f"--client-certificate={cert}", f"--client-key={key}",
                     f"--cluster-ca-file={env.cluster.pki.ca[0]}", f"--peer-cache-dir={self.cache}",
                     f"--bind-address={ip}", f"--heartbeat-port={HEARTBEAT_PORT}",
                     f"--health-bind-address={ip}", f"--health-port={HEALTH_PORT}", "-v", "1"]
        self.proc = None
        self.start()

    def start(self):
        self.proc = LAUNCHER.call(lambda: Process(f"agent-{self.name}", self.args, self.env.cluster.workdir))
        self.env.cluster.procs.append(self.proc)
        return self

    def kill(self):
        self.proc.kill()

    def metrics(self):
        """{name or name{labels}: value} of /metrics, or {} when it does not answer."""
        return scrape(f"http://{self.ip}:{HEALTH_PORT}/metrics")

    def metric(self, key, default=0.0):
        return self.metrics().get(key, default)


# ---------------------------------------------------------------- the wire format (agent/heartbeat.h)

def heartbeat_body(node, pool, seq, boot, fingerprint, reachable=True, leader=False, challenge=b""):
    flags = (1 if reachable else 0) | (2 if leader else 0)
    n, p = node.encode(), pool.encode()
    return (b"PCHB\x01\x01" + bytes([flags, len(n), len(p), len(challenge)]) +
            struct.pack(">Qq", seq, int(time.time() * 1e6)) + boot + fingerprint + n + p + challenge)


def with_signature(body, signature):
    return body + struct.pack(">H", len(signature)) + signature


def certificate_datagram(der):
    return b"PCHB\x01\x02" + struct.pack(">H", len(der)) + der


def decode_heartbeat(data):
    """(node, pool, seq, reachable, fingerprint, signed_len) of a heartbeat datagram, or None."""
    if len(data) < 74 or data[:6] != b"PCHB\x01\x01":
        return None
    flags, nl, pl, cl = data[6:10]
    seq = struct.unpack(">Q", data[10:18])[0]
    fp = data[42:74]
    node = data[74:74 + nl].decode()
    pool = data[74 + nl:74 + nl + pl].decode()
    return node, pool, seq, bool(flags & 1), fp, 74 + nl + pl + cl


class Rogue:
    """The test as a member of pool alpha (a Node with the pool label and the host's
    LAN address): it receives the agents' real datagrams and sends its own."""

    def __init__(self, env, host_ip):
        self.env, self.host_ip = env, host_ip
        self.cert, self.key = env.cluster.pki.node(PROBE)
        self.der = openssl_bytes("x509", "-in", self.cert, "-outform", "DER")
        self.fp = hashlib.sha256(self.der).digest()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host_ip, HEARTBEAT_PORT))
        self.sock.settimeout(0.5)
        self.captured = {}  # node -> [datagram, ...]
        self.certs = {}     # node -> DER
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True, name="rogue")
        self.thread.start()

    def _run(self):
        while not self._stop:
            try:
                data, _ = self.sock.recvfrom(65536)
            except OSError:
                continue
            hb = decode_heartbeat(data)
            if hb:
                self.captured.setdefault(hb[0], []).append(data)

    def sign(self, body):
        """ECDSA-SHA256 with the node key (DER), as the agent signs."""
        return openssl_bytes("dgst", "-sha256", "-sign", self.key, stdin=body)

    def send(self, ip, data):
        self.sock.sendto(data, (ip, HEARTBEAT_PORT))

    def stop(self):
        self._stop = True
        self.sock.close()


# ---------------------------------------------------------------- the timeline

class Env:
    def __init__(self, binary):
        self.net = Net()
        self.results, self.errors, self.agents = {}, [], {}
        try:
            self.agent_bin = os.path.join(os.path.dirname(binary), "poolcoord-agent")
            if not os.access(self.agent_bin, os.X_OK):
                raise RuntimeError(f"{self.agent_bin} is not built")
            self.cluster = KubeCluster(grace=f"{GRACE:.0f}s", kcm_args=[f"--node-monitor-period={MONITOR_PERIOD:.0f}s"],
                                       bind_address="0.0.0.0", extra_sans=[f"IP:{self.net.cloud_host}"])
            self.pc = ChartInstall(self.cluster, binary, values=["agent.enabled=true"])
            self.nw, self.lw = NodeWatch(self.cluster), LeaseWatch(self.cluster)
            self.kubelets, self.ips = {}, {}
            pools = {"alpha": (1, ALPHA), "bravo": (2, BRAVO)}
            for pool, (index, names) in pools.items():
                for i, n in enumerate(names, start=1):
                    ns, ip = self.net.node(n, index, i)
                    self.ips[n] = ip
                    self.kubelets[n] = self.register(n, pool, ip)
            self.rogue_ip = self.net.pool(1)
            self.kubelets[PROBE] = self.register(PROBE, "alpha", self.rogue_ip)
            self.rogue = Rogue(self, self.rogue_ip)
            self.nw.wait("every Node Ready", lambda: all(self.nw.status(n) == "True" for n in self.kubelets), 60)
            self.setup_started = time.time()
            for pool, (index, names) in pools.items():
                for n in names:
                    self.agents[n] = Agent(self, n, self.net.links[(n, "c")][0], self.ips[n])
            self.wait_pool_up("alpha", ALPHA)
            self.wait_pool_up("bravo", BRAVO)
            self.role()
            self.t0 = time.time()
            self.holders = []
            threading.Thread(target=self.follow_holder, daemon=True).start()
            self.run([("member", self.cut_off_member), ("deaths", self.deaths), ("leader", self.leader_killed),
                      ("restart", self.restart), ("rogue", self.bad_input), ("bravo", self.whole_pool),
                      ("cached", self.cut_off_start)])
            print(f"timeline: {time.time() - self.t0:.0f} s at grace {GRACE:.0f} s", flush=True)
            print(f"alpha's PoolLease holders (s, holder, transitions): {self.holders}", flush=True)
            for n in ALPHA:
                a = self.agents[n]
                m = a.metrics()
                print(f"  agent {n}: alive {a.proc.alive()} (exit {a.proc.proc.poll()}), leader "
                      f"{m.get('poolcoord_agent_leader')}, sees {m.get('poolcoord_agent_cloud_sees_node')}, "
                      f"heard {m.get('poolcoord_agent_peers_heard')}, written "
                      f"{m.get('poolcoord_agent_delegations_written_total')}", flush=True)
        except BaseException:
            if self.agents:
                print(self.logs(), flush=True)
            self.stop()
            raise

    def register(self, name, pool, ip):
        k = Kubelet(self.cluster, name, {POOL_LABEL: pool}).register()
        patch = {"status": {"addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}}
        r = self.cluster.admin().request("PATCH", f"/api/v1/nodes/{name}/status", patch,
                                         ctype="application/merge-patch+json")
        if r.status != 200:
            raise AssertionError(f"addresses of {name}: {r.status} {r.body[:300]}")
        return k.start()

    def follow_holder(self):
        while not getattr(self, "_stopping", False):
            try:
                r = self.cluster.admin().request("GET", "/apis/coordination.pool/v1alpha1/poolleases/alpha")
                spec = r.json()["spec"] if r.status == 200 else {}
                h = (spec.get("holderIdentity", ""), spec.get("leaseTransitions"))
                if not self.holders or self.holders[-1][1:] != h:
                    self.holders.append((round(time.time() - self.t0, 1), *h))
            except Exception:
                pass
            time.sleep(0.5)

    def holder(self, pool):
        r = self.cluster.admin().request("GET", f"/apis/coordination.pool/v1alpha1/poolleases/{pool}")
        return r.json()["spec"].get("holderIdentity", "") if r.status == 200 else ""

    def wait_pool_up(self, pool, names, extra=0, timeout=60):
        def up():
            holder = self.holder(pool)
            return holder in names and all(
                self.agents[n].metric("poolcoord_agent_peers_heard") >= len(names) - 1 + extra and
                self.agents[n].metric("poolcoord_agent_cloud_sees_node") == 1 for n in names)
        deadline = time.time() + timeout
        while not up():
            if time.time() > deadline:
                states = {n: {k: v for k, v in self.agents[n].metrics().items()
                              if k.startswith(("poolcoord_agent_peers", "poolcoord_agent_cloud", "poolcoord_agent_leader"))}
                          for n in names}
                raise AssertionError(f"pool {pool} not up within {timeout}s: holder {self.holder(pool)!r}, {states}")
            time.sleep(0.5)
        self.results.setdefault("up", {})[pool] = time.time()

    def cut(self, node):
        self.net.cloud_link(node, False)
        return self.kubelets[node].cut_off()

    def restore(self, node):
        self.net.cloud_link(node, True)
        self.kubelets[node].come_back()

    def die(self, node):
        """Agent and kubelet killed: the node is dead."""
        self.agents[node].kill()
        self.kubelets[node].stop()
        return time.time()

    def run(self, scenarios):
        run_scenarios(scenarios, self.errors)

    def delegated_lease(self, node):
        r = self.cluster.admin().request("GET", f"/apis/coordination.pool/v1alpha1/delegatedleases/{node}")
        return r.json() if r.status == 200 else None

    def history(self, node, since):
        """A node's Ready changes and Lease versions, in seconds after `since`, for messages."""
        with self.nw.lock:
            ready = [(round(t - since, 1), st) for t, st in self.nw.ready.get(node, [])]
        with self.lw.lock:
            leases = [(round(t - since, 1), round(r - since, 1) if r else None,
                       sorted(k.split("/")[-1] for k in a if k.startswith(("coordination.pool/", "openyurt.io/"))))
                      for t, r, a in self.lw.versions.get(node, [])]
        return f"{node} Ready: {ready}; Lease versions (seen, renewTime, marks): {leases}"

    def forwards(self, node, after):
        own = {parse_micro(r) for r in self.kubelets[node].renewals}
        return [r for r, _ in self.lw.renewals(node, after) if all(abs(r - o) > 1e-6 for o in own)]

    # --- scenarios (threads); roles are given once the pools are up (role()):
    #   leader   alpha's first leader, killed at +40 s (restarted 20 s after a successor)
    #   member   cut off at 0 for 3 x grace + 5 s, alive in its pool, then back
    #   dead_dl  cut off at 0, delegated, dies at ~+20 s
    #   dead     reachable, dies at ~+20 s
    #   restart  its agent restarts at +15..+28 s
    #   cached   its agent restarts cut off at +75 s (peers from its cache)
    def role(self):
        leader = self.holder("alpha")
        others = [n for n in ALPHA if n != leader]
        self.roles = dict(zip(("member", "dead_dl", "dead", "restart", "cached"), others), leader=leader)
        print(f"roles: {self.roles}", flush=True)

    def cut_off_member(self):
        """A member loses the cloud, stays alive in its pool for 3 x grace, then returns."""
        m = self.roles["member"]
        r = self.results.setdefault("member", {"node": m})
        r["cut"] = self.cut(m)
        self.nw.wait(f"{m}'s agent says cut off",
                     lambda: self.agents[m].metric("poolcoord_agent_cloud_sees_node", 1) == 0, 15)
        r["dl"] = self.nw.wait(f"a DelegatedLease for {m}", lambda: self.delegated_lease(m), 30)
        r["dl_at"] = time.time()
        time.sleep(max(0.0, r["cut"] + 3 * GRACE + 5 - time.time()))
        r["until"] = r["back"] = time.time()
        self.restore(m)
        try:
            self.nw.wait(f"{m} seen by the cloud again, its DelegatedLease gone",
                         lambda: self.agents[m].metric("poolcoord_agent_cloud_sees_node") == 1 and
                         self.delegated_lease(m) is None, 40)
        except AssertionError as e:
            raise AssertionError(f"{e}: agent {self.agents[m].metrics()}; DelegatedLease {self.delegated_lease(m)}; "
                                 f"{self.history(m, r['cut'])}")
        r["released"] = time.time()
        self.nw.wait(f"{m} without our marks and taint",
                     lambda: TAINT not in self.nw.current_taints(m) and
                     not any(k == DELEGATE or k.startswith("coordination.pool/")
                             for k in (self.lw.latest(m) or (0, 0, {}))[2]), 40)
        r["clean"] = time.time()

    def deaths(self):
        """A delegated member dies; a reachable one (never delegated) dies."""
        dl, plain = self.roles["dead_dl"], self.roles["dead"]
        r = self.results.setdefault("deaths", {"dl": dl, "plain": plain})
        self.cut(dl)
        self.nw.wait(f"a DelegatedLease for {dl}", lambda: self.delegated_lease(dl), 30)
        time.sleep(10)
        r["dl_died"] = self.die(dl)
        r["plain_died"] = self.die(plain)
        r["plain_last_renewal"] = parse_micro(self.kubelets[plain].renewals[-1])
        for key, n in (("dl", dl), ("plain", plain)):
            r[f"{key}_unknown"] = self.nw.wait(f"{n} Unknown",
                                               lambda n=n, key=key: self.nw.first(n, "Unknown", after=r[f"{key}_died"]),
                                               GRACE + 3 * INTERVAL + 30)

    def leader_killed(self):
        """The leader's agent dies (its kubelet lives on) while the member is delegated."""
        r = self.results.setdefault("leader", {})
        time.sleep(40)
        r["old"] = self.holder("alpha")
        r["killed"] = time.time()
        self.agents[r["old"]].kill()
        r["new"] = self.nw.wait("a new alpha leader",
                                lambda: (lambda h: h if h and h != r["old"] else None)(self.holder("alpha")), 60)
        r["elected"] = time.time()
        m = self.roles["member"]
        self.nw.wait(f"{m}'s DelegatedLease written by the new leader",
                     lambda: (self.delegated_lease(m) or {}).get("spec", {}).get("delegate") == r["new"], 30)
        r["rewritten"] = time.time()
        self.agents[r["old"]].start()

    def restart(self):
        """An agent restarts: heard again, and hearing, within one heartbeat interval."""
        n, observer = self.roles["restart"], self.roles["leader"]
        r = self.results.setdefault("restart", {"node": n})
        time.sleep(15)
        self.agents[n].kill()
        time.sleep(2 * INTERVAL + 3)
        r["heard_while_down"] = self.agents[observer].metric("poolcoord_agent_peers_heard")
        r["restarted"] = time.time()
        self.agents[n].start()
        while time.time() < r["restarted"] + 20:
            if self.agents[n].metric("poolcoord_agent_peers_heard") >= 3 and \
                    self.agents[observer].metric("poolcoord_agent_peers_heard") >= r["heard_while_down"] + 1:
                break
            time.sleep(0.2)
        r["rejoined"] = time.time()
        r["heard"] = self.agents[n].metric("poolcoord_agent_peers_heard")
        r["observer_heard"] = self.agents[observer].metric("poolcoord_agent_peers_heard")

    def bad_input(self):
        """The rogue member's forged, replayed, foreign-pool, oversized and malformed
        datagrams, sent to the leader (who would write a DelegatedLease)."""
        r = self.results.setdefault("rogue", {})
        rogue, role = self.rogue, self.roles
        target, victim = role["leader"], role["cached"]
        ip = self.ips[target]
        self.nw.wait(f"heartbeats of {victim} captured", lambda: len(rogue.captured.get(victim, [])) >= 2, 30)
        before = self.agents[target].metrics()
        boot = os.urandom(16)
        # Its own heartbeat, well formed and signed: accepted (the wire format interoperates).
        rogue.send(ip, certificate_datagram(rogue.der))
        time.sleep(0.2)
        own = heartbeat_body(PROBE, "alpha", 1, boot, rogue.fp, reachable=True)
        rogue.send(ip, with_signature(own, rogue.sign(own)))
        # A replay of the victim's real heartbeat (the target has seen it).
        rogue.send(ip, rogue.captured[victim][0])
        # The victim's heartbeat with its "reachable" flag turned into "cut off".
        flipped = bytearray(rogue.captured[victim][-1])
        flipped[6] ^= 0x01
        rogue.send(ip, bytes(flipped))
        # "The victim is cut off", signed with the rogue's key under the victim's certificate.
        v = decode_heartbeat(rogue.captured[victim][-1])
        forged = heartbeat_body(victim, "alpha", v[2] + 1000, os.urandom(16), v[4], reachable=False)
        rogue.send(ip, with_signature(forged, rogue.sign(forged)))
        # Its own heartbeat for another pool.
        foreign = heartbeat_body(PROBE, "bravo", 2, boot, rogue.fp)
        rogue.send(ip, with_signature(foreign, rogue.sign(foreign)))
        # Oversized, malformed, not ours at all.
        rogue.send(ip, b"PCHB\x01\x01" + b"\0" * 2000)
        rogue.send(ip, b"PCHB\x01\x01\x00")
        rogue.send(ip, b"GET / HTTP/1.1\r\n\r\n")
        # A certificate of the victim from a CA nobody trusts.
        ca_dir = tempfile.mkdtemp(dir=self.cluster.workdir)
        other_ca = make_ca(ca_dir, "other-ca")
        other = issue_cert(ca_dir, "foreign", other_ca, ["clientAuth"], cn=f"system:node:{victim}",
                           orgs=["system:nodes"])
        rogue.send(ip, certificate_datagram(openssl_bytes("x509", "-in", other[0], "-outform", "DER")))
        time.sleep(3)
        after = self.agents[target].metrics()
        r["delta"] = {k: after.get(k, 0) - before.get(k, 0) for k in after if "dropped" in k or "received" in k}
        time.sleep(INTERVAL)
        r["victim_dl"] = self.delegated_lease(victim)

    def whole_pool(self):
        """Every member of bravo loses the cloud at once."""
        r = self.results.setdefault("bravo", {})
        time.sleep(5)
        r["cut"] = {n: self.cut(n) for n in BRAVO}
        for n in BRAVO:
            r[f"{n}_unknown"] = self.nw.wait(f"{n} Unknown", lambda n=n: self.nw.first(n, "Unknown", after=r["cut"][n]),
                                             GRACE + 30)
        r["leaders"] = sum(self.agents[n].metric("poolcoord_agent_leader") for n in BRAVO)
        r["dls"] = [n for n in BRAVO if self.delegated_lease(n)]
        for n in BRAVO:
            self.restore(n)

    def cut_off_start(self):
        """An agent restarts while its node is cut off: its peers come from its cache."""
        n = self.roles["cached"]
        r = self.results.setdefault("cached", {"node": n})
        time.sleep(75)
        self.agents[n].kill()
        r["cut"] = self.cut(n)
        self.agents[n].start()
        r["started"] = time.time()
        try:
            self.nw.wait(f"{n}'s agent up, cut off, hearing its pool",
                         lambda: self.agents[n].metric("poolcoord_agent_pool_members") >= len(ALPHA) + 1 and
                         self.agents[n].metric("poolcoord_agent_peers_heard") >= 2, 30)
        except AssertionError as e:
            raise AssertionError(f"{e}: {self.agents[n].metrics()}")
        r["members"] = self.agents[n].metric("poolcoord_agent_pool_members")
        r["dl"] = self.nw.wait(f"a DelegatedLease for {n}", lambda: self.delegated_lease(n), 45)
        r["delegated"] = time.time()
        self.restore(n)

    def logs(self):
        out = [self.cluster.logs() if hasattr(self, "cluster") else ""]
        for a in self.agents.values():
            out.append(f"--- agent {a.name}\n{a.proc.log(3000)}")
        return "\n".join(out)

    def stop(self):
        self._stopping = True
        if hasattr(self, "rogue"):
            self.rogue.stop()
        for a in self.agents.values():
            a.kill()
        stop_parts(self, "nw", "lw", "kubelets", "pc", "cluster")
        self.net.cleanup()


# ---------------------------------------------------------------- the verdicts

def no_errors(env):
    assert not env.errors, "; ".join(env.errors)


def pools_come_up(env):
    up = env.results["up"]
    print(f"  both pools led and fully heard {max(up.values()) - env.setup_started:.0f} s after the agents "
          f"started; roles {env.roles}", flush=True)


def cut_off_member_stays_ready(env):
    r = env.results["member"]
    m = r["node"]
    unknown = env.nw.first(m, "Unknown", after=r["cut"])
    assert unknown is None or unknown > r["until"], \
        f"{m} went Unknown while alive in its pool: {env.history(m, r['cut'])}"
    assert env.nw.first_taint(m, UNREACHABLE, after=r["cut"]) is None, f"{m} got the unreachable taint"
    assert r["until"] - r["cut"] >= 3 * GRACE, f"only {r['until'] - r['cut']:.0f} s observed"
    tainted = env.nw.first_taint(m, TAINT, after=r["cut"])
    assert tainted is not None, f"{m} never got node.openyurt.io/unschedulable"
    spec = r["dl"]["spec"]
    assert spec["holderIdentity"] == m and spec["poolName"] == "alpha", spec
    renewals = [t for t, _ in env.lw.renewals(m, r["cut"] - GRACE) if t <= r["back"]]
    gaps = [b - a for a, b in zip(renewals, renewals[1:])]
    assert gaps and max(gaps) < GRACE, f"{m}'s Lease gaps {gaps}"
    print(f"  {m} cut off: DelegatedLease {r['dl_at'] - r['cut']:.1f} s after the cut; Ready for "
          f"{r['until'] - r['cut']:.0f} s; unschedulable {tainted - r['dl_at']:.0f} s after its DelegatedLease; "
          f"{len(renewals)} Lease renewals, longest gap {max(gaps):.1f} s; back: released after "
          f"{r['released'] - r['back']:.1f} s, clean after {r['clean'] - r['back']:.1f} s", flush=True)


def dead_nodes_go_notready(env):
    r = env.results["deaths"]
    bound = GRACE + 2 * INTERVAL + MONITOR_PERIOD
    dl = r["dl_unknown"] - r["dl_died"]
    plain = r["plain_unknown"] - r["plain_died"]
    assert dl <= bound + SLACK, f"{r['dl']} (delegated) Unknown {dl:.1f} s after its death (bound {bound:.0f} s)"
    assert plain <= bound + SLACK, f"{r['plain']} (not delegated) Unknown {plain:.1f} s after its death"
    print(f"  dead nodes Unknown after: {r['dl']} (delegated) {dl:.1f} s, {r['plain']} (not delegated) "
          f"{plain:.1f} s ({r['plain_unknown'] - r['plain_last_renewal']:.1f} s after its last renewal); bound "
          f"grace + 2 intervals + monitor period = {bound:.0f} s", flush=True)


def leader_failover_keeps_members(env):
    r = env.results["leader"]
    m = env.roles["member"]
    window = [t for t, _ in env.lw.renewals(m, r["killed"] - GRACE) if t <= r["rewritten"] + 10]
    gaps = [b - a for a, b in zip(window, window[1:])]
    assert gaps and max(gaps) < GRACE, f"{m}'s Lease gaps around the failover: {gaps}"
    assert env.nw.first(m, "Unknown", after=r["killed"]) is None or \
        env.nw.first(m, "Unknown", after=r["killed"]) > env.results["member"]["until"]
    print(f"  leader {r['old']} killed: {r['new']} elected after {r['elected'] - r['killed']:.1f} s, rewrote "
          f"{m}'s DelegatedLease after {r['rewritten'] - r['killed']:.1f} s; {m}'s longest Lease gap around it "
          f"{max(gaps):.1f} s (grace {GRACE:.0f} s)", flush=True)


def restarted_agent_rejoins(env):
    r = env.results["restart"]
    took = r["rejoined"] - r["restarted"]
    assert r["heard"] >= 3, r
    assert r["observer_heard"] >= r["heard_while_down"] + 1, r
    assert took <= INTERVAL + 3, f"rejoined after {took:.1f} s"
    print(f"  {r['node']} restarted: heard and hearing its pool again after {took:.1f} s "
          f"(interval {INTERVAL:.0f} s)", flush=True)


def bad_input_is_dropped(env):
    r = env.results["rogue"]
    d = r["delta"]

    def dropped(reason):
        return d.get(f'poolcoord_agent_heartbeats_dropped_total{{reason="{reason}"}}', 0)
    for reason in ("replay", "bad_signature", "foreign_pool", "oversized", "malformed", "unknown_authority"):
        assert dropped(reason) >= 1, f"no {reason} drop counted: {d}"
    assert dropped("bad_signature") >= 2, d  # the flipped flag and the forged claim
    received = sum(v for k, v in d.items() if "received" in k)
    assert received >= 1, f"the rogue's own valid heartbeat was not accepted: {d}"
    assert r["victim_dl"] is None, f"a forged 'cut off' led to a DelegatedLease: {r['victim_dl']}"
    print("  rogue datagrams dropped by the leader: " +
          ", ".join(f"{k.split('=')[1][1:-2]} {v:.0f}" for k, v in d.items() if "dropped" in k and v), flush=True)


def whole_pool_cut_off_goes_notready(env):
    r = env.results["bravo"]
    for n in BRAVO:
        took = r[f"{n}_unknown"] - r["cut"][n]
        assert took <= unknown_bound(GRACE, MONITOR_PERIOD) + SLACK, f"{n} Unknown after {took:.1f} s"
    assert r["leaders"] == 0, "a bravo agent still leads without the cloud"
    assert not r["dls"], r["dls"]
    print("  bravo cut off whole (the known limit): Unknown after " +
          ", ".join(f"{n} {r[f'{n}_unknown'] - r['cut'][n]:.1f} s" for n in BRAVO), flush=True)


def cut_off_start_uses_the_cache(env):
    r = env.results["cached"]
    assert r["members"] >= len(ALPHA) + 1, r
    print(f"  {r['node']} started cut off: {r['members']:.0f} members from its peer cache, delegated "
          f"{r['delegated'] - r['started']:.1f} s after its start", flush=True)


CASES = [no_errors, pools_come_up, cut_off_member_stays_ready, dead_nodes_go_notready, leader_failover_keeps_members,
         restarted_agent_rejoins, bad_input_is_dropped, whole_pool_cut_off_goes_notready, cut_off_start_uses_the_cache]

if __name__ == "__main__":
    sys.exit(run_cluster_cases(CASES, Env, __doc__))
