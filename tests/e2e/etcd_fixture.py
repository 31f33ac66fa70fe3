"""A real etcd for the end-to-end tests: Debian's etcd-server binary on 127.0.0.1,
free client and peer ports, data on tmpfs (/dev/shm), killed and removed at the
end — the Python twin of tests/store/etcd_fixture.h.

    etcd = EtcdFixture()          # raises RuntimeError with etcd's log tail when
    etcd.endpoint                 # it cannot start; "http://127.0.0.1:<port>"
    etcd.revision()               # etcd's current revision (header.revision)
    etcd.compact(rev)             # compact the key-value history up to rev
    etcd.stop()

TLS mode, as kube-apiserver's etcd is usually run (client certificates required):

    etcd = EtcdFixture(tls=True)  # a throwaway CA, server and client certificate
    etcd.endpoint                 # "https://127.0.0.1:<port>"
    etcd.tls.ca, etcd.tls.client_cert, etcd.tls.client_key   # for the server's
                                  # --etcd-cafile, --etcd-certfile, --etcd-keyfile

etcd runs with --cert-file/--key-file/--trusted-ca-file/--client-cert-auth=true
and the fixture's own calls present the client certificate. `tls=` also takes a
TlsFiles from make_tls_files(dir) (made with the `openssl` CLI), and
make_ca/issue_cert make more certificates (another CA, a stranger's client
certificate) for negative cases. wait_for_gateway=False counts etcd as started
once its own /health answers, for an etcd whose JSON gateway is broken on
purpose (make_tls_files(dir, server_client_auth=False)). `host` is the client
address (default 127.0.0.1; another of this machine's addresses for clients in
network namespaces, plain HTTP). The peer port stays plain HTTP (one member, on
loopback). Default (tls=False): plain HTTP, exactly
as before.

$POOLCOORD_ETCD names another binary. Nothing is skipped: without an etcd binary
the constructor fails with the reason. etcd never outlives the test: it gets
SIGKILL when the Python process (the thread that started it) dies
(PR_SET_PDEATHSIG), and every fixture still running at interpreter exit is
stopped.

A cluster of members (Debian's etcd 3.4, plain HTTP), for the robustness suite:

    cluster = EtcdCluster(3)              # members on free 127.0.0.1 ports, or
    cluster = EtcdCluster(3, net=net)     # each in its own network namespace of
                                          # tests/e2e/netns.py's Net (for partitions)
    cluster.endpoints                     # every member's client URL (--etcd-servers)
    cluster.leader()                      # the index of the current leader, or None
    cluster.kill(i); cluster.start(i)     # SIGKILL member i; restart it on its data
    cluster.revision(), .compact(rev), .get(key), .call(path, body)   # any live member
    cluster.stop()

`Compactor` emulates a bounded watch window on etcd, for suites written against
the memory store's --watch-history-size: it follows every revision through an
etcd watch and compacts to `revision - window` as soon as it moves, so a
watch or continue token from before the window gets 410 Expired as it would
from the memory store (kube-apiserver compacts too, only every 5 minutes).

Standard library only.
"""
import atexit
import base64
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

_live = set()


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _die_with_parent():
    # Runs in the child between fork and exec: SIGKILL etcd when its parent dies.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def find_binary():
    env = os.environ.get("POOLCOORD_ETCD")
    if env:
        return env if os.access(env, os.X_OK) else None
    return shutil.which("etcd")


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed ({r.returncode}): {r.stderr[-1000:]}")


def make_ca(directory, name):
    """A self-signed CA (EC P-256, valid for a day) as <name>.crt/<name>.key in
    `directory`; returns (cert path, key path)."""
    cnf = os.path.join(directory, f"{name}.cnf")
    with open(cnf, "w") as f:
        f.write("[req]\ndistinguished_name = dn\n[dn]\n[ca]\nbasicConstraints = critical,CA:TRUE\n"
                "keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n")
    crt, key = os.path.join(directory, f"{name}.crt"), os.path.join(directory, f"{name}.key")
    _openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", "1", "-subj", f"/CN={name}", "-config", cnf, "-extensions", "ca",
             "-keyout", key, "-out", crt, cwd=directory)
    return crt, key


