#!/usr/bin/env python3
"""Connection costs of poolcoord-apiserver (issue 12, "Connections"): how long the
server holds clients that send half a request header and stall, and what idle TLS
connections cost in resident memory while open and after they close.

    bench/connections.py --binary build/poolcoord-apiserver [--stalled 200] [--idle 2000]
    bench/connections.py --binary old/poolcoord-apiserver --binary new/poolcoord-apiserver

With several --binary, each is measured in turn (a fresh server each), so a
before/after comparison runs on the same machine in the same minutes.

Starts the server standalone on a free 127.0.0.1 port (generated certificates in a
temporary directory, memory store), then:

1. stalled: opens --stalled TLS connections, each sends
   "GET /version HTTP/1.1\\r\\nHost: x\\r\\n" (no blank line) and then nothing; records
   when the server closes each one (bounded by --stall-limit seconds);
2. idle: opens --idle TLS connections, each sends one GET /version and reads the
   answer (a keep-alive connection as client-go pools them), then stays idle;
   VmRSS of the server (from /proc/<pid>/status) before, with all open, and after
   the client closed them all (sampled until it is stable for 3 s, at most 20 s).

Prints one JSON object (also written to --out). Standard library only; the client
runs in this process, so the file-descriptor limit is raised to its hard limit.
"""
import argparse
import json
import os
import resource
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

# The end-to-end tests' raw-TLS helpers: one way to open, and to watch the
# server close, a hand-written client connection.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from harness import await_server_closes, free_port, tls_socket  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def mib(kib):
    return round(kib / 1024.0, 1)


class Server:
    def __init__(self, binary, extra):
        self.dir = tempfile.mkdtemp(prefix="poolcoord-conn-bench-")
        self.port = free_port()
        self.ca = os.path.join(self.dir, "certs", "ca.crt")
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(
            [binary, f"--secure-port={self.port}", "--bind-address=127.0.0.1",
             f"--cert-dir={self.dir}/certs", f"--write-kubeconfig={self.dir}/admin.kubeconfig",
             *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            if os.path.exists(self.ca):
                try:
                    s = self.connect()
                    s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        s.close()
                        return
                    s.close()
                except OSError:
                    pass
            time.sleep(0.1)
        raise RuntimeError("server not ready within 30 s")

    def context(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        return ctx

    def connect(self, ctx=None, timeout=10):
        return tls_socket(self.port, ctx or self.context(), timeout)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def stalled(server, n, limit):
    ctx = server.context()
    conns = []
    for _ in range(n):
        s = server.connect(ctx)
        s.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n")
        s.setblocking(False)
        conns.append(s)
    t0 = time.monotonic()
    rss_held = rss_kib(server.proc.pid)
    # Answers are not expected; a stalled client counts only when closed.
    held, _, still_open = await_server_closes(conns, t0, limit)
    return {
        "connections": n,
        "closed_by_server": len(held),
        "still_open_at_limit": still_open,
        "limit_s": limit,
        "held_min_s": round(min(held), 1) if held else None,
        "held_median_s": round(statistics.median(held), 1) if held else None,
        "held_max_s": round(max(held), 1) if held else None,
        "rss_while_held_mib": mib(rss_held),
    }


def idle(server, n):
    ctx = server.context()
    pid = server.proc.pid
    before = rss_kib(pid)
    conns = []
    t0 = time.monotonic()
    for _ in range(n):
        s = server.connect(ctx)
        s.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("server closed a fresh keep-alive connection")
            data += chunk
        conns.append(s)
    opened_s = time.monotonic() - t0
    time.sleep(2)
    with_open = rss_kib(pid)
    for s in conns:
        s.close()
    # After closing: sample until stable for 3 s (the server notices the EOF on
    # its I/O threads), at most 20 s.
    samples = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        samples.append(rss_kib(pid))
        if len(samples) >= 7 and max(samples[-7:]) - min(samples[-7:]) < 256:
            break
        time.sleep(0.5)
    after = samples[-1]
    return {
        "connections": n,
        "open_seconds": round(opened_s, 1),
        "rss_before_mib": mib(before),
        "rss_open_mib": mib(with_open),
        "rss_after_close_mib": mib(after),
        "per_connection_kib": round((with_open - before) / n, 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", action="append", required=True)
    ap.add_argument("--stalled", type=int, default=200)
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--stall-limit", type=float, default=150.0,
                    help="seconds to wait for the server to close stalled clients")
    ap.add_argument("--out")
    ap.add_argument("server_args", nargs="*", help="extra flags for the server (after --)")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = []
    for binary in a.binary:
        server = Server(os.path.abspath(binary), a.server_args)
        try:
            result = {"binary": binary, "rss_start_mib": mib(rss_kib(server.proc.pid))}
            if a.stalled:
                result["stalled"] = stalled(server, a.stalled, a.stall_limit)
            if a.idle:
                result["idle"] = idle(server, a.idle)
        finally:
            server.stop()
        print(json.dumps(result), file=sys.stderr, flush=True)
        results.append(result)
    text = json.dumps(results[0] if len(results) == 1 else results, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
