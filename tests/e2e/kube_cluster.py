"""A real Kubernetes control plane for the end-to-end tests, and poolcoord deployed
into it as its Helm chart deploys it.

    cluster = KubeCluster(grace="40s")   # etcd + kube-apiserver + kube-controller-manager
    cluster.kubectl("get", "nodes")      # the real kubectl as system:masters
    cluster.node_client("n1")            # HTTPS as system:node:n1 (client certificate)
    pc = ChartInstall(cluster, binary)   # helm template | kubectl apply, binary on the host
    kubelet = Kubelet(cluster, "n1", {POOL_LABEL: "p"}).start()

Binaries: kube-apiserver and kube-controller-manager from $POOLCOORD_K8S_BIN, else
<repo>/../shared/k8s/v1.32.6/bin; where neither has them, KubeCluster raises Skip
(the test prints why and how to get them, and exits 77, which ctest counts as
skipped). etcd is Debian's etcd-server (tests/e2e/etcd_fixture.py, data on
/dev/shm), helm comes from $HELM, PATH or build/tools/helm (scripts/install-deps.sh
--test puts it there), kubectl is the pinned 1.32 (harness.kubectl_binary).

kube-apiserver runs as a cluster's does: Node,RBAC authorization, the
NodeRestriction admission plugin, service-account tokens, and the aggregation layer
(front-proxy CA, a front-proxy client certificate with CN front-proxy-client,
X-Remote-* headers). The PKI (cluster CA, front-proxy CA, serving, admin,
controller-manager and node client certificates) is made with the openssl CLI.

KubeCluster alone runs no kubelet and no container runtime, so the chart's
Deployment never gets a pod (tests/e2e/kube_nodes.py adds real nodes around it, for
the suites that run the chart as pods): ChartInstall runs poolcoord-apiserver on the host with the Deployment's own
arguments, the chart's serving Secret and a token of the chart's ServiceAccount (so
the chart's RBAC is what is tested), and the chart's Service is rendered as
`type: ExternalName` with `externalName: localhost` and the server's port, which is
how the aggregator and the webhook client reach it. `Kubelet` stands in for a node's
kubelet: it registers its Node (Ready) and renews its Lease in kube-node-lease every
10 s with the node's own client certificate, writing back the Lease it read as the
kubelet does.

Every process gets SIGKILL when the test process dies (PR_SET_PDEATHSIG).
Standard library only.
"""
import argparse
import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_fixture import EtcdFixture, _die_with_parent, _openssl, issue_cert, make_ca  # noqa: E402
from harness import Client, free_port, kubectl_binary, run_one, wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "charts", "poolcoord")
K8S_VERSION = "v1.32.6"
POOL_LABEL = "apps.openyurt.io/nodepool"
DELEGATE = "openyurt.io/delegate-heartbeat"
SKIP_EXIT = 77  # ctest's SKIP_RETURN_CODE for these tests


class Skip(Exception):
    """The real control plane is not available here: the test is skipped, not failed."""


def k8s_bin_dir(more=()):
    """The directory holding kube-apiserver and kube-controller-manager (and the
    binaries named in `more`), or Skip."""
    env = os.environ.get("POOLCOORD_K8S_BIN")
    where = env or os.path.normpath(os.path.join(ROOT, "..", "shared", "k8s", K8S_VERSION, "bin"))
    missing = [b for b in ("kube-apiserver", "kube-controller-manager", *more)
               if not os.access(os.path.join(where, b), os.X_OK)]
    if missing:
        origin = "$POOLCOORD_K8S_BIN" if env else "../shared/k8s/v1.32.6/bin (POOLCOORD_K8S_BIN unset)"
        raise Skip(
            f"no {', '.join(missing)} in {where} ({origin}). These tests need the real "
            f"{', '.join(('kube-apiserver', 'kube-controller-manager', *more))} 1.32: "
            f"`setup-envtest use 1.32.x` gives kube-apiserver (controller-runtime's envtest), and "
            f"all are at https://dl.k8s.io/release/{K8S_VERSION}/bin/linux/amd64/<name>; put them "
            f"in one directory and set POOLCOORD_K8S_BIN to it")
    return where


