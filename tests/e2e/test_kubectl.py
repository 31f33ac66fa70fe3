"""The README's promise, with the real kubectl: get, apply (twice), edit, patch,
label, annotate, describe, explain, get -w, wait --for=delete and delete against a
standalone server and the kubeconfig it wrote; the warnings kubectl prints for a
finalizer without a domain."""
import json
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Server, expect, kubectl_binary, pool_lease, run_cases, uniq, wait_for)  # noqa: E402


def ok(p, what):
    expect(p.returncode == 0, f"kubectl {what} failed (rc={p.returncode}): {p.stderr[-600:]}")
    return p.stdout


def api_resources(s):
    out = ok(s.kubectl("api-resources", "--api-group=coordination.pool"), "api-resources")
    expect("poolleases" in out and "delegatedleases" in out, out)
    expect(" pl " in out and " dl " in out, f"short names missing: {out}")


def get_empty_then_apply_twice(s):
    name = uniq("apply")
    obj = json.dumps(pool_lease(name, "hz-1", duration=20))
    out = ok(s.kubectl("apply", "-f", "-", stdin=obj), "apply")
    expect("created" in out, out)
    out = ok(s.kubectl("apply", "-f", "-", stdin=obj), "apply again")
    expect("unchanged" in out or "configured" in out, out)
    changed = pool_lease(name, "hz-1", duration=25)
    out = ok(s.kubectl("apply", "-f", "-", stdin=json.dumps(changed)), "apply change")
    expect("configured" in out, out)
    got = json.loads(ok(s.kubectl("get", "poollease", name, "-o", "json"), "get -o json"))
    expect(got["spec"]["leaseDurationSeconds"] == 25, f"apply did not change the spec: {got['spec']}")
    expect("kubectl.kubernetes.io/last-applied-configuration" in got["metadata"].get("annotations", {}),
           "last-applied annotation missing")


def get_table_columns(s):
    name = uniq("tbl")
    ok(s.kubectl("apply", "-f", "-", stdin=json.dumps(pool_lease(name, "hz-2"))), "apply")
    out = ok(s.kubectl("get", "poolleases"), "get")
    header = out.splitlines()[0].split()
    expect(header[:2] == ["NAME", "HOLDER"] or ("NAME" in header and "HOLDER" in header and "AGE" in header),
           f"columns: {header}")
    row = [line for line in out.splitlines() if line.startswith(name)]
    expect(row and "hz-2" in row[0], f"row for {name}: {out}")


def edit_with_editor(s):
    name = uniq("edit")
    ok(s.kubectl("apply", "-f", "-", stdin=json.dumps(pool_lease(name))), "apply")
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write("#!/bin/sh\nsed -i 's/leaseDurationSeconds: 15/leaseDurationSeconds: 44/' \"$1\"\n")
        editor = f.name
    os.chmod(editor, 0o755)
    try:
        out = ok(s.kubectl("edit", "poollease", name, env={"KUBE_EDITOR": editor, "EDITOR": editor}), "edit")
        expect("edited" in out, out)
    finally:
        os.unlink(editor)
    out = ok(s.kubectl("get", "pl", name, "-o", "jsonpath={.spec.leaseDurationSeconds}"), "get")
    expect(out == "44", f"edit not applied: {out!r}")


