"""Real nodes for the end-to-end tests: kubelet and kube-proxy 1.32 with Debian's
containerd, runc and CNI plugins, one network and mount namespace per node, beside
the control plane of tests/e2e/kube_cluster.py (with kube-scheduler), running the
image scripts/build-image.sh builds. Root only (CI runs as root).

    nc = NodeCluster(binary, grace="40s")        # control plane + scheduler + networks
    nc.add_node("c1", labels={ROLE: "cloud"})    # a node with a cloud link only
    nc.add_node("e1", pool="edge")               # a pool member: cloud link + pool LAN
    nc.start_nodes()                             # all at once; each Ready with its Lease
    nc.nodes["e1"].cut(); .restore()             # the node's cloud link down / up
    nc.nodes["e1"].kill(); .start()              # the node dies (every process); comes back
    rel = HelmRelease(nc, values=[...]).install()  # `helm install` of charts/poolcoord
    nc.stop()

Where the binaries come from: kubelet, kube-proxy and kube-scheduler beside
kube-apiserver ($POOLCOORD_K8S_BIN, else ../shared/k8s/v1.32.6/bin); containerd,
runc, ctr, the CNI plugins (bridge, host-local, loopback, portmap in /usr/lib/cni),
iptables, mmdebstrap and umoci from Debian (scripts/install-deps.sh --test). Where
one is missing, or the test is not root, NodeCluster raises Skip with the reason,
before it builds any image.

The images: ensure_images() runs scripts/build-image.sh for the binaries under
test (when its archives are older than them) and each node imports both archives
into its containerd (`ctr -n k8s.io images import`): the chart's default image
docker.io/poolcoord/poolcoord-apiserver:<appVersion>, and the pod sandbox
localhost/poolcoord/pause (Debian's catatonit), which is containerd's
sandbox_image. Nothing is pulled.

Network (every name carries the run's tag pc<pid>, so two runs side by side never
meet; Network.sweep_stale() removes what a killed run left):
  cloud bridge  <tag>c0, 10.<c>.0.1/24: kube-apiserver listens on 0.0.0.0 with this
                address in its certificate and advertises it (the `kubernetes`
                Service's endpoint); etcd for the etcd3 store listens on it too.
  pool LANs     <tag>l<i>, 172.<l>.<i>.0/24, the host at .254: the pool members'
                InternalIP (the kubelet's --node-ip; the agents' heartbeats).
  per node      netns <tag>-<node>: a veth to the cloud bridge, its only way to the
                control plane ("cut" = that link down), and for a pool member a
                veth to its pool's LAN; inside, containerd's CNI bridge cni0 with the
                node's pod subnet 10.<c>.<10+n>.0/24, routed from the host through
                the node's cloud address, so kube-apiserver reaches pods directly:
                --enable-aggregator-routing=true sends the aggregator's and the
                webhooks' calls to the Service's endpoints, as a control plane
                without kube-proxy must. Pods reach the `kubernetes` Service
                (in-cluster config) through the node's kube-proxy (iptables mode).

Per node, in its own mount and UTS namespace (`nsenter --net unshare -m -u`, not
`ip netns exec`, which remounts /sys and hides the cgroup mounts): the node's own
/var/lib (so /var/lib/kubelet, the kubelet's PKI at /var/lib/kubelet/pki and the
agent's peer cache are the node's), /var/log (pod logs) and /etc/kubernetes
(kubelet.conf, pki/ca.crt), bind-mounted from its directory; its hostname; files
with the values the kubelet wants bind-mounted over the kernel tunables it would
otherwise set host-wide. containerd with its own root, state (the pods' network
namespaces under it too, not in /run/netns), socket and runc root,
restrict_oom_score_adj (this VM's bounding set lacks CAP_SYS_RESOURCE, so
runc cannot give a sandbox its negative oom_score_adj); the kubelet with
cgroupDriver cgroupfs and its own cgroupRoot /<tag>-<node> (cgroup v1, no
systemd), TLS-bootstrapped with a bootstrap token: kube-controller-manager's CSR
approver and signer issue its client certificate (kubelet-client-current.pem),
as on a kubeadm node; kube-proxy as system:kube-proxy. Each daemon gets SIGKILL
when the node's init process dies, which gets it when the test dies; a killed
node's shims and pod processes are found by its containerd socket and its cgroups,
and the shims' sockets (containerd 1.6 keeps them in /run/containerd/s) removed. The
mount point /etc/kubernetes is created on the host when missing (empty) and left
there: another run's nodes may have their own mounted on it.

Standard library only.
"""
import base64
import hashlib
import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_cluster import (CHART, POOL_LABEL, KubeCluster, LeaseWatch, NodeWatch, Process, Skip,  # noqa: E402
                          ensure_images, helm_binary, k8s_bin_dir, write_kubeconfig)
