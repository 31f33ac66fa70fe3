"""Server-side apply end to end, with the real kubectl 1.32 and raw HTTPS (issue 12):
`kubectl apply --server-side`, `--force-conflicts`, `--dry-run=server`, the move
from client-side `kubectl apply`, managedFields on every write
(`kubectl get -o yaml --show-managed-fields`), conflicts as kube-apiserver words
them, removal of fields an applier lets go of, the cap on Update entries, and a
lease renewal that only moves its manager's time. Each expectation is what
kube-apiserver 1.32 answered for the same request against a
CustomResourceDefinition with our schema."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (BASE, GV, Server, expect, expect_status, microtime, run_cases,  # noqa: E402
                     uniq)

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def manifest(name, holder="hz-1", duration=15, labels=None):
    md = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": GV, "kind": "PoolLease", "metadata": md,
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration}}


def kubectl_ok(s, *args, stdin=None):
    r = s.kubectl(*args, stdin=stdin)
    expect(r.returncode == 0, f"kubectl {' '.join(args)} failed: {r.stderr}")
    return r.stdout


def entries(obj):
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def get(s, name, kind="poolleases"):
    return expect_status(s.admin().request("GET", f"{BASE}/{kind}/{name}"), 200).json()


def kubectl_apply_server_side(s):
    name = uniq("ssa")
    out = kubectl_ok(s, "apply", "--server-side", "-f", "-", stdin=json.dumps(manifest(name, labels={"x": "1"})))
    expect("serverside-applied" in out, out)
    # managedFields are shown, with kubectl's Apply entry owning what it applied.
    yaml_out = kubectl_ok(s, "get", "pl", name, "-o", "yaml", "--show-managed-fields")
    for want in ("managedFields:", "manager: kubectl", "operation: Apply", "fieldsType: FieldsV1",
                 "f:holderIdentity: {}", "f:x: {}"):
        expect(want in yaml_out, f"{want!r} missing from:\n{yaml_out}")
    e = entries(get(s, name))[("kubectl", "Apply")]
    expect(e["fieldsV1"] == {"f:metadata": {"f:labels": {"f:x": {}}},
                             "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}}, e)
    expect(e["apiVersion"] == GV and "time" in e, e)
    # Without --show-managed-fields kubectl hides them, as it does for kube-apiserver.
    expect("managedFields" not in kubectl_ok(s, "get", "pl", name, "-o", "yaml"), "shown by default")


def conflicts_force_and_dry_run(s):
    name = uniq("ssa")
    kubectl_ok(s, "apply", "--server-side", "-f", "-", stdin=json.dumps(manifest(name)))
    kubectl_ok(s, "patch", "pl", name, "--type=merge", "-p", '{"spec":{"leaseDurationSeconds":20}}')
    r = s.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(manifest(name, holder="hz-2")))
    expect(r.returncode != 0, "a conflicting apply must fail")
    expect('Apply failed with 1 conflict: conflict with "kubectl-patch" using coordination.pool/v1alpha1: '
           ".spec.leaseDurationSeconds" in r.stderr, r.stderr)
    expect(get(s, name)["spec"]["holderIdentity"] == "hz-1", "a failed apply changed the object")
    # The raw answer: 409 Conflict with one FieldManagerConflict cause.
    body = json.dumps(manifest(name, holder="hz-2"))
    c = s.admin()
    st = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=kubectl", body, APPLY),
                       409, "Conflict").json()
    expect(st["details"]["causes"] == [{"reason": "FieldManagerConflict",
                                        "message": 'conflict with "kubectl-patch" using coordination.pool/v1alpha1',
                                        "field": ".spec.leaseDurationSeconds"}], st)
    # --dry-run=server shows the result and stores nothing.
    out = kubectl_ok(s, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-o",
                     "jsonpath={.spec.holderIdentity}", "-f", "-", stdin=body)
    expect(out == "hz-2", out)
    expect(get(s, name)["spec"]["holderIdentity"] == "hz-1", "dry run stored the change")
    # --force-conflicts takes the field from kubectl-patch.
    kubectl_ok(s, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=body)
    o = get(s, name)
    expect(o["spec"] == {"holderIdentity": "hz-2", "leaseDurationSeconds": 15}, o["spec"])
    expect(("kubectl-patch", "Update") not in entries(o), entries(o))


def apply_creates_and_needs_a_manager(s):
    c = s.admin()
    name = uniq("ssa")
    body = json.dumps(manifest(name))
    r = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", body, APPLY), 422, "Invalid")
    expect(r.json()["message"] == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                                  "is required for apply patch", r.body)
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 404)
    dry = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=m&dryRun=All", body, APPLY), 201)
    expect(not dry.json()["metadata"].get("resourceVersion"), dry.body)
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 404)
    created = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=m", body, APPLY), 201)
    rv = created.json()["metadata"]["resourceVersion"]
    # The same configuration again changes nothing: no write.
    again = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=m", body, APPLY), 200)
    expect(again.json()["metadata"]["resourceVersion"] == rv, "a no-op apply wrote")
    # YAML works as well as JSON.
    yaml_body = f"apiVersion: {GV}\nkind: PoolLease\nmetadata:\n  name: {name}\nspec:\n  leaseDurationSeconds: 16\n"
    expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=m&force=true", yaml_body, APPLY), 200)
    o = get(s, name)
    # m left holderIdentity out and nobody else owned it: it is gone.
    expect(o["spec"] == {"leaseDurationSeconds": 16}, o["spec"])
    # Applying to /status of a missing object does not create it.
    missing = uniq("none")
    expect_status(c.request("PATCH", f"{BASE}/poolleases/{missing}/status?fieldManager=m",
                            json.dumps(manifest(missing)), APPLY), 404)


def bad_apply_input(s):
    c = s.admin()
    name = uniq("ssa")
    url = f"{BASE}/poolleases/{name}?fieldManager=m"
    cases = [
        ("[1,2]", "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal "
                  "array into Go value of type map[string]interface {}"),
        (json.dumps({**manifest(name), "apiVersion": "coordination.pool/v1"}),
         "invalid object type: coordination.pool/v1, Kind=PoolLease"),
        (json.dumps({**manifest(name), "metadata": {"name": name, "managedFields": [{"manager": "x"}]}}),
         "metadata.managedFields must be nil"),
        (json.dumps({**manifest(name), "spec": {"foo": 1}}),
         f"failed to create typed patch object (/{name}; coordination.pool/v1alpha1, Kind=PoolLease): "
         ".spec.foo: field not declared in schema"),
        (json.dumps(manifest("other")), f"the name of the object (other) does not match the name on the URL ({name})"),
        ("a: [", None),
    ]
    for body, message in cases:
        r = expect_status(c.request("PATCH", url, body, APPLY), 400, "BadRequest")
        if message:
            expect(r.json()["message"] == message, r.body)
    expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=m&force=true",
                            '{"spec":{}}', MERGE), 422, "Invalid")
    # Repeated keys: Strict refuses with the line, Warn warns.
    dup = f"apiVersion: {GV}\nkind: PoolLease\nmetadata:\n  name: {name}\nspec:\n  leaseDurationSeconds: 3\n  leaseDurationSeconds: 4\n"
    r = expect_status(c.request("PATCH", url + "&fieldValidation=Strict", dup, APPLY), 400, "BadRequest")
    expect(r.json()["message"] == "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal "
                                  'errors:\n  line 7: key "leaseDurationSeconds" already set in map', r.body)
    r = expect_status(c.request("PATCH", url, dup, APPLY), 201)
    expect(r.header("Warning") == '299 - "line 7: key \\"leaseDurationSeconds\\" already set in map"',
           r.headers)
    expect(r.json()["spec"]["leaseDurationSeconds"] == 4, r.body)


def client_side_apply_moves_over(s):
    name = uniq("csa")
    kubectl_ok(s, "apply", "-f", "-", stdin=json.dumps(manifest(name, labels={"x": "1"})))
    o = get(s, name)
    expect(("kubectl-client-side-apply", "Update") in entries(o), entries(o))
    # Changing a field kubectl-client-side-apply owns is no conflict for kubectl:
    # its value still is the last-applied one.
    kubectl_ok(s, "apply", "--server-side", "-f", "-", stdin=json.dumps(manifest(name, holder="hz-2", labels={"x": "1"})))
    o = get(s, name)
    expect(o["spec"]["holderIdentity"] == "hz-2", o["spec"])
    last = json.loads(o["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    expect(last["spec"]["holderIdentity"] == "hz-2", last)
    managers = set(entries(o))
    expect(managers == {("kubectl", "Apply"), ("kubectl-last-applied", "Apply")}, managers)


def owners_by_user_agent_and_update(s):
    c = s.admin()
    name = uniq("mf")
    r = expect_status(c.request("POST", f"{BASE}/poolleases", manifest(name),
                                headers={"User-Agent": "my-controller/v0.3 (linux/amd64)"}), 201)
    e = entries(r.json())[("my-controller", "Update")]
    expect(e["fieldsV1"] == {"f:spec": {".": {}, "f:holderIdentity": {}, "f:leaseDurationSeconds": {}}}, e)
    # A PUT by another manager takes what it changes.
    o = r.json()
    o["spec"]["leaseDurationSeconds"] = 30
    o["metadata"]["labels"] = {"team": "edge"}
    r = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}?fieldManager=editor", o), 200)
    got = entries(r.json())
    expect(got[("editor", "Update")]["fieldsV1"] == {"f:metadata": {"f:labels": {".": {}, "f:team": {}}},
                                                     "f:spec": {"f:leaseDurationSeconds": {}}}, got)
    expect(got[("my-controller", "Update")]["fieldsV1"] == {"f:spec": {".": {}, "f:holderIdentity": {}}}, got)
    # [{}] resets them.
    o = r.json()
    o["metadata"]["managedFields"] = [{}]
    r = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}?fieldManager=editor", o), 200)
    expect("managedFields" not in r.json()["metadata"], r.body)


def update_entries_are_capped(s):
    c = s.admin()
    name = uniq("cap")
    expect_status(c.request("POST", f"{BASE}/poolleases?fieldManager=cr", manifest(name)), 201)
    for i in range(12):
        expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=u{i:02d}",
                                {"metadata": {"labels": {f"l{i}": "v"}}}, MERGE), 200)
    mf = get(s, name)["metadata"]["managedFields"]
    updaters = [e["manager"] for e in mf if e["operation"] == "Update"]
    expect(len(updaters) == 10, updaters)
    expect("ancient-changes" in updaters and "u11" in updaters and "cr" not in updaters, updaters)


def renewal_moves_only_the_time(s):
    # The pool leader renews a DelegatedLease by merge patch (the fast path):
    # one entry, its fields unchanged, its time the renewal's second.
    leader = s.token("hz-1-token")
    pool = "hangzhou"
    pl = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": pool},
          "spec": {"holderIdentity": "hz-1", "leaseDurationSeconds": 60, "acquireTime": microtime(),
                   "renewTime": microtime(), "leaseTransitions": 0}}
    r = leader.request("POST", f"{BASE}/poolleases", pl)
    if r.status == 409:
        cur = get(s, pool)
        cur["spec"].update(holderIdentity="hz-1", renewTime=microtime(), leaseTransitions=cur["spec"].get("leaseTransitions", 0) + 1,
                           acquireTime=microtime(), leaseDurationSeconds=60)
        expect_status(s.admin().request("PUT", f"{BASE}/poolleases/{pool}", cur), 200)
    dl = {"apiVersion": GV, "kind": "DelegatedLease",
          "metadata": {"name": "hz-2", "annotations": {"openyurt.io/delegate-heartbeat": "true"}},
          "spec": {"holderIdentity": "hz-2", "leaseDurationSeconds": 40, "renewTime": microtime(),
                   "poolName": pool, "delegate": "hz-1"}}
    agent = {"User-Agent": "poolcoord-agent/0.1"}
    r = leader.request("POST", f"{BASE}/delegatedleases", dl, headers=agent)
    expect(r.status in (201, 409), r.body)
    first = None
    for _ in range(3):
        r = expect_status(leader.request("PATCH", f"{BASE}/delegatedleases/hz-2",
                                         {"spec": {"renewTime": microtime()}}, MERGE, headers=agent), 200)
        mine = entries(r.json()).get(("poolcoord-agent", "Update"))
        expect(mine is not None, r.body)
        expect(first is None or mine["fieldsV1"] == first, (mine, first))
        first = mine["fieldsV1"]
        expect(f'"f:renewTime"' in json.dumps(mine["fieldsV1"]), mine)


def node_applies_its_lease(s):
    # Apply goes through the same rules as any write: a member acquires its
    # pool's lease by apply, another member may not take it while it is live.
    name = "beijing"
    node = s.token("bj-1-token")
    cfg = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
           "spec": {"holderIdentity": "bj-1", "leaseDurationSeconds": 60, "acquireTime": microtime(),
                    "renewTime": microtime(), "leaseTransitions": 0}}
    expect_status(node.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=agent", json.dumps(cfg), APPLY), 201)
    cfg["spec"].update(holderIdentity="bj-2", leaseTransitions=1, renewTime=microtime(), acquireTime=microtime())
    other = s.token("bj-2-token")
    r = expect_status(other.request("PATCH", f"{BASE}/poolleases/{name}?fieldManager=agent2&force=true",
                                    json.dumps(cfg), APPLY), 409, "Conflict")
    expect('held by "bj-1" until' in r.json()["message"], r.body)


CASES = [kubectl_apply_server_side, conflicts_force_and_dry_run, apply_creates_and_needs_a_manager,
         bad_apply_input, client_side_apply_moves_over, owners_by_user_agent_and_update,
         update_entries_are_capped, renewal_moves_only_the_time, node_applies_its_lease]

if __name__ == "__main__":
    sys.exit(run_cases(CASES, lambda b: Server(b)))