def helm_binary():
    """$HELM, else helm on PATH, else build/tools/helm (scripts/install-deps.sh --test)."""
    for candidate in (os.environ.get("HELM"), shutil.which("helm"),
                      os.path.join(ROOT, "build", "tools", "helm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("helm not found ($HELM, PATH, build/tools/helm): run scripts/install-deps.sh --test")


def ensure_images(binary):
    """The two OCI archives for the binaries beside `binary`, built by
    scripts/build-image.sh when missing or older than the binaries or the script.
    Returns {"poolcoord": (archive, repository, tag), "pause": (...)}; Skip where
    the script cannot run (not root, or without mmdebstrap and umoci)."""
    if os.geteuid() != 0:
        raise Skip("scripts/build-image.sh needs root (mmdebstrap, chroot, umoci); CI runs as root")
    missing = [t for t in ("mmdebstrap", "umoci") if not shutil.which(t)]
    if missing:
        raise Skip(f"no {' or '.join(missing)} to build the image (scripts/install-deps.sh --test installs them)")
    bindir = os.path.dirname(os.path.abspath(binary))
    out = os.path.join(bindir, "image")
    script = os.path.join(ROOT, "scripts", "build-image.sh")
    inputs = [os.path.join(bindir, b) for b in ("poolcoord-apiserver", "poolcoord-agent", "kubectl-pool")]
    for b in inputs:
        if not os.access(b, os.X_OK):
            raise RuntimeError(f"{b} is not built")
    names = os.path.join(out, "images.txt")

    def fresh():
        try:
            with open(names) as f:
                refs = f.read().split()
            archives = [os.path.join(out, n) for n in os.listdir(out) if n.endswith(".oci.tar")]
        except OSError:
            return None
        if len(refs) != 2 or len(archives) < 2:
            return None
        built = min(os.path.getmtime(a) for a in archives)
        if any(os.path.getmtime(i) > built for i in inputs + [script]):
            return None
        return refs
    refs = fresh()
    if refs is None:
        t0 = time.time()
        p = subprocess.run(["bash", script, "--binaries", bindir], capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"scripts/build-image.sh failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-3000:]}")
        print(f"image built in {time.time() - t0:.1f} s: {p.stdout.strip().splitlines()[-3:]}", flush=True)
        refs = fresh()
        if refs is None:
            raise RuntimeError(f"scripts/build-image.sh wrote no images into {out}")
    images = {}
    for ref in refs:
        repo, tag = ref.rsplit(":", 1)
        if repo.endswith("/pause"):
            images["pause"] = (os.path.join(out, "pause.oci.tar"), repo, tag)
        else:
            images["poolcoord"] = (os.path.join(out, f"poolcoord-{tag}.oci.tar"), repo, tag)
    return images


def unknown_bound(grace, monitor_period):
    """The latest, in seconds after a node's last Lease renewal, that
    kube-controller-manager's node lifecycle controller marks the node Unknown:
    a renewal counts from the monitor pass that first sees it (probeTimestamp is
    that pass's clock, up to one --node-monitor-period after the renewal), and
    the node is judged at the first pass more than grace after the probe (up to
    one period more). Watch delivery and a busy machine come on top: the
    caller's slack."""
    return grace + 2 * monitor_period


def forwarder_shard(node, shards):
    """The forwarding shard of `node` (controllers::Forwarder::ShardOf): FNV-1a
    (64 bits) of its name, modulo `shards`."""
    h = 14695981039346656037
    for c in node.encode():
        h = ((h ^ c) * 1099511628211) % (1 << 64)
    return h % shards


def now_micro(ahead=0.0):
    """Now (plus `ahead` seconds) as a MicroTime string."""
    return datetime.fromtimestamp(time.time() + ahead, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro(text):
    """Seconds since the epoch of a MicroTime/Time string (RFC 3339, Z)."""
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if "." in text else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()


def write_kubeconfig(path, server, ca, cert=None, key=None, token=None):
    user = {"token": token} if token else {"client-certificate": cert, "client-key": key}
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                   "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority": ca}}],
                   "users": [{"name": "u", "user": user}],
                   "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}, f)
    return path


def yaml_objects(text):
    """The objects of a YAML stream, as dicts. The standard library has no YAML
    reader: kubectl converts it offline (`label --local` of a label nobody sets
    leaves each object as it was, except an empty labels map it adds where there
    were none, which is dropped again)."""
    p = subprocess.run([kubectl_binary(), "label", "--local", "-f", "-", "-o", "json",
                        "poolcoord.test/none-"], input=text, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "KUBECONFIG": os.devnull})
    if p.returncode != 0:
        raise RuntimeError(f"kubectl could not read the YAML: {p.stderr}")
    out, dec, pos = [], json.JSONDecoder(), 0
    s = p.stdout
    while True:
        while pos < len(s) and s[pos].isspace():
            pos += 1
        if pos >= len(s):
            break
        obj, pos = dec.raw_decode(s, pos)
        items = obj["items"] if obj.get("kind") == "List" else [obj]
        for o in items:
            if o.get("metadata", {}).get("labels") == {}:
                del o["metadata"]["labels"]
            out.append(o)
    return out


def helm_template(*args, release="poolcoord", namespace="pool-system", check=True):
    """`helm template <release> charts/poolcoord -n <namespace> <args>`: the
    CompletedProcess (check=False) or the YAML text."""
    p = subprocess.run([helm_binary(), "template", release, CHART, "--namespace", namespace, *args],
                       capture_output=True, text=True, timeout=120)
    if not check:
        return p
    if p.returncode != 0:
        raise AssertionError(f"helm template {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p.stdout


def run_scenarios(scenarios, errors, timeout=900):
    """Runs each (name, fn) of `scenarios` in its own thread and waits for all
    (each at most `timeout` s). An exception is not raised but appended to
    `errors` as "name: Type: message", for the test's cases to judge."""
    def guard(name, fn):
        try:
            fn()
        except Exception as e:  # judged by the cases
            errors.append(f"{name}: {type(e).__name__}: {e}")
    threads = [threading.Thread(target=guard, args=s, daemon=True) for s in scenarios]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)