from harness import free_port, kubectl_binary, wait_for  # noqa: E402

ROLE = "poolcoord.test/role"
CNI_DIR = "/usr/lib/cni"
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
# Beside kube-apiserver and kube-controller-manager (kube_cluster.k8s_bin_dir).
NODE_BINARIES = ("kubelet", "kube-proxy", "kube-scheduler")
TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "unshare", "setpriv",
         "iptables", "ip", "mmdebstrap", "umoci")
# Kernel tunables the kubelet sets; shadowed inside each node so the host's stay.
SYSCTLS = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
           "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
           "kernel/keys/root_maxbytes": "25000000"}
BOOTSTRAP_GROUP = "system:bootstrappers:poolcoord-test"


def sh(*args, check=True, timeout=60):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip() or p.stdout.strip()}")
    return p


def run_tag():
    return f"pc{os.getpid() % 100000}"


def _tag_dead(tag):
    alive = {int(p) % 100000 for p in os.listdir("/proc") if p.isdigit()}
    return int(tag[2:]) not in alive


class Launcher:
    """Starts processes from one thread that lives as long as the test: a child
    gets SIGKILL when the *thread* that started it ends (PR_SET_PDEATHSIG), and
    scenarios start processes (agents, nodes) from threads of their own."""

    def __init__(self):
        self.jobs = queue.Queue()
        threading.Thread(target=self._run, daemon=True, name="launcher").start()

    def _run(self):
        while True:
            fn, done, box = self.jobs.get()
            try:
                box.append(fn())
            except Exception as e:  # handed back to the caller
                box.append(e)
            done.set()

    def call(self, fn):
        done, box = threading.Event(), []
        self.jobs.put((fn, done, box))
        done.wait()
        if isinstance(box[0], Exception):
            raise box[0]
        return box[0]


LAUNCHER = Launcher()