def patch_label_annotate(s):
    name = uniq("pla")
    ok(s.kubectl("apply", "-f", "-", stdin=json.dumps(pool_lease(name))), "apply")
    ok(s.kubectl("patch", "poollease", name, "--type=merge", "-p", '{"spec":{"leaseDurationSeconds":33}}'), "patch merge")
    ok(s.kubectl("patch", "poollease", name, "--type=json",
                 "-p", '[{"op":"replace","path":"/spec/leaseDurationSeconds","value":34}]'), "patch json")
    ok(s.kubectl("label", "poollease", name, "tier=gold"), "label")
    ok(s.kubectl("annotate", "poollease", name, "note=hello"), "annotate")
    got = json.loads(ok(s.kubectl("get", "pl", name, "-o", "json"), "get"))
    expect(got["spec"]["leaseDurationSeconds"] == 34, f"patches: {got['spec']}")
    expect(got["metadata"]["labels"].get("tier") == "gold", "label missing")
    expect(got["metadata"]["annotations"].get("note") == "hello", "annotation missing")
    out = ok(s.kubectl("get", "pl", "-l", "tier=gold", "-o", "name"), "get -l")
    expect(name in out, out)
    out = ok(s.kubectl("get", "pl", "-l", "tier!=gold", "-o", "name"), "get -l !=")
    expect(name not in out, out)
    ok(s.kubectl("label", "poollease", name, "tier-"), "label remove")
    got = json.loads(ok(s.kubectl("get", "pl", name, "-o", "json"), "get"))
    expect("tier" not in got["metadata"].get("labels", {}), "label not removed")
    p = s.kubectl("patch", "poollease", name, "--type=strategic", "-p", '{"spec":{}}')
    expect(p.returncode != 0 and "415" in p.stderr or "unknown format" in p.stderr or "UnsupportedMediaType" in p.stderr,
           f"strategic merge patch must be refused: {p.stderr}")


def describe_and_explain(s):
    name = uniq("desc")
    ok(s.kubectl("apply", "-f", "-", stdin=json.dumps(pool_lease(name, "hz-3"))), "apply")
    out = ok(s.kubectl("describe", "poollease", name), "describe")
    expect(name in out and "hz-3" in out, out)
    out = ok(s.kubectl("explain", "poolleases.spec"), "explain")
    expect("holderIdentity" in out and "leaseDurationSeconds" in out, out[:500])
    out = ok(s.kubectl("explain", "delegatedleases.spec.poolName"), "explain dl")
    expect("poolName" in out, out[:300])
    # Issue 15: the write-only proof and what the server records of it.
    out = ok(s.kubectl("explain", "delegatedlease.spec.proof"), "explain proof")
    expect("heartbeat" in out and "certificate" in out and "DelegationProof" in out, out[:800])
    out = ok(s.kubectl("explain", "delegatedlease.status.proof"), "explain status.proof")
    expect("bootID" in out and "sequence" in out, out[:800])
    out = ok(s.kubectl("explain", "poollease.status.challenges"), "explain challenges")
    expect("issueTime" in out and "value" in out, out[:800])