def stop_parts(env, *names):
    """Stops env's attributes `names`, in that order, skipping those never made:
    each has stop(), or is a dict of such (kubelets by node)."""
    for name in names:
        part = getattr(env, name, None)
        if part is None:
            continue
        for p in (part.values() if isinstance(part, dict) else [part]):
            p.stop()


class Pki:
    """The cluster's certificates, made with the openssl CLI in `directory`."""

    def __init__(self, directory, extra_sans=()):
        self.dir = directory
        self.ca = make_ca(directory, "cluster-ca")
        self.front_proxy_ca = make_ca(directory, "front-proxy-ca")
        self.serving = issue_cert(directory, "kube-apiserver", self.ca, ["serverAuth"],
                                  san="IP:127.0.0.1,DNS:localhost,DNS:kubernetes,"
                                      "DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1"
                                      + "".join(f",{s}" for s in extra_sans))
        self.front_proxy_client = issue_cert(directory, "front-proxy-client", self.front_proxy_ca,
                                             ["clientAuth"])
        self.admin = self.client("admin", "kube-admin", ["system:masters"])
        self.kcm = self.client("kcm", "system:kube-controller-manager")
        self.sa_key = os.path.join(directory, "sa.key")
        self.sa_pub = os.path.join(directory, "sa.pub")
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", self.sa_key,
                 cwd=directory)
        _openssl("pkey", "-in", self.sa_key, "-pubout", "-out", self.sa_pub, cwd=directory)
        self._nodes = {}
        self._lock = threading.Lock()

    def client(self, name, cn, orgs=(), ca=None):
        """A client certificate CN=cn, O=orgs signed by the cluster CA (or `ca`)."""
        return issue_cert(self.dir, name, ca or self.ca, ["clientAuth"], cn=cn, orgs=orgs)

    def node(self, node):
        """The node's kubelet client certificate: CN system:node:<node>, O system:nodes."""
        with self._lock:
            if node not in self._nodes:
                self._nodes[node] = self.client(f"node-{node}", f"system:node:{node}", ["system:nodes"])
            return self._nodes[node]


class Process:
    """A child process with its log in a file; SIGKILL when the test process dies."""

    def __init__(self, name, args, workdir, env=None):
        self.name, self.args = name, args
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.env = env
        self.proc = None
        self.start()

    def start(self):
        self._log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT,
                                     preexec_fn=_die_with_parent, env=self.env)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL, as a node or pod dying would."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def stop(self, timeout=15):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self._log.close()
        return self.proc.returncode if self.proc else None

    def log(self, tail=6000):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-tail:] if tail else f.read()
        except OSError:
            return ""