def issue_cert(directory, name, ca, usages, san=None, cn=None, orgs=()):
    """A leaf certificate for CN=<cn, default name> (and O=<each of orgs>) signed
    by `ca` (cert, key), with extendedKeyUsage `usages` ("serverAuth",
    "clientAuth") and an optional subjectAltName ("IP:127.0.0.1"), saved as
    <name>.crt/<name>.key; returns (cert path, key path)."""
    crt, key = os.path.join(directory, f"{name}.crt"), os.path.join(directory, f"{name}.key")
    csr, ext = os.path.join(directory, f"{name}.csr"), os.path.join(directory, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints = critical,CA:FALSE\n"
                "keyUsage = critical,digitalSignature,keyEncipherment\n"
                f"extendedKeyUsage = {','.join(usages)}\n" + (f"subjectAltName = {san}\n" if san else ""))
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", "".join(f"/O={o}" for o in orgs) + f"/CN={cn or name}", "-keyout", key,
             "-out", csr, cwd=directory)
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-set_serial",
             str(int.from_bytes(os.urandom(8), "big")), "-days", "1", "-extfile", ext, "-out", crt,
             cwd=directory)
    return crt, key


class TlsFiles:
    """PEM paths: ca (ca_key), server_cert/server_key, client_cert/client_key."""

    def __init__(self, **paths):
        self.__dict__.update(paths)


def make_tls_files(directory, server_client_auth=True):
    """A throwaway CA, an etcd serving certificate for IP:127.0.0.1 and a client
    certificate (CN=poolcoord) in `directory`. etcd 3.4's JSON gateway dials
    etcd's own gRPC port presenting the serving certificate as a client
    certificate, so with --client-cert-auth=true that certificate needs
    clientAuth too; server_client_auth=False leaves it out (a broken etcd)."""
    ca = make_ca(directory, "etcd-ca")
    server = issue_cert(directory, "etcd-server", ca,
                        ["serverAuth", "clientAuth"] if server_client_auth else ["serverAuth"],
                        san="IP:127.0.0.1")
    client = issue_cert(directory, "poolcoord-etcd-client", ca, ["clientAuth"])
    return TlsFiles(ca=ca[0], ca_key=ca[1], server_cert=server[0], server_key=server[1],
                    client_cert=client[0], client_key=client[1])