class Network:
    """The namespaces, bridges and links of one run, all named after its tag:
    a cloud bridge, one LAN bridge per pool, and per node a namespace with a
    veth to the cloud bridge and (pool members) one to its pool's LAN."""

    def __init__(self):
        if os.geteuid() != 0:
            raise Skip("network namespaces need root (CI runs as root)")
        if not shutil.which("ip"):
            raise Skip("no `ip` (iproute2) for network namespaces")
        pid = os.getpid()
        self.tag = run_tag()
        self.sweep_stale()
        # A SIGTERM (ctest --timeout's first signal, a user's kill) unwinds
        # through the test's finally blocks, so the namespaces go with it.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        self.cloud_net = f"10.{100 + pid % 100}.0"
        self.pod_net = f"10.{100 + pid % 100}"
        self.lan_net = f"172.{16 + pid % 16}"
        self.namespaces, self.links, self.bridges, self.routes = [], {}, [], []
        self.cloud_bridge = self._bridge("c", f"{self.cloud_net}.1/24")
        self.cloud_host = f"{self.cloud_net}.1"
        self.lan_bridges = {}
        self.count = 0
        self.cloud_ips = {}
        self.default_routes = set()

    @staticmethod
    def sweep_stale():
        """Removes what earlier runs whose process is gone left behind (a run
        killed with SIGKILL cannot clean up after itself): namespaces, bridges,
        node processes (their command lines name the run's node directory) and
        node cgroups."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for line in listed.splitlines():
            ns = line.split()[0] if line.split() else ""
            m = re.fullmatch(r"(pc\d+)-.+", ns)
            if m and _tag_dead(m.group(1)):
                sh("ip", "netns", "del", ns, check=False)
        links = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"],
                               capture_output=True, text=True).stdout
        for line in links.splitlines():
            m = re.match(r"\d+: (pc\d+)([cl]\d+)[:@]", line)
            if m and _tag_dead(m.group(1)):
                sh("ip", "link", "del", m.group(1) + m.group(2), check=False)
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            m = re.search(r"/(pc\d+)-nodes/", cmd)
            if m and _tag_dead(m.group(1)):
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        for root in _cgroup_roots():
            for entry in os.listdir(root):
                m = re.fullmatch(r"(pc\d+)-.+", entry)
                if m and _tag_dead(m.group(1)):
                    _remove_cgroup(os.path.join(root, entry))

    def _bridge(self, kind, address):
        name = f"{self.tag}{kind}{len(self.bridges)}"
        sh("ip", "link", "add", name, "type", "bridge")
        self.bridges.append(name)
        sh("ip", "addr", "add", address, "dev", name)
        sh("ip", "link", "set", name, "up")
        return name

    def pool(self, index):
        """The host's address on pool `index`'s LAN."""
        if index not in self.lan_bridges:
            self.lan_bridges[index] = self._bridge("l", f"{self.lan_net}.{index}.254/24")
        return f"{self.lan_net}.{index}.254"

    def node(self, name, pool_index, i, default_route=False):
        """A namespace with a cloud link and, unless pool_index is None, a LAN
        link to that pool's bridge; returns (netns, LAN IP or None). With
        default_route, the node's default route is the cloud bridge (its pods'
        way to kube-apiserver and etcd)."""
        self.count += 1
        ns = f"{self.tag}-{name}"
        sh("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        self.cloud_ips[name] = f"{self.cloud_net}.{self.count + 1}"
        links = [("c", self.cloud_bridge, f"{self.cloud_ips[name]}/24")]
        lan_ip = None
        if pool_index is not None:
            self.pool(pool_index)
            lan_ip = f"{self.lan_net}.{pool_index}.{i}"
            links.append(("l", self.lan_bridges[pool_index], f"{lan_ip}/24"))
        for kind, bridge, address in links:
            host, inner = f"{self.tag}{kind}{self.count}h", f"{kind}{self.count}"
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "link", "set", host, "master", bridge, "up")
            sh("ip", "-n", ns, "addr", "add", address, "dev", inner)
            sh("ip", "-n", ns, "link", "set", inner, "up")
            self.links[(name, kind)] = (ns, inner)
        if default_route:
            sh("ip", "-n", ns, "route", "add", "default", "via", self.cloud_host)
            self.default_routes.add(name)
        return ns, lan_ip

    def pod_subnet(self, name):
        """The node's pod subnet, routed from the host through its cloud address."""
        n = int(self.cloud_ips[name].rsplit(".", 1)[1])
        subnet = f"{self.pod_net}.{10 + n}.0/24"
        if subnet not in self.routes:
            sh("ip", "route", "add", subnet, "via", self.cloud_ips[name], "dev", self.cloud_bridge)
            self.routes.append(subnet)
        return subnet

    def cloud_link(self, name, up):
        ns, inner = self.links[(name, "c")]
        sh("ip", "-n", ns, "link", "set", inner, "up" if up else "down")
        if up and name in self.default_routes:  # a link set down loses the routes through it
            sh("ip", "-n", ns, "route", "replace", "default", "via", self.cloud_host)

    def cleanup(self):
        for subnet in self.routes:
            sh("ip", "route", "del", subnet, check=False)
        for ns in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)
        for b in self.bridges:
            sh("ip", "link", "del", b, check=False)


def scrape(url, timeout=3):
    """{name or name{labels}: value} of the Prometheus text at `url` (plain HTTP),
    or {} when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def _cgroup_roots():
    """The cgroup v1 hierarchies' roots (the unified one of a hybrid set-up aside)."""
    base = "/sys/fs/cgroup"
    if not os.path.isdir(base):
        return []
    return [os.path.join(base, h) for h in sorted(os.listdir(base))
            if h != "unified" and os.path.isdir(os.path.join(base, h)) and
            not os.path.islink(os.path.join(base, h))]