def _insecure_ctx():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class KubeCluster:
    """etcd, kube-apiserver (aggregation, Node,RBAC, NodeRestriction) and
    kube-controller-manager on free 127.0.0.1 ports. `grace` is
    --node-monitor-grace-period (None: the 1.32 default, 50 s); kcm=False leaves
    the controller manager out. `bind_address` and `extra_sans` (e.g.
    ["IP:10.201.0.1"]) let clients in other network namespaces reach
    kube-apiserver (the agent tests). `advertise_address` (an address pods
    reach) is kept in the `kubernetes` Service's endpoints by kube-apiserver's
    lease reconciler, as in a cluster with nodes (tests/e2e/kube_nodes.py);
    `apiserver_args` are appended to kube-apiserver's; `kubelet_client` gives it
    a client certificate to the kubelets (logs, exec; CN
    kube-apiserver-kubelet-client, O system:masters). Raises Skip without the
    binaries (and `binaries`, more of them by name, e.g. "kubelet")."""

    def __init__(self, grace=None, kcm=True, kcm_args=(), bind_address="127.0.0.1", extra_sans=(),
                 advertise_address=None, apiserver_args=(), binaries=(), kubelet_client=False):
        self.bind_address = bind_address
        self.advertise_address = advertise_address
        self.apiserver_args = list(apiserver_args)
        self.bin = k8s_bin_dir(binaries)
        self.workdir = tempfile.mkdtemp(prefix="poolcoord-k8s-")
        self.procs = []
        t0 = time.time()
        self.etcd = EtcdFixture(name="k8s")
        self.pki = Pki(self.workdir, extra_sans)
        if kubelet_client:
            cert = self.pki.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ["system:masters"])
            self.apiserver_args += [f"--kubelet-client-certificate={cert[0]}", f"--kubelet-client-key={cert[1]}"]
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.admin_kubeconfig = write_kubeconfig(os.path.join(self.workdir, "admin.kubeconfig"), self.url,
                                                 self.pki.ca[0], *self.pki.admin)
        try:
            self._start_apiserver()
            if kcm:
                self._start_kcm(grace, kcm_args)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.time() - t0

    def _start_apiserver(self):
        p = self.pki
        args = [os.path.join(self.bin, "kube-apiserver"),
                f"--etcd-servers={self.etcd.endpoint}", f"--bind-address={self.bind_address}",
                f"--advertise-address={self.advertise_address or '127.0.0.1'}", f"--secure-port={self.port}",
                f"--tls-cert-file={p.serving[0]}", f"--tls-private-key-file={p.serving[1]}",
                f"--client-ca-file={p.ca[0]}",
                f"--service-account-key-file={p.sa_pub}", f"--service-account-signing-key-file={p.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.0.0.0/24",
                # A loopback address in the `kubernetes` endpoints draws a complaint
                # and reaches no pod: none is kept without nodes.
                *([] if self.advertise_address else ["--endpoint-reconciler-type=none"]),
                f"--cert-dir={os.path.join(self.workdir, 'apiserver-certs')}",
                "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
                f"--requestheader-client-ca-file={p.front_proxy_ca[0]}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={p.front_proxy_client[0]}",
                f"--proxy-client-key-file={p.front_proxy_client[1]}",
                "--profiling=false", *self.apiserver_args]
        self.apiserver = Process("kube-apiserver", args, self.workdir)
        self.procs.append(self.apiserver)
        admin = self.admin()
        deadline = time.time() + 60
        while True:
            if not self.apiserver.alive():
                raise RuntimeError("kube-apiserver exited:\n" + self.apiserver.log())
            try:
                if admin.request("GET", "/readyz", accept=None).status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("kube-apiserver not ready within 60 s:\n" + self.apiserver.log())
            time.sleep(0.2)
        # The system namespaces controller makes kube-node-lease shortly after.
        wait_for("namespace kube-node-lease",
                 lambda: admin.request("GET", "/api/v1/namespaces/kube-node-lease").status == 200, timeout=30)

    def start_controller_manager(self, grace=None, extra=()):
        """Starts kube-controller-manager now (for a cluster made with kcm=False):
        its node lifecycle controller starts every existing node's grace period at
        its first sight of it."""
        self._start_kcm(grace, extra)

    def _start_kcm(self, grace, extra):
        p = self.pki
        kubeconfig = write_kubeconfig(os.path.join(self.workdir, "kcm.kubeconfig"), self.url, p.ca[0], *p.kcm)
        self.kcm_port = free_port()
        args = [os.path.join(self.bin, "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
                f"--secure-port={self.kcm_port}", f"--cert-dir={os.path.join(self.workdir, 'kcm-certs')}",
                f"--service-account-private-key-file={p.sa_key}", f"--root-ca-file={p.ca[0]}",
                "--use-service-account-credentials=true",
                f"--cluster-signing-cert-file={p.ca[0]}", f"--cluster-signing-key-file={p.ca[1]}",
                "--leader-elect=false", "--profiling=false",
                *([f"--node-monitor-grace-period={grace}"] if grace else []), *extra]
        self.kcm = Process("kube-controller-manager", args, self.workdir)
        self.procs.append(self.kcm)
        ctx = _insecure_ctx()

        def healthy():
            if not self.kcm.alive():
                raise RuntimeError("kube-controller-manager exited:\n" + self.kcm.log())
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{self.kcm_port}/healthz", timeout=2,
                                            context=ctx) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for("kube-controller-manager /healthz", healthy, timeout=60)

    # --- clients
    def admin(self):
        return Client(self.port, self.pki.ca[0], cert=self.pki.admin)

    def node_client(self, node):
        return Client(self.port, self.pki.ca[0], cert=self.pki.node(node))

    def user_client(self, name, cn, orgs=()):
        return Client(self.port, self.pki.ca[0], cert=self.pki.client(name, cn, orgs))

    def kubectl(self, *args, stdin=None, kubeconfig=None, timeout=60, env=None, check=False):
        cmd = [kubectl_binary(), "--kubeconfig", kubeconfig or self.admin_kubeconfig,
               "--cache-dir", os.path.join(self.workdir, "kube-cache"), *args]
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
        if check and p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({p.returncode}): {p.stderr}{p.stdout}")
        return p

    def kubectl_json(self, *args, **kw):
        return json.loads(self.kubectl(*args, "-o", "json", check=True, **kw).stdout)

    def apiserver_requests(self, resource, verb="POST"):
        """kube-apiserver's apiserver_request_total for `resource` and `verb`, all codes."""
        total = 0.0
        for line in self.admin().request("GET", "/metrics", accept=None).body.splitlines():
            if line.startswith("apiserver_request_total{") and f'resource="{resource}"' in line \
                    and f'verb="{verb}"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def logs(self):
        return "\n".join(f"--- {p.name} log tail:\n{p.log(3000)}" for p in self.procs)

    def stop(self):
        for p in reversed(self.procs):
            p.stop()
        self.etcd.stop()
        self._remove_workdir()

    def _remove_workdir(self):
        """The work folder (certificates, logs, the chart's render, real nodes'
        state) goes with the cluster. POOLCOORD_KEEP_WORKDIR=1 keeps it for a
        look at the logs; so does anything still mounted under it (a real node's
        containerd or kubelet state that its own stop failed to unmount), which
        rmtree would descend into."""
        if os.environ.get("POOLCOORD_KEEP_WORKDIR"):
            print(f"kept {self.workdir} (POOLCOORD_KEEP_WORKDIR)", flush=True)
            return
        with open("/proc/mounts") as f:
            mounted = [line.split()[1] for line in f if line.split()[1].startswith(self.workdir + "/")]
        if mounted:
            print(f"kept {self.workdir}: {len(mounted)} mounts under it, e.g. {mounted[0]}", flush=True)
            return
        shutil.rmtree(self.workdir, ignore_errors=True)


