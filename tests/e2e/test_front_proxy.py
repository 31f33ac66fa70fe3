"""Front-proxy (requestheader) authentication through a real proxy: nginx set up the
way kube-apiserver's aggregator proxies — TLS to poolcoord with a front-proxy
client certificate (CN front-proxy-client, signed by a separate front-proxy CA given
to poolcoord as --requestheader-client-ca-file, --requestheader-allowed-names=
front-proxy-client), the Authorization header dropped, and X-Remote-User, one
X-Remote-Group line per group and X-Remote-Extra-Foo set by the proxy — with the
real kubectl in front of nginx.

nginx listens on one 127.0.0.1 port per identity it asserts:
  admin   kube-admin, groups team-x and system:masters (two lines), extra foo=bar
  jane    jane, one group line "team-x,system:masters" (must not be split)
  badcn   kube-admin/system:masters, but a front-proxy certificate with another CN
  nocert  kube-admin/system:masters, no client certificate at all
Requests the built-in rules leave open go to SubjectAccessReview at the cloud
fixture (--authorization-kubeconfig), which records the user, groups and extra it
was asked about and denies everything."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_fixture import CloudFixture, make_ca, make_client_cert  # noqa: E402
from harness import (BASE, GV, Server, expect, expect_status, free_port, kubectl_binary,  # noqa: E402
                     run_cases, uniq)

CLOUD = None
NGINX = None
WORK = None
SAR_SPECS = []

IDENTITIES = {
    "admin": {"user": "kube-admin", "groups": ["team-x", "system:masters"], "extra": {"Foo": "bar"},
              "cert": "good"},
    "jane": {"user": "jane", "groups": ["team-x,system:masters"], "extra": {"Foo": "bar"}, "cert": "good"},
    "badcn": {"user": "kube-admin", "groups": ["system:masters"], "extra": {}, "cert": "badcn"},
    "nocert": {"user": "kube-admin", "groups": ["system:masters"], "extra": {}, "cert": None},
}


class Nginx:
    """nginx in the foreground (`nginx -c <conf> -p <dir>`), one server block per identity."""

    def __init__(self, workdir, upstream_port, upstream_ca, certs):
        self.dir = os.path.join(workdir, "nginx")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        self.ports = {name: free_port() for name in IDENTITIES}
        servers = []
        for name, ident in IDENTITIES.items():
            lines = [f"    listen 127.0.0.1:{self.ports[name]};",
                     "    location / {",
                     f"      proxy_pass https://127.0.0.1:{upstream_port};",
                     "      proxy_http_version 1.1;",
                     '      proxy_set_header Connection "";',
                     "      proxy_buffering off;",
                     "      proxy_read_timeout 300s;",
                     f"      proxy_ssl_trusted_certificate {upstream_ca};",
                     "      proxy_ssl_verify on;",
                     "      proxy_ssl_name localhost;",
                     "      proxy_ssl_server_name on;",
                     # the aggregator deletes the client's credentials before proxying
                     '      proxy_set_header Authorization "";',
                     f"      proxy_set_header X-Remote-User {ident['user']};"]
            lines += [f'      proxy_set_header X-Remote-Group "{g}";' for g in ident["groups"]]
            lines += [f"      proxy_set_header X-Remote-Extra-{k} {v};" for k, v in ident["extra"].items()]
            if ident["cert"]:
                crt, key = certs[ident["cert"]]
                lines += [f"      proxy_ssl_certificate {crt};", f"      proxy_ssl_certificate_key {key};"]
            lines += ["    }"]
            servers.append("  server {\n" + "\n".join(lines) + "\n  }")
        tmp = os.path.join(self.dir, "tmp")
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.error_log = os.path.join(self.dir, "error.log")
        with open(self.conf, "w") as f:
            f.write(f"""daemon off;
