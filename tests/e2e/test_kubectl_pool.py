"""`kubectl pool`, the kubectl plugin (build/kubectl-pool), run by the real kubectl
1.32 (which finds it on PATH) against the real poolcoord-apiserver, with PoolLeases
and DelegatedLeases written through the API by the nodes' own identities: the
table, `describe`, `-o json|yaml`, expiry judged on the server's clock (its Date
header; a stub server whose clock is 75 s ahead shows it), kubeconfig handling as
kubectl's (KUBECONFIG merged, --context, --server, --token, ...), and errors as
kubectl prints them.

Talking to poolcoord directly there is no Nodes API: members come from the
DelegatedLeases (test_cluster_kubectl_pool.py has the Nodes of a real cluster)."""
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (BASE, GV, Server, expect, expect_status, free_port, kubectl_binary,  # noqa: E402
                     microtime, run_cases, wait_for)

DELEGATE = "openyurt.io/delegate-heartbeat"
BUILD = None  # the build folder: kubectl-pool is there
STATE = {}


def kubectl_pool(s, *args, env=None, kubeconfig=True, timeout=60):
    """`kubectl pool <args> [--kubeconfig <admin>]` with the build folder first on PATH."""
    cmd = [kubectl_binary(), "pool", *args]
    if kubeconfig:
        cmd += ["--kubeconfig", s.kubeconfig]
    # HOME: no ~/.kube/config of this machine's user joins in.
    e = {**os.environ, "PATH": BUILD + os.pathsep + os.environ.get("PATH", ""), "HOME": s.workdir}
    e.pop("KUBECONFIG", None)
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


def ok(r):
    expect(r.returncode == 0, f"exit {r.returncode}: {r.stderr}{r.stdout}")
    return r


def table(text):
    """kubectl's table as a list of {header: cell} (columns are 3+ spaces apart)."""
    lines = [line for line in text.splitlines() if line.strip()]
    head = re.split(r"\s{3,}", lines[0].strip())
    return [dict(zip(head, re.split(r"\s{3,}", line.strip()))) for line in lines[1:]]


def parse_micro(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def delegated(node, pool, delegate, renew):
    return {"apiVersion": GV, "kind": "DelegatedLease",
            "metadata": {"name": node, "annotations": {DELEGATE: "true"}},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": renew,
                     "poolName": pool, "delegate": delegate}}


