"""A real etcd for the end-to-end tests: Debian's etcd-server binary on 127.0.0.1,
free client and peer ports, data on tmpfs (/dev/shm), killed and removed at the
end — the Python twin of tests/store/etcd_fixture.h.

    etcd = EtcdFixture()          # raises RuntimeError with etcd's log tail when
    etcd.endpoint                 # it cannot start; "http://127.0.0.1:<port>"
    etcd.revision()               # etcd's current revision (header.revision)
    etcd.compact(rev)             # compact the key-value history up to rev
    etcd.stop()

$POOLCOORD_ETCD names another binary. Nothing is skipped: without an etcd binary
the constructor fails with the reason. etcd never outlives the test: it gets
SIGKILL when the Python process (the thread that started it) dies
(PR_SET_PDEATHSIG), and every fixture still running at interpreter exit is
stopped.

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


class EtcdFixture:
    def __init__(self, name="e2e", startup_timeout=20):
        binary = find_binary()
        if not binary:
            raise RuntimeError("etcd binary not found (PATH, or $POOLCOORD_ETCD when set): install "
                               "Debian's etcd-server (scripts/install-deps.sh --test)")
        self.dir = tempfile.mkdtemp(prefix="poolcoord-etcd-", dir="/dev/shm")
        client_port = _free_port()
        peer_port = _free_port()
        while peer_port == client_port:
            peer_port = _free_port()
        self.endpoint = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self.log_path = os.path.join(self.dir, "etcd.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, f"--name={name}", f"--data-dir={self.dir}/data",
             f"--listen-client-urls={self.endpoint}", f"--advertise-client-urls={self.endpoint}",
             f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
             f"--initial-cluster={name}={peer}", "--initial-cluster-state=new", "--log-level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        _live.add(self)
        deadline = time.time() + startup_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"etcd exited at startup ({self.proc.returncode}): {tail}")
            try:
                self.call("/v3/maintenance/status", {}, timeout=1)
                return
            except (OSError, ValueError):
                time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"etcd did not become healthy within {startup_timeout} s: {tail}")

    def call(self, path, body, timeout=10):
        """POSTs JSON to etcd's v3 gateway; returns the decoded answer."""
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


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
                with urllib.request.urlopen(req, timeout=3600) as r:
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
