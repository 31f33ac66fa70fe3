"""A stand-in for the cloud cluster's kube-apiserver, for what the real one cannot
be made to do: answer 5xx, time out, drop connections, stay without the
authentication ConfigMap (test_delegated_auth.py, test_forwarder.py). Everything
else runs against a real kube-apiserver (tests/e2e/kube_cluster.py). Around the
faults it keeps kube-apiserver's semantics for what poolcoord uses:

- coordination.k8s.io/v1 Leases (namespaced): get, list (labelSelector key=value),
  watch (a selector's watch reports an object entering it as ADDED and leaving it as
  DELETED, as kube-apiserver's does), create (409 AlreadyExists), update (404, 409
  Conflict on a stale resourceVersion), delete;
- core/v1 Nodes: get, list (labelSelector key or key=value), watch (resourceVersion,
  410 Expired events for a too-old resourceVersion), merge patches with optimistic
  concurrency (a PUT is refused as the chart's RBAC refuses it);
- core/v1 Events: create, list;
- TokenReview and SubjectAccessReview (static answers set by the test);
- ConfigMaps in kube-system (kube-system/extension-apiserver-authentication): get,
  list and watch (fieldSelector metadata.name=<name>); set_configmap/delete_configmap
  change them live;
- count(method, path) tells how often a path was called (e.g. TokenReview caching);
- inject(method, path, action) makes the next calls of a path fail (a status
  code, a timeout, a dropped connection).

One global resourceVersion counter, as etcd gives. HTTPS with a throw-away CA made
by the openssl CLI; clients authenticate with a bearer token. Standard library only.
"""
import copy
import http.server
import json
import os
import queue
import socket
import socketserver
import ssl
import subprocess
import threading
import time
import uuid
from urllib.parse import parse_qs, urlparse


def status(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details:
        s["details"] = details
    return s


class CloudState:
    def __init__(self):
        self.lock = threading.Condition()
        self.rv = 100
        self.leases = {}   # (ns, name) -> object
        self.nodes = {}    # name -> object
        self.events = []
        self.configmaps = {}
        self.node_events = []  # (rv, type, object) for watches
        self.lease_events = []  # (rv, type, object, previous) of every namespace's Leases
        self.tokens = {}   # token -> user info dict (TokenReview)
        self.sar_allow = lambda spec: False
        self.requests = []  # (method, path, user) log
        self.configmap_events = []  # (rv, type, object) of kube-system ConfigMaps, for watches
        self.faults = []  # [method, path, action, times left]: see inject()

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    # --- helpers for tests
    def add_node(self, name, labels=None):
        with self.lock:
            obj = {"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": labels or {},
                                "resourceVersion": self.next_rv()},
                   "spec": {}}
            self.nodes[name] = obj
            self.node_events.append((int(self.rv), "ADDED", copy.deepcopy(obj)))
            self.lock.notify_all()
            return obj

    def lease(self, name, ns="kube-node-lease"):
        with self.lock:
            o = self.leases.get((ns, name))
            return copy.deepcopy(o) if o else None

    def put_lease(self, obj, ns="kube-node-lease"):
        with self.lock:
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("uid", str(uuid.uuid4()))
            obj["metadata"]["namespace"] = ns
            obj["metadata"]["resourceVersion"] = self.next_rv()
            prev = self.leases.get((ns, obj["metadata"]["name"]))
            self.leases[(ns, obj["metadata"]["name"])] = obj
            self.lease_events.append((int(self.rv), "MODIFIED" if prev else "ADDED", copy.deepcopy(obj), prev))
            self.lock.notify_all()

    def node(self, name):
        with self.lock:
            return copy.deepcopy(self.nodes.get(name))

    def set_configmap(self, name, data):
        """Creates or replaces the kube-system ConfigMap `name` (watchers see ADDED/MODIFIED)."""
        with self.lock:
            old = self.configmaps.get(name)
            obj = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "kube-system",
                                "uid": (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()),
                                "resourceVersion": self.next_rv()},
                   "data": dict(data)}
            self.configmaps[name] = obj
            self.configmap_events.append((int(self.rv), "MODIFIED" if old else "ADDED", copy.deepcopy(obj)))
            self.lock.notify_all()
            return obj

    def delete_configmap(self, name):
        with self.lock:
            obj = self.configmaps.pop(name, None)
            if obj is not None:
                obj = copy.deepcopy(obj)
                obj["metadata"]["resourceVersion"] = self.next_rv()
                self.configmap_events.append((int(self.rv), "DELETED", obj))
                self.lock.notify_all()

    def count(self, method, path):
        """How many requests the fixture has answered for exactly this method and path."""
        return sum(1 for m, p in list(self.requests) if m == method and p == path)

    # --- faults: what a real kube-apiserver cannot be made to do on purpose
    def inject(self, method, path, action, times=1):
        """The next `times` requests for exactly `method` and `path` fail: `action` is
        an HTTP status code (answered with a Status of that code), "timeout" (read,
        then no answer for 60 s) or "drop" (the connection closes without an answer)."""
        with self.lock:
            self.faults.append([method, path, action, times])

    def take_fault(self, method, path):
        with self.lock:
            for f in self.faults:
                if f[0] == method and f[1] == path and f[3] > 0:
                    f[3] -= 1
                    return f[2]
        return None


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch, as kube-apiserver applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