class KubectlWatching:
    """A long-running kubectl (get -w, wait) at -v=6, which logs each request it
    makes: `watching` is set once its watch request was answered, so a change made
    after that can only reach it through the watch (not the initial list/get)."""

    def __init__(self, s, *args):
        self.proc = subprocess.Popen([kubectl_binary(), "--kubeconfig", s.kubeconfig, "--cache-dir",
                                      os.path.join(s.workdir, "kube-cache"), "-v=6", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.watching = threading.Event()
        self.log = []
        self.out = []
        self._threads = [threading.Thread(target=self._read_log, daemon=True),
                         threading.Thread(target=self._read_out, daemon=True)]
        for t in self._threads:
            t.start()

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)
            # client-go's round tripper, at -v=6: "GET https://...&watch=true 200 OK in 3 milliseconds"
            if "watch=true" in line and " 200 OK" in line:
                self.watching.set()

    def _read_out(self):
        for line in self.proc.stdout:
            self.out.append(line)

    def wait_watching(self, timeout=30):
        expect(self.watching.wait(timeout),
               f"kubectl {self.proc.args[-3:]} never opened its watch: {''.join(self.log)[-1500:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self._threads:
            t.join(5)


def get_watch_sees_changes(s):
    name = uniq("gw")
    w = KubectlWatching(s, "get", "poolleases", "-w", "--request-timeout=30s")
    try:
        w.wait_watching()
        expect(not any(name in line for line in w.out), "the object is listed before it was made")
        ok(s.kubectl("apply", "-f", "-", stdin=json.dumps(pool_lease(name, "hz-4"))), "apply")
        wait_for(f"get -w to show {name}", lambda: any(name in line for line in w.out), timeout=15,
                 every=0.05)
    finally:
        w.stop()


def wait_for_delete_and_delete(s):
    name = uniq("del")
    ok(s.kubectl("apply", "-f", "-", stdin=json.dumps(pool_lease(name))), "apply")
    w = KubectlWatching(s, "wait", "--for=delete", f"poollease/{name}", "--timeout=30s")
    try:
        w.wait_watching()
        expect(w.proc.poll() is None, f"wait --for=delete ended before the delete: {''.join(w.log)[-600:]}")
        out = ok(s.kubectl("delete", "poollease", name), "delete")
        expect("deleted" in out, out)
        rc = w.proc.wait(40)
        expect(rc == 0, f"wait --for=delete rc={rc}: {''.join(w.log)[-600:]}")
        expect(any(f"poollease.coordination.pool/{name} condition met" in line for line in w.out) or
               any(name in line for line in w.out), f"wait --for=delete printed: {w.out}")
    finally:
        w.stop()
    p = s.kubectl("get", "poollease", name)
    expect(p.returncode != 0 and "NotFound" in p.stderr, f"get after delete: {p.stderr}")
    p = s.kubectl("delete", "poollease", name)
    expect(p.returncode != 0 and "not found" in p.stderr, f"second delete: {p.stderr}")


def invalid_object_message(s):
    bad = pool_lease("Bad_Name")
    p = s.kubectl("apply", "-f", "-", stdin=json.dumps(bad))
    expect(p.returncode != 0 and "is invalid" in p.stderr and "metadata.name" in p.stderr,
           f"invalid name message: {p.stderr}")
    bad = pool_lease(uniq("neg"), duration=-1)
    p = s.kubectl("apply", "-f", "-", stdin=json.dumps(bad))
    expect(p.returncode != 0 and "leaseDurationSeconds" in p.stderr, f"negative duration: {p.stderr}")
    unknown = pool_lease(uniq("unk"))
    unknown["spec"]["bogusField"] = 1
    p = s.kubectl("apply", "-f", "-", stdin=json.dumps(unknown))
    expect(p.returncode != 0 and "bogusField" in p.stderr, f"strict validation: {p.stderr}")


def finalizer_without_a_domain_warns(s):
    # The lines kubectl printed for a custom resource of kube-apiserver 1.32.6.
    tail = "to avoid accidental conflicts with other finalizer writers"
    name = uniq("fin")
    obj = pool_lease(name)
    obj["metadata"]["finalizers"] = ["cleanup", "example.com/ok"]
    p = s.kubectl("create", "-f", "-", stdin=json.dumps(obj))
    ok(p, "create")
    warned = [line for line in p.stderr.splitlines() if line.startswith("Warning:")]
    expect(warned == [f'Warning: metadata.finalizers: "cleanup": prefer a domain-qualified finalizer name {tail}'],
           f"create's warnings: {p.stderr}")
    p = s.kubectl("patch", "poollease", name, "--type=merge",
                  "-p", '{"metadata":{"finalizers":["cleanup","example.com/ok","pool.example"]}}')
    ok(p, "patch")
    warned = [line for line in p.stderr.splitlines() if line.startswith("Warning:")]
    expect(warned == ['Warning: metadata.finalizers: "pool.example": prefer a domain-qualified finalizer '
                      f'name including a path (/) {tail}'], f"patch's warnings: {p.stderr}")
    p = s.kubectl("label", "poollease", name, "seen=yes")
    ok(p, "label")
    expect("Warning:" not in p.stderr, f"a write adding no finalizer warned: {p.stderr}")
    ok(s.kubectl("patch", "poollease", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'),
       "patch finalizers away")
    ok(s.kubectl("delete", "poollease", name), "delete")


CASES = [api_resources, get_empty_then_apply_twice, get_table_columns, edit_with_editor,
         patch_label_annotate, describe_and_explain, get_watch_sees_changes,
         wait_for_delete_and_delete, invalid_object_message, finalizer_without_a_domain_warns]

if __name__ == "__main__":
    sys.exit(run_cases(CASES, lambda binary: Server(binary)))