class ChartInstall:
    """poolcoord as charts/poolcoord deploys it, into `cluster`: `helm template`
    (with `values`, --set strings) applied with kubectl, then the binary run on the
    host with the rendered Deployment's arguments, the rendered serving Secret and
    the chart ServiceAccount's token. The Service is rendered as ExternalName
    localhost:<port> (service.type, service.externalName, service.port), and
    server.securePort is the same port, so the Deployment's --secure-port is used
    as it is; server.kubeconfig points the chart's --kubeconfig,
    --authentication-kubeconfig and --authorization-kubeconfig at a file that
    exists here. With replicas=N in `values`, N processes run (procs[i], ports[i]):
    replica 0 on the Service's port, the others on ports of their own (one
    ExternalName target cannot spread load; the tests address them directly)."""

    POD_KUBECONFIG = "/etc/poolcoord/kubeconfig"

    def __init__(self, cluster, binary, values=(), namespace="pool-system", release="poolcoord",
                 extra_args=(), wait_available=True, files=None):
        self.cluster, self.binary, self.namespace, self.release = cluster, binary, namespace, release
        self.files = dict(files or {})  # path in the pod -> path here, for values that name files
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="poolcoord-chart-", dir=cluster.workdir)
        self.sets = [f"service.type=ExternalName", "service.externalName=localhost",
                     f"service.port={self.port}", f"server.securePort={self.port}",
                     f"server.kubeconfig={self.POD_KUBECONFIG}",
                     # The tests' hand-written DelegatedLeases carry no proofs (issue 15);
                     # real agents send them anyway. A test's values may say otherwise.
                     "server.delegationProof.mode=optional", *values]
        # The release's objects, as `helm install` creates them: hooks (the
        # post-delete cleanup Job and its RBAC) are Helm's to run, not kubectl's.
        self.text = helm_template("--no-hooks", *[a for s in self.sets for a in ("--set", s)],
                                  release=release, namespace=namespace)
        self.objects = yaml_objects(self.text)
        if cluster.kubectl("get", "namespace", namespace).returncode != 0:
            cluster.kubectl("create", "namespace", namespace, check=True)
        cluster.kubectl("apply", "-f", "-", stdin=self.text, check=True)
        self.service_account = self.one("ServiceAccount")["metadata"]["name"]
        self.service = self.one("Service")["metadata"]["name"]
        self.forwarder_user = f"system:serviceaccount:{namespace}:{self.service_account}"
        token = cluster.kubectl("create", "token", self.service_account, "-n", namespace,
                                "--duration=24h", check=True).stdout.strip()
        self.kubeconfig = write_kubeconfig(os.path.join(self.dir, "kubeconfig"), cluster.url,
                                           cluster.pki.ca[0], token=token)
        certs = os.path.join(self.dir, "serving-cert")
        os.makedirs(certs)
        for k, v in self.one("Secret")["data"].items():
            with open(os.path.join(certs, k), "wb") as f:
                f.write(base64.b64decode(v))
        self.ca = os.path.join(certs, "ca.crt")
        container = self.one("Deployment")["spec"]["template"]["spec"]["containers"][0]
        mount = [m for m in container["volumeMounts"] if m["name"] == "serving-cert"][0]["mountPath"]
        self.args = [self._host_arg(a, mount, certs) for a in container["args"]]
        self.args += ["--bind-address=127.0.0.1", *extra_args]
        self.procs, self.ports = [], []
        for i in range(int(self.one("Deployment")["spec"]["replicas"])):
            port = self.port if i == 0 else free_port()
            args = [f"--secure-port={port}" if a.startswith("--secure-port=") else
                    a + (f"-{i}" if a.startswith("--cert-dir=") and i else "") for a in self.args]
            name = f"poolcoord-{release}" + (f"-{i}" if i else "")
            self.procs.append(Process(name, [binary, *args], self.dir))
            self.ports.append(port)
        self.proc = self.procs[0]
        cluster.procs[:0] = self.procs
        for i in range(len(self.procs)):
            self.wait_ready(replica=i)
        if wait_available:
            self.wait_available()

    def _host_arg(self, arg, mount, certs):
        arg = arg.replace(mount, certs).replace(self.POD_KUBECONFIG, self.kubeconfig)
        for pod_path, host_path in self.files.items():
            arg = arg.replace(pod_path, host_path)
        if arg.startswith("--cert-dir="):
            arg = "--cert-dir=" + os.path.join(self.dir, "scratch")
        return arg

    def one(self, kind, name=None):
        hits = [o for o in self.objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
        assert len(hits) == 1, f"{len(hits)} rendered objects of kind {kind} {name or ''}"
        return hits[0]

    def direct(self, cert=None, replica=0):
        """A client of poolcoord itself (not through kube-apiserver), verifying the
        serving certificate against the chart's CA (its SANs name the Service, not
        127.0.0.1)."""
        c = Client(self.ports[replica], self.ca, cert=cert)
        c.ctx.check_hostname = False
        return c

    def wait_ready(self, timeout=30, replica=0):
        proc = self.procs[replica]

        def ready():
            if not proc.alive():
                raise RuntimeError(f"poolcoord exited ({proc.proc.returncode}):\n{proc.log()}")
            try:
                return self.direct(replica=replica).request("GET", "/readyz", accept=None).status == 200
            except OSError:
                return False
        wait_for(f"poolcoord replica {replica} /readyz", ready, timeout=timeout)

    def wait_available(self, timeout=60):
        p = self.cluster.kubectl("wait", "--for=condition=Available", "apiservice/v1alpha1.coordination.pool",
                                 f"--timeout={timeout}s", timeout=timeout + 10)
        if p.returncode != 0:
            st = self.cluster.kubectl("get", "apiservice", "v1alpha1.coordination.pool", "-o", "json").stdout
            raise AssertionError(f"APIService not Available: {p.stderr}\n{st[-1500:]}\n{self.proc.log()}")

    def metrics(self, replica=0):
        return self.direct(replica=replica).request("GET", "/metrics", accept=None).body

    def metric(self, name, replica=0, **labels):
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics(replica).splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            series, _, value = line.rpartition(" ")
            metric_name, _, label_text = series.partition("{")
            if metric_name != name:
                continue
            if all(f'{k}="{v}"' in label_text for k, v in labels.items()):
                total += float(value)
        return total

    def restart(self, replica=0):
        self.procs[replica].stop()
        self.procs[replica].start()
        self.wait_ready(replica=replica)

    def stop(self):
        for p in self.procs:
            p.stop()


class Kubelet:
    """A stand-in kubelet for node `name`: registers its Node (Ready, with `labels`)
    and renews kube-node-lease/<name> every `interval` seconds with the node's
    client certificate, as the kubelet's lease controller does: GET, then PUT the
    Lease it read (annotations included) with a new renewTime, holderIdentity and
    leaseDurationSeconds 40; on 409 it reads again. cut_off() makes one last
    renewal and then no more calls; come_back() posts Ready and renews at once.
    `renewals` holds the renewTime of each of its own renewals."""

    def __init__(self, cluster, name, labels=None, interval=10.0, lease_duration=40):
        self.cluster, self.name, self.labels = cluster, name, labels or {}
        self.interval, self.lease_duration = interval, lease_duration
        self.client = cluster.node_client(name)
        self.online = True
        self.renewals = []
        self.errors = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.RLock()
        self.thread = None
        self.node_uid = None

    def register(self, lease=True):
        """Creates the Node (Ready) and, unless lease=False, the node's Lease."""
        now = now_micro()[:19] + "Z"
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name, **self.labels}},
                "status": {"conditions": [self._ready(now)]}}
        r = self.client.request("POST", "/api/v1/nodes", node)
        if r.status == 409:
            r = self.client.request("GET", f"/api/v1/nodes/{self.name}")
        if r.status not in (200, 201):
            raise AssertionError(f"kubelet {self.name}: creating its Node: {r.status} {r.body[:300]}")
        self.node_uid = r.json()["metadata"]["uid"]
        if lease:
            self.renew()
        return self

    @staticmethod
    def _ready(now):
        return {"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                "lastTransitionTime": now}

    def post_ready(self):
        now = now_micro()[:19] + "Z"
        patch = {"status": {"conditions": [self._ready(now)]}}
        r = self.client.request("PATCH", f"/api/v1/nodes/{self.name}/status", patch,
                                ctype="application/strategic-merge-patch+json")
        if r.status != 200:
            raise AssertionError(f"kubelet {self.name}: posting Ready: {r.status} {r.body[:300]}")

    def renew(self, only_if_online=False, renew_time=None):
        """One renewal; returns the renewTime written (None when only_if_online and
        the node is cut off). `renew_time` (a MicroTime string) stands for a kubelet
        whose clock is off."""
        with self._lock:
            if only_if_online and not self.online:
                return None
            path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
            for _ in range(5):
                r = self.client.request("GET", path)
                renew = renew_time or now_micro()
                if r.status == 404:
                    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                             "metadata": {"name": self.name, "namespace": "kube-node-lease",
                                          "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                                               "name": self.name, "uid": self.node_uid}]},
                             "spec": {"holderIdentity": self.name, "leaseDurationSeconds": self.lease_duration,
                                      "renewTime": renew}}
                    w = self.client.request("POST", path.rsplit("/", 1)[0], lease)
                else:
                    lease = r.json()
                    lease["spec"].update(holderIdentity=self.name, leaseDurationSeconds=self.lease_duration,
                                         renewTime=renew)
                    w = self.client.request("PUT", path, lease)
                if w.status in (200, 201):
                    self.renewals.append(renew)
                    return renew
                if w.status != 409:
                    self.errors.append((renew, w.status, w.body[:300]))
                    raise AssertionError(f"kubelet {self.name}: renewing its Lease: {w.status} {w.body[:300]}")
            raise AssertionError(f"kubelet {self.name}: five conflicts in a row renewing its Lease")

    def start(self):
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"kubelet-{self.name}")
        self.thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            try:
                self.renew(only_if_online=True)
            except Exception as e:  # recorded; the loop goes on as the kubelet's does
                self.errors.append((now_micro(), 0, str(e)))
            self._wake.wait(self.interval)
            self._wake.clear()

    def cut_off(self, ahead=0.0):
        """The node loses the cloud right after one last renewal; returns when it
        was written (seconds since the epoch). No renewal of the loop follows it.
        `ahead`: the kubelet's clock runs that many seconds fast, so the renewTime
        written lies that far ahead of the time returned."""
        with self._lock:
            self.online = False
            return parse_micro(self.renew(renew_time=now_micro(ahead) if ahead else None)) - ahead

    def come_back(self):
        """The node reaches the cloud again: posts Ready and renews at once."""
        with self._lock:
            self.post_ready()
            self.online = True
            self.renew()

    def stop(self):
        self._stop.set()
        self._wake.set()