def label_match(obj, selector):
    if not selector:
        return True
    labels = obj["metadata"].get("labels") or {}
    for term in selector.split(","):
        if "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k.rstrip("=")) != v.lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: CloudState = None

    def log_message(self, *args):
        pass

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        return json.loads(data) if data else None

    def _auth(self):
        h = self.headers.get("Authorization", "")
        if h != "Bearer " + self.server.token:
            self._send(401, status(401, "Unauthorized", "Unauthorized"))
            return False
        return True

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PUT(self):
        self._route("PUT")

    def do_PATCH(self):
        self._route("PATCH")

    def do_DELETE(self):
        self._route("DELETE")

    def _route(self, method):
        if not self._auth():
            return
        u = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        parts = [p for p in u.path.split("/") if p]
        st = self.state
        st.requests.append((method, u.path))
        body = self._body() if method in ("POST", "PUT", "PATCH") else None
        fault = st.take_fault(method, u.path)
        if fault is not None:
            return self._fault(fault)
        # /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]
        if parts[:3] == ["apis", "coordination.k8s.io", "v1"] and len(parts) >= 6 and parts[5] == "leases":
            return self._leases(method, parts[4], parts[6] if len(parts) > 6 else None, q, body)
        if parts[:3] == ["api", "v1", "nodes"]:
            return self._nodes(method, parts[3] if len(parts) > 3 else None, q, body)
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5 and parts[4] == "events":
            with st.lock:
                if method == "POST":
                    ev = copy.deepcopy(body)
                    md = ev.setdefault("metadata", {})
                    md["name"] = md.get("name") or md.get("generateName", "ev.") + uuid.uuid4().hex[:5]
                    md["resourceVersion"] = st.next_rv()
                    st.events.append(ev)
                    return self._send(201, ev)
                return self._send(200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": st.events})
        if parts == ["apis", "authentication.k8s.io", "v1", "tokenreviews"] and method == "POST":
            user = st.tokens.get(body["spec"]["token"])
            out = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": body["spec"],
                   "status": {"authenticated": bool(user), **({"user": user} if user else {})}}
            return self._send(201, out)
        if parts == ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] and method == "POST":
            allowed = bool(st.sar_allow(body["spec"]))
            return self._send(201, {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                    "spec": body["spec"], "status": {"allowed": allowed}})
        if parts == ["api", "v1", "namespaces", "kube-system", "configmaps"] and method == "GET":
            return self._configmaps(q)
        if parts[:5] == ["api", "v1", "namespaces", "kube-system", "configmaps"] and len(parts) == 6:
            cm = st.configmaps.get(parts[5])
            if cm is None:
                return self._send(404, status(404, "NotFound", f'configmaps "{parts[5]}" not found'))
            return self._send(200, cm)
        self._send(404, status(404, "NotFound", "the server could not find the requested resource"))

    def _fault(self, action):
        if action == "timeout":
            time.sleep(60)
            self.close_connection = True
        elif action == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self._send(action, status(action, "InternalError" if action == 500 else "ServiceUnavailable",
                                      f"injected by the test: {action}"))

    def _configmaps(self, q):
        """List or watch kube-system ConfigMaps; fieldSelector metadata.name=<n> narrows to one."""
        st = self.state
        sel = q.get("fieldSelector") or ""
        want = sel.split("=", 1)[1].lstrip("=") if sel.startswith("metadata.name=") else None

        def match(obj):
            return want is None or obj["metadata"]["name"] == want
        if q.get("watch") in ("true", "1"):
            return self._stream(st.configmap_events, q, match)
        with st.lock:
            items = [copy.deepcopy(o) for _, o in sorted(st.configmaps.items()) if match(o)]
            return self._send(200, {"kind": "ConfigMapList", "apiVersion": "v1",
                                    "metadata": {"resourceVersion": str(st.rv)}, "items": items})

    def _stream(self, events, q, match, expires=False):
        """A watch over `events` ((rv, type, object) tuples) from q's resourceVersion.
        With `expires`, a resourceVersion far older than the history kept is answered
        with 410 Expired, as kube-apiserver's watch cache does."""
        st = self.state
        since = int(q.get("resourceVersion") or 0)
        timeout = min(int(q.get("timeoutSeconds") or 60), 60)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(obj):
            data = (json.dumps(obj) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        deadline = time.time() + timeout
        try:
            if expires:
                with st.lock:
                    oldest = events[0][0] if events else st.rv
                    if since and since < oldest - 1 and events and events[0][0] > since + 1000:
                        chunk({"type": "ERROR",
                               "object": status(410, "Expired", f"too old resource version: {since}")})
                        self.wfile.write(b"0\r\n\r\n")
                        return
            sent = since
            while time.time() < deadline and not self.server.stopping:
                with st.lock:
                    pending = [e for e in events if e[0] > sent]
                    if not pending:
                        st.lock.wait(0.2)
                        continue
                for rv, typ, obj, *prev in pending:
                    sent = rv
                    if prev:
                        # A selector's watch, as kube-apiserver's: an object
                        # entering the selection is ADDED, one leaving it DELETED.
                        was = prev[0] is not None and match(prev[0])
                        if typ == "DELETED":
                            typ = "DELETED" if was else None
                        elif match(obj):
                            typ = "MODIFIED" if was else "ADDED"
                        else:
                            typ, obj = ("DELETED", obj) if was else (None, obj)
                        if typ:
                            chunk({"type": typ, "object": obj})
                    elif match(obj):
                        chunk({"type": typ, "object": obj})
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass

    def _leases(self, method, ns, name, q, body):
        st = self.state
        if name is None and method == "GET" and q.get("watch") in ("true", "1"):
            sel = q.get("labelSelector")
            return self._stream(st.lease_events, q,
                                lambda obj: obj["metadata"].get("namespace") == ns and label_match(obj, sel),
                                expires=True)
        with st.lock:
            if name is None and method == "GET":
                items = [copy.deepcopy(o) for (n, _), o in sorted(st.leases.items())
                         if n == ns and label_match(o, q.get("labelSelector"))]
                return self._send(200, {"kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1",
                                        "metadata": {"resourceVersion": str(st.rv)}, "items": items})
            if name is None and method == "POST":
                key = (ns, body["metadata"]["name"])
                if key in st.leases:
                    return self._send(409, status(409, "AlreadyExists",
                                                  f'leases.coordination.k8s.io "{key[1]}" already exists'))
                obj = copy.deepcopy(body)
                obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), resourceVersion=st.next_rv())
                st.leases[key] = obj
                st.lease_events.append((int(st.rv), "ADDED", copy.deepcopy(obj), None))
                st.lock.notify_all()
                return self._send(201, obj)
            key = (ns, name)
            cur = st.leases.get(key)
            if cur is None:
                return self._send(404, status(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found',
                                              {"name": name, "group": "coordination.k8s.io", "kind": "leases"}))
            if method == "GET":
                return self._send(200, cur)
            if method == "PUT":
                rv = body.get("metadata", {}).get("resourceVersion")
                if rv and rv != cur["metadata"]["resourceVersion"]:
                    return self._send(409, status(409, "Conflict",
                                                  f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": '
                                                  "the object has been modified; please apply your changes to the "
                                                  "latest version and try again"))
                obj = copy.deepcopy(body)
                obj["metadata"].update(namespace=ns, uid=cur["metadata"]["uid"], resourceVersion=st.next_rv())
                st.leases[key] = obj
                st.lease_events.append((int(st.rv), "MODIFIED", copy.deepcopy(obj), copy.deepcopy(cur)))
                st.lock.notify_all()
                return self._send(200, obj)
            if method == "DELETE":
                del st.leases[key]
                st.next_rv()
                st.lease_events.append((int(st.rv), "DELETED", copy.deepcopy(cur), copy.deepcopy(cur)))
                st.lock.notify_all()
                return self._send(200, cur)
        self._send(405, status(405, "MethodNotAllowed", "method not allowed"))

    def _nodes(self, method, name, q, body):
        st = self.state
        if name is None and method == "GET" and q.get("watch") in ("true", "1"):
            return self._watch_nodes(q)
        with st.lock:
            if name is None and method == "GET":
                items = [copy.deepcopy(o) for _, o in sorted(st.nodes.items())
                         if label_match(o, q.get("labelSelector"))]
                return self._send(200, {"kind": "NodeList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": str(st.rv)}, "items": items})
            cur = st.nodes.get(name)
            if cur is None:
                return self._send(404, status(404, "NotFound", f'nodes "{name}" not found'))
            if method == "GET":
                return self._send(200, cur)
            if method == "PUT":
                # The chart grants nodes get/list/watch/patch, not update (issue 11).
                return self._send(403, status(403, "Forbidden",
                                              f'nodes "{name}" is forbidden: User cannot update resource '
                                              '"nodes" in API group "" at the cluster scope'))
            if method == "PATCH":
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    return self._send(415, status(415, "UnsupportedMediaType", "merge patches only"))
                rv = (body.get("metadata") or {}).get("resourceVersion")
                if rv and rv != cur["metadata"]["resourceVersion"]:
                    return self._send(409, status(409, "Conflict", f'Operation cannot be fulfilled on nodes "{name}"'))
                obj = merge_patch(copy.deepcopy(cur), body)
                obj["metadata"]["resourceVersion"] = st.next_rv()
                st.nodes[name] = obj
                st.node_events.append((int(st.rv), "MODIFIED", copy.deepcopy(obj)))
                st.lock.notify_all()
                return self._send(200, obj)
        self._send(405, status(405, "MethodNotAllowed", "method not allowed"))

    def _watch_nodes(self, q):
        sel = q.get("labelSelector")
        self._stream(self.state.node_events, q, lambda obj: label_match(obj, sel), expires=True)


