"""The Helm chart (charts/poolcoord), rendered and linted with the real Helm 3 and
checked object by object.

helm comes from $HELM, PATH or build/tools/helm (scripts/install-deps.sh --test
installs it); `helm template` renders, kubectl converts the YAML to JSON offline
(kube_cluster.yaml_objects: the standard library has no YAML reader). What needs
a cluster (server-side dry runs of every values variant, Helm's lookup of the
existing Secret, NOTES) is in test_cluster_api.py, against a real kube-apiserver.

Run by ctest as `test_chart.py --binary <poolcoord-apiserver>`: the binary's --help
lists the flags the Deployment may pass, and the binary is started with the rendered
Deployment's args and Secret (on 127.0.0.1, a free port) to answer the probes, the
scraper and the webhook path. Standard library only. Ends with "N passed, N failed".
"""
import argparse
import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run_one  # noqa: E402
from kube_cluster import CHART, ROOT, helm_binary, helm_template, yaml_objects  # noqa: E402

NS = "pool-system"
RELEASE = "poolcoord"
ANNOTATION = "openyurt.io/delegate-heartbeat"
ANNOTATED_CEL = ("has(object.metadata.annotations) && "
                 "'openyurt.io/delegate-heartbeat' in object.metadata.annotations")
NOT_NODE_CEL = "request.userInfo.username != 'system:node:' + object.metadata.name"
NODE_CEL = "request.userInfo.username == 'system:node:' + object.metadata.name"
PROM = "monitoring.coreos.com/v1"


class Ctx:
    def __init__(self, tmp, server_bin):
        self.tmp, self.server_bin = tmp, server_bin


def render_raw(ctx, *args):
    """`helm template poolcoord charts/poolcoord -n pool-system <args>`: the CompletedProcess."""
    return helm_template(*args, release=RELEASE, namespace=NS, check=False)


HOOK = "helm.sh/hook"


def is_hook(doc):
    return HOOK in (doc["metadata"].get("annotations") or {})


def render(ctx, *args, hooks=False):
    """The release's objects (`hooks`: Helm's hooks instead, which `helm install`
    does not create with the release)."""
    p = render_raw(ctx, *args)
    if p.returncode != 0:
        raise AssertionError(f"helm template {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    docs = [d for d in yaml_objects(p.stdout) if is_hook(d) == hooks]
    assert docs or hooks, "helm rendered no documents"
    return docs


def values_file(ctx, name, obj):
    path = os.path.join(ctx.tmp, name)
    with open(path, "w") as f:
        json.dump(obj, f)  # JSON is YAML
    return path


def find(docs, kind, name=None, namespace=None):
    hits = [d for d in docs if d["kind"] == kind
            and (name is None or d["metadata"]["name"] == name)
            and (namespace is None or d["metadata"].get("namespace") == namespace)]
    assert hits, f"no {kind} {name or ''} {namespace or ''} in {[(d['kind'], d['metadata']['name']) for d in docs]}"
    return hits


def one(docs, kind, name=None, namespace=None):
    hits = find(docs, kind, name, namespace)
    assert len(hits) == 1, f"{len(hits)} objects {kind} {name}"
    return hits[0]


def container(docs):
    dep = one(docs, "Deployment")
    cs = dep["spec"]["template"]["spec"]["containers"]
    assert len(cs) == 1, cs
    return dep, cs[0]


def args_map(c):
    out = {}
    for a in c["args"]:
        assert a.startswith("--"), a
        k, _, v = a[2:].partition("=")
        out[k] = v
    return out


def eq(actual, expected, what):
    assert actual == expected, f"{what}: {actual!r}, want {expected!r}"


def openssl(*args, stdin=None):
    p = subprocess.run(["openssl", *args], input=stdin, capture_output=True, timeout=30)
    assert p.returncode == 0, f"openssl {args}: {p.stderr.decode()}"
    return p.stdout.decode()


# ---------------------------------------------------------------------------
# Cases.

def case_defaults_render_every_object(ctx):
    docs = render(ctx, "--api-versions", PROM)
    kinds = {d["kind"] for d in docs}
    want = {"ServiceAccount", "Deployment", "Service", "Secret", "APIService",
            "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding", "PodDisruptionBudget", "NetworkPolicy", "ConfigMap", "PrometheusRule"}
    assert want <= kinds, f"missing kinds {want - kinds}"
    for d in docs:
        assert d["metadata"].get("name"), d
        ns = d["metadata"].get("namespace")
        cluster_scoped = d["kind"] in {"APIService", "ValidatingWebhookConfiguration",
                                       "ValidatingAdmissionPolicy",
                                       "ValidatingAdmissionPolicyBinding", "ClusterRole",
                                       "ClusterRoleBinding"}
        if cluster_scoped:
            assert ns is None, f"cluster-scoped {d['kind']} with a namespace"
        else:
            assert ns, f"{d['kind']} {d['metadata']['name']} without a namespace"
    # Helm's install order: the ServiceAccount before the Deployment, the Service before
    # the APIService that points at it.
    order = [d["kind"] for d in docs]
    assert order.index("ServiceAccount") < order.index("Deployment")
    assert order.index("Service") < order.index("APIService")


def server_selector(dep):
    """What selects the server's pods alone: the Deployment's selector and the
    component (the agent's pods carry the name and instance too)."""
    labels = dep["spec"]["template"]["metadata"]["labels"]
    eq(labels.get("app.kubernetes.io/component"), "apiserver", "the server pod's component label")
    return {**dep["spec"]["selector"]["matchLabels"], "app.kubernetes.io/component": "apiserver"}


def case_deployment_memory_store(ctx):
    docs = render(ctx)
    dep, c = container(docs)
    eq(dep["spec"]["replicas"], 1, "replicas")
    eq(dep["spec"]["strategy"], {"type": "Recreate"}, "strategy")
    spec = dep["spec"]["template"]["spec"]
    assert "affinity" not in spec, "one replica needs no anti-affinity"
    eq(dep["spec"]["selector"]["matchLabels"],
       {k: v for k, v in dep["spec"]["template"]["metadata"]["labels"].items()
        if k in dep["spec"]["selector"]["matchLabels"]}, "selector matches the pod labels")
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        eq(get["path"], path, probe + " path")
        eq(get["scheme"], "HTTPS", probe + " scheme")
        eq(get["port"], "https", probe + " port")
    eq([p["containerPort"] for p in c["ports"] if p["name"] == "https"], [8443], "container port")
    sc = c["securityContext"]
    eq(sc["runAsNonRoot"], True, "runAsNonRoot")
    eq(sc["readOnlyRootFilesystem"], True, "readOnlyRootFilesystem")
    eq(sc["allowPrivilegeEscalation"], False, "allowPrivilegeEscalation")
    eq(sc["capabilities"]["drop"], ["ALL"], "capabilities.drop")
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"]
    a = args_map(c)
    sa = one(docs, "ServiceAccount")["metadata"]["name"]
    eq(spec["serviceAccountName"], sa, "serviceAccountName")
    eq(a["secure-port"], "8443", "--secure-port")
    eq(a["forwarder-user"], f"system:serviceaccount:{NS}:{sa}", "--forwarder-user")
    eq(a["pool-label"], "apps.openyurt.io/nodepool", "--pool-label")
    eq(a["lease-proxy-users"], "openyurt:yurt-coordinator:node-lease-proxy-client",
       "--lease-proxy-users")
    eq(a["max-lease-duration"], "300", "--max-lease-duration")
    # Verifiable delegation (issue 15): the server's own defaults, said out loud.
    eq(a["delegation-proof"], "required", "--delegation-proof")
    eq(a["delegation-challenge-period"], "5s", "--delegation-challenge-period")
    eq(a["delegation-proof-max-age"], "15s", "--delegation-proof-max-age")
    a = args_map(container(render(ctx, "--set", "server.delegationProof.mode=optional"))[1])
    eq(a["delegation-proof"], "optional", "--delegation-proof from the value")
    bad = render_raw(ctx, "--set", "server.delegationProof.mode=maybe")
    assert bad.returncode != 0 and "delegationProof" in bad.stderr, bad.stderr[-500:]
    a = args_map(c)
    eq(a["storage-backend"], "memory", "--storage-backend")
    eq(a["leader-elect"], "false", "--leader-elect")
    assert "etcd-servers" not in a and "forwarder-shards" not in a
    # The forwarder's client carries 20,000 delegated nodes by default.
    eq(a["kube-api-qps"], "2500", "--kube-api-qps")
    eq(a["kube-api-burst"], "5000", "--kube-api-burst")
    eq(a["concurrent-node-lease-syncs"], "64", "--concurrent-node-lease-syncs")
    paths = a["authorization-always-allow-paths"].split(",")
    assert {"/healthz", "/readyz", "/livez"} <= set(paths), paths
    # The serving certificate comes from the mounted Secret.
    secret = one(docs, "Secret")
    vol = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == secret["metadata"]["name"]]
    assert len(vol) == 1, spec["volumes"]
    mount = [m for m in c["volumeMounts"] if m["name"] == vol[0]["name"]][0]
    eq(a["tls-cert-file"], mount["mountPath"] + "/tls.crt", "--tls-cert-file")
    eq(a["tls-private-key-file"], mount["mountPath"] + "/tls.key", "--tls-private-key-file")
    eq(secret["type"], "kubernetes.io/tls", "Secret type")