class Follow:
    """Follows every object at the list `path` (an admin list, then watch, again on
    410 or a dropped stream) and calls record(obj, t) with the test clock's time of
    each state seen, under `lock` (a Condition notified after each record)."""

    def __init__(self, cluster, path, name):
        self.cluster, self.path = cluster, path
        self.lock = threading.Condition()
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def record(self, obj, t):
        raise NotImplementedError

    def _seen(self, obj):
        with self.lock:
            self.record(obj, time.time())
            self.lock.notify_all()

    def _run(self):
        admin = self.cluster.admin()
        rv = ""
        while not self._stop:
            try:
                if not rv:
                    lst = admin.request("GET", self.path).json()
                    for o in lst["items"]:
                        self._seen(o)
                    rv = lst["metadata"]["resourceVersion"]
                resp, events, conn = admin.watch(f"{self.path}?watch=1&resourceVersion={rv}"
                                                 "&allowWatchBookmarks=true&timeoutSeconds=600", timeout=700)
                for ev in events:
                    if self._stop:
                        break
                    if ev["type"] == "ERROR":
                        rv = ""
                        break
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self._seen(ev["object"])
                conn.close()
            except Exception:
                if self._stop:
                    return
                time.sleep(0.5)
                rv = ""

    def wait(self, what, pred, timeout):
        """Waits (under the lock) until pred() is truthy; returns its value."""
        deadline = time.time() + timeout
        with self.lock:
            while True:
                v = pred()
                if v:
                    return v
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
                self.lock.wait(min(left, 0.5))

    def stop(self):
        self._stop = True