class _Etcd:
    """What EtcdFixture and EtcdCluster share, over their own call(path, body)
    and stop()."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def revision(self):
        return int(self.call("/v3/kv/range", {"key": b64("\0"), "count_only": True})["header"]["revision"])

    def compact(self, revision):
        """Compacts history up to `revision`; a revision already compacted is fine."""
        try:
            self.call("/v3/kv/compaction", {"revision": str(revision)})
        except urllib.error.HTTPError as e:
            if b"compacted" not in e.read():
                raise

    def get(self, key):
        """The value stored at `key` (bytes), or None."""
        kvs = self.call("/v3/kv/range", {"key": b64(key)}).get("kvs") or []
        return base64.b64decode(kvs[0]["value"]) if kvs else None


class EtcdFixture(_Etcd):
    def __init__(self, name="e2e", startup_timeout=20, tls=False, wait_for_gateway=True, host="127.0.0.1"):
        binary = find_binary()
        if not binary:
            raise RuntimeError("etcd binary not found (PATH, or $POOLCOORD_ETCD when set): install "
                               "Debian's etcd-server (scripts/install-deps.sh --test)")
        self.dir = tempfile.mkdtemp(prefix="poolcoord-etcd-", dir="/dev/shm")
        if tls is True:
            tls_dir = os.path.join(self.dir, "tls")
            os.mkdir(tls_dir)
            tls = make_tls_files(tls_dir)
        self.tls = tls or None
        self.ssl_context = None
        tls_args = []
        if self.tls:
            self.ssl_context = ssl.create_default_context(cafile=self.tls.ca)
            self.ssl_context.load_cert_chain(self.tls.client_cert, self.tls.client_key)
            tls_args = [f"--cert-file={self.tls.server_cert}", f"--key-file={self.tls.server_key}",
                        f"--trusted-ca-file={self.tls.ca}", "--client-cert-auth=true"]
        client_port = _free_port()
        peer_port = _free_port()
        while peer_port == client_port:
            peer_port = _free_port()
        self.endpoint = f"{'https' if self.tls else 'http'}://{host}:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self.log_path = os.path.join(self.dir, "etcd.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, f"--name={name}", f"--data-dir={self.dir}/data",
             f"--listen-client-urls={self.endpoint}", f"--advertise-client-urls={self.endpoint}",
             f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
             f"--initial-cluster={name}={peer}", "--initial-cluster-state=new", "--log-level=warn",
             *tls_args],
            stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        _live.add(self)
        deadline = time.time() + startup_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"etcd exited at startup ({self.proc.returncode}): {tail}")
            try:
                if self._ready(wait_for_gateway):
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"etcd did not become healthy within {startup_timeout} s: {tail}")

    def _ready(self, wait_for_gateway):
        if self.tls:
            # etcd's own /health handler, not the gateway's: it answers even
            # when the gateway is broken on purpose (wait_for_gateway=False).
            with urllib.request.urlopen(self.endpoint + "/health", timeout=1,
                                        context=self.ssl_context) as r:
                if json.loads(r.read()).get("health") != "true":
                    return False
        if wait_for_gateway:
            self.call("/v3/maintenance/status", {}, timeout=1)
        return True

    def call(self, path, body, timeout=10):
        """POSTs JSON to etcd's v3 gateway (with the client certificate in TLS
        mode); returns the decoded answer."""
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context) as r:
            return json.loads(r.read())

    def log_tail(self, n=2000):
        try:
            with open(self.log_path) as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        _live.discard(self)


class EtcdMember:
    """One member of an EtcdCluster: its process, data directory and URLs."""

    def __init__(self, name, ip, client_port, peer_port, data_dir, exec_prefix):
        self.name, self.ip = name, ip
        self.client_url = f"http://{ip}:{client_port}"
        self.peer_url = f"http://{ip}:{peer_port}"
        self.data_dir, self.exec_prefix = data_dir, exec_prefix
        self.log_path = os.path.join(os.path.dirname(data_dir), f"{name}.log")
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def call(self, path, body, timeout=5):
        req = urllib.request.Request(self.client_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())


class EtcdCluster(_Etcd):
    """`size` etcd members forming one cluster (see the module doc). Members run
    with --initial-cluster naming all of them; a restarted member rejoins from
    its data directory. Members get SIGKILL when the thread that started them
    ends (PR_SET_PDEATHSIG): start and restart them from one thread that lives
    as long as the cluster."""

    def __init__(self, size=3, net=None, startup_timeout=30, extra_args=()):
        binary = find_binary()
        if not binary:
            raise RuntimeError("etcd binary not found (PATH, or $POOLCOORD_ETCD when set): install "
                               "Debian's etcd-server (scripts/install-deps.sh --test)")
        self.binary, self.extra_args = binary, list(extra_args)
        self.dir = tempfile.mkdtemp(prefix="poolcoord-etcd-cluster-", dir="/dev/shm")
        self.members = []
        for i in range(size):
            name = f"m{i}"
            if net is not None:
                ip = net.add(f"e{i}")
                ports, prefix = (2379, 2380), net.exec_prefix(f"e{i}")
            else:
                ip, prefix = "127.0.0.1", []
                ports = (_free_port(), _free_port())
                while ports[0] == ports[1]:
                    ports = (ports[0], _free_port())
            self.members.append(EtcdMember(name, ip, *ports, os.path.join(self.dir, name, "data"),
                                           prefix))
        self.token = f"poolcoord-{os.getpid()}-{os.path.basename(self.dir)}"
        self.initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        _live.add(self)
        try:
            for i in range(size):
                self.start(i, wait=False)
            for i in range(size):
                self.wait_ready(i, startup_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def endpoints(self):
        return [m.client_url for m in self.members]

    @property
    def endpoint(self):
        return ",".join(self.endpoints)

    def start(self, i, wait=True, timeout=30):
        """Starts member i (again, on its data directory after a kill)."""
        m = self.members[i]
        os.makedirs(os.path.dirname(m.data_dir), exist_ok=True)
        log = open(m.log_path, "a")
        m.proc = subprocess.Popen(
            [*m.exec_prefix, self.binary, f"--name={m.name}", f"--data-dir={m.data_dir}",
             f"--listen-client-urls={m.client_url}", f"--advertise-client-urls={m.client_url}",
             f"--listen-peer-urls={m.peer_url}", f"--initial-advertise-peer-urls={m.peer_url}",
             f"--initial-cluster={self.initial_cluster}", "--initial-cluster-state=new",
             f"--initial-cluster-token={self.token}", "--log-level=warn", *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        log.close()
        if wait:
            self.wait_ready(i, timeout)

    def wait_ready(self, i, timeout=30):
        """Until member i answers a linearizable read (it has a leader and its
        gateway works)."""
        m = self.members[i]
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not m.alive():
                raise RuntimeError(f"etcd member {m.name} exited ({m.proc.returncode}): "
                                   f"{self.log_tail(i)}")
            try:
                m.call("/v3/kv/range", {"key": b64("\0"), "count_only": True}, timeout=2)
                return
            except (OSError, ValueError):
                time.sleep(0.1)
        raise RuntimeError(f"etcd member {m.name} not ready within {timeout} s: {self.log_tail(i)}")

    def kill(self, i):
        """SIGKILL member i (its data directory stays, for start(i))."""
        m = self.members[i]
        if m.alive():
            m.proc.kill()
            m.proc.wait()

    def status(self, i):
        """Member i's /v3/maintenance/status answer."""
        return self.members[i].call("/v3/maintenance/status", {})

    def leader(self):
        """The index of the member every live member names as leader, or None."""
        ids, leaders = {}, set()
        for i, m in enumerate(self.members):
            if not m.alive():
                continue
            try:
                st = self.status(i)
            except (OSError, ValueError):
                return None
            ids[st["header"]["member_id"]] = i
            leaders.add(st.get("leader"))
        if len(leaders) != 1:
            return None
        return ids.get(leaders.pop())

    def call(self, path, body, timeout=10):
        """POSTs to the first live member that answers; the last error otherwise."""
        error = None
        for m in self.members:
            if not m.alive():
                continue
            try:
                return m.call(path, body, timeout)
            except urllib.error.HTTPError:
                raise
            except (OSError, ValueError) as e:
                error = e
        raise error or OSError("no etcd member is running")

    def log_tail(self, i, n=2000):
        try:
            with open(self.members[i].log_path) as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        for i in range(len(self.members)):
            self.kill(i)
        shutil.rmtree(self.dir, ignore_errors=True)
        _live.discard(self)


class Compactor:
    """Keeps etcd's history to the last `window` revisions (see the module doc)."""

    def __init__(self, etcd, window):
        self.etcd, self.window = etcd, window
        self.compacted = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _follow(self, revision):
        target = revision - self.window
        if target > self.compacted:
            self.etcd.compact(target)
            self.compacted = target

    def _run(self):
        body = json.dumps({"create_request": {"key": b64("\0"), "range_end": b64("\0")}}).encode()
        while not self.stopping:
            try:
                req = urllib.request.Request(self.etcd.endpoint + "/v3/watch", data=body, method="POST")
                with urllib.request.urlopen(req, timeout=3600, context=self.etcd.ssl_context) as r:
                    for line in r:
                        if self.stopping:
                            return
                        msg = json.loads(line).get("result", {})
                        rev = int(msg.get("header", {}).get("revision", 0))
                        if rev:
                            self._follow(rev)
            except (OSError, ValueError):
                if self.stopping:
                    return
                time.sleep(0.2)

    def stop(self):
        self.stopping = True


@atexit.register
def _stop_all():
    for fixture in list(_live):
        fixture.stop()