def make_ca(workdir, name):
    """A throw-away CA (openssl CLI); returns (cert path, key path)."""
    key, crt = os.path.join(workdir, f"{name}.key"), os.path.join(workdir, f"{name}.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", f"/CN={name}",
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
                    "-keyout", key, "-out", crt], check=True, capture_output=True)
    return crt, key


def make_client_cert(workdir, ca, name, cn, orgs=(), usage="clientAuth"):
    """A certificate signed by `ca` ((cert, key)) with subject CN=cn, O=each of orgs and
    extendedKeyUsage `usage`; returns (cert path, key path)."""
    key, csr, crt = (os.path.join(workdir, f"{name}.{x}") for x in ("key", "csr", "crt"))
    subj = "".join(f"/O={o}" for o in orgs) + f"/CN={cn}"
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-subj", subj, "-keyout", key, "-out", csr], check=True, capture_output=True)
    ext = os.path.join(workdir, f"{name}.ext")
    with open(ext, "w") as f:
        f.write(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage={usage}\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
                    "-days", "1", "-extfile", ext, "-out", crt], check=True, capture_output=True)
    return crt, key


class ThreadingHTTPSServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    stopping = False


class CloudFixture:
    """Starts the fixture on 127.0.0.1:<free port>; `kubeconfig` is a file for poolcoord's --kubeconfig."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.state = CloudState()
        self.token = uuid.uuid4().hex
        key, crt = os.path.join(workdir, "cloud.key"), os.path.join(workdir, "cloud.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=cloud-fixture", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", key, "-out", crt], check=True, capture_output=True)
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPSServer(("127.0.0.1", 0), handler)
        self.httpd.token = self.token
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.kubeconfig = os.path.join(workdir, "cloud.kubeconfig")
        with open(self.kubeconfig, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "cloud",
                       "clusters": [{"name": "cloud", "cluster": {"server": f"https://127.0.0.1:{self.port}",
                                                                  "certificate-authority": crt}}],
                       "users": [{"name": "poolcoord", "user": {"token": self.token}}],
                       "contexts": [{"name": "cloud", "context": {"cluster": "cloud", "user": "poolcoord"}}]}, f)

    def stop(self):
        self.httpd.stopping = True
        self.httpd.shutdown()
        self.httpd.server_close()