def setup(s):
    """hangzhou: hz-1 leads (15 s) and delegates hz-3 and hz-4; beijing: bj-1 leads
    with a 1 s lease that is left to expire."""
    if STATE:
        return STATE
    hz1 = s.token("hz-1-token")
    now = microtime()
    expect_status(hz1.request("POST", BASE + "/poolleases",
                              {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "hangzhou"},
                               "spec": {"holderIdentity": "hz-1", "leaseDurationSeconds": 15,
                                        "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}), 201)
    STATE["renew"] = {}
    for node in ("hz-3", "hz-4"):
        renew = microtime(-0.5)
        expect_status(hz1.request("POST", BASE + "/delegatedleases",
                                  delegated(node, "hangzhou", "hz-1", renew)), 201)
        STATE["renew"][node] = renew
    bj1 = s.token("bj-1-token")
    expect_status(bj1.request("POST", BASE + "/poolleases",
                              {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": "beijing"},
                               "spec": {"holderIdentity": "bj-1", "leaseDurationSeconds": 1,
                                        "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}), 201)
    return STATE


def admin_get(s, path):
    return expect_status(s.admin().request("GET", path), 200).json()


# ---------------------------------------------------------------------- cases --

def kubectl_finds_the_plugin(s):
    r = subprocess.run([kubectl_binary(), "plugin", "list"], capture_output=True, text=True,
                       env={**os.environ, "PATH": BUILD + os.pathsep + os.environ.get("PATH", "")})
    expect(os.path.join(BUILD, "kubectl-pool") in r.stdout, f"kubectl plugin list: {r.stdout}{r.stderr}")
    r = ok(kubectl_pool(s, "--help", kubeconfig=False))
    expect("kubectl pool describe POOL" in r.stdout and "cluster-scoped" in r.stdout, r.stdout)


def list_shows_leader_term_expiry_and_delegations(s):
    setup(s)
    r = ok(kubectl_pool(s))
    rows = {row["NAME"]: row for row in table(r.stdout)}
    expect(r.stdout.startswith("NAME       LEADER   TERM   EXPIRES"), r.stdout)
    hz = rows["hangzhou"]
    expect(hz["LEADER"] == "hz-1" and hz["TERM"] == "0", hz)
    m = re.fullmatch(r"in (\d+)s", hz["EXPIRES"])
    expect(m and 0 < int(m.group(1)) <= 15, hz)
    expect(hz["MEMBERS (DELEGATEDLEASES)"] == "2", f"members from the DelegatedLeases: {hz}")
    expect(hz["DELEGATED"] == "2", hz)
    expect(re.fullmatch(r"hz-[34] \(\d+s\)", hz["LONGEST DELEGATION"]), hz)
    expect(r.stderr == "", r.stderr)


def json_output_is_a_pool_list_on_the_servers_clock(s):
    setup(s)
    d = json.loads(ok(kubectl_pool(s, "-o", "json")).stdout)
    expect(d["kind"] == "PoolList" and d["apiVersion"] == "kubectl-pool.coordination.pool/v1alpha1", d)
    expect(d["serverTimeSource"] == "Date" and d["membersFrom"] == "DelegatedLeases", d)
    hz = [p for p in d["items"] if p["metadata"]["name"] == "hangzhou"][0]
    lease = admin_get(s, BASE + "/poolleases/hangzhou")
    pl = hz["poolLease"]
    expect(pl["uid"] == lease["metadata"]["uid"] and pl["observedTime"] == lease["status"]["observedTime"],
           f"{pl} vs {lease}")
    expiry = parse_micro(lease["status"]["observedTime"]) + timedelta(seconds=15)
    expect(parse_micro(pl["expiryTime"]) == expiry, pl)
    server_time = parse_micro(d["serverTime"])
    expect(pl["expiresInSeconds"] == int((expiry - server_time).total_seconds()), (pl, d["serverTime"]))
    expect(abs((server_time - datetime.now(timezone.utc)).total_seconds()) < 5, d["serverTime"])
    members = {m["name"]: m for m in hz["members"]}
    expect(sorted(members) == ["hz-3", "hz-4"], members)
    for node in ("hz-3", "hz-4"):
        dl = admin_get(s, BASE + f"/delegatedleases/{node}")
        got = members[node]["delegation"]
        expect(got["delegate"] == "hz-1" and got["live"] and got["currentTerm"], got)
        expect(got["renewTime"] == STATE["renew"][node] == dl["spec"]["renewTime"], (got, dl))
        expect(got["observedTime"] == dl["status"]["observedTime"], (got, dl))
        expect(got["since"] == dl["metadata"]["creationTimestamp"].replace("Z", ".000000Z"), (got, dl))
    expect(hz["delegated"] == 2 and hz["memberCount"] == 2, hz)
    y = ok(kubectl_pool(s, "-o", "yaml")).stdout
    expect(y.startswith("apiVersion: kubectl-pool.coordination.pool/v1alpha1\nkind: PoolList\n"), y[:200])
    expect(f'  observedTime: "{lease["status"]["observedTime"]}"' in y, y)


def describe_shows_each_members_renewal_and_writer(s):
    setup(s)
    r = ok(kubectl_pool(s, "describe", "hangzhou"))
    lease = admin_get(s, BASE + "/poolleases/hangzhou")
    expect(re.search(r"^Leader:\s+hz-1$", r.stdout, re.M), r.stdout)
    expect(f"PoolLease uid {lease['metadata']['uid']}" in r.stdout, r.stdout)
    expect(re.search(r"^Observed Time:\s+" + re.escape(lease["status"]["observedTime"]), r.stdout, re.M),
           r.stdout)
    expect(re.search(r"^Members:\s+2 from DelegatedLeases", r.stdout, re.M), r.stdout)
    for node in ("hz-3", "hz-4"):
        dl = admin_get(s, BASE + f"/delegatedleases/{node}")
        line = [x for x in r.stdout.splitlines() if x.startswith(f"  {node} ")]
        expect(line, f"no line for {node}:\n{r.stdout}")
        cells = re.split(r"\s{3,}", line[0].strip())
        expect(cells[1:4] == ["yes", "hz-1", STATE["renew"][node]], cells)
        expect(cells[4].startswith(dl["status"]["observedTime"] + " ("), cells)
        expect(cells[6] == "current", cells)
    one = json.loads(ok(kubectl_pool(s, "describe", "hangzhou", "-o", "json")).stdout)
    expect(one["kind"] == "Pool" and one["metadata"]["name"] == "hangzhou", one)


def expiry_on_the_servers_clock(s):
    setup(s)

    def beijing():
        rows = {row["NAME"]: row for row in table(ok(kubectl_pool(s)).stdout)}
        return rows["beijing"] if rows["beijing"]["EXPIRES"].startswith("expired") else None
    row = wait_for("beijing's 1 s lease to expire", beijing, timeout=10)
    expect(re.fullmatch(r"expired \d+s ago", row["EXPIRES"]) and row["LEADER"] == "bj-1", row)
    d = json.loads(ok(kubectl_pool(s, "describe", "beijing", "-o", "json")).stdout)
    expect(d["poolLease"]["expired"] and d["poolLease"]["expiresInSeconds"] <= 0, d)


class _Stub(http.server.BaseHTTPRequestHandler):
    """An API server whose clock runs 75 s ahead of the PoolLease's observedTime:
    lists of our kinds and, unless nodes_status says otherwise, labelled Nodes."""
    observed = datetime(2026, 1, 1, tzinfo=timezone.utc)
    nodes_status = 200

    def log_message(self, *a):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        status, body = 200, None
        if path == BASE + "/poolleases":
            body = {"kind": "PoolLeaseList", "apiVersion": GV, "metadata": {}, "items": [
                {"metadata": {"name": "shenzhen", "uid": "u-sz", "resourceVersion": "5"},
                 "spec": {"holderIdentity": "sz-1", "leaseDurationSeconds": 15, "leaseTransitions": 2},
                 "status": {"observedTime": self.observed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}]}
        elif path == BASE + "/delegatedleases":
            body = {"kind": "DelegatedLeaseList", "apiVersion": GV, "metadata": {}, "items": []}
        elif path == "/api/v1/nodes" and self.nodes_status == 200:
            body = {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [
                {"metadata": {"name": n, "labels": {"apps.openyurt.io/nodepool": "shenzhen"}}}
                for n in ("sz-1", "sz-2", "sz-3")]}
        else:
            status = self.nodes_status if path == "/api/v1/nodes" else 404
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                    "reason": "Forbidden" if status == 403 else "NotFound",
                    "message": 'nodes is forbidden: User "x" cannot list resource "nodes"'
                    if status == 403 else "the server could not find the requested resource"}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def date_time_string(self, timestamp=None):  # BaseHTTPRequestHandler sends Date itself
        return format_datetime(self.observed + timedelta(seconds=75), usegmt=True)


def server_clock_is_the_date_header_not_this_machine(s):
    """The stub's PoolLease expired 60 s ago by the stub's Date, although on this
    machine's clock (years later) it would be long gone: only the server's clock counts."""
    class Ahead(_Stub):
        pass

    class NoDate(_Stub):
        def send_response(self, code, message=None):
            self.send_response_only(code, message)
            self.send_header("Server", "stub")

    class NodesForbidden(_Stub):
        nodes_status = 403

    for handler in (Ahead, NoDate, NodesForbidden):
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            server = f"http://127.0.0.1:{httpd.server_address[1]}"
            r = ok(kubectl_pool(s, "--server", server, kubeconfig=False))
            row = table(r.stdout)[0]
            if handler is Ahead:
                expect(row["EXPIRES"] == "expired 60s ago", r.stdout)
                expect(row["MEMBERS (NODES)"] == "3" and row["TERM"] == "2", r.stdout)
                d = json.loads(ok(kubectl_pool(s, "--server", server, "-o", "json", kubeconfig=False)).stdout)
                expect(d["serverTime"] == "2026-01-01T00:01:15.500000Z" and d["serverTimeSource"] == "Date", d)
                expect(d["membersFrom"] == "Nodes" and d["items"][0]["poolLease"]["expiresInSeconds"] == -60, d)
            elif handler is NoDate:
                expect("Warning: the server sent no Date header" in r.stderr, r.stderr)
                expect(re.fullmatch(r"expired \d+d ago", row["EXPIRES"]), row)
            else:
                expect(r.stderr == 'Warning: cannot list Nodes (nodes is forbidden: User "x" cannot list '
                                   'resource "nodes"): members are taken from the DelegatedLeases\n', r.stderr)
                expect(row["MEMBERS (DELEGATEDLEASES)"] == "0", row)
        finally:
            httpd.shutdown()
            httpd.server_close()


def kubeconfig_merge_context_and_flags(s):
    setup(s)
    dead = free_port()
    other = os.path.join(s.workdir, "other.kubeconfig")
    with open(other, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\n"
                f"clusters:\n- name: elsewhere\n  cluster: {{server: 'https://127.0.0.1:{dead}'}}\n"
                "users:\n- name: someone\n  user: {token: nothing}\n"
                "contexts:\n- name: elsewhere\n  context: {cluster: elsewhere, user: someone}\n")
    chain = os.pathsep.join([os.path.join(s.workdir, "missing"), other, s.kubeconfig])
    env = {"KUBECONFIG": chain}
    # The first file's current-context wins: the dead port, as kubectl prints it.
    r = kubectl_pool(s, env=env, kubeconfig=False)
    expect(r.returncode == 1 and r.stderr == f"The connection to the server 127.0.0.1:{dead} was refused - "
           "did you specify the right host or port?\n", f"{r.returncode} {r.stderr}")
    # --context picks the admin kubeconfig's context out of the merged files.
    want = table(ok(kubectl_pool(s)).stdout)[0]["NAME"]
    for args in (["--context", "poolcoord"], ["--context=poolcoord", "-n", "kube-system"],
                 ["--context", "poolcoord", "--request-timeout", "5s"],
                 ["--cluster", "poolcoord", "--user", "poolcoord-admin"]):
        r = ok(kubectl_pool(s, *args, env=env, kubeconfig=False))
        expect(table(r.stdout)[0]["NAME"] == want, f"{args}: {r.stdout}")
    # Flags over the file: another server, a token instead of the certificate,
    # no verification (the file's CA is then dropped, as kubectl drops it).
    url = f"https://127.0.0.1:{s.port}"
    ok(kubectl_pool(s, "--server", url, "--token", "admin-token", "--certificate-authority", s.ca,
                    kubeconfig=False))
    ok(kubectl_pool(s, "--insecure-skip-tls-verify"))
    r = kubectl_pool(s, "--server", url, "--token", "admin-token", kubeconfig=False)
    expect(r.returncode == 1 and r.stderr.startswith("Unable to connect to the server: "),
           f"an unverified server is refused: {r.returncode} {r.stderr}")
    r = kubectl_pool(s, "--context", "nope")
    expect(r.returncode == 1 and r.stderr == f'error: context "nope" not found in {s.kubeconfig}\n', r.stderr)


def errors_as_kubectl_prints_them(s):
    setup(s)
    url = f"https://127.0.0.1:{s.port}"
    r = kubectl_pool(s, "--server", url, "--certificate-authority", s.ca, "--token", "viewer-token",
                     kubeconfig=False)
    expect(r.returncode == 1 and r.stdout == "", r)
    expect(r.stderr.startswith('Error from server (Forbidden): poolleases.coordination.pool is forbidden: '
                               'User "viewer" cannot list resource "poolleases"'), r.stderr)
    r = kubectl_pool(s, "--server", url, "--certificate-authority", s.ca, "--token", "wrong", kubeconfig=False)
    expect(r.returncode == 1 and r.stderr.startswith("error: You must be logged in to the server ("), r.stderr)
    r = kubectl_pool(s, "describe", "nope")
    expect(r.returncode == 1 and r.stderr.startswith('error: pool "nope" not found'), r.stderr)
    r = kubectl_pool(s, "--bogus")
    expect(r.returncode == 1 and r.stderr == "Error: unknown flag: --bogus\n"
           "See 'kubectl pool --help' for usage.\n", r.stderr)
    r = kubectl_pool(s, "-o", "wide")
    expect(r.returncode == 1 and r.stderr.startswith("error: unable to match a printer"), r.stderr)


CASES = [kubectl_finds_the_plugin, list_shows_leader_term_expiry_and_delegations,
         json_output_is_a_pool_list_on_the_servers_clock, describe_shows_each_members_renewal_and_writer,
         expiry_on_the_servers_clock, server_clock_is_the_date_header_not_this_machine,
         kubeconfig_merge_context_and_flags, errors_as_kubectl_prints_them]


def _server(binary):
    global BUILD
    BUILD = os.path.dirname(binary)
    if not os.access(os.path.join(BUILD, "kubectl-pool"), os.X_OK):
        raise RuntimeError(f"{BUILD}/kubectl-pool is not built")
    return Server(binary)


if __name__ == "__main__":
    sys.exit(run_cases(CASES, _server))
