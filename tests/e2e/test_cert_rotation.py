"""Certificates rotate without a restart (issue 12): the real server started with
--tls-cert-file/--tls-private-key-file, --client-ca-file and
--requestheader-client-ca-file from an openssl-made PKI, whose files are then
replaced the ways operators and their tools do it.

The inputs that showed the defect: replacing the serving pair in place or by
rename changed nothing until restart (also after SIGHUP); appending a CA to
--client-ca-file did not admit that CA's clients; an expired serving certificate
stayed until restart. And what must not change: a keep-alive connection made
before a rotation keeps working; a broken file keeps the old certificate."""
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_fixture import make_ca, make_client_cert  # noqa: E402
from harness import BASE, Client, Server, expect, run_cases, wait_for  # noqa: E402

WORK = tempfile.mkdtemp(prefix="poolcoord-rotation-")


def make_serving(ca, name, dates=None):
    """A serving certificate for 127.0.0.1 signed by `ca`; `dates` = (start, end) in
    openssl's YYYYMMDDHHMMSSZ makes one with that validity (`openssl ca`)."""
    key, csr, crt = (os.path.join(WORK, f"{name}.{x}") for x in ("key", "csr", "crt"))
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-subj", f"/CN={name}", "-keyout", key, "-out", csr],
                   check=True, capture_output=True)
    ext = os.path.join(WORK, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    if dates is None:
        subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1],
                        "-CAcreateserial", "-days", "1", "-extfile", ext, "-out", crt],
                       check=True, capture_output=True)
    else:
        db = os.path.join(WORK, f"{name}-ca")
        os.makedirs(db, exist_ok=True)
        open(os.path.join(db, "index.txt"), "w").close()
        with open(os.path.join(db, "serial"), "w") as f:
            f.write(os.urandom(8).hex() + "\n")
        cnf = os.path.join(db, "ca.cnf")
        with open(cnf, "w") as f:
            f.write(f"[ca]\ndefault_ca = d\n[d]\ndatabase = {db}/index.txt\nnew_certs_dir = {db}\n"
                    f"serial = {db}/serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n"
                    "[p]\ncommonName = supplied\n")
        subprocess.run(["openssl", "ca", "-batch", "-notext", "-config", cnf, "-cert", ca[0],
                        "-keyfile", ca[1], "-in", csr, "-out", crt, "-startdate", dates[0],
                        "-enddate", dates[1], "-extfile", ext], check=True, capture_output=True)
    return crt, key


def read(path):
    with open(path) as f:
        return f.read()