def server_flags(ctx):
    """The flags poolcoord-apiserver accepts: its --help, else the table in flags.cc."""
    known = set()
    if ctx.server_bin and os.access(ctx.server_bin, os.X_OK):
        p = subprocess.run([ctx.server_bin, "--help"], capture_output=True, text=True, timeout=30)
        known = set(re.findall(r"--([a-z0-9-]+)", p.stdout + p.stderr))
    if not known:  # no binary built: the flag table in the source
        with open(os.path.join(ROOT, "apiservice", "flags.cc")) as f:
            known = set(re.findall(r'\b(?:s|b|i|i64|d|l)\("([a-z0-9-]+)"', f.read()))
    assert len(known) > 20, f"could not read the server's flags: {sorted(known)}"
    return known


def case_deployment_args_are_server_flags(ctx):
    """Every flag the chart passes is one poolcoord-apiserver accepts."""
    docs = render(ctx, "--set", "storage.backend=etcd3,replicas=2",
                  "--set", "storage.etcd.servers={https://etcd:2379}",
                  "--set", "server.kubeconfig=/etc/poolcoord/kubeconfig")
    names = set(args_map(container(docs)[1]))
    unknown = names - server_flags(ctx)
    assert not unknown, f"the chart passes flags the server does not have: {sorted(unknown)}"