master_process off;
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.error_log} info;
events {{ worker_connections 128; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
{chr(10).join(servers)}
}}
""")
        self.proc = subprocess.Popen(["nginx", "-e", self.error_log, "-c", self.conf, "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        for port in self.ports.values():
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nginx exited {self.proc.returncode}: {self.log()}")
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=2).connect()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise RuntimeError("nginx did not listen within 15 s: " + self.log())
                    time.sleep(0.1)

    def log(self):
        try:
            with open(self.error_log) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def request(self, identity, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.ports[identity], timeout=20)
        hdrs = {"Accept": "application/json"}
        if body is not None:
            body = json.dumps(body)
            hdrs["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read().decode("utf-8", "replace")
        conn.close()

        class R:
            status = r.status
            text = data

            def json(self):
                return json.loads(self.text)
        return R()

    def kubectl(self, identity, *args, stdin=None):
        kubeconfig = os.path.join(self.dir, f"{identity}.kubeconfig")
        if not os.path.exists(kubeconfig):
            with open(kubeconfig, "w") as f:
                json.dump({"apiVersion": "v1", "kind": "Config", "current-context": identity,
                           "clusters": [{"name": "nginx", "cluster": {
                               "server": f"http://127.0.0.1:{self.ports[identity]}"}}],
                           "users": [{"name": identity, "user": {}}],
                           "contexts": [{"name": identity, "context": {"cluster": "nginx", "user": identity}}]},
                          f)
        cmd = [kubectl_binary(), "--kubeconfig", kubeconfig,
               "--cache-dir", os.path.join(self.dir, f"kube-cache-{identity}"), *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def sar_policy(spec):
    SAR_SPECS.append(spec)
    return False


def kubectl_acts_as_the_remote_user(s):
    name = uniq("fp")
    manifest = json.dumps({"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
                           "spec": {"leaseDurationSeconds": 30}})
    r = NGINX.kubectl("admin", "apply", "-f", "-", stdin=manifest)
    expect(r.returncode == 0, f"kubectl apply through nginx: {r.stdout} {r.stderr}")
    expect(f"poollease.coordination.pool/{name}" in r.stdout and "created" in r.stdout, r.stdout)
    r = NGINX.kubectl("admin", "get", "poolleases", name, "-o", "json")
    expect(r.returncode == 0, f"kubectl get through nginx: {r.stderr}")
    expect(json.loads(r.stdout)["metadata"]["name"] == name, r.stdout)
    # system:masters came from the second X-Remote-Group line: no review was needed
    expect(not any(sp.get("user") == "kube-admin" for sp in SAR_SPECS),
           "a master must not reach SubjectAccessReview")


def plain_user_gets_kubes_403(s):
    n = len(SAR_SPECS)
    r = NGINX.kubectl("jane", "get", "poolleases")
    expect(r.returncode != 0, f"jane must not list poolleases: {r.stdout}")
    want = ('Error from server (Forbidden): poolleases.coordination.pool is forbidden: User "jane" cannot '
            'list resource "poolleases" in API group "coordination.pool" at the cluster scope')
    expect(want in r.stderr, f"kubectl stderr: {r.stderr}")
    expect(len(SAR_SPECS) > n, "jane's request should have been reviewed")
    spec = [sp for sp in SAR_SPECS[n:] if sp.get("user") == "jane"][-1]
    # one group line is one group, commas and all; the extra key lower-cased
    expect(spec["groups"] == ["team-x,system:masters", "system:authenticated"], f"groups: {spec}")
    expect(spec.get("extra") == {"foo": ["bar"]}, f"extra: {spec}")
    expect(spec["resourceAttributes"]["verb"] == "list", f"{spec}")


def both_group_lines_count(s):
    # The same request with the groups on one line is refused, on two lines allowed.
    expect_status_raw(NGINX.request("admin", "GET", BASE + "/delegatedleases"), 200)
    expect_status_raw(NGINX.request("jane", "GET", BASE + "/delegatedleases"), 403)


def wrong_cn_means_headers_ignored(s):
    r = NGINX.request("badcn", "GET", BASE + "/poolleases")
    expect_status_raw(r, 401)
    expect(r.json().get("reason") == "Unauthorized", r.text)
    k = NGINX.kubectl("badcn", "get", "poolleases")
    expect(k.returncode != 0 and "You must be logged in to the server" in k.stderr, f"kubectl: {k.stdout} {k.stderr[-300:]}")


def no_front_proxy_cert_means_headers_ignored(s):
    expect_status_raw(NGINX.request("nocert", "GET", BASE + "/poolleases"), 401)
    k = NGINX.kubectl("nocert", "get", "poolleases")
    expect(k.returncode != 0 and "You must be logged in to the server" in k.stderr, f"kubectl: {k.stdout} {k.stderr[-300:]}")
    # health stays open to anonymous callers, through the proxy too
    expect_status_raw(NGINX.request("nocert", "GET", "/readyz"), 200)


def direct_client_headers_are_ignored(s):
    # A client with its own credentials (not the front-proxy cert) sends the headers itself.
    c = s.token("viewer-token")
    r = c.request("GET", BASE + "/poolleases",
                  headers={"X-Remote-User": "kube-admin", "X-Remote-Group": "system:masters"})
    expect_status(r, 403, "Forbidden")
    expect('User "viewer"' in r.json()["message"], r.json()["message"])
    # and with no credentials at all: 401, not kube-admin
    expect_status(s.anonymous().request("GET", BASE + "/poolleases",
                                        headers={"X-Remote-User": "kube-admin",
                                                 "X-Remote-Group": "system:masters"}), 401, "Unauthorized")


def expect_status_raw(r, code):
    expect(r.status == code, f"want HTTP {code}, got {r.status}: {r.text[:300]}")


def make_server(binary):
    global CLOUD, NGINX, WORK
    if not shutil.which("nginx"):
        raise RuntimeError("nginx is not installed (scripts/install-deps.sh --test installs it)")
    WORK = tempfile.mkdtemp(prefix="poolcoord-frontproxy-")
    CLOUD = CloudFixture(WORK)
    CLOUD.state.sar_allow = sar_policy
    fp_ca = make_ca(WORK, "front-proxy-ca")
    certs = {"good": make_client_cert(WORK, fp_ca, "front-proxy-client", "front-proxy-client"),
             "badcn": make_client_cert(WORK, fp_ca, "not-the-proxy", "not-the-proxy")}
    server = Server(binary, extra_args=[f"--requestheader-client-ca-file={fp_ca[0]}",
                                        "--requestheader-allowed-names=front-proxy-client",
                                        f"--authorization-kubeconfig={CLOUD.kubeconfig}"])
    try:
        NGINX = Nginx(WORK, server.port, server.ca, certs)
    except Exception:
        server.stop()
        server.cleanup()
        raise
    return server


CASES = [kubectl_acts_as_the_remote_user, plain_user_gets_kubes_403, both_group_lines_count,
         wrong_cn_means_headers_ignored, no_front_proxy_cert_means_headers_ignored,
         direct_client_headers_are_ignored]

if __name__ == "__main__":
    try:
        rc = run_cases(CASES, make_server)
    finally:
        if NGINX:
            if os.environ.get("KEEP_NGINX_LOG"):
                print(NGINX.log())
            NGINX.stop()
        if CLOUD:
            CLOUD.stop()
        if WORK:
            shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(rc)