def _cgroup_pids(path):
    pids = set()
    for d, _, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids.update(int(x) for x in f.read().split())
            except OSError:
                pass
    return pids


def _remove_cgroup(path):
    """SIGKILLs every process in the cgroup tree, then removes it, deepest first."""
    for _ in range(50):
        pids = _cgroup_pids(path)
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)
    for d, _, _ in sorted(os.walk(path), key=lambda w: -w[0].count("/")):
        try:
            os.rmdir(d)
        except OSError:
            pass


def _remove_shim_socket(cmd):
    """A runc shim's socket, which containerd 1.6 keeps under /run/containerd/s
    whatever its state directory (named by the SHA-256 of <containerd socket>/
    <namespace>/<id>), and a killed shim leaves behind."""
    try:
        args = [a.decode() for a in cmd]
        opt = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("-")}
        key = os.path.join(opt["-address"], opt["-namespace"], opt["-id"])
    except (KeyError, UnicodeDecodeError):
        return
    try:
        os.unlink(os.path.join("/run/containerd/s", hashlib.sha256(key.encode()).hexdigest()))
    except OSError:
        pass


def _check_tools():
    if os.geteuid() != 0:
        raise Skip("real nodes (network, mount namespaces, cgroups, containerd) need root; CI runs as root")
    missing = [t for t in TOOLS if not shutil.which(t)]
    missing += [f"{CNI_DIR}/{p}" for p in CNI_PLUGINS if not os.access(f"{CNI_DIR}/{p}", os.X_OK)]
    if missing:
        raise Skip(f"missing for real nodes: {', '.join(missing)} (Debian's containerd, runc, "
                   f"containernetworking-plugins, iptables, mmdebstrap, umoci: scripts/install-deps.sh --test)")
    if not _cgroup_roots() or not os.path.isdir("/sys/fs/cgroup/cpuset"):
        raise Skip("the nodes' kubelets are set up for cgroup v1 (cgroupfs driver): no /sys/fs/cgroup/cpuset here")