class NodeWatch(Follow):
    """Every Node's Ready condition status and taints over time (test clock)."""

    def __init__(self, cluster):
        self.ready = {}      # node -> [(t, status)] at each change
        self.taints = {}     # node -> [(t, frozenset of "key:effect")] at each change
        super().__init__(cluster, "/api/v1/nodes", "node-watch")

    def record(self, node, t):
        name = node["metadata"]["name"]
        status = next((c["status"] for c in node.get("status", {}).get("conditions", [])
                       if c["type"] == "Ready"), None)
        taints = frozenset(f"{x['key']}:{x['effect']}" for x in node.get("spec", {}).get("taints", []))
        for hist, value in ((self.ready.setdefault(name, []), status),
                            (self.taints.setdefault(name, []), taints)):
            if not hist or hist[-1][1] != value:
                hist.append((t, value))

    def status(self, node):
        with self.lock:
            h = self.ready.get(node)
            return h[-1][1] if h else None

    def current_taints(self, node):
        with self.lock:
            h = self.taints.get(node)
            return h[-1][1] if h else frozenset()

    def first(self, node, status, after=0.0):
        """Test-clock time at which `node` first had Ready=`status` at or after `after`
        (a state that began earlier and still held then counts from `after`), or None."""
        with self.lock:
            hist = self.ready.get(node, [])
            for i, (t, s) in enumerate(hist):
                end = hist[i + 1][0] if i + 1 < len(hist) else float("inf")
                if s == status and end > after:
                    return max(t, after)
        return None

    def first_taint(self, node, taint, after=0.0):
        with self.lock:
            for t, taints in self.taints.get(node, []):
                if t >= after and taint in taints:
                    return t
        return None


class LeaseWatch(Follow):
    """Every node Lease in kube-node-lease over time: versions[node] is a list of
    (t, renewTime seconds, annotations) for each renewTime or annotation change."""

    def __init__(self, cluster):
        self.versions = {}
        super().__init__(cluster, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                         "lease-watch")

    def record(self, lease, t):
        renew = lease.get("spec", {}).get("renewTime")
        entry = (t, parse_micro(renew) if renew else None, dict(lease["metadata"].get("annotations") or {}))
        hist = self.versions.setdefault(lease["metadata"]["name"], [])
        if not hist or hist[-1][1:] != entry[1:]:
            hist.append(entry)

    def renewals(self, node, after=0.0):
        """(renewTime, annotations) of each version renewed after `after` (renewTime, seconds)."""
        with self.lock:
            return [(r, a) for _, r, a in self.versions.get(node, []) if r is not None and r > after]

    def latest(self, node):
        with self.lock:
            h = self.versions.get(node)
            return h[-1] if h else None


