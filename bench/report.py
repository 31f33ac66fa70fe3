#!/usr/bin/env python3
"""Turns the JSON files bench/run.sh left in a results directory into Markdown:
every figure of the run, every ratio computed from figures of the same run, and
the targets of issue 6 as met or not. Usage: report.py RESULTS_DIR > results.md
"""
import glob
import json
import os
import re
import sys

D = sys.argv[1]


def load(name, default=None):
    try:
        with open(os.path.join(D, name)) as f:
            text = f.read().strip()
        return json.loads(text) if text else default
    except (OSError, ValueError):
        return default


def ms(us):
    return "–" if us is None else f"{us / 1000:.2f} ms"


def rate(x):
    return "–" if x is None else f"{x:,.0f}/s"


def cpu(us):
    return f"{us:.1f} µs" if us is not None else "–"


def met(ok):
    return "**met**" if ok else "**not met**"


m = load("machine.json", {})
s = m.get("settings", {})
out = []
w = out.append
w(f"Run of {m.get('date', '?')} · {m.get('nproc', '?')} CPUs ({m.get('cpu', '?')}) · "
  f"{m.get('mem_kib', 0) / 1048576:.1f} GiB RAM · kernel {m.get('kernel', '?')} · "
  f"git {m.get('git', '?')} · etcd {m.get('etcd', '?')}, nginx {m.get('nginx', '?')}, wrk {m.get('wrk', '?')}")
w(f"Load average at start {m.get('loadavg_start', '?')}, at end {load('loadavg-end.json', '?')} "
  "(the machine is shared: compare ratios, not absolute figures).")
w("")
targets = []  # (target, figure, ok)

# ---- 1. renewals, closed loop
rounds = sorted({int(x) for x in (re.match(r".*/r(\d+)-renewals\.json$", p).group(1)
                                  for p in glob.glob(os.path.join(D, "r*-renewals.json")))})
peers = [("renewals", "poolcoord DelegatedLease renewals (merge-PATCH, HTTPS)"),
         ("etcd-https", "etcd 3.4 put, v3 JSON gateway, HTTPS"),
         ("etcd-http", "etcd 3.4 put, v3 JSON gateway, plain HTTP"),
         ("nginx", "nginx fixed 200, HTTPS"),
         ("hello", "Boost.Beast hello-world, HTTPS")]