def der(cert_path):
    text = read(cert_path)
    first = text[:text.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    return ssl.PEM_cert_to_DER_cert(first)


def write_in_place(path, text):
    with open(path, "w") as f:
        f.write(text)


def write_by_rename(path, text):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def served_der(port):
    """The certificate a new handshake gets (not verified)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return s.getpeercert(binary_form=True)


class Pki:
    def __init__(self):
        self.serving_ca = make_ca(WORK, "serving-ca")
        self.client_ca = make_ca(WORK, "client-ca-1")
        self.client_ca2 = make_ca(WORK, "client-ca-2")
        self.proxy_ca = make_ca(WORK, "front-proxy-ca-1")
        self.proxy_ca2 = make_ca(WORK, "front-proxy-ca-2")
        self.alice = make_client_cert(WORK, self.client_ca, "alice", "alice", ["system:masters"])
        self.bob = make_client_cert(WORK, self.client_ca2, "bob", "bob", ["system:masters"])
        self.proxy2 = make_client_cert(WORK, self.proxy_ca2, "proxy2", "front-proxy-client")
        # The files the server is started with.
        self.cert = os.path.join(WORK, "tls.crt")
        self.key = os.path.join(WORK, "tls.key")
        self.client_ca_file = os.path.join(WORK, "client-ca.crt")
        self.proxy_ca_file = os.path.join(WORK, "requestheader-ca.crt")
        first = make_serving(self.serving_ca, "first")
        shutil.copy(first[0], self.cert)
        shutil.copy(first[1], self.key)
        shutil.copy(self.client_ca[0], self.client_ca_file)
        shutil.copy(self.proxy_ca[0], self.proxy_ca_file)

    def install(self, pair, how=write_by_rename):
        how(self.key, read(pair[1]))
        how(self.cert, read(pair[0]))


PKI = Pki()


class RotationServer(Server):
    """The server on the PKI above: no generated certificates, no kubeconfig."""

    def __init__(self, binary):
        super().__init__(binary, extra_args=[
            f"--tls-cert-file={PKI.cert}", f"--tls-private-key-file={PKI.key}",
            f"--client-ca-file={PKI.client_ca_file}",
            f"--requestheader-client-ca-file={PKI.proxy_ca_file}",
            "--requestheader-allowed-names=front-proxy-client"])

    @property
    def ca(self):
        return PKI.serving_ca[0]

    def wrote_start_files(self):
        return True  # it generates no certificates and writes no kubeconfig

    def _write_admin_cert(self):
        pass  # no kubeconfig to take it from: the tests use as_user

    def as_user(self, cert):
        return Client(self.port, self.ca, cert=cert)

    def full_log(self):
        with open(self.log_path) as f:
            return f.read()


def metric(server, name, labels=""):
    text = Client(server.port, server.ca).request("GET", "/metrics", accept=None).body
    m = re.search("^" + re.escape(name + labels) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def reloads(server, material, result):
    return metric(server, "poolcoord_certificate_reloads_total",
                  f'{{material="{material}",result="{result}"}}') or 0


def test_in_place_replacement_is_served_and_keepalive_survives(server):
    ctx = ssl.create_default_context(cafile=server.ca)
    ctx.load_cert_chain(*PKI.alice)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=20)
    conn.request("GET", BASE + "/poolleases")
    r = conn.getresponse()
    r.read()
    expect(r.status == 200, f"alice before rotation: {r.status}")
    sock = conn.sock
    before = sock.getpeercert(binary_form=True)
    expect(before == der(PKI.cert), "the first certificate is not the one served")
    second = make_serving(PKI.serving_ca, "second")
    PKI.install(second, how=write_in_place)
    wait_for("the in-place replacement to be served to a new handshake",
             lambda: served_der(server.port) == der(second[0]))
    # The connection made before the rotation goes on, with its own handshake.
    conn.request("GET", BASE + "/poolleases")
    r = conn.getresponse()
    r.read()
    expect(r.status == 200, f"keep-alive request after rotation: {r.status}")
    expect(conn.sock is sock, "the keep-alive connection was replaced")
    expect(sock.getpeercert(binary_form=True) == before, "the old connection's certificate changed")
    conn.close()
    # A verifying client (kubectl's view) accepts the new one.
    expect(server.as_user(PKI.alice).request("GET", BASE + "/poolleases").status == 200,
           "a new verified connection after rotation failed")


def test_rename_replacement_is_served(server):
    third = make_serving(PKI.serving_ca, "third")
    PKI.install(third, how=write_by_rename)
    wait_for("the renamed-in certificate to be served", lambda: served_der(server.port) == der(third[0]))


def test_broken_file_keeps_the_old_certificate(server):
    current = der(PKI.cert)
    failures = reloads(server, "serving-cert", "failure")
    fourth = make_serving(PKI.serving_ca, "fourth")
    text = read(fourth[0])
    write_by_rename(PKI.cert, text[:len(text) // 2])  # half-written
    wait_for("the refusal to be logged", lambda: "ServingCertificateReloadFailed" in server.full_log())
    wait_for("the failure to be counted",
             lambda: reloads(server, "serving-cert", "failure") > failures)
    expect(served_der(server.port) == current, "a half-written certificate replaced the served one")
    # A certificate whose key is still the old one: refused as well.
    write_by_rename(PKI.cert, text)
    wait_for("the mismatch to be counted",
             lambda: reloads(server, "serving-cert", "failure") > failures + 1)
    expect(served_der(server.port) == current, "a certificate without its key was served")
    write_by_rename(PKI.key, read(fourth[1]))
    wait_for("the completed pair to be served", lambda: served_der(server.port) == der(fourth[0]))


def test_expired_certificate_replaced_by_a_fresh_one(server):
    expired = make_serving(PKI.serving_ca, "expired", dates=("20200101000000Z", "20200102000000Z"))
    PKI.install(expired)
    wait_for("the expired certificate to be served (as kube loads it)",
             lambda: served_der(server.port) == der(expired[0]))
    try:
        server.as_user(PKI.alice).request("GET", "/readyz", accept=None)
        raise AssertionError("a verifying client accepted an expired certificate")
    except ssl.SSLCertVerificationError as e:
        expect("expired" in str(e), f"unexpected verification error: {e}")
    fresh = make_serving(PKI.serving_ca, "fresh")
    PKI.install(fresh)
    wait_for("the fresh certificate to be served", lambda: served_der(server.port) == der(fresh[0]))
    expect(server.as_user(PKI.alice).request("GET", BASE + "/poolleases").status == 200,
           "the fresh certificate is not accepted")
    expect(metric(server, "poolcoord_serving_certificate_expiration_timestamp_seconds") >
           time.time(), "the expiry metric does not show the fresh certificate")


def test_appended_client_ca_admits_its_clients(server):
    expect(server.as_user(PKI.bob).request("GET", BASE + "/poolleases").status == 401,
           "bob's CA is not trusted yet")
    with open(PKI.client_ca_file, "a") as f:
        f.write(read(PKI.client_ca2[0]))
    wait_for("bob (client-ca-2) to be admitted",
             lambda: server.as_user(PKI.bob).request("GET", BASE + "/poolleases").status == 200)
    expect(server.as_user(PKI.alice).request("GET", BASE + "/poolleases").status == 200,
           "alice (client-ca-1) is no longer admitted")


def test_new_front_proxy_ca_is_trusted(server):
    headers = {"X-Remote-User": "proxied-admin", "X-Remote-Group": "system:masters"}
    expect(server.as_user(PKI.proxy2).request("GET", BASE + "/poolleases", headers=headers).status == 401,
           "a proxy of the next front-proxy CA is trusted already")
    write_by_rename(PKI.proxy_ca_file, read(PKI.proxy_ca2[0]))
    wait_for("the new front-proxy CA to be trusted",
             lambda: server.as_user(PKI.proxy2).request("GET", BASE + "/poolleases",
                                                        headers=headers).status == 200)


def test_sighup_rereads_and_the_server_keeps_serving(server):
    server.proc.send_signal(signal.SIGHUP)
    wait_for("SIGHUP to be logged", lambda: "received SIGHUP" in server.full_log())
    expect(server.proc.poll() is None, "SIGHUP stopped the server")
    expect(server.as_user(PKI.alice).request("GET", BASE + "/poolleases").status == 200,
           "not serving after SIGHUP")


def test_each_reload_is_counted_and_logged(server):
    for material in ("serving-cert", "client-ca", "requestheader-client-ca"):
        expect(reloads(server, material, "success") >= 1, f"no successful {material} reload counted")
    expect(reloads(server, "serving-cert", "success") >= 5, "serving reloads missing")
    expect(reloads(server, "serving-cert", "failure") >= 2, "serving failures missing")
    log = server.full_log()
    for reason in ("ServingCertificateReload", "CACertificateReload", "ServingCertificateReloadFailed"):
        expect(f'reason="{reason}"' in log, f"no {reason} event in the log")


CASES = [test_in_place_replacement_is_served_and_keepalive_survives, test_rename_replacement_is_served,
         test_broken_file_keeps_the_old_certificate, test_expired_certificate_replaced_by_a_fresh_one,
         test_appended_client_ca_admits_its_clients, test_new_front_proxy_ca_is_trusted,
         test_sighup_rereads_and_the_server_keeps_serving, test_each_reload_is_counted_and_logged]

if __name__ == "__main__":
    try:
        rc = run_cases(CASES, RotationServer)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(rc)