class NodeCluster:
    """KubeCluster with what real nodes need (see the module doc): kube-apiserver
    on 0.0.0.0 advertising the cloud bridge address, aggregator routing, bootstrap
    tokens and a kubelet client certificate; kube-controller-manager (grace,
    `monitor_period`) signing and approving the kubelets' CSRs; kube-scheduler;
    the node networks. `nodes` by name; `nw`/`lw` follow every Node and node
    Lease from the start."""

    def __init__(self, binary, grace="40s", monitor_period="2s", kcm_args=()):
        # Every reason to skip before the image build (minutes on a first run):
        # root, the node tools, cgroup v1, then the control plane's binaries.
        _check_tools()
        k8s_bin_dir(NODE_BINARIES)
        self.binary = binary
        self.images = ensure_images(binary)
        self.net = Network()
        self.nodes = {}
        self.pools = {}
        try:
            self.tag = self.net.tag
            self.cluster = KubeCluster(
                grace=grace, kcm_args=[f"--node-monitor-period={monitor_period}", *kcm_args],
                bind_address="0.0.0.0", extra_sans=[f"IP:{self.net.cloud_host}"],
                advertise_address=self.net.cloud_host, binaries=NODE_BINARIES,
                apiserver_args=["--enable-aggregator-routing=true", "--enable-bootstrap-token-auth=true",
                                "--kubelet-preferred-address-types=InternalIP"], kubelet_client=True)
            self.server = f"https://{self.net.cloud_host}:{self.cluster.port}"
            self.dir = os.path.join(self.cluster.workdir, f"{self.tag}-nodes")
            os.makedirs(self.dir)
            self._start_scheduler()
            self._bootstrap_objects()
            self.nw, self.lw = NodeWatch(self.cluster), LeaseWatch(self.cluster)
        except BaseException:
            self.stop()
            raise

    def _start_scheduler(self):
        c = self.cluster
        cert = c.pki.client("kube-scheduler", "system:kube-scheduler")
        kubeconfig = write_kubeconfig(os.path.join(c.workdir, "scheduler.kubeconfig"), c.url, c.pki.ca[0], *cert)
        self.scheduler = Process("kube-scheduler", [
            os.path.join(c.bin, "kube-scheduler"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--leader-elect=false"], c.workdir)
        c.procs.append(self.scheduler)

    def _bootstrap_objects(self):
        """A bootstrap token and the RBAC of TLS bootstrapping (as kubeadm sets it up:
        bootstrappers may create CSRs, which kube-controller-manager's approver
        approves for the nodeclient signer; nodes may renew their own)."""
        self.token_id, secret = secrets.token_hex(3), secrets.token_hex(8)
        self.token = f"{self.token_id}.{secret}"
        objs = [
            {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
             "metadata": {"name": f"bootstrap-token-{self.token_id}", "namespace": "kube-system"},
             "stringData": {"token-id": self.token_id, "token-secret": secret,
                            "usage-bootstrap-authentication": "true", "auth-extra-groups": BOOTSTRAP_GROUP}},
            self._binding("poolcoord-test:kubelet-bootstrap", "system:node-bootstrapper", BOOTSTRAP_GROUP),
            self._binding("poolcoord-test:node-autoapprove-bootstrap",
                          "system:certificates.k8s.io:certificatesigningrequests:nodeclient", BOOTSTRAP_GROUP),
            self._binding("poolcoord-test:node-autoapprove-certificate-rotation",
                          "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes")]
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}),
                             check=True)
        c = self.cluster
        self.proxy_cert = c.pki.client("kube-proxy", "system:kube-proxy")
        with open(c.pki.ca[0], "rb") as f:
            self.ca_data = base64.b64encode(f.read()).decode()

    @staticmethod
    def _binding(name, role, group):
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}

    def add_node(self, name, pool=None, labels=None):
        """A node (not started): a pool member when `pool` is given (its LAN, the
        pool label), else a node with a cloud link only."""
        index = None
        if pool is not None:
            index = self.pools.setdefault(pool, len(self.pools) + 1)
        node = Node(self, name, pool, index, dict(labels or {}))
        self.nodes[name] = node
        return node

    def start_nodes(self, names=None, timeout=120):
        """Starts the nodes (all by default) at once; returns when each is Ready
        and has its Lease. Sets each node's started/ready/lease times (test clock)."""
        nodes = [self.nodes[n] for n in (names or self.nodes)]
        for n in nodes:
            n.start()
        for n in nodes:
            n.wait_ready(timeout)

    def kubectl(self, *args, **kw):
        return self.cluster.kubectl(*args, **kw)

    def logs(self):
        out = [self.cluster.logs() if hasattr(self, "cluster") else ""]
        for n in self.nodes.values():
            out.append(n.logs())
        return "\n".join(out)

    def stop(self):
        for part in ("nw", "lw"):
            if getattr(self, part, None):
                getattr(self, part).stop()
        for n in self.nodes.values():
            try:
                n.kill()
            except Exception as e:  # cleanup goes on
                print(f"stopping node {n.name}: {e}", flush=True)
        for n in self.nodes.values():
            n.remove()
        if getattr(self, "cluster", None):
            self.cluster.stop()
        self.net.cleanup()