if rounds:
    w(f"### 1. DelegatedLease renewals vs. peers — closed loop (wrk, {s.get('connections')} connections, "
      f"{s.get('threads')} threads, {s.get('seconds')} s per run, {len(rounds)} rounds alternating)")
    w("")
    w("| run | round | rate | p50 | p99 | p99.9 | max | non-2xx | socket errors | server CPU per request |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    sums = {k: 0.0 for k, _ in peers}
    for r in rounds:
        for k, label in peers:
            j = load(f"r{r}-{k}.json", {}) or {}
            sums[k] += j.get("rps", 0.0)
            w(f"| {label} | {r} | {rate(j.get('rps'))} | {ms(j.get('p50_us'))} | {ms(j.get('p99_us'))} | "
              f"{ms(j.get('p999_us'))} | {ms(j.get('max_us'))} | {j.get('non2xx3xx', '–')} | "
              f"{j.get('socket_errors', '–')} | {cpu(j.get('server_cpu_us_per_req'))} |")
    w("")
    w("Ratios (each round's renewal rate over the peer's rate in the same round; 'all' = sum over sum):")
    w("")
    w("| ratio | " + " | ".join(f"round {r}" for r in rounds) + " | all |")
    w("|---|" + "---|" * (len(rounds) + 1))

    def ratio_row(peer, label):
        cells = []
        for r in rounds:
            a = (load(f"r{r}-renewals.json", {}) or {}).get("rps")
            b = (load(f"r{r}-{peer}.json", {}) or {}).get("rps")
            cells.append(f"{a / b:.2f}" if a and b else "–")
        allr = sums["renewals"] / sums[peer] if sums[peer] else None
        w(f"| {label} | " + " | ".join(cells) + f" | {allr:.2f} |" if allr else f"| {label} | – |")
        return allr

    r_etcd_tls = ratio_row("etcd-https", "renewals / etcd put (HTTPS)")
    r_etcd = ratio_row("etcd-http", "renewals / etcd put (HTTP)")
    r_nginx = ratio_row("nginx", "renewals / nginx TLS 200")
    ratio_row("hello", "renewals / Beast hello TLS")
    hn = [(load(f"r{r}-hello.json", {}) or {}).get("rps", 0) / max(1, (load(f"r{r}-nginx.json", {}) or {}).get("rps", 1))
          for r in rounds]
    if sums["nginx"]:
        w("| (for scale) Beast hello / nginx | " + " | ".join(f"{x:.2f}" for x in hn) +
          f" | {sums['hello'] / sums['nginx']:.2f} |")

    def cpu_ratio_row(peer, label):
        # Server CPU per request, the peer's over ours: independent of the client's share.
        cells, a_all, b_all = [], [], []
        for r in rounds:
            a = (load(f"r{r}-renewals.json", {}) or {}).get("server_cpu_us_per_req")
            b = (load(f"r{r}-{peer}.json", {}) or {}).get("server_cpu_us_per_req")
            cells.append(f"{b / a:.2f}" if a and b else "–")
            if a and b:
                a_all.append(a)
                b_all.append(b)
        allr = sum(b_all) / sum(a_all) if a_all else None
        w(f"| {label} | " + " | ".join(cells) + (f" | {allr:.2f} |" if allr else " | – |"))

    cpu_ratio_row("etcd-https", "server CPU per request: etcd put (HTTPS) / renewal")
    cpu_ratio_row("nginx", "server CPU per request: nginx TLS 200 / renewal")
    cpu_ratio_row("hello", "server CPU per request: Beast hello TLS / renewal")
    w("")
    worst_etcd = min(x for x in (r_etcd_tls, r_etcd) if x is not None) if (r_etcd_tls or r_etcd) else None
    if worst_etcd is not None:
        targets.append(("renewals ≥ 3× etcd's put rate (against the faster of etcd HTTPS/HTTP)",
                        f"{worst_etcd:.2f}×", worst_etcd >= 3))
    if r_nginx is not None:
        targets.append(("renewals ≥ 60% of nginx's TLS rate", f"{100 * r_nginx:.0f}%", r_nginx >= 0.6))

fixed = load("renewals-fixed.json")
if fixed:
    w(f"### 1b. DelegatedLease renewals at a fixed {fixed['target_rate']:,.0f}/s (poolcoord-loadgen, open loop, "
      f"{fixed['connections']} connections, {fixed['duration_s']:.0f} s after warm-up; latency from the scheduled "
      "send time)")
    w("")
    w("| achieved | p50 | p90 | p99 | p99.9 | max | measured requests unfinished at the end (+5 s) | "
      "answers incl. warm-up | statuses |")
    w("|---|---|---|---|---|---|---|---|---|")
    w(f"| {rate(fixed['achieved_rate'])} | {ms(fixed['p50_us'])} | {ms(fixed['p90_us'])} | {ms(fixed['p99_us'])} | "
      f"{ms(fixed['p999_us'])} | {ms(fixed['max_us'])} | {fixed['unfinished']:,} of {fixed['sent']:,} | "
      f"{fixed.get('completed_with_warmup', '–')} | `{json.dumps(fixed['status'])}` |")
    ctl = load("renewals-fixed-hello.json")
    if ctl:
        w(f"| control: same client and rate against the Beast hello-world: {rate(ctl['achieved_rate'])} | "
          f"{ms(ctl['p50_us'])} | {ms(ctl['p90_us'])} | {ms(ctl['p99_us'])} | {ms(ctl['p999_us'])} | "
          f"{ms(ctl['max_us'])} | {ctl['unfinished']:,} of {ctl['sent']:,} | {ctl.get('completed_with_warmup', '–')} | "
          f"`{json.dumps(ctl['status'])}` |")
    w("")
    ok = (fixed["p99_us"] <= 2000 and fixed["unfinished"] == 0
          and fixed["achieved_rate"] >= 0.97 * fixed["target_rate"])
    targets.append((f"renewals p99 ≤ 2 ms at {fixed['target_rate']:,.0f}/s",
                    f"p99 {ms(fixed['p99_us'])}, achieved {rate(fixed['achieved_rate'])}", ok))

base = load("baseline.json")
if base and rounds:
    w(f"### 1c. Renewals before and after, same run (closed loop as in 1; the baseline is "
      f"`{base['binary']}`, on a fixture of its own; order alternating per round)")
    w("")
    w("| round | after: rate | before: rate | after / before | after: CPU per request | "
      "before: CPU per request | after: p99 | before: p99 |")
    w("|---|---|---|---|---|---|---|---|")
    a_sum = b_sum = 0.0
    a_cpu, b_cpu = [], []
    for r in rounds:
        a = load(f"r{r}-renewals.json", {}) or {}
        b = load(f"r{r}-renewals-baseline.json", {}) or {}
        a_sum += a.get("rps", 0.0)
        b_sum += b.get("rps", 0.0)
        if a.get("server_cpu_us_per_req") and b.get("server_cpu_us_per_req"):
            a_cpu.append(a["server_cpu_us_per_req"])
            b_cpu.append(b["server_cpu_us_per_req"])
        ratio = f"{a['rps'] / b['rps']:.3f}" if a.get("rps") and b.get("rps") else "–"
        w(f"| {r} | {rate(a.get('rps'))} | {rate(b.get('rps'))} | {ratio} | "
          f"{cpu(a.get('server_cpu_us_per_req'))} | {cpu(b.get('server_cpu_us_per_req'))} | "
          f"{ms(a.get('p99_us'))} | {ms(b.get('p99_us'))} |")
    if b_sum:
        cpu_cell = (f"{sum(a_cpu) / len(a_cpu):.1f} µs vs {sum(b_cpu) / len(b_cpu):.1f} µs "
                    f"({sum(a_cpu) / sum(b_cpu):.3f})") if a_cpu else "–"
        w(f"| all | {rate(a_sum / len(rounds))} | {rate(b_sum / len(rounds))} | {a_sum / b_sum:.3f} | "
          f"{cpu_cell} | | | |")
    fb = load("renewals-fixed-baseline.json")
    if fixed and fb:
        w("")
        w(f"At a fixed {fixed['target_rate']:,.0f}/s (open loop, as 1b):")
        w("")
        w("| server | achieved | p50 | p99 | p99.9 | server CPU per request |")
        w("|---|---|---|---|---|---|")
        for label, j in (("after", fixed), ("before", fb)):
            w(f"| {label} | {rate(j['achieved_rate'])} | {ms(j['p50_us'])} | {ms(j['p99_us'])} | "
              f"{ms(j['p999_us'])} | {cpu(j.get('server_cpu_us_per_req'))} |")
    w("")

wh = load("webhook.json")
if wh:
    sizes = load("webhook-sizes.json", {})
    w(f"### 2. Webhook reviews at a fixed {wh['target_rate']:,.0f}/s (open loop, {wh['connections']} connections; "
      "bodies " + ", ".join(f"{k.replace('webhook_', '')} {v:,} B" for k, v in sizes.items()) + ", rotated)")
    w("")
    w("| achieved | p50 | p90 | p99 | p99.9 | max | allowed | measured requests unfinished | statuses | "
      "server CPU per review |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    w(f"| {rate(wh['achieved_rate'])} | {ms(wh['p50_us'])} | {ms(wh['p90_us'])} | {ms(wh['p99_us'])} | "
      f"{ms(wh['p999_us'])} | {ms(wh['max_us'])} | {wh['matched']:,} of {wh['completed']:,} | {wh['unfinished']} | "
      f"`{json.dumps(wh['status'])}` | {cpu(wh.get('server_cpu_us_per_req'))} |")
    ctl = load("webhook-hello.json")
    if ctl:
        w(f"| control: same client, bodies and rate against the Beast hello-world: {rate(ctl['achieved_rate'])} | "
          f"{ms(ctl['p50_us'])} | {ms(ctl['p90_us'])} | {ms(ctl['p99_us'])} | {ms(ctl['p999_us'])} | "
          f"{ms(ctl['max_us'])} | – | {ctl['unfinished']:,} | `{json.dumps(ctl['status'])}` | "
          f"{cpu(ctl.get('server_cpu_us_per_req'))} |")
    w("")
    w("Server CPU per review: user + system CPU of the server process over the whole load-generator run "
      "(warm-up included), divided by the reviews it answered; it does not depend on the client's share "
      "of the cores, unlike the latencies.")
    w("")
    targets.append((f"webhook p99 ≤ 500 µs at {wh['target_rate']:,.0f}/s", f"p99 {wh['p99_us']} µs",
                    wh["p99_us"] <= 500 and wh["unfinished"] == 0))

mem = load("memory.json")
if mem:
    pop = load("memory-populate.json", {}) or {}
    objs = mem["objects_wanted"]
    created = pop.get("status", {}).get("201", 0)
    grow = (mem["rss_kib"] - mem["rss_start_kib"]) * 1024
    w(f"### 3. Memory: {objs:,} objects ({objs // 11:,} PoolLeases + {objs - objs // 11:,} DelegatedLeases)")
    w("")
    w("| RSS, 1,000-node membership, no objects | RSS at start (membership and tokens loaded) | RSS with the objects | peak (VmHWM) | "
      "RSS after one full LIST | growth per object | created (201) | create rate |")
    w("|---|---|---|---|---|---|---|---|")
    w(f"| {mem.get('rss_empty_kib', 0) / 1024:.1f} MiB | {mem['rss_start_kib'] / 1024:.1f} MiB | {mem['rss_kib'] / 1024:.1f} MiB | {mem['hwm_kib'] / 1024:.1f} MiB | "
      f"{mem['rss_after_list_kib'] / 1024:.1f} MiB | {grow / max(1, created):,.0f} B | {created:,} | "
      f"{rate(pop.get('rate'))} |")
    w("")
    dl = load("dl-size.json", {}) or {}
    if dl:
        w(f"(One DelegatedLease is {dl['delegatedlease_json_bytes']} bytes as JSON.)")
        w("")
    targets.append((f"≤ 150 MiB RSS for {objs:,} objects", f"{mem['rss_kib'] / 1024:.1f} MiB "
                    f"({grow / max(1, created):,.0f} B/object)", mem["rss_kib"] <= 150 * 1024 and created >= objs))

fo = load("fanout.json")
if fo:
    w(f"### 4. Watch fan-out: {fo['watchers']:,} watchers on delegatedleases, {s.get('watch_rate')} writes/s")
    w("")
    w("| watchers ready | writes | write → last watcher p50 | p90 | p99 | max | writes not seen by all | "
      "events received | write latency p50 / p99 |")
    w("|---|---|---|---|---|---|---|---|---|")
    w(f"| {fo['watchers_ready']:,} (set-up {fo['setup_s']} s) | {fo['writes']} | {ms(fo['p50_us'])} | "
      f"{ms(fo['p90_us'])} | {ms(fo['p99_us'])} | {ms(fo['max_us'])} | {fo['incomplete']} | {fo['events']:,} | "
      f"{ms(fo['write']['p50_us'])} / {ms(fo['write']['p99_us'])} |")
    w("")
    targets.append(("watch fan-out p99 ≤ 50 ms", f"p99 {ms(fo['p99_us'])}",
                    fo["p99_us"] <= 50000 and fo["incomplete"] == 0 and fo["watchers_ready"] == fo["watchers"]))

wc = [(b, c, n, load(f"wc-{b}-cache-{c}-w{n}.json"))
      for b in ("etcd3", "memory") for c in ("false", "true")
      for n in (1, s.get("watchers", 1000))]
wc = [x for x in wc if x[3]]
if wc:
    w(f"### 6. Watch cache: each store with --watch-cache=false and =true, 1 and {s.get('watchers', 1000):,} "
      f"watchers on delegatedleases, {s.get('watch_rate')} writes/s")
    w("")
    w("| store | --watch-cache | watchers ready | server threads | etcd watchers | etcd watch streams | "
      "server connections to etcd | write → last watcher p50 | p99 | max | writes not seen by all | "
      "events received | write latency p50 / p99 | server CPU per write | client CPU per write | "
      "etcd CPU in the run |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    na = lambda v: "–" if v is None else f"{v:,}"
    for b, c, n, j in wc:
        wr = j.get("write", {})
        w(f"| {b} | {c} | {na(j.get('watchers_ready'))} of {n:,} | {na(j.get('server_threads'))} | "
          f"{na(j.get('etcd_watchers'))} | {na(j.get('etcd_watch_streams'))} | {na(j.get('etcd_connections'))} | "
          f"{ms(j.get('p50_us'))} | {ms(j.get('p99_us'))} | {ms(j.get('max_us'))} | {na(j.get('incomplete'))} | "
          f"{na(j.get('events'))} | {ms(wr.get('p50_us'))} / {ms(wr.get('p99_us'))} | "
          f"{'–' if j.get('server_cpu_ms_per_write') is None else str(j['server_cpu_ms_per_write']) + ' ms'} | "
          f"{'–' if not j.get('writes_ok') or j.get('client_cpu_ms') is None else format(j['client_cpu_ms'] / j['writes_ok'], '.2f') + ' ms'} | "
          f"{'–' if j.get('etcd_cpu_ms_writes') is None else format(j['etcd_cpu_ms_writes'], ',') + ' ms'} |")
    w("")
    w("Server CPU per write: the server's user + system CPU from the moment every watch was open to the "
      "end of the run (the writes, their fan-out to every watcher and the drain), over the writes; unlike "
      "the latencies it does not depend on the CPU the rest of the machine leaves. Client CPU per write: "
      "the load generator's own, from its first write to the end of the drain (it reads every watch on "
      "the same 2 cores).")
    w("")
    peers = [(c, n, load(f"wc-etcd3-cache-{c}-w{n}-etcd-peer.json"))
             for c in ("false", "true") for n in (1, s.get("watchers", 1000))]
    peers = [x for x in peers if x[2]]
    if peers:
        w("The control, in the same runs: etcd's own write → watch latency on the same etcd while each "
          "etcd3 fan-out ran (`etcd_watch_peer.py`: PUTs of the same size at the same rate under a prefix "
          "of their own, from sending the PUT to the event at `etcdctl watch` (gRPC) and at a /v3/watch "
          "stream of the JSON gateway, as the server's upstream watch reads it). What the machine's load "
          "alone adds between an etcd write and a watcher of it; etcd CPU above includes these writes.")
        w("")
        w("| --watch-cache | watchers of the fan-out | PUT p50 / p99 | → etcdctl watch p50 / p99 | "
          "→ gateway watch p50 / p99 |")
        w("|---|---|---|---|---|")
        f2 = lambda d: f"{d.get('p50_ms')} / {d.get('p99_ms')} ms" if d else "–"
        for c, n, j in peers:
            w(f"| {c} | {n:,} | {f2(j.get('put'))} | {f2(j.get('etcdctl'))} | {f2(j.get('gateway'))} |")
        w("")
    one = load("wc-etcd3-cache-true-w1.json")
    many = load(f"wc-etcd3-cache-true-w{s.get('watchers', 1000)}.json")
    if one and many:
        targets.append((f"etcd3 + watch cache: threads and etcd watchers with {s.get('watchers', 1000):,} "
                        "watchers as with 1",
                        f"threads {one.get('server_threads')} → {many.get('server_threads')}, etcd watchers "
                        f"{one.get('etcd_watchers')} → {many.get('etcd_watchers')}",
                        one.get("server_threads") == many.get("server_threads") and
                        one.get("etcd_watchers") == many.get("etcd_watchers")))
        targets.append((f"etcd3 + watch cache: fan-out p99 ≤ 100 ms at {s.get('watchers', 1000):,} watchers",
                        f"p99 {ms(many.get('p99_us'))}",
                        many.get("p99_us") is not None and many["p99_us"] <= 100000 and
                        many.get("incomplete") == 0 and many.get("watchers_ready") == many.get("watchers")))

cn = load("connections.json")
if cn:
    w("### 7. Connections: stalled half-headers and idle TLS connections")
    w("")
    w("| stalled clients | closed by the server | held (min / median / max) | RSS while held | "
      "idle connections | RSS before | RSS with them open | per connection | RSS after they closed |")
    w("|---|---|---|---|---|---|---|---|---|")
    st, idl = cn.get("stalled", {}), cn.get("idle", {})
    w(f"| {st.get('connections', 0):,} | {st.get('closed_by_server', 0):,} | {st.get('held_min_s')} / "
      f"{st.get('held_median_s')} / {st.get('held_max_s')} s | {st.get('rss_while_held_mib')} MiB | "
      f"{idl.get('connections', 0):,} | {idl.get('rss_before_mib')} MiB | {idl.get('rss_open_mib')} MiB | "
      f"{idl.get('per_connection_kib')} KiB | {idl.get('rss_after_close_mib')} MiB |")
    w("")

se = load("sim-exit.json")
if se is not None:
    w("### 5. Simulator, 1,000 pools × 10 nodes")
    w("")
    if se.get("skipped"):
        w("Skipped (no poolcoord-sim binary, or BENCH_SIM_SECONDS=0).")
    else:
        try:
            with open(os.path.join(D, "sim.cmd")) as f:
                w("`" + f.read().strip() + "`")
        except OSError:
            pass
        w("")
        w(f"Exit status {se['exit']} (0: every invariant held; 1: one broke; 124: timed out).")
        w("")
        try:
            with open(os.path.join(D, "sim.txt")) as f:
                w("```")
                w(f.read().rstrip())
                w("```")
        except OSError:
            pass
    w("")

av = load("agent-verify.json")
if av:
    w(f"### 8. Edge agent: heartbeats verified per second per core ({av['peers']} members, "
      f"{av['rounds']} rounds, CA key {av['ca_key']}; every signature checked)")
    w("")
    w("| node key | certificate cache | verified/s per core | µs per heartbeat | signing/s | "
      "chain verification/s | heartbeat | certificate (DER) |")
    w("|---|---|---|---|---|---|---|---|")
    for r in av["results"]:
        w(f"| {r['key']} | {'on' if r['cache'] else 'off'} | {r['verified_per_s']:,} | "
          f"{r['us_per_heartbeat']} | {r['sign_per_s']:,} | {r['chain_per_s']:,} | "
          f"{r['heartbeat_bytes']} B | {r['certificate_bytes']} B |")
    w("")
    lan = [(n, load(f"agent-lan-{n}.json")) for n in ("steady-ecdsa", "cutoff-ecdsa", "steady-rsa", "cutoff-rsa")]
    lan = [(n, d) for n, d in lan if d]
    if lan:
        w("One agent (the LAN side of poolcoord-agent: AgentCore, UdpTransport, RunLanLoop) receiving "
          "500 peers' heartbeats every 5 s on 127.0.0.1 and sending its own rounds to all of them:")
        w("")
        w("| members | say \"cut off\" | CPU (share of one core) | RSS / peak | heartbeats received "
          "(expected) | signatures checked (with warm-up) | peers heard | dropped |")
        w("|---|---|---|---|---|---|---|---|")
        for n, d in lan:
            w(f"| {d['key']} | {d['cut_off_members']} of {d['peers']} | {100 * d['cpu_share']:.2f}% | "
              f"{d['rss_kib'] / 1024:.1f} / {d['hwm_kib'] / 1024:.1f} MiB | {d['accepted']:,} ({d['expected']:,}) | "
              f"{d['verified']:,} | {d['peers_heard']} | {d['dropped_total']} |")
            targets.append((f"(issue 14) agent CPU ≤ 1% of a core, 500 peers ({d['key']}, {d['cut_off_members']} cut off)",
                            f"{100 * d['cpu_share']:.2f}%", d["cpu_share"] <= 0.01))
            targets.append((f"(issue 14) agent RSS ≤ 20 MiB ({d['key']}, {d['cut_off_members']} cut off)",
                            f"{d['hwm_kib'] / 1024:.1f} MiB", d["hwm_kib"] <= 20 * 1024))
        w("")

if targets:
    w("### Targets (issue 6)")
    w("")
    w("| target | figure (this run) | |")
    w("|---|---|---|")
    for t, fig, ok in targets:
        w(f"| {t} | {fig} | {met(ok)} |")
    w("")
print("\n".join(out))