class PoolLeader:
    """The pool leader's agent, as an edge node runs it: holds poolleases/<pool>
    (renewed every `interval`, leaseDurationSeconds 15) and renews a DelegatedLease
    every `interval` for each node in its delegated set, all with its own client
    certificate through kube-apiserver. first_write/last_write: the test-clock times
    of the first and last DelegatedLease write of each node's current delegation."""

    def __init__(self, cluster, node, pool, interval=5.0, dl_duration=20):
        self.cluster, self.node, self.pool = cluster, node, pool
        self.interval, self.dl_duration = interval, dl_duration
        self.delegated = set()
        self.first_write, self.last_write = {}, {}
        self.errors = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.client = cluster.node_client(node)
        self.renew_pool_lease()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"leader-{node}")
        self.thread.start()

    def renew_pool_lease(self, client=None):
        c = client or self.client
        path = f"/apis/coordination.pool/v1alpha1/poolleases/{self.pool}"
        now = now_micro()
        r = c.request("GET", path)
        if r.status == 404:
            body = {"apiVersion": "coordination.pool/v1alpha1", "kind": "PoolLease",
                    "metadata": {"name": self.pool},
                    "spec": {"holderIdentity": self.node, "leaseDurationSeconds": 15, "acquireTime": now,
                             "renewTime": now, "leaseTransitions": 0}}
            w = c.request("POST", path.rsplit("/", 1)[0], body)
        else:
            body = r.json()
            body["spec"]["renewTime"] = now
            w = c.request("PUT", path, body)
        if w.status not in (200, 201):
            raise AssertionError(f"leader {self.node}: PoolLease {self.pool}: {w.status} {w.body[:300]}")

    def write(self, node, client=None):
        """One DelegatedLease write for `node` (create or renew)."""
        c = client or self.client
        path = f"/apis/coordination.pool/v1alpha1/delegatedleases/{node}"
        for _ in range(5):  # the agent's loop may write the same lease meanwhile: read again
            r = c.request("GET", path)
            spec = {"holderIdentity": node, "leaseDurationSeconds": self.dl_duration,
                    "renewTime": now_micro(), "poolName": self.pool, "delegate": self.node}
            if r.status == 404:
                w = c.request("POST", path.rsplit("/", 1)[0],
                              {"apiVersion": "coordination.pool/v1alpha1", "kind": "DelegatedLease",
                               "metadata": {"name": node, "annotations": {DELEGATE: "true"}}, "spec": spec})
            else:
                body = r.json()
                body["spec"] = spec
                w = c.request("PUT", path, body)
            if w.status not in (409,):
                break
        if w.status not in (200, 201):
            raise AssertionError(f"leader {self.node}: DelegatedLease {node}: {w.status} {w.body[:300]}")
        t = time.time()
        with self._lock:
            self.first_write.setdefault(node, t)
            self.last_write[node] = t

    def delegate(self, node):
        """Starts delegating `node` now (the first write happens before this returns)."""
        with self._lock:
            self.first_write.pop(node, None)
            self.delegated.add(node)
        self.write(node, self.cluster.node_client(self.node))

    def undelegate(self, node, delete=False):
        """Stops renewing `node`'s DelegatedLease (it then expires), or deletes it."""
        with self._lock:
            self.delegated.discard(node)
        if delete:
            r = self.cluster.node_client(self.node).request(
                "DELETE", f"/apis/coordination.pool/v1alpha1/delegatedleases/{node}")
            if r.status not in (200, 404):
                raise AssertionError(f"deleting DelegatedLease {node}: {r.status} {r.body[:200]}")

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.renew_pool_lease()
                with self._lock:
                    nodes = sorted(self.delegated)
                for n in nodes:
                    with self._lock:
                        if n not in self.delegated:
                            continue
                    self.write(n)
            except Exception as e:  # recorded; the agent keeps going as a real one would
                self.errors.append(f"{now_micro()}: {e}")

    def stop(self):
        self._stop.set()


def run_cluster_cases(cases, setup, doc=""):
    """Runs a cluster test file: `setup(binary)` returns the shared environment
    (with stop() and logs()), then each case(env), printing PASS/FAIL lines and
    the tally. Returns the exit code: 0, 1, or SKIP_EXIT when the control plane's
    binaries are missing."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--binary", required=True, help="poolcoord-apiserver")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--keep", action="store_true",
                    help="print the logs even when everything passed, and keep the work folders")
    a, _ = ap.parse_known_args()
    only = set(filter(None, a.only.split(",")))
    if a.keep:
        os.environ["POOLCOORD_KEEP_WORKDIR"] = "1"
    t0 = time.time()
    try:
        env = setup(os.path.abspath(a.binary))
    except Skip as e:
        print(f"SKIP: {e}", flush=True)
        return SKIP_EXIT
    except Exception as e:
        print(f"FAIL setup: {type(e).__name__}: {e}", flush=True)
        traceback.print_exc(limit=4)
        print("0 passed, 1 failed")
        return 1
    print(f"PASS setup ({time.time() - t0:.1f}s)", flush=True)
    passed, failed = 1, 0
    try:
        for case in cases:
            if only and case.__name__ not in only:
                continue
            if run_one(case, env):
                passed += 1
            else:
                failed += 1
    finally:
        if failed or a.keep:
            print(env.logs())
        env.stop()
    print(f"{passed} passed, {failed} failed ({time.time() - t0:.0f}s)")
    return 0 if failed == 0 else 1
