#!/usr/bin/env python3
"""Where a Go server's CPU goes, from a CPU profile of /debug/pprof/profile,
without Go's toolchain (this machine has none): the profile's protobuf
(github.com/google/pprof proto/profile.proto) is read here, and the top
functions are printed by flat and by cumulative share, with the share of a few
areas named by package (JSON, protobuf, TLS, the garbage collector, field
management, admission, the watch cache, etcd's client, ...).

    bench/pprof_top.py PROFILE [--top 25]

PROFILE is the gzipped protobuf kube-apiserver answers at
/debug/pprof/profile?seconds=N (bench/forwarder_scale.py --profile-at takes them).
"""

import argparse
import gzip
import sys
from collections import Counter

# Areas, in order: a stack counts in the first one it passes through. The
# patterns name work, never a wrapper that every request passes through (the
# aggregator's handler, priority and fairness's Finish, the cacher's
# GuaranteedUpdate), or everything would count there.
AREAS = [
    ("garbage collector", ("runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.bgsweep", "runtime.markroot")),
    ("admission (CEL, webhooks, policies)", ("k8s.io/apiserver/pkg/admission", "cel-go", "k8s.io/apiserver/pkg/cel")),
    ("field management (managedFields)", ("managedfields", "structured-merge-diff")),
    ("watch cache and watchers", ("handlers.(*WatchServer)", "cacher.(*cacheWatcher)", "cacher.(*cachingObject)",
                                  "cacher.(*watchCache)", "cacher.(*Cacher).dispatch", "cacher.(*Cacher).startCaching",
                                  "client-go/tools/cache", "watch.(*StreamWatcher)")),
    ("etcd client (gRPC)", ("go.etcd.io/etcd/client", "google.golang.org/grpc")),
    ("JSON", ("encoding/json", "sigs.k8s.io/json", "json-iterator", "runtime/serializer/json")),
    ("protobuf", ("gogo/protobuf", "runtime/serializer/protobuf", "google.golang.org/protobuf", ".Unmarshal", ".Marshal")),
    ("TLS and crypto", ("crypto/", "vendor/golang.org/x/crypto")),
    ("authentication and authorization", ("pkg/authentication", "pkg/authorization", "plugin/pkg/auth")),
    ("priority and fairness", ("queueset.(*queueSet)", "flowcontrol.(*configController).startRequest")),
    ("the aggregator's proxy (requests and watches of aggregated APIs)", ("proxy.(*UpgradeAwareHandler)",
                                                                           "httputil.(*ReverseProxy)")),
    ("the rest of request handling (registry, filters, conversion)", ("k8s.io/apiserver/pkg/endpoints",
                                                                       "k8s.io/apiserver/pkg/registry")),
    ("HTTP and network", ("net/http", "golang.org/x/net/http2", "internal/poll", "net.(*conn)", "syscall.")),
    ("memory allocation", ("runtime.mallocgc", "runtime.growslice", "runtime.newobject", "runtime.makeslice")),
    ("scheduler and runtime", ("runtime.",)),
]


def varint(b, i):
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        if c < 0x80:
            return value, i
        shift += 7


def fields(b):
    """(field number, wire type, value) of a message: ints, or bytes for wire type 2."""
    i, n = 0, len(b)
    while i < n:
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 2:
            ln, i = varint(b, i)
            v, i = b[i:i + ln], i + ln
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {wt} at {i}")
        yield num, wt, v


def ints(wt, v):
    """A repeated integer field's values, packed (wire type 2) or not."""
    if wt != 2:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings, samples, locations, functions, types = [], [], {}, {}, []
    for num, wt, v in fields(data):
        if num == 6:
            strings.append(v.decode("utf-8", "replace"))
        elif num == 1:
            types.append({n: x for n, _, x in fields(v)})
        elif num == 2:
            locs, vals = [], []
            for n, w, x in fields(v):
                if n == 1:
                    locs += ints(w, x)
                elif n == 2:
                    vals += [signed(y) for y in ints(w, x)]
            samples.append((locs, vals))
        elif num == 4:
            loc_id, funcs = 0, []
            for n, _, x in fields(v):
                if n == 1:
                    loc_id = x
                elif n == 4:
                    funcs.append(next((y for m, _, y in fields(x) if m == 1), 0))
            locations[loc_id] = funcs  # innermost (inlined) first
        elif num == 5:
            f = {n: x for n, _, x in fields(v)}
            functions[f.get(1, 0)] = f.get(2, 0)
    names = {fid: strings[s] for fid, s in functions.items()}
    kinds = [strings[t.get(1, 0)] for t in types]
    return samples, locations, names, kinds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--within", default="", help="also the top cumulative functions of stacks through this")
    a = ap.parse_args()
    samples, locations, names, kinds = read(a.profile)
    col = kinds.index("cpu") if "cpu" in kinds else len(kinds) - 1
    flat, cum, areas, within = Counter(), Counter(), Counter(), Counter()
    total = 0
    for locs, vals in samples:
        v = vals[col]
        total += v
        stack = [names.get(f, "?") for loc in locs for f in locations.get(loc, [])]
        if stack:
            flat[stack[0]] += v
        for fn in set(stack):
            cum[fn] += v
        if a.within and any(a.within in fn for fn in stack):
            for fn in set(stack):
                within[fn] += v
        area = next((name for name, pats in AREAS for fn in stack if any(p in fn for p in pats)), "other")
        areas[area] += v
    if not total:
        print("no samples")
        return 1
    print(f"{total / 1e9:.2f} s of CPU in {len(samples)} stacks")
    print("\nby area (each stack counted in the first area of the list it passes through):")
    for name, v in areas.most_common():
        print(f"  {100 * v / total:5.1f}%  {name}")
    shown = [("flat", flat), ("cumulative", cum)]
    if a.within:
        shown.append((f"cumulative, stacks through {a.within!r}", within))
    for title, counter in shown:
        print(f"\ntop {a.top} by {title}:")
        for fn, v in counter.most_common(a.top):
            print(f"  {100 * v / total:5.1f}%  {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