class Node:
    """One node: its namespaces, directories, daemons. See the module doc."""

    def __init__(self, nc, name, pool, pool_index, labels):
        self.nc, self.name, self.pool = nc, name, pool
        self.ns, self.lan_ip = nc.net.node(name, pool_index, len(nc.nodes) + 1, default_route=True)
        self.cloud_ip = nc.net.cloud_ips[name]
        self.ip = self.lan_ip or self.cloud_ip
        self.subnet = nc.net.pod_subnet(name)
        if pool is not None:
            labels.setdefault(POOL_LABEL, pool)
        self.labels = labels
        self.dir = os.path.join(nc.dir, name)
        self.cgroup = f"{nc.tag}-{name}"
        self.init = None
        self.times = {}
        self._write_files()

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _write_files(self):
        nc, d = self.nc, self.dir
        for sub in ("containerd/root", "containerd/state", "containerd/runc", "containerd/opt", "cni/net.d",
                    "cni/ipam", "var-lib/kubelet", "var-lib/kube-proxy", "var-lib/dbus", "var-log",
                    "etc-kubernetes/pki", "sysctl", "log", "run"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        sock = self.path("containerd", "containerd.sock")
        self.socket = sock
        with open(self.path("containerd.toml"), "w") as f:
            f.write(f"""version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{d}/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{nc.images['pause'][1]}:{nc.images['pause'][2]}"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "{d}/containerd/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{CNI_DIR}"
      conf_dir = "{d}/cni/net.d"
""")
        with open(self.path("cni", "net.d", "10-pods.conflist"), "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": "pods", "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "dataDir": self.path("cni", "ipam"),
                          "ranges": [[{"subnet": self.subnet}]], "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "portmap", "capabilities": {"portMappings": True}}]}, f)
        with open(self.path("var-lib", "kubelet", "config.yaml"), "w") as f:
            json.dump({
                "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{self.cgroup}", "failSwapOn": False,
                "containerRuntimeEndpoint": f"unix://{sock}", "address": "0.0.0.0", "port": 10250,
                "healthzBindAddress": "127.0.0.1", "healthzPort": 10248, "readOnlyPort": 0,
                "rotateCertificates": True,
                "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                                   "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}},
                "authorization": {"mode": "Webhook"}, "clusterDomain": "cluster.local",
                "resolvConf": "/etc/resolv.conf", "enforceNodeAllocatable": ["pods"],
                "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                                 "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
                "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
                "serializeImagePulls": False}, f)
        shutil.copy(nc.cluster.pki.ca[0], self.path("etc-kubernetes", "pki", "ca.crt"))
        kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
                      "clusters": [{"name": "c", "cluster": {"server": nc.server,
                                                             "certificate-authority-data": nc.ca_data}}],
                      "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
        with open(self.path("etc-kubernetes", "bootstrap-kubelet.conf"), "w") as f:
            json.dump({**kubeconfig, "users": [{"name": "u", "user": {"token": nc.token}}]}, f)
        with open(self.path("var-lib", "kube-proxy", "kubeconfig.conf"), "w") as f:
            json.dump({**kubeconfig, "users": [{"name": "u", "user": {
                "client-certificate": nc.proxy_cert[0], "client-key": nc.proxy_cert[1]}}]}, f)
        with open(self.path("var-lib", "dbus", "machine-id"), "w") as f:
            f.write(secrets.token_hex(16) + "\n")
        for key, value in SYSCTLS.items():
            with open(self.path("sysctl", key.replace("/", "_")), "w") as f:
                f.write(value + "\n")
        kbin = nc.cluster.bin
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        mounts = "\n".join(f"mount --bind {self.path('sysctl', k.replace('/', '_'))} /proc/sys/{k}" for k in SYSCTLS)
        pause, poolcoord = nc.images["pause"], nc.images["poolcoord"]
        with open(self.path("init.sh"), "w") as f:
            f.write(f"""set -e
# The node's own mount and UTS namespace (see tests/e2e/kube_nodes.py).
mount --bind {d}/var-lib /var/lib
mount --bind {d}/var-log /var/log
mount --bind {d}/etc-kubernetes /etc/kubernetes
{mounts}
hostname {self.name}
run() {{  # name, command...: in the background; SIGKILL when this script dies
  local name=$1; shift
  setpriv --pdeathsig KILL "$@" >> {d}/log/$name.log 2>&1 &
  echo $! > {d}/run/$name.pid
}}
rm -f {sock} {sock}.ttrpc  # a killed containerd's socket files stay behind
run containerd containerd --config {d}/containerd.toml
for i in $(seq 200); do ctr -a {sock} version >/dev/null 2>&1 && break; sleep 0.05; done
ctr -a {sock} -n k8s.io images import --base-name {pause[1]} {pause[0]} >/dev/null
ctr -a {sock} -n k8s.io images import --base-name {poolcoord[1]} {poolcoord[0]} >/dev/null
echo images imported
run kubelet {kbin}/kubelet --config=/var/lib/kubelet/config.yaml \\
  --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf \\
  --hostname-override={self.name} --node-ip={self.ip} --node-labels={labels} --v=1
run kube-proxy {kbin}/kube-proxy --kubeconfig=/var/lib/kube-proxy/kubeconfig.conf \\
  --hostname-override={self.name} --proxy-mode=iptables --conntrack-max-per-core=0 \\
  --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 --oom-score-adj=0 \\
  --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256 --v=1
wait
""")

    def _make_cgroups(self):
        for root in _cgroup_roots():
            os.makedirs(os.path.join(root, self.cgroup), exist_ok=True)
        for key in ("cpuset.cpus", "cpuset.mems"):
            with open(f"/sys/fs/cgroup/cpuset/{key}") as src:
                value = src.read()
            with open(f"/sys/fs/cgroup/cpuset/{self.cgroup}/{key}", "w") as dst:
                dst.write(value)

    def start(self):
        """Starts containerd, the kubelet and kube-proxy in the node's namespaces."""
        if not os.path.isdir("/etc/kubernetes"):
            os.makedirs("/etc/kubernetes", exist_ok=True)
        self._make_cgroups()
        self.times["started"] = time.time()
        self.init = LAUNCHER.call(lambda: Process(
            f"node-{self.name}", ["nsenter", f"--net=/run/netns/{self.ns}", "unshare", "--mount", "--uts",
                                  "--propagation", "private", "bash", self.path("init.sh")], self.path("log")))
        return self

    def wait_ready(self, timeout=120):
        """Waits until the node, started at times["started"], is Ready and its kubelet
        has renewed its Lease (about 10 s after Ready: the kubelet's first try
        cannot yet name the Node as the Lease's owner); sets times["ready"] and
        times["lease"] (test clock, when the watches saw them)."""
        nw, lw = self.nc.nw, self.nc.lw
        after = self.times["started"]

        def ready():
            if not self.init.alive():
                raise RuntimeError(f"node {self.name}'s init exited:\n{self.logs()}")
            return nw.first(self.name, "True", after=after)

        def renewed():
            return min((t for t, r, _ in lw.versions.get(self.name, []) if t >= after and r and r >= after - 1),
                       default=None)
        try:
            self.times["ready"] = nw.wait(f"node {self.name} Ready", ready, timeout)
            self.times["lease"] = lw.wait(f"node {self.name}'s Lease renewed", renewed, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.logs()}")
        return self

    def pid(self, daemon):
        try:
            with open(self.path("run", f"{daemon}.pid")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def cut(self):
        """The node's cloud link goes down: its kubelet, kube-proxy and agent no
        longer reach kube-apiserver; its pool's LAN stays."""
        self.nc.net.cloud_link(self.name, False)
        return time.time()

    def restore(self):
        self.nc.net.cloud_link(self.name, True)
        return time.time()

    def kill(self):
        """The node dies: SIGKILL to the kubelet, kube-proxy, containerd, the
        shims and every process of its pods (its cgroups and the processes naming
        its containerd socket). Returns the test-clock time."""
        t = time.time()
        for daemon in ("kubelet", "kube-proxy", "containerd"):
            pid = self.pid(daemon)
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if self.init is not None:
            self.init.kill()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
                if self.socket.encode() in cmd:
                    os.kill(int(pid), signal.SIGKILL)
                    _remove_shim_socket(cmd)
            except OSError:
                pass
        for root in _cgroup_roots():
            _remove_cgroup(os.path.join(root, self.cgroup))
        return t

    def pod_processes(self, uid, comm=None):
        """Pids of the processes of the pod `uid` on this node (its cgroups under
        the node's cgroupRoot), those whose /proc/<pid>/comm is `comm` if given."""
        pids = set()
        for d, _, _ in os.walk(f"/sys/fs/cgroup/pids/{self.cgroup}"):
            if os.path.basename(d) == f"pod{uid}":
                pids |= _cgroup_pids(d)
        if comm is None:
            return sorted(pids)
        out = []
        for p in pids:
            try:
                with open(f"/proc/{p}/comm") as f:
                    if f.read().strip() == comm:
                        out.append(p)
            except OSError:
                pass
        return sorted(out)

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def kubelet_certificate(self):
        """The kubelet's current client certificate, kubelet-client-current.pem: the
        path of the file it links to (an absolute path inside the node), here."""
        pki = self.path("var-lib", "kubelet", "pki")
        target = os.readlink(os.path.join(pki, "kubelet-client-current.pem"))
        return os.path.join(pki, os.path.basename(target))

    def log(self, daemon, tail=3000):
        try:
            with open(self.path("log", f"{daemon}.log"), errors="replace") as f:
                return f.read()[-tail:] if tail else f.read()
        except OSError:
            return ""

    def logs(self):
        return "\n".join(f"--- node {self.name} {d} log tail:\n{self.log(d)}"
                         for d in (f"node-{self.name}", "containerd", "kubelet", "kube-proxy"))


class PodWatch:
    """Every pod's phase and readiness over time (test clock): first seen,
    scheduled, Running, Ready, deletion asked; by pod name."""

    def __init__(self, cluster):
        from kube_cluster import Follow

        class _Follow(Follow):
            def record(inner, pod, t):
                self._record(pod, t)
        self.pods = {}
        self.follow = _Follow(cluster, "/api/v1/pods", "pod-watch")
        self.lock = self.follow.lock

    def _record(self, pod, t):
        md, st = pod["metadata"], pod.get("status", {})
        p = self.pods.setdefault(md["name"], {"namespace": md.get("namespace"), "uid": md.get("uid")})
        p["seen"] = p.get("seen", t)
        p["node"] = pod.get("spec", {}).get("nodeName")
        p["labels"] = md.get("labels", {})
        p["phase"] = st.get("phase")
        p["ip"] = st.get("podIP")
        if p["node"]:
            p.setdefault("scheduled", t)
        if st.get("phase") == "Running":
            p.setdefault("running", t)
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", []))
        if ready:
            p.setdefault("ready", t)
        p["is_ready"] = ready
        if md.get("deletionTimestamp"):
            p.setdefault("deleting", t)

    def wait(self, what, pred, timeout):
        return self.follow.wait(what, pred, timeout)

    def matching(self, **labels):
        with self.lock:
            return {n: dict(p) for n, p in self.pods.items()
                    if all(p.get("labels", {}).get(k) == v for k, v in labels.items())}

    def stop(self):
        self.follow.stop()


class HelmRelease:
    """charts/poolcoord as an operator installs it: `helm install/upgrade/uninstall`
    with --set `values`, against kube-apiserver as system:masters."""

    def __init__(self, nc, values=(), release="poolcoord", namespace="pool-system"):
        self.nc, self.release, self.namespace = nc, release, namespace
        self.values = list(values)
        self.home = os.path.join(nc.cluster.workdir, "helm")
        os.makedirs(self.home, exist_ok=True)

    def helm(self, *args, timeout=300, check=True):
        env = {**os.environ, "HELM_CACHE_HOME": os.path.join(self.home, "cache"),
               "HELM_CONFIG_HOME": os.path.join(self.home, "config"),
               "HELM_DATA_HOME": os.path.join(self.home, "data"), "KUBECONFIG": self.nc.cluster.admin_kubeconfig}
        p = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=timeout, env=env)
        if check and p.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({p.returncode}): {p.stderr}{p.stdout[-2000:]}")
        return p

    def _sets(self, values):
        return [a for v in values for a in ("--set", v)]

    def install(self):
        self.helm("install", self.release, CHART, "--namespace", self.namespace, "--create-namespace",
                  *self._sets(self.values))
        return self

    def upgrade(self, values=()):
        self.values += list(values)
        self.helm("upgrade", self.release, CHART, "--namespace", self.namespace, *self._sets(self.values))
        return self

    def uninstall(self):
        self.helm("uninstall", self.release, "--namespace", self.namespace, "--wait", "--timeout", "120s")
