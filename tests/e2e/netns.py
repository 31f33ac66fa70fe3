"""Network namespaces on one bridge, for tests that cut links between processes
(an etcd member from its peers, a poolcoord replica from etcd) while the test
itself, in the host namespace, still reaches every one of them.

    net = Net("rb")                 # NetUnavailable when not root or no `ip`/`nft`
    ip = net.add("e0")              # namespace <tag>-e0 with 10.A.B.n on the bridge
    subprocess.Popen([*net.exec_prefix("e0"), "etcd", ...])
    net.block("e0", [ip_of_e1, ip_of_e2])   # drop every packet between e0 and them
    net.unblock("e0")
    net.cleanup()                   # namespaces and bridge gone

Names carry a tag made of `prefix` and this process's pid (two suites can run at
once), and the subnet 10.A.B.0/24 is derived from the pid too. A run killed with
SIGKILL cannot clean up: the next Net of the same prefix removes the namespaces
and bridges of runs whose process is gone. `block` installs an nftables table in
the namespace that drops packets to and from the given addresses (no RST, no
ICMP: a silent partition, as a cut cable or a blackholed route looks; TCP
connections hang until their own timeouts), `unblock` deletes it; addresses not
named (the host, other namespaces) are unaffected.

Standard library only; needs root, iproute2 and nftables (scripts/install-deps.sh
--test installs nftables).
"""
import os
import re
import shutil
import subprocess


class NetUnavailable(RuntimeError):
    """Network namespaces cannot be made here; the message says why (a skip reason)."""


def _sh(*args, check=True, stdin=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=30, input=stdin)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()}")
    return p


def unavailable_reason():
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if not shutil.which(tool):
            return f"no `{tool}` ({package}; scripts/install-deps.sh --test installs it)"
    return None


class Net:
    def __init__(self, prefix):
        reason = unavailable_reason()
        if reason:
            raise NetUnavailable(reason)
        if not re.fullmatch(r"[a-z]{1,3}", prefix):
            raise ValueError("prefix: 1-3 lower-case letters")
        pid = os.getpid()
        self.prefix = prefix
        self.tag = f"{prefix}{pid % 100000}"
        self.sweep_stale(prefix)
        self.subnet = f"10.{200 + (pid // 256) % 50}.{pid % 256}"
        self.host_ip = f"{self.subnet}.1"
        self.bridge = f"{self.tag}br"
        self.namespaces = {}   # short name -> (namespace, ip)
        _sh("ip", "link", "add", self.bridge, "type", "bridge")
        _sh("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        _sh("ip", "link", "set", self.bridge, "up")

    @staticmethod
    def sweep_stale(prefix):
        """Removes namespaces and bridges named for `prefix` whose process is gone."""
        alive = {int(p) % 100000 for p in os.listdir("/proc") if p.isdigit()}
        pattern = re.compile(rf"({re.escape(prefix)})(\d+)(-.+|br)$")

        def stale(name):
            m = pattern.match(name)
            return m and int(m.group(2)) not in alive
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for line in listed.splitlines():
            ns = line.split()[0] if line.split() else ""
            if stale(ns):
                _sh("ip", "netns", "del", ns, check=False)
        links = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"],
                               capture_output=True, text=True).stdout
        for line in links.splitlines():
            m = re.match(r"\d+: ([^:@]+)[:@]", line)
            if m and stale(m.group(1)):
                _sh("ip", "link", "del", m.group(1), check=False)

    def add(self, name):
        """A namespace with one link to the bridge; returns its IP address."""
        if not re.fullmatch(r"[a-z0-9]{1,4}", name):
            raise ValueError("name: 1-4 lower-case letters or digits")
        ns = f"{self.tag}-{name}"
        ip = f"{self.subnet}.{10 + len(self.namespaces)}"
        _sh("ip", "netns", "add", ns)
        self.namespaces[name] = (ns, ip)
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
        host_end, inner = f"{self.tag}{name}", "eth0"
        _sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", inner, "netns", ns)
        _sh("ip", "link", "set", host_end, "master", self.bridge, "up")
        _sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", inner)
        _sh("ip", "-n", ns, "link", "set", inner, "up")
        return ip

    def ip(self, name):
        return self.namespaces[name][1]

    def exec_prefix(self, name):
        """The argv prefix that runs a command inside namespace `name`."""
        return ["ip", "netns", "exec", self.namespaces[name][0]]

    def block(self, name, addresses):
        """Drops every packet between namespace `name` and `addresses`, both ways."""
        ns = self.namespaces[name][0]
        self.unblock(name)
        peers = ", ".join(addresses)
        _sh("ip", "netns", "exec", ns, "nft", "-f", "-", stdin=(
            "table inet partition {\n"
            f"  chain in {{ type filter hook input priority 0; ip saddr {{ {peers} }} drop; }}\n"
            f"  chain out {{ type filter hook output priority 0; ip daddr {{ {peers} }} drop; }}\n"
            "}\n"))

    def unblock(self, name):
        ns = self.namespaces[name][0]
        _sh("ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "partition", check=False)

    def cleanup(self):
        for ns, _ in self.namespaces.values():
            _sh("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
        _sh("ip", "link", "del", self.bridge, check=False)
