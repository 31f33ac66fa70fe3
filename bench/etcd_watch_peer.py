#!/usr/bin/env python3
"""etcd's own write-to-watch latency, the control for the etcd3 fan-out (bench/run.sh section 6).

At a fixed rate, PUTs values of a DelegatedLease's size under a prefix of their own
through etcd's JSON gateway (POST /v3/kv/put, as the server writes) and times, for
each write, when its event reaches two watchers of that prefix on the same etcd:
`etcdctl watch` (gRPC, as kube-apiserver watches) and a /v3/watch stream of the JSON
gateway (as the server's upstream watch reads it). Run beside a fan-out run, it shows
what the machine's load alone adds between an etcd write and a watcher of it.

    etcd_watch_peer.py --endpoint http://127.0.0.1:2379 --rate 20 --duration 10 --out FILE

Standard library only. Prints and writes JSON: per watcher the p50/p90/p99/max in ms
from sending the PUT to receiving its event, the events seen, and the PUT latency.
"""
import argparse
import base64
import http.client
import json
import re
import subprocess
import threading
import time
import urllib.parse

REV = re.compile(rb'"mod_revision":"?(\d+)')


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return round(v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))], 2)


def summary(values):
    return {"p50_ms": pct(values, 50), "p90_ms": pct(values, 90), "p99_ms": pct(values, 99),
            "max_ms": round(max(values), 2) if values else None, "n": len(values)}


def b64(s):
    return base64.b64encode(s.encode()).decode()


def prefix_end(prefix):
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--value-bytes", type=int, default=1200)
    ap.add_argument("--prefix", default="/bench-watch-peer/")
    ap.add_argument("--etcdctl", default="etcdctl")
    ap.add_argument("--out")
    args = ap.parse_args()
    url = urllib.parse.urlparse(args.endpoint)
    seen = {"etcdctl": {}, "gateway": {}}  # revision -> monotonic time of arrival
    ready = {"etcdctl": threading.Event(), "gateway": threading.Event()}

    def record(name, line, now):
        for m in REV.finditer(line):
            seen[name].setdefault(int(m.group(1)), now)

    # gRPC: etcdctl prints one JSON WatchResponse per line, unbuffered.
    ctl = subprocess.Popen([args.etcdctl, "--endpoints", f"{url.hostname}:{url.port}", "watch",
                            "--prefix", args.prefix, "-w", "json"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def read_ctl():
        for line in ctl.stdout:
            now = time.monotonic()
            ready["etcdctl"].set()
            record("etcdctl", line, now)

    # The JSON gateway's streaming watch, as store/etcd3_store.cc opens it.
    def read_gateway():
        conn = http.client.HTTPConnection(url.hostname, url.port)
        body = json.dumps({"create_request": {"key": b64(args.prefix),
                                              "range_end": b64(prefix_end(args.prefix))}})
        conn.request("POST", "/v3/watch", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        while True:
            line = resp.readline()
            if not line:
                return
            now = time.monotonic()
            if b'"created":true' in line:
                ready["gateway"].set()
            record("gateway", line, now)

    threading.Thread(target=read_ctl, daemon=True).start()
    threading.Thread(target=read_gateway, daemon=True).start()
    ready["gateway"].wait(10)
    # etcdctl prints nothing until the first event: one write tells it is watching.
    conn = http.client.HTTPConnection(url.hostname, url.port)

    def put(key, value):
        conn.request("POST", "/v3/kv/put", json.dumps({"key": b64(key), "value": b64(value)}),
                     {"Content-Type": "application/json"})
        return int(json.loads(conn.getresponse().read())["header"]["revision"])

    for _ in range(50):
        put(args.prefix + "warmup", "x")
        if ready["etcdctl"].wait(0.2):
            break
    value = "v" * args.value_bytes
    writes = []  # (sent, done, revision)
    t0 = time.monotonic()
    i = 0
    while True:
        due = t0 + i / args.rate
        if due >= t0 + args.duration:
            break
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sent = time.monotonic()
        rev = put(f"{args.prefix}k{i % 100}", value)
        writes.append((sent, time.monotonic(), rev))
        i += 1
    time.sleep(2)
    ctl.terminate()
    ctl.wait()
    result = {"rate": args.rate, "writes": len(writes), "value_bytes": args.value_bytes,
              "put": summary([(d - s) * 1000 for s, d, _ in writes])}
    for name in seen:
        lat = [(seen[name][r] - s) * 1000 for s, _, r in writes if r in seen[name]]
        result[name] = summary(lat)
        result[name]["missed"] = len(writes) - len(lat)
    text = json.dumps(result)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
