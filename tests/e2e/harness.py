"""Shared pieces of the end-to-end tests: start the real poolcoord-apiserver on a
free 127.0.0.1 port, talk to it over HTTPS, run the real kubectl against it.

Standard library only. Each test file is a script run by ctest with
`--binary <path to poolcoord-apiserver>`; it prints one line per case and ends with
"N passed, N failed".
"""
import argparse
import base64
import http.client
import json
import os
import selectors
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

GV = "coordination.pool/v1alpha1"
BASE = "/apis/" + GV
TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
MEMBERSHIP = {"pools": {"hangzhou": ["hz-1", "hz-2", "hz-3", "hz-4"],
                        "beijing": ["bj-1", "bj-2", "bj-3"]}}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def kubectl_binary():
    """$KUBECTL, else kubectl.1.32 beside the dispatcher on PATH, else kubectl."""
    if os.environ.get("KUBECTL"):
        return os.environ["KUBECTL"]
    exe = shutil.which("kubectl")
    if exe:
        pinned = os.path.join(os.path.dirname(os.path.realpath(exe)), "kubectl.1.32")
        if os.access(pinned, os.X_OK):
            return pinned
    return exe


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return ""


class Client:
    def __init__(self, port, ca, cert=None, token=None, host="127.0.0.1"):
        self.port, self.token, self.host = port, token, host
        self.ctx = ssl.create_default_context(cafile=ca)
        if cert:
            self.ctx.load_cert_chain(*cert)
        self.conn = None

    def connect(self, timeout=20):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def request(self, method, path, body=None, ctype="application/json", accept="application/json",
                headers=None):
        hdrs = {"Accept": accept} if accept else {}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            hdrs["Content-Type"] = ctype
        hdrs.update(headers or {})
        for attempt in range(2):
            if self.conn is None:
                self.conn = self.connect()
            try:
                self.conn.request(method, path, body=body, headers=hdrs)
                r = self.conn.getresponse()
                data = r.read()
                return Response(r.status, r.getheaders(), data.decode("utf-8", "replace"))
            except (http.client.HTTPException, ConnectionError, ssl.SSLError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def watch(self, path, timeout=20, accept="application/json"):
        conn = self.connect(timeout)
        hdrs = {"Accept": accept}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        conn.request("GET", path, headers=hdrs)
        r = conn.getresponse()

        def events():
            while True:
                line = r.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    yield json.loads(line)
        return r, events(), conn


_ETCD = {}


def store_args(extra_args):
    """Server flags for the store that $POOLCOORD_E2E_STORE names: none for the
    memory store (the default); for "etcd3", one etcd per test process
    (tests/e2e/etcd_fixture.py, killed when the process ends) and a key prefix of
    its own for each Server. A --watch-history-size=N among the Server's flags is
    emulated by compacting etcd to its last N revisions (etcd_fixture.Compactor),
    so the suites' 410 Expired cases hold on etcd too."""
    backend = os.environ.get("POOLCOORD_E2E_STORE", "memory")
    if backend == "memory" or any(a.startswith("--storage-backend") for a in extra_args):
        return []
    if backend != "etcd3":
        raise RuntimeError(f"POOLCOORD_E2E_STORE={backend}: want memory or etcd3")
    from etcd_fixture import Compactor, EtcdFixture
    if "etcd" not in _ETCD:
        _ETCD["etcd"] = EtcdFixture()
    etcd = _ETCD["etcd"]
    for a in extra_args:
        if a.startswith("--watch-history-size=") and "compactor" not in _ETCD:
            _ETCD["compactor"] = Compactor(etcd, int(a.split("=", 1)[1]))
    return ["--storage-backend=etcd3", f"--etcd-servers={etcd.endpoint}",
            f"--etcd-prefix=/e2e/{uuid.uuid4().hex[:8]}"]


class Server:
    """poolcoord-apiserver started standalone: it generates its own CA, serving and
    admin certificates and writes the admin kubeconfig, as README command 1 does.
    `membership` replaces MEMBERSHIP (every node of it gets a token
    "<node>-token"); `host` is the address it listens on and is reached at, and
    `exec_prefix` runs it there (e.g. inside a network namespace: netns.py)."""

    def __init__(self, binary, extra_args=(), tokens=None, membership_file=True, membership=None,
                 host="127.0.0.1", exec_prefix=()):
        self.workdir = tempfile.mkdtemp(prefix="poolcoord-e2e-")
        self.host, self.exec_prefix = host, list(exec_prefix)
        self.port = free_port()
        self.cert_dir = os.path.join(self.workdir, "certs")
        self.kubeconfig = os.path.join(self.workdir, "admin.kubeconfig")
        self.membership = os.path.join(self.workdir, "membership.yaml")
        membership = membership or MEMBERSHIP
        with open(self.membership, "w") as f:
            json.dump(membership, f)
        self.tokens = {"admin-token": ("token-admin", ["system:masters"]),
                       "viewer-token": ("viewer", [])}
        for node in sorted({n for nodes in membership["pools"].values() for n in nodes}):
            self.tokens[f"{node}-token"] = (f"system:node:{node}", ["system:nodes"])
        self.tokens.update(tokens or {})
        token_file = os.path.join(self.workdir, "tokens.csv")
        with open(token_file, "w") as f:
            for tok, (user, groups) in self.tokens.items():
                f.write(f'{tok},{user},uid-{user},"{",".join(groups)}"\n')
        self.args = [*self.exec_prefix, binary, f"--secure-port={self.port}", f"--bind-address={host}",
                     f"--cert-dir={self.cert_dir}", f"--write-kubeconfig={self.kubeconfig}",
                     f"--token-auth-file={token_file}",
                     *([f"--pool-membership-file={self.membership}"] if membership_file else []),
                     # The tests' own DelegatedLeases carry no proofs (issue 15): the server
                     # counts them instead of refusing them; a test may say otherwise.
                     "--delegation-proof=optional",
                     *store_args(extra_args), *extra_args]
        self.log_path = os.path.join(self.workdir, "server.log")
        self.start()

    def start(self):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.read_log()}")
            if self.wrote_start_files():
                try:
                    c = Client(self.port, self.ca, host=self.host)
                    if c.request("GET", "/readyz", accept=None).status == 200:
                        break
                except OSError:
                    pass
            time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError("server not ready within 30 s:\n" + self.read_log())
        self._write_admin_cert()

    @property
    def ca(self):
        return os.path.join(self.cert_dir, "ca.crt")

    def wrote_start_files(self):
        """Whether the server has written what it writes before it serves: its
        kubeconfig and generated CA (a subclass on certificates of its own says
        True)."""
        return os.path.exists(self.kubeconfig) and os.path.exists(os.path.join(self.cert_dir, "ca.crt"))

    def _write_admin_cert(self):
        # The kubeconfig embeds the admin certificate; unpack it for Python's ssl.
        with open(self.kubeconfig) as f:
            text = f.read()
        try:
            cfg = json.loads(text)
            user = cfg["users"][0]["user"]
        except ValueError:
            user = {}
            for line in text.splitlines():
                line = line.strip()
                for key in ("client-certificate-data", "client-key-data", "client-certificate", "client-key"):
                    if line.startswith(key + ":"):
                        user[key] = line.split(":", 1)[1].strip().strip('"')
        paths = []
        for key in ("client-certificate", "client-key"):
            if key + "-data" in user:
                p = os.path.join(self.workdir, key.replace("client-", "admin-") + ".pem")
                with open(p, "wb") as f:
                    f.write(base64.b64decode(user[key + "-data"]))
                paths.append(p)
            else:
                paths.append(user[key])
        self.admin_cert = tuple(paths)

    def read_log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def admin(self):
        return Client(self.port, self.ca, cert=self.admin_cert, host=self.host)

    def token(self, tok):
        return Client(self.port, self.ca, token=tok, host=self.host)

    def anonymous(self):
        return Client(self.port, self.ca, host=self.host)

    def kubectl(self, *args, stdin=None, env=None, timeout=60):
        cmd = [kubectl_binary(), "--kubeconfig", self.kubeconfig,
               "--cache-dir", os.path.join(self.workdir, "kube-cache"), *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Stops the server; returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def cleanup(self):
        shutil.rmtree(self.workdir, ignore_errors=True)


class Failed(AssertionError):
    pass


def expect(cond, msg):
    if not cond:
        raise Failed(msg)


def expect_status(r, code, reason=None):
    expect(r.status == code, f"want HTTP {code}, got {r.status}: {r.body[:400]}")
    if code >= 400:
        s = r.json()
        expect(s.get("kind") == "Status" and s.get("apiVersion") == "v1", f"not a v1 Status: {r.body[:300]}")
        expect(s.get("code") == code and s.get("status") == "Failure", f"Status code wrong: {r.body[:300]}")
        expect(s.get("message"), "Status without message")
        if reason:
            expect(s.get("reason") == reason, f"want reason {reason}, got {s.get('reason')}: {r.body[:300]}")
    return r


def wait_for(what, fn, timeout=20, every=0.2):
    """Polls fn until it returns something truthy; returns it, or fails naming `what`."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last})")


def tls_socket(port, ctx, timeout=10):
    """A raw TLS socket to 127.0.0.1:port, for tests (and bench/connections.py)
    that write HTTP bytes by hand: half requests, stalled or idle clients."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    # Without it, Nagle holds the request behind the handshake's last flight
    # until the server's delayed ACK: 40 ms per connection.
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def await_server_closes(socks, t0, limit_s):
    """Waits until the server has closed each of `socks` (TLS sockets; made
    non-blocking here), at most until `limit_s` seconds after `t0`
    (time.monotonic()). Returns (closed_after, answers, still_open): the seconds
    after t0 at which each close was seen, the first bytes of every answer a
    socket got instead (it stays watched), and how many were still open at the
    limit. Closes every socket before it returns."""
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    open_ = set(socks)
    closed_after, answers = [], []
    while open_ and time.monotonic() - t0 < limit_s:
        for key, _ in sel.select(timeout=1.0):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except ssl.SSLWantReadError:
                continue
            except OSError:
                data = b""
            if data:
                answers.append(data[:80])
                continue
            closed_after.append(time.monotonic() - t0)
            sel.unregister(s)
            s.close()
            open_.discard(s)
    for s in open_:
        sel.unregister(s)
        s.close()
    sel.close()
    return closed_after, answers, len(open_)


def sim_beside(server_binary):
    """The poolcoord-sim built beside `server_binary` (the same build directory),
    for the tests that drive the simulator; None, after printing why, when it
    is not there."""
    sim = os.path.join(os.path.dirname(os.path.abspath(server_binary)), "poolcoord-sim")
    if not os.access(sim, os.X_OK):
        print(f"FAIL: {sim} not found; build the poolcoord-sim target", file=sys.stderr)
        return None
    return sim


def server_log_tail(work_dir):
    """The last 2,000 characters of the server.log poolcoord-sim leaves in its
    --work-dir, as a failure message; None when there is none."""
    log = os.path.join(work_dir, "server.log")
    if not os.path.exists(log):
        return None
    with open(log) as f:
        return "server.log tail:\n" + f.read()[-2000:]


def verdict(failures):
    """Prints each failure (stderr) and PASS or FAIL; the exit status of a
    script-style test: 0 when nothing failed."""
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print("PASS" if not failures else "FAIL")
    return 0 if not failures else 1


def uniq(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def microtime(offset_s=0.0):
    from datetime import datetime, timedelta, timezone
    return (datetime.now(timezone.utc) + timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pool_lease(name, holder=None, duration=15, labels=None):
    spec = {"leaseDurationSeconds": duration}
    if holder:
        now = microtime()
        spec.update(holderIdentity=holder, acquireTime=now, renewTime=now, leaseTransitions=0)
    md = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": GV, "kind": "PoolLease", "metadata": md, "spec": spec}


def run_one(case, *subjects):
    """Runs case(*subjects), printing PASS or FAIL with its time; True when it passed."""
    t0 = time.time()
    try:
        case(*subjects)
        print(f"PASS {case.__name__} ({time.time() - t0:.1f}s)", flush=True)
        return True
    except Exception as e:  # any exception is a failed case
        print(f"FAIL {case.__name__} ({time.time() - t0:.1f}s): {type(e).__name__}: {e}", flush=True)
        traceback.print_exc(limit=4)
        return False


def e2e_args():
    """The command line of every end-to-end script, as ctest runs it: --binary
    (poolcoord-apiserver; made absolute) and --keep (print the server logs even
    when every case passed)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    return a


def run_cases(cases, server_factory):
    """Runs each case(server) and prints the closing tally; returns the exit code."""
    a = e2e_args()
    passed = failed = 0
    server = server_factory(a.binary)
    try:
        for case in cases:
            if run_one(case, server):
                passed += 1
            else:
                failed += 1
            if server.proc.poll() is not None and case is not cases[-1]:
                print(f"server exited ({server.proc.returncode}) after {case.__name__}:\n{server.read_log()}")
                failed += 1
                server.start()
    finally:
        server.stop()
        if failed or a.keep:
            print("server log tail:\n" + server.read_log())
        server.cleanup()
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
