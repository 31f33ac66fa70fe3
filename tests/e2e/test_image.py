"""The image scripts/build-image.sh builds, as a security reviewer reads it: the
OCI archive's index, manifest, config and layer, checked without a container
engine (tests/e2e/kube_nodes.py runs it on real kubelets).

- the chart's default image (image.repository, appVersion) is the one built;
- OCI labels source, version (the chart's appVersion) and revision (this tree's
  commit);
- it runs as 65532:65532 (numeric, so runAsNonRoot can verify it), with
  poolcoord-apiserver as the entrypoint;
- its files are the three programs, /etc/passwd and /etc/group, and exactly the
  shared libraries `ldd` lists for the programs (and the loader): no shell, no
  package manager, nothing else;
- each program starts from those files alone, as 65532 (chroot); /bin/sh does not;
- the pod sandbox image is Debian's catatonit, static, alone, `-P`.

Root only (the script and chroot need it), and skipped without mmdebstrap/umoci.
Standard library only.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import e2e_args, expect, run_one  # noqa: E402
from kube_cluster import CHART, ROOT, SKIP_EXIT, Skip, ensure_images, helm_template, yaml_objects  # noqa: E402

PROGRAMS = ("poolcoord-apiserver", "poolcoord-agent", "kubectl-pool")


class Image:
    """An OCI archive's single image: index, manifest, config and its files."""

    def __init__(self, archive, workdir):
        self.dir = tempfile.mkdtemp(dir=workdir)
        with tarfile.open(archive) as t:
            t.extractall(self.dir)
        self.index = self.read_json("index.json")
        expect(len(self.index["manifests"]) == 1, self.index)
        self.ref_name = self.index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        self.manifest = self.blob(self.index["manifests"][0]["digest"])
        self.config = self.blob(self.manifest["config"]["digest"])
        self.rootfs = os.path.join(self.dir, "rootfs")
        os.mkdir(self.rootfs)
        self.members = {}
        for layer in self.manifest["layers"]:
            with tarfile.open(self.blob_path(layer["digest"])) as t:
                for m in t.getmembers():
                    self.members[os.path.normpath("/" + m.name)] = m
                t.extractall(self.rootfs, numeric_owner=True)

    def read_json(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return json.load(f)

    def blob_path(self, digest):
        return os.path.join(self.dir, "blobs", *digest.split(":", 1))

    def blob(self, digest):
        with open(self.blob_path(digest)) as f:
            return json.load(f)

    def files(self):
        """Regular files and symlinks by path (directories aside)."""
        return {p: m for p, m in self.members.items() if not m.isdir()}


class Env:
    def __init__(self, binary):
        self.binary = binary
        self.images = ensure_images(binary)
        self.tmp = tempfile.mkdtemp(prefix="poolcoord-image-")
        self.poolcoord = Image(self.images["poolcoord"][0], self.tmp)
        self.pause = Image(self.images["pause"][0], self.tmp)


def the_charts_default_image_is_the_one_built(env):
    deployment = [o for o in yaml_objects(helm_template()) if o["kind"] == "Deployment"][0]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    _, repo, tag = env.images["poolcoord"]
    expect(f"docker.io/{image}" == f"{repo}:{tag}", (image, repo, tag))
    expect(env.poolcoord.ref_name == tag, env.poolcoord.ref_name)


def labels_name_source_version_revision(env):
    labels = env.poolcoord.config["config"]["Labels"]
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        app_version = [ln.split('"')[1] for ln in f if ln.startswith("appVersion:")][0]
    expect(labels["org.opencontainers.image.version"] == app_version, labels)
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    revision = labels["org.opencontainers.image.revision"]
    expect(revision in (head, head + "-dirty"), (revision, head))
    expect(labels["org.opencontainers.image.source"], labels)
    print(f"  labels: {json.dumps(labels, sort_keys=True)}", flush=True)


def runs_as_65532_with_the_server_as_entrypoint(env):
    c = env.poolcoord.config["config"]
    expect(c["User"] == "65532:65532", c)
    expect(c["Entrypoint"] == ["/usr/local/bin/poolcoord-apiserver"], c)
    expect("8443/tcp" in c.get("ExposedPorts", {}), c)


def ldd_libraries(binary_dir):
    """Sonames (and the loader's name) `ldd` lists for the three programs."""
    names = set()
    for b in PROGRAMS:
        out = subprocess.run(["ldd", os.path.join(binary_dir, b)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
                names.add(parts[0])
            elif parts and parts[0].startswith("/"):
                names.add(os.path.basename(parts[0]))
    return names


def holds_only_the_programs_and_the_libraries_they_link(env):
    files = env.poolcoord.files()
    libdir = "/usr/lib/x86_64-linux-gnu/"
    libs = {p[len(libdir):] for p in files if p.startswith(libdir)}
    wanted = ldd_libraries(os.path.dirname(env.binary))
    expect(libs == wanted, f"in the image, not linked: {sorted(libs - wanted)}; linked, not in it: "
                           f"{sorted(wanted - libs)}")
    rest = sorted(p for p in files if not p.startswith(libdir))
    expect(rest == ["/etc/group", "/etc/passwd", "/lib", "/lib64", "/usr/lib64/ld-linux-x86-64.so.2",
                    *(f"/usr/local/bin/{b}" for b in sorted(PROGRAMS))], rest)
    for b in PROGRAMS:
        m = files[f"/usr/local/bin/{b}"]
        expect(m.uid == 0 and m.mode & 0o777 == 0o755, (b, m.uid, oct(m.mode)))
    for p in ("/bin/sh", "/usr/bin/dpkg", "/usr/bin/apt"):
        expect(p not in files, p)
    with open(os.path.join(env.poolcoord.rootfs, "etc", "passwd")) as f:
        expect("poolcoord:x:65532:65532:" in f.read(), "no 65532 in /etc/passwd")
    size = sum(m.size for m in files.values())
    print(f"  {len(libs)} libraries; {size / 2**20:.1f} MiB unpacked, "
          f"{os.path.getsize(env.images['poolcoord'][0]) / 2**20:.1f} MiB archive", flush=True)


def every_program_starts_inside_it_and_no_shell_does(env):
    for b in PROGRAMS:
        p = subprocess.run(["chroot", "--userspec=65532:65532", env.poolcoord.rootfs, f"/usr/local/bin/{b}", "--help"],
                           capture_output=True, text=True, timeout=30)
        expect(p.returncode == 0, f"{b} --help in the image: exit {p.returncode}: {p.stderr[-500:]}")
    p = subprocess.run(["chroot", env.poolcoord.rootfs, "/bin/sh", "-c", "true"], capture_output=True, text=True)
    expect(p.returncode != 0, "a shell ran inside the image")


def the_pause_image_is_catatonit_alone(env):
    c = env.pause.config["config"]
    expect(c["Entrypoint"] == ["/usr/bin/catatonit", "-P"], c)
    expect(sorted(env.pause.files()) == ["/usr/bin/catatonit"], sorted(env.pause.files()))
    out = subprocess.run(["file", "-b", os.path.join(env.pause.rootfs, "usr/bin/catatonit")],
                         capture_output=True, text=True).stdout
    expect("statically linked" in out or "static-pie" in out, out)


CASES = [the_charts_default_image_is_the_one_built, labels_name_source_version_revision,
         runs_as_65532_with_the_server_as_entrypoint, holds_only_the_programs_and_the_libraries_they_link,
         every_program_starts_inside_it_and_no_shell_does, the_pause_image_is_catatonit_alone]


def main():
    a = e2e_args()
    try:
        env = Env(a.binary)
    except Skip as e:
        print(f"SKIP: {e}", flush=True)
        return SKIP_EXIT
    try:
        results = [run_one(case, env) for case in CASES]
    finally:
        shutil.rmtree(env.tmp, ignore_errors=True)
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