def https_get(port, ca, host, path, method="GET", body=None):
    """One request to 127.0.0.1:port, verifying the certificate against `ca` for
    `host` (as the aggregator does against the APIService caBundle)."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            data = body.encode() if body else b""
            head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
            tls.sendall(head.encode() + data)
            chunks = []
            while True:
                b = tls.recv(65536)
                if not b:
                    break
                chunks.append(b)
    raw_resp = b"".join(chunks).decode(errors="replace")
    head, _, body = raw_resp.partition("\r\n\r\n")
    status = int(head.split(" ", 2)[1])
    if "transfer-encoding: chunked" in head.lower():
        out, rest = [], body
        while rest:
            size_line, _, rest = rest.partition("\r\n")
            size = int(size_line.strip() or "0", 16)
            if size == 0:
                break
            out.append(rest[:size])
            rest = rest[size + 2:]
        body = "".join(out)
    return status, body


def case_rendered_pod_runs_the_server(ctx):
    """The Deployment's args and the serving Secret start the real server, which
    answers the probes, the scraper and the webhook path over TLS that verifies
    against the APIService caBundle for <svc>.<ns>.svc."""
    assert ctx.server_bin and os.access(ctx.server_bin, os.X_OK), \
        f"--binary {ctx.server_bin!r} is not an executable poolcoord-apiserver"
    docs = render(ctx)
    secret = one(docs, "Secret")
    dep, c = container(docs)
    mount = [m for m in c["volumeMounts"] if m["name"] == "serving-cert"][0]["mountPath"]
    certs = os.path.join(ctx.tmp, "pod-certs")
    os.makedirs(certs, exist_ok=True)
    for k, v in secret["data"].items():
        with open(os.path.join(certs, k), "wb") as f:
            f.write(base64.b64decode(v))
    ca = os.path.join(ctx.tmp, "pod-ca.crt")
    with open(ca, "wb") as f:
        f.write(base64.b64decode(one(docs, "APIService")["spec"]["caBundle"]))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    args = []
    for a in c["args"]:
        a = a.replace(mount, certs)
        if a.startswith("--secure-port="):
            a = f"--secure-port={port}"
        elif a.startswith("--cert-dir="):
            a = "--cert-dir=" + os.path.join(ctx.tmp, "pod-scratch")
        args.append(a)
    log_path = os.path.join(ctx.tmp, "pod.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([ctx.server_bin, *args, "--bind-address=127.0.0.1"], stdout=log,
                            stderr=subprocess.STDOUT)
    host = f"{one(docs, 'Service')['metadata']['name']}.{NS}.svc"
    try:
        deadline = time.time() + 15
        while True:
            try:
                status, body = https_get(port, ca, host, c["readinessProbe"]["httpGet"]["path"])
                break
            except (ConnectionError, OSError):
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError("server did not come up:\n" + open(log_path).read())
                time.sleep(0.2)
        eq(status, 200, "readiness probe")
        status, _ = https_get(port, ca, host, c["livenessProbe"]["httpGet"]["path"])
        eq(status, 200, "liveness probe")
        status, body = https_get(port, ca, host, "/metrics")
        eq(status, 200, "/metrics without credentials (the scraper)")
        assert "apiserver_request_total" in body, body[:300]
        hook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "chart-1", "kind": {"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"},
            "resource": {"group": "coordination.k8s.io", "version": "v1", "resource": "leases"},
            "name": "n1", "namespace": "kube-node-lease", "operation": "UPDATE",
            "userInfo": {"username": "system:node:n1", "groups": ["system:nodes"]},
            "object": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "n1", "namespace": "kube-node-lease"},
                       "spec": {"holderIdentity": "n1"}},
            "dryRun": False}}
        status, body = https_get(port, ca, host, hook["clientConfig"]["service"]["path"] + "?timeout=2s",
                                 method="POST", body=json.dumps(review))
        eq(status, 200, "webhook path")
        resp = json.loads(body)
        eq((resp["apiVersion"], resp["kind"], resp["response"]["uid"]),
           ("admission.k8s.io/v1", "AdmissionReview", "chart-1"), "AdmissionReview answer")
        eq(resp["response"]["allowed"], True, "an unannotated node Lease write")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def case_service_and_apiservice(ctx):
    docs = render(ctx)
    svc = one(docs, "Service")
    port = svc["spec"]["ports"][0]
    eq((port["port"], port["targetPort"], port["name"]), (443, "https", "https"), "Service port")
    dep = one(docs, "Deployment")
    eq(svc["spec"]["selector"], server_selector(dep), "Service selector")
    api = one(docs, "APIService")
    eq(api["metadata"]["name"], "v1alpha1.coordination.pool", "APIService name")
    s = api["spec"]
    eq((s["group"], s["version"]), ("coordination.pool", "v1alpha1"), "group/version")
    eq((s["groupPriorityMinimum"], s["versionPriority"]), (1000, 15), "priorities")
    eq(s["service"], {"name": svc["metadata"]["name"], "namespace": NS, "port": 443}, "service ref")
    assert s["caBundle"], "caBundle empty"
    assert "insecureSkipTLSVerify" not in s
    hook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]
    eq(hook["clientConfig"]["caBundle"], s["caBundle"], "webhook caBundle vs APIService caBundle")
    eq(one(docs, "Secret")["data"]["ca.crt"], s["caBundle"], "Secret ca.crt vs caBundle")


def case_generated_certificate_is_valid(ctx):
    docs = render(ctx)
    data = one(docs, "Secret")["data"]
    ca = os.path.join(ctx.tmp, "gen-ca.crt")
    crt = os.path.join(ctx.tmp, "gen-tls.crt")
    with open(ca, "wb") as f:
        f.write(base64.b64decode(data["ca.crt"]))
    with open(crt, "wb") as f:
        f.write(base64.b64decode(data["tls.crt"]))
    assert "PRIVATE KEY" in base64.b64decode(data["tls.key"]).decode()
    openssl("verify", "-CAfile", ca, crt)
    text = openssl("x509", "-in", crt, "-noout", "-text")
    svc = one(docs, "Service")["metadata"]["name"]
    sans = set(re.findall(r"DNS:([^,\s]+)", text))
    eq(sans, {svc, f"{svc}.{NS}", f"{svc}.{NS}.svc"}, "serving certificate SANs")
    assert "TLS Web Server Authentication" in text
    # The key matches the certificate.
    key = os.path.join(ctx.tmp, "gen-tls.key")
    with open(key, "wb") as f:
        f.write(base64.b64decode(data["tls.key"]))
    eq(openssl("x509", "-in", crt, "-noout", "-pubkey"), openssl("pkey", "-in", key, "-pubout"),
       "public key of tls.crt vs tls.key")


def case_offline_renders_generate_a_new_ca(ctx):
    """Without a cluster, `lookup` finds nothing: each render generates a CA (the
    upgrade that keeps the installed Secret is test_cluster_api.py's
    helm_lookup_keeps_the_serving_secret, with the real lookup)."""
    first = one(render(ctx), "Secret")
    again = one(render(ctx), "Secret")
    assert first["data"]["ca.crt"] != again["data"]["ca.crt"], \
        "offline renders without a cluster must generate a new CA each time"
    docs = render(ctx, "--is-upgrade")
    assert one(docs, "Secret")["data"]["ca.crt"] not in (first["data"]["ca.crt"], again["data"]["ca.crt"])


def case_user_supplied_certificates(ctx):
    ca_pem = "-----BEGIN CERTIFICATE-----\nUSER-CA\n-----END CERTIFICATE-----\n"
    crt_pem = "-----BEGIN CERTIFICATE-----\nUSER-SERVING\n-----END CERTIFICATE-----\n"
    key_pem = "-----BEGIN PRIVATE KEY-----\nUSER-KEY\n-----END PRIVATE KEY-----\n"
    vals = values_file(ctx, "tls.json", {"tls": {"cert": crt_pem, "key": key_pem, "caCert": ca_pem}})
    docs = render(ctx, "-f", vals)
    b64 = lambda s: base64.b64encode(s.encode()).decode()
    data = one(docs, "Secret")["data"]
    eq(data, {"tls.crt": b64(crt_pem), "tls.key": b64(key_pem), "ca.crt": b64(ca_pem)}, "Secret data")
    eq(one(docs, "APIService")["spec"]["caBundle"], b64(ca_pem), "APIService caBundle")
    eq(one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"],
       b64(ca_pem), "webhook caBundle")
    # A certificate without its key is refused.
    half = values_file(ctx, "half.json", {"tls": {"cert": crt_pem, "caCert": ca_pem}})
    p = render_raw(ctx, "-f", half)
    assert p.returncode != 0 and "tls.key is required" in p.stderr, (p.returncode, p.stderr)


def case_webhook_configuration(ctx):
    docs = render(ctx)
    cfg = one(docs, "ValidatingWebhookConfiguration")
    eq(len(cfg["webhooks"]), 1, "webhooks")
    h = cfg["webhooks"][0]
    assert h["name"].count(".") >= 2, f"webhook name must be fully qualified: {h['name']}"
    svc = one(docs, "Service")
    eq(h["clientConfig"]["service"], {"name": svc["metadata"]["name"], "namespace": NS,
                                      "path": "/validate-delegated-heartbeat", "port": 443},
       "clientConfig.service")
    eq(h["sideEffects"], "None", "sideEffects")
    eq(h["admissionReviewVersions"], ["v1"], "admissionReviewVersions")
    eq(h["timeoutSeconds"], 2, "timeoutSeconds")
    eq(h["matchPolicy"], "Equivalent", "matchPolicy")
    eq(h["failurePolicy"], "Ignore", "failurePolicy (default)")
    eq(h["namespaceSelector"], {"matchLabels": {"kubernetes.io/metadata.name": "kube-node-lease"}},
       "namespaceSelector")
    eq(len(h["rules"]), 1, "rules")
    r = h["rules"][0]
    eq((r["apiGroups"], r["apiVersions"], sorted(r["operations"]), r["resources"]),
       (["coordination.k8s.io"], ["v1"], ["CREATE", "UPDATE"], ["leases"]), "rule")
    # On the memory store the forwarder's own writes are not sent (the webhook
    # would read the store the forwarder just read, in the same process); the
    # identity is the one the Deployment passes as --forwarder-user.
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    user = [a.split("=", 1)[1] for a in args if a.startswith("--forwarder-user=")]
    eq(len(user), 1, "--forwarder-user args")
    not_forwarder = f"request.userInfo.username != '{user[0]}'"
    exprs = [m["expression"] for m in h["matchConditions"]]
    eq(sorted(exprs), sorted([ANNOTATED_CEL, NOT_NODE_CEL, not_forwarder]), "matchConditions (memory)")
    assert len({m["name"] for m in h["matchConditions"]}) == 3
    # With etcd3 the review of the forwarder's writes stays: a consistent read of
    # what another replica, or this one's watch cache, may not have seen yet.
    etcd = one(render(ctx, "--set", "storage.backend=etcd3", "--set", "replicas=2",
                      "--set", "storage.etcd.servers={https://etcd:2379}"),
               "ValidatingWebhookConfiguration")["webhooks"][0]
    eq(sorted(m["expression"] for m in etcd["matchConditions"]), sorted([ANNOTATED_CEL, NOT_NODE_CEL]),
       "matchConditions (etcd3)")
    # The failure policy is a value; the schema refuses anything else.
    h = one(render(ctx, "--set", "webhook.failurePolicy=Fail"),
            "ValidatingWebhookConfiguration")["webhooks"][0]
    eq(h["failurePolicy"], "Fail", "failurePolicy=Fail")
    for bad in ("webhook.failurePolicy=Sometimes", "webhook.timeoutSeconds=31"):
        p = render_raw(ctx, "--set", bad)
        assert p.returncode != 0 and "schema" in p.stderr, (bad, p.returncode, p.stderr)


def case_admission_policy(ctx):
    docs = render(ctx)
    vap = one(docs, "ValidatingAdmissionPolicy")
    eq(vap["apiVersion"], "admissionregistration.k8s.io/v1", "VAP apiVersion")
    mc = vap["spec"]["matchConstraints"]
    eq(mc["namespaceSelector"], {"matchLabels": {"kubernetes.io/metadata.name": "kube-node-lease"}},
       "VAP namespaceSelector")
    r = mc["resourceRules"][0]
    eq((r["apiGroups"], sorted(r["operations"]), r["resources"]),
       (["coordination.k8s.io"], ["CREATE", "UPDATE"], ["leases"]), "VAP rule")
    exprs = sorted(m["expression"] for m in vap["spec"]["matchConditions"])
    eq(exprs, sorted([ANNOTATED_CEL, NODE_CEL]), "VAP matchConditions")
    v = vap["spec"]["validations"]
    eq(len(v), 1, "validations")
    e = v[0]["expression"]
    eq(vap["spec"]["variables"], [{"name": "key", "expression": f"'{ANNOTATION}'"}], "VAP variables")
    # Keep unchanged: allowed only on UPDATE when the old object had the same value;
    # CREATE (oldObject null) with the annotation is an addition.
    for part in ("request.operation == 'UPDATE'", "oldObject != null",
                 "variables.key in oldObject.metadata.annotations",
                 "oldObject.metadata.annotations[variables.key] == object.metadata.annotations[variables.key]"):
        assert part in e, f"{part!r} not in {e!r}"
    assert v[0].get("messageExpression") or v[0].get("message")
    eq(v[0]["reason"], "Forbidden", "reason")
    b = one(docs, "ValidatingAdmissionPolicyBinding")
    eq(b["spec"]["policyName"], vap["metadata"]["name"], "binding policyName")
    eq(b["spec"]["validationActions"], ["Deny"], "validationActions")
    docs = render(ctx, "--set", "admissionPolicy.enabled=false")
    kinds = {d["kind"] for d in docs}
    assert "ValidatingAdmissionPolicy" not in kinds and "ValidatingAdmissionPolicyBinding" not in kinds
    # Without the policy nothing else would judge the node's own annotated writes:
    # the webhook is sent them (it has the same rule).
    hook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]
    exprs = [m["expression"] for m in hook["matchConditions"]]
    assert ANNOTATED_CEL in exprs and NOT_NODE_CEL not in exprs, exprs


def doc_expressions(path):
    """The CEL `expression:` values of a Markdown file's YAML blocks, folded scalars
    joined as YAML folds them."""
    with open(path) as f:
        lines = f.read().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(?:- )?expression:\s*(.*)$", line)
        if not m:
            continue
        value = m.group(2).strip()
        if value in (">-", ">"):
            indent, parts = None, []
            for nxt in lines[i + 1:]:
                cur = len(nxt) - len(nxt.lstrip())
                if not nxt.strip() or (indent is not None and cur < indent) or \
                        (indent is None and cur <= len(m.group(1))):
                    break
                indent = cur if indent is None else indent
                parts.append(nxt.strip())
            value = " ".join(parts)
        elif value[:1] in "\"'":
            value = json.loads(value) if value[0] == '"' else value[1:-1].replace("''", "'")
        out.append(value)
    return out


def case_cel_matches_webhook_doc(ctx):
    """The CEL in the chart is the CEL docs/webhook-match-conditions.md specifies."""
    documented = doc_expressions(os.path.join(ROOT, "docs", "webhook-match-conditions.md"))
    assert len(documented) >= 4, f"could not read the doc's expressions: {documented}"
    docs = render(ctx)
    hook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]
    vap = one(docs, "ValidatingAdmissionPolicy")["spec"]
    ours = [m["expression"] for m in hook["matchConditions"]]
    ours += [m["expression"] for m in vap["matchConditions"]]
    ours += [v["expression"] for v in vap["validations"] + vap["variables"]]
    norm = lambda e: " ".join(e.split())
    documented = {norm(e) for e in documented}
    for e in ours:
        assert norm(e) in documented, f"chart CEL not in docs/webhook-match-conditions.md: {e!r}"


def binding_subjects(b):
    return {(s["kind"], s["name"], s.get("namespace")) for s in b["subjects"]}


def case_rbac(ctx):
    docs = render(ctx)
    sa = ("ServiceAccount", one(docs, "ServiceAccount")["metadata"]["name"], NS)
    crbs = find(docs, "ClusterRoleBinding")
    deleg = [b for b in crbs if b["roleRef"]["name"] == "system:auth-delegator"]
    assert len(deleg) == 1 and deleg[0]["roleRef"]["kind"] == "ClusterRole"
    eq(binding_subjects(deleg[0]), {sa}, "auth-delegator subjects")
    reader = [b for b in find(docs, "RoleBinding", namespace="kube-system")
              if b["roleRef"]["name"] == "extension-apiserver-authentication-reader"]
    assert len(reader) == 1 and reader[0]["roleRef"]["kind"] == "Role"
    eq(binding_subjects(reader[0]), {sa}, "auth-reader subjects")

    def rules_of(kind, name, namespace=None):
        return one(docs, kind, name, namespace)["rules"]

    def allows(rules, group, resource, verb):
        return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
                   for r in rules)

    def bound(kind, role_name, namespace=None):
        bkind = "ClusterRoleBinding" if namespace is None else "RoleBinding"
        return [b for b in find(docs, bkind, namespace=namespace)
                if b["roleRef"]["name"] == role_name and b["roleRef"]["kind"] == kind]

    # The forwarder: node Leases through a Role in kube-node-lease only.
    lease_roles = find(docs, "Role", namespace="kube-node-lease")
    eq(len(lease_roles), 1, "Roles in kube-node-lease")
    for verb in ("get", "list", "watch", "create", "update", "patch"):
        assert allows(lease_roles[0]["rules"], "coordination.k8s.io", "leases", verb), verb
    assert sa in binding_subjects(bound("Role", lease_roles[0]["metadata"]["name"], "kube-node-lease")[0])
    cluster_roles = find(docs, "ClusterRole")
    assert not any(allows(cr["rules"], "coordination.k8s.io", "leases", "update") for cr in cluster_roles), \
        "no ClusterRole may write Leases cluster-wide"
    fwd = [cr for cr in cluster_roles if allows(cr["rules"], "", "nodes", "patch")]
    eq(len(fwd), 1, "ClusterRoles patching nodes")
    for verb in ("get", "list", "watch", "patch"):
        assert allows(fwd[0]["rules"], "", "nodes", verb), verb
    assert allows(fwd[0]["rules"], "", "events", "create") and allows(fwd[0]["rules"], "", "events", "patch")
    assert sa in binding_subjects(bound("ClusterRole", fwd[0]["metadata"]["name"])[0])
    # The forwarding shards' and replicas' Leases in our own namespace (a killed
    # replica's presence Lease is deleted by the others).
    le = [r for r in find(docs, "Role", namespace=NS)
          if allows(r["rules"], "coordination.k8s.io", "leases", "update")]
    eq(len(le), 1, "leader-election Role")
    for verb in ("get", "list", "create", "update", "delete"):
        assert allows(le[0]["rules"], "coordination.k8s.io", "leases", verb), verb
    assert sa in binding_subjects(bound("Role", le[0]["metadata"]["name"], NS)[0])

    # Nodes and the lease proxy use our resources through kube-apiserver.
    clients = [cr for cr in cluster_roles if allows(cr["rules"], "coordination.pool", "poolleases", "update")
               and not any(k.startswith("rbac.authorization.k8s.io/aggregate-to")
                           for k in cr["metadata"].get("labels", {}))]
    eq(len(clients), 1, "pool-client ClusterRoles")
    for res in ("poolleases", "delegatedleases"):
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
            assert allows(clients[0]["rules"], "coordination.pool", res, verb), (res, verb)
    subs = binding_subjects(bound("ClusterRole", clients[0]["metadata"]["name"])[0])
    assert ("Group", "system:nodes", None) in subs, subs
    assert ("User", "openyurt:yurt-coordinator:node-lease-proxy-client", None) in subs, subs

    # aggregate-to-view/edit/admin.
    agg = {}
    for cr in cluster_roles:
        for k, v in cr["metadata"].get("labels", {}).items():
            if k.startswith("rbac.authorization.k8s.io/aggregate-to-"):
                eq(v, "true", k)
                agg[k.rsplit("-", 1)[1]] = cr
    eq(sorted(agg), ["admin", "edit", "view"], "aggregated roles")
    for res in ("poolleases", "delegatedleases"):
        for verb in ("get", "list", "watch"):
            assert allows(agg["view"]["rules"], "coordination.pool", res, verb)
        for verb in ("create", "update", "patch", "delete"):
            assert not allows(agg["view"]["rules"], "coordination.pool", res, verb), ("view", verb)
            assert allows(agg["edit"]["rules"], "coordination.pool", res, verb)
            assert allows(agg["admin"]["rules"], "coordination.pool", res, verb)


def case_replicas_guard_with_memory_store(ctx):
    for extra in ([], ["--set", "storage.backend=memory"]):
        p = render_raw(ctx, "--set", "replicas=2", *extra)
        assert p.returncode != 0, f"replicas=2 with memory rendered:\n{p.stdout[:300]}"
        assert "replicas=2 needs storage.backend=etcd3" in p.stderr, p.stderr
        assert p.stdout == "", "nothing may be printed when the guard fails"
    # etcd3 without servers is refused too.
    p = render_raw(ctx, "--set", "storage.backend=etcd3")
    assert p.returncode != 0 and "storage.etcd.servers is required" in p.stderr, p.stderr
    p = render_raw(ctx, "--set", "replicas=0")
    assert p.returncode != 0 and "schema" in p.stderr, p.stderr


def case_etcd3_replicas(ctx):
    docs = render(ctx, "--set", "storage.backend=etcd3,replicas=3",
                  "--set", "storage.etcd.servers={https://etcd-0.etcd:2379,https://etcd-1.etcd:2379}")
    dep, c = container(docs)
    eq(dep["spec"]["replicas"], 3, "replicas")
    eq(dep["spec"]["strategy"]["type"], "RollingUpdate", "strategy")
    aff = dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    pref = aff["preferredDuringSchedulingIgnoredDuringExecution"]
    eq(len(pref), 1, "anti-affinity terms")
    term = pref[0]["podAffinityTerm"]
    eq(term["topologyKey"], "kubernetes.io/hostname", "topologyKey")
    eq(term["labelSelector"]["matchLabels"], server_selector(dep), "anti-affinity selector")
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in aff
    a = args_map(c)
    eq(a["leader-elect"], "true", "--leader-elect")
    eq(a["storage-backend"], "etcd3", "--storage-backend")
    eq(a["etcd-servers"], "https://etcd-0.etcd:2379,https://etcd-1.etcd:2379", "--etcd-servers")
    eq(a["leader-elect-resource-namespace"], NS, "--leader-elect-resource-namespace")
    assert a["leader-elect-resource-name"]
    eq(a["forwarder-shards"], "8", "--forwarder-shards")
    pdb = one(docs, "PodDisruptionBudget")
    eq(pdb["spec"].get("minAvailable"), 1, "PDB minAvailable")
    assert "maxUnavailable" not in pdb["spec"]
    eq(pdb["spec"]["selector"], {"matchLabels": server_selector(dep)}, "PDB selector")
    # One replica: maxUnavailable, so that drains are not blocked forever.
    pdb1 = one(render(ctx), "PodDisruptionBudget")
    eq(pdb1["spec"].get("maxUnavailable"), 1, "single-replica PDB maxUnavailable")
    assert "minAvailable" not in pdb1["spec"]


def case_network_policy(ctx):
    docs = render(ctx, "--set", "networkPolicy.controlPlane.cidrs={10.0.0.0/24,192.168.10.5/32}")
    np = one(docs, "NetworkPolicy")
    dep = one(docs, "Deployment")
    eq(np["spec"]["podSelector"]["matchLabels"], server_selector(dep), "podSelector")
    eq(np["spec"]["policyTypes"], ["Ingress"], "policyTypes")
    rules = np["spec"]["ingress"]
    eq(len(rules), 2, "ingress rules")
    for r in rules:
        eq(r["ports"], [{"port": 8443, "protocol": "TCP"}], "ports")
    eq([f["ipBlock"]["cidr"] for f in rules[0]["from"]], ["10.0.0.0/24", "192.168.10.5/32"],
       "control-plane CIDRs")
    eq(rules[1]["from"], [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
       "metrics scraper")
    assert "NetworkPolicy" not in {d["kind"] for d in render(ctx, "--set", "networkPolicy.enabled=false")}
    p = render_raw(ctx, "--set", "networkPolicy.controlPlane.cidrs={not-a-cidr}")
    assert p.returncode != 0 and "schema" in p.stderr, p.stderr


def case_dashboard(ctx):
    docs = render(ctx)
    cms = [d for d in find(docs, "ConfigMap") if d["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    eq(len(cms), 1, "dashboard ConfigMaps")
    data = cms[0]["data"]
    eq(len(data), 1, "dashboard files")
    dash = json.loads(next(iter(data.values())))
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p.get("targets", []))
    for metric in ("apiserver_request_total", "apiserver_request_duration_seconds",
                   "apiserver_registered_watchers", "poolcoord_delegated_nodes",
                   "poolcoord_pool_leader_changes_total", "poolcoord_forward_duration_seconds",
                   "poolcoord_forward_errors_total", "poolcoord_pools_without_leader"):
        assert metric in exprs, f"no panel queries {metric}"
    assert dash["title"] and len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def case_prometheus_rule(ctx):
    kinds = {d["kind"] for d in render(ctx)}
    assert "PrometheusRule" not in kinds, "rendered although monitoring.coreos.com/v1 is not served"
    docs = render(ctx, "--api-versions", PROM, "--set", "monitoring.prometheusRule.delegatedNodeFor=45m")
    pr = one(docs, "PrometheusRule")
    eq(pr["apiVersion"], PROM, "apiVersion")
    rules = {r["alert"]: r for g in pr["spec"]["groups"] for r in g["rules"]}
    assert {"PoolcoordNodeDelegatedTooLong", "PoolcoordPoolWithoutLeader",
            "PoolcoordForwardingErrors"} <= set(rules), sorted(rules)
    delegated = rules["PoolcoordNodeDelegatedTooLong"]
    assert "poolcoord_delegated_nodes" in delegated["expr"]
    eq(delegated["for"], "45m", "delegated threshold")
    assert "poolcoord_pools_without_leader" in rules["PoolcoordPoolWithoutLeader"]["expr"]
    assert "poolcoord_forward_errors_total" in rules["PoolcoordForwardingErrors"]["expr"]
    behind = rules["PoolcoordForwarderBehind"]
    eq(behind["expr"], "max(poolcoord_forwarder_queue_lag_seconds) > 10", "forwarder lag alert")
    eq(behind["for"], "1m", "forwarder lag threshold")
    for r in rules.values():
        assert r["labels"]["severity"] and r["annotations"]["summary"], r
        # Prometheus' own templating survives Helm's.
    assert "{{ $labels.pool }}" in delegated["annotations"]["summary"], delegated["annotations"]
    kinds = {d["kind"] for d in render(ctx, "--api-versions", PROM,
                                       "--set", "monitoring.prometheusRule.enabled=false")}
    assert "PrometheusRule" not in kinds


def case_yaml_stream(ctx):
    p = render_raw(ctx, "--api-versions", PROM)
    assert p.returncode == 0, p.stderr
    count = len(render(ctx, "--api-versions", PROM)) + len(render(ctx, "--api-versions", PROM, hooks=True))
    eq(len(re.findall(r"(?m)^---$", p.stdout)), count, "documents in the YAML stream")
    eq(len(re.findall(r"(?m)^# Source: poolcoord/templates/", p.stdout)), count, "# Source comments")
    assert "kind: APIService" in p.stdout


def case_helm_lint(ctx):
    """`helm lint --strict` for the defaults and each values variant shipped."""
    for extra in ([], ["--set", "storage.backend=etcd3,replicas=3",
                       "--set", "storage.etcd.servers={https://etcd-0.etcd:2379}"],
                  ["--set", "webhook.failurePolicy=Fail"],
                  ["--set", "service.type=ExternalName,service.externalName=localhost"]):
        p = subprocess.run([helm_binary(), "lint", "--strict", CHART, "--namespace", NS, *extra],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and "1 chart(s) linted, 0 chart(s) failed" in p.stdout, \
            f"helm lint {extra}: {p.stdout}{p.stderr}"
    p = subprocess.run([helm_binary(), "lint", "--strict", CHART, "--set", "webhook.timeoutSeconds=31"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "timeoutSeconds" in p.stdout + p.stderr, p.stdout + p.stderr


def case_external_name_service(ctx):
    """service.type=ExternalName (a server outside the cluster's pods, as the
    end-to-end tests run it): externalName, no selector, the port the aggregator
    and the webhook client dial."""
    docs = render(ctx, "--set", "service.type=ExternalName,service.externalName=localhost,service.port=18443")
    svc = one(docs, "Service")["spec"]
    eq((svc["type"], svc["externalName"]), ("ExternalName", "localhost"), "ExternalName Service")
    assert "selector" not in svc, svc
    eq(one(docs, "APIService")["spec"]["service"]["port"], 18443, "APIService port")
    eq(one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["service"]["port"], 18443,
       "webhook port")
    p = render_raw(ctx, "--set", "service.type=ExternalName")
    assert p.returncode != 0 and "service.externalName is required" in p.stderr, p.stderr


def case_kube_version_and_names(ctx):
    p = render_raw(ctx, "--kube-version", "v1.29.5")
    assert p.returncode != 0 and "kubeVersion" in p.stderr, p.stderr
    docs = render(ctx, "--set", "fullnameOverride=pc")
    eq(one(docs, "Service")["metadata"]["name"], "pc", "fullnameOverride")
    eq(one(docs, "APIService")["spec"]["service"]["name"], "pc", "APIService service ref")
    text = openssl("x509", "-noout", "-ext", "subjectAltName",
                   stdin=base64.b64decode(one(docs, "Secret")["data"]["tls.crt"]))
    assert f"DNS:pc.{NS}.svc" in text, text


def case_cleanup_hook(ctx):
    """`helm uninstall`'s post-delete hook (docs/chart.md "Uninstall"): a Job
    running the image with --cleanup as the Deployment runs it (non-root,
    read-only root filesystem), bounded, with its own ServiceAccount and the
    least RBAC, all hooks created before the Job and deleted with it on success;
    none of it in the release; off with cleanup.enabled=false."""
    docs = render(ctx)
    hooks = render(ctx, hooks=True)
    eq(sorted(d["kind"] for d in hooks),
       ["ClusterRole", "ClusterRoleBinding", "Job", "Role", "RoleBinding", "ServiceAccount"], "hook kinds")
    name = "poolcoord-cleanup"
    for d in hooks:
        a = d["metadata"]["annotations"]
        eq(a[HOOK], "post-delete", f"{d['kind']} hook")
        eq(a["helm.sh/hook-delete-policy"], "before-hook-creation,hook-succeeded", f"{d['kind']} delete policy")
        eq(d["metadata"]["name"], name, f"{d['kind']} name")
        eq(d["metadata"]["labels"]["app.kubernetes.io/component"], "cleanup", f"{d['kind']} component")
        eq(d["metadata"]["labels"]["app.kubernetes.io/instance"], RELEASE, f"{d['kind']} instance")
        # Helm creates hooks of one event by weight: everything the Job needs first.
        eq(int(a["helm.sh/hook-weight"]), 0 if d["kind"] == "Job" else -5, f"{d['kind']} weight")
    eq(one(hooks, "ServiceAccount")["metadata"]["namespace"], NS, "the hook's ServiceAccount namespace")
    # Least RBAC: Nodes read and patched (the taint), node Leases read and updated (the marks).
    eq(one(hooks, "ClusterRole")["rules"],
       [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}], "ClusterRole rules")
    role = one(hooks, "Role", namespace="kube-node-lease")
    eq(role["rules"], [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                        "verbs": ["get", "list", "update"]}], "Role rules")
    sa = ("ServiceAccount", name, NS)
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        b = one(hooks, kind)
        eq(binding_subjects(b), {sa}, f"{kind} subjects")
        eq(b["roleRef"]["name"], name, f"{kind} roleRef")
    eq(one(hooks, "RoleBinding")["metadata"]["namespace"], "kube-node-lease", "RoleBinding namespace")

    job = one(hooks, "Job")
    eq(job["metadata"]["namespace"], NS, "Job namespace")
    js = job["spec"]
    eq(js["activeDeadlineSeconds"], 180, "activeDeadlineSeconds")
    eq(js["backoffLimit"], 0, "backoffLimit")
    pod = js["template"]["spec"]
    eq(pod["restartPolicy"], "Never", "restartPolicy")
    eq(pod["serviceAccountName"], name, "the Job's ServiceAccount")
    dep, server = container(docs)
    eq(pod["securityContext"], dep["spec"]["template"]["spec"]["securityContext"], "pod securityContext")
    cs = pod["containers"]
    eq(len(cs), 1, "containers")
    c = cs[0]
    eq(c["image"], server["image"], "image")
    eq(c["securityContext"], server["securityContext"], "container securityContext")
    eq(c["securityContext"]["readOnlyRootFilesystem"], True, "read-only root filesystem")
    eq(c["securityContext"]["runAsNonRoot"], True, "runAsNonRoot")
    assert c["resources"]["limits"]["memory"], c["resources"]
    # Not one of the server's pods: the Service and the PDB do not select it.
    selector = server_selector(dep)
    labels = js["template"]["metadata"]["labels"]
    assert any(labels.get(k) != v for k, v in selector.items()), labels
    eq(c["args"], ["--cleanup", "--cleanup-timeout=2m", "--v=1"], "args")
    # The bound: the program's own timeout ends it before the Job's deadline does.
    assert js["activeDeadlineSeconds"] > 120 + 30, js["activeDeadlineSeconds"]
    # The release's own objects hold none of it.
    assert not any(d["metadata"]["name"] == name for d in docs), [d["metadata"]["name"] for d in docs]

    # The values reach it as they reach the Deployment; --kubeconfig too.
    hooks = render(ctx, "--set", "server.kubeconfig=/etc/poolcoord/kubeconfig,server.verbosity=3",
                   "--set", "cleanup.timeout=90s,cleanup.activeDeadlineSeconds=150",
                   "--set", "nodeSelector.role=cloud", "--set", "fullnameOverride=pc", hooks=True)
    job = one(hooks, "Job")
    pod = job["spec"]["template"]["spec"]
    eq(pod["containers"][0]["args"],
       ["--cleanup", "--cleanup-timeout=90s", "--kubeconfig=/etc/poolcoord/kubeconfig", "--v=3"], "args")
    eq(job["spec"]["activeDeadlineSeconds"], 150, "activeDeadlineSeconds from the value")
    eq(pod["nodeSelector"], {"role": "cloud"}, "nodeSelector")
    eq(job["metadata"]["name"], "pc-cleanup", "name from fullnameOverride")
    unknown = {a[2:].partition("=")[0] for a in pod["containers"][0]["args"]} - server_flags(ctx)
    assert not unknown, f"the hook passes flags the server does not have: {sorted(unknown)}"
    eq(render(ctx, "--set", "cleanup.enabled=false", hooks=True), [], "hooks with cleanup.enabled=false")
    p = render_raw(ctx, "--set", "cleanup.activeDeadlineSeconds=5")
    assert p.returncode != 0 and "activeDeadlineSeconds" in p.stderr, p.stderr[-400:]

    # The rendered arguments start the real program: with no cloud to reach
    # (no --kubeconfig, not in a pod) it says so and fails (1), not a flag error (2).
    if ctx.server_bin and os.access(ctx.server_bin, os.X_OK):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        args = one(render(ctx, hooks=True), "Job")["spec"]["template"]["spec"]["containers"][0]["args"]
        p = subprocess.run([ctx.server_bin, *args], capture_output=True, text=True, timeout=30, env=env)
        assert p.returncode == 1 and "--cleanup needs the cloud cluster" in p.stderr, \
            f"{p.returncode} {p.stderr[-500:]}"


def case_agent_daemonset(ctx):
    """agent.enabled: the poolcoord-agent DaemonSet (docs/agent.md) and the RBAC its
    node identities need; off by default. Its arguments are poolcoord-agent's flags."""
    assert not [d for d in render(ctx) if d["kind"] == "DaemonSet"], "an agent DaemonSet by default"
    docs = render(ctx, "--set", "agent.enabled=true,server.poolLabel=example.com/pool")
    ds = one(docs, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    # Nothing that selects the server's pods selects the agent's: a PDB that did
    # was never computed by kube-controller-manager (a DaemonSet has no scale).
    agent_labels = ds["spec"]["template"]["metadata"]["labels"]
    dep = one(docs, "Deployment")
    for kind, sel in (("Service", one(docs, "Service")["spec"]["selector"]),
                      ("PodDisruptionBudget", one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]),
                      ("NetworkPolicy", one(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"])):
        assert any(agent_labels.get(k) != v for k, v in sel.items()), f"the {kind} selects the agent's pods"
        eq(sel, server_selector(dep), f"{kind} selector")
    eq(ds["spec"]["updateStrategy"], {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
       "rolling update, one agent at a time")
    eq((spec["hostNetwork"], spec["dnsPolicy"], spec["automountServiceAccountToken"]),
       (True, "ClusterFirstWithHostNet", False), "host network, no token")
    expr = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]
    eq((expr["key"], expr["operator"]), ("example.com/pool", "Exists"), "only pool nodes")
    tolerated = {(t["key"], t["operator"], t.get("effect")) for t in spec["tolerations"]}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.openyurt.io/unschedulable"):
        assert (key, "Exists", None) in tolerated, f"{key} not tolerated (every effect): {tolerated}"
    c = spec["containers"][0]
    eq(c["command"], ["/usr/local/bin/poolcoord-agent"], "command")
    args = args_map(c)
    eq(args["pool-label"], "example.com/pool", "--pool-label follows server.poolLabel")
    eq(c["resources"]["requests"], {"cpu": "10m", "memory": "24Mi"}, "requests from the benchmark")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    for name in ("kubelet-pki", "cluster-ca", "kubeconfig"):
        assert mounts[name].get("readOnly"), f"{name} mounted read-only"
    assert not mounts["peer-cache"].get("readOnly"), "the peer cache is written"
    vols = {v["name"]: v["hostPath"] for v in spec["volumes"]}
    eq(vols["peer-cache"], {"path": "/var/lib/poolcoord-agent", "type": "DirectoryOrCreate"}, "peer cache hostPath")
    eq(vols["kubelet-pki"]["path"], "/var/lib/kubelet/pki", "kubelet PKI hostPath")
    sc = c["securityContext"]
    eq((sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"], sc["capabilities"]), (True, False, {"drop": ["ALL"]}),
       "no capabilities")
    # Node identities may read Nodes (their pool's members) since 1.32's Node authorizer no longer lets them.
    role = one(docs, "ClusterRole", "poolcoord-agent-node-reader")
    eq(role["rules"], [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}], "node reader")
    eq(one(docs, "ClusterRoleBinding", "poolcoord-agent-node-reader")["subjects"],
       [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}], "bound to nodes")
    # The rendered arguments are the agent's flags: it gets past flag parsing (exit 2
    # is a flag error) to reading the node's certificate, which is not here (exit 1).
    agent = os.path.join(os.path.dirname(ctx.server_bin), "poolcoord-agent") if ctx.server_bin else ""
    if agent and os.access(agent, os.X_OK):
        p = subprocess.run([agent, *c["args"]], capture_output=True, text=True, timeout=30)
        eq(p.returncode, 1, f"poolcoord-agent with the rendered args ({p.stderr.strip()[-300:]})")
        assert "kubelet-client-current.pem" in p.stderr, p.stderr
    with_server = render(ctx, "--set", "agent.enabled=true,agent.server=https://10.0.0.1:6443")
    c = one(with_server, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    eq(args_map(c)["server"], "https://10.0.0.1:6443", "--server")
    assert "kubeconfig" not in args_map(c), "--kubeconfig with --server"
    p = render_raw(ctx, "--set", "agent.enabled=true,agent.heartbeatInterval=soon")
    assert p.returncode != 0 and "heartbeatInterval" in p.stderr, p.stderr


CASES = [
    case_agent_daemonset,
    case_cleanup_hook,
    case_defaults_render_every_object,
    case_deployment_memory_store,
    case_deployment_args_are_server_flags,
    case_service_and_apiservice,
    case_rendered_pod_runs_the_server,
    case_generated_certificate_is_valid,
    case_offline_renders_generate_a_new_ca,
    case_user_supplied_certificates,
    case_webhook_configuration,
    case_admission_policy,
    case_cel_matches_webhook_doc,
    case_rbac,
    case_replicas_guard_with_memory_store,
    case_etcd3_replicas,
    case_network_policy,
    case_dashboard,
    case_prometheus_rule,
    case_yaml_stream,
    case_helm_lint,
    case_external_name_service,
    case_kube_version_and_names,
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="", help="poolcoord-apiserver (for its --help)")
    a = ap.parse_args()
    passed = failed = 0
    tmp = tempfile.mkdtemp(prefix="poolcoord-chart-")
    try:
        t0 = time.time()
        try:
            p = subprocess.run([helm_binary(), "version", "--short"], capture_output=True, text=True, timeout=30)
            assert p.returncode == 0 and p.stdout.startswith("v3."), p.stdout + p.stderr
            print(f"PASS helm {p.stdout.strip()} ({time.time() - t0:.1f}s)", flush=True)
            passed += 1
        except Exception as e:
            print(f"FAIL helm: {e}", flush=True)
            print(f"{passed} passed, {failed + 1} failed")
            return 1
        ctx = Ctx(tmp, os.path.abspath(a.binary) if a.binary else "")
        for case in CASES:
            if run_one(case, ctx):
                passed += 1
            else:
                failed += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
