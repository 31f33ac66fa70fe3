#!/usr/bin/env python3
"""The house in order, two ways (docs/architecture.md, "The floors" and "A kind's
files"):

1. Nothing includes upward: every #include "<folder>/..." of the project's own
   code names a folder that the including folder may depend on (ALLOWED).
2. A kind owns everything about itself: a generic file (any .h or .cc under
   handlers/, store/ or apiservice/ that is not in KIND_FILES or NAMING_FILES)
   names neither a kind of the group (PoolLease, DelegatedLease, their plurals)
   nor one of their fields, in code or in comments; what a kind needs there is
   a hook of its strategy (handlers/registry/strategy.h).

Prints each violation as file:line and exits 1; exits 0 when the house is in
order. Run by ctest (test `layers`; tests/scripts/check_layers_test.py tests
it), so the README's test command and CI catch it the day it is written.

  scripts/check-layers.py [repo root]
"""
import pathlib
import re
import sys

# Which of the project's folders each folder may include (itself always). The two
# processes (apiservice/, agent/) and the kubectl plugin never include each other;
# store/ and cloud/ stand side by side on api/, the group's kinds as values.
ALLOWED = {
    "base": set(),
    "api": {"base"},
    "store": {"base", "api"},
    "cloud": {"base", "api"},
    "election": {"base", "api", "store", "cloud"},
    "controllers": {"base", "api", "store", "cloud", "election"},
    "handlers": {"base", "api", "store", "cloud", "election"},
    "apiservice": {"base", "api", "store", "cloud", "election", "controllers", "handlers"},
    "agent": {"base", "api", "store", "cloud", "election", "controllers"},
    "kubectl-pool": {"base", "api", "cloud"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_.-]+)/')

# The files of each kind: what the kind is (names, types, codec), what the API
# does with it (its strategy) and the rules it answers to. The two kinds share a
# lease-shaped model, so most of them are both kinds' files.
KIND_FILES = {
    "PoolLease": ["handlers/registry/pool_lease.cc"],
    "DelegatedLease": ["handlers/registry/delegated_lease.cc",
                       "election/delegation_proof.h", "election/delegation_proof.cc"],
    "both": ["api/types.h", "api/types.cc", "api/codec.h", "api/codec.cc",
             "handlers/registry/lease_strategy.h", "handlers/registry/lease_strategy.cc",
             "election/lease_rules.h", "election/lease_rules.cc"],
}
# Files of the checked folders that name the kinds by what they are, with why.
NAMING_FILES = {
    "handlers/registry/registry.cc": "the group's list of kinds, one line each",
    "handlers/admission_handler.cc": "the webhook of coordination.k8s.io/v1 Leases, the fields "
                                     "of which a PoolLease's mirror",
    "apiservice/flags.cc": "the server's flags, whose help names the kinds their rules govern",
    "apiservice/server.cc": "assembles the server, the kinds' controllers among the rest",
}
GENERIC_FOLDERS = ("handlers", "store", "apiservice")

# A kind's name, or one of its fields: the wire names and the C++ member names of
# api/types.h; the fields with common words (delegate, proof, expired,
# challenges) as members of spec or status, as JSON keys, or as C++ members.
KIND_NAME = re.compile(r"PoolLease|DelegatedLease|\b(?:pool|delegated)leases?\b")
FIELD = re.compile(
    r"\b(?:holderIdentity|leaseDurationSeconds|acquireTime|renewTime|leaseTransitions|poolName"
    r"|observedTime|leaderTerm|poolLeaseUID|bootID|holder_identity|lease_duration_seconds"
    r"|acquire_time_us|renew_time_us|lease_transitions|pool_name|observed_time_us|leader_term"
    r"|pool_lease_uid|accepted_proof|boot_id)\b"
    r"|\b(?:spec|status)\s*(?:\.|->)\s*(?:delegate|proof|expired|challenges)\b"
    r'|"(?:delegate|proof|expired|challenges)"'
    r"|\.(?:delegate|proof|challenges)\b")


def sources(root, folder):
    for path in sorted((root / folder).rglob("*")):
        if path.suffix in (".h", ".cc") and path.is_file():
            yield path


def upward_includes(root, folder, allowed, path):
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        match = INCLUDE.match(line)
        if not match:
            continue
        target = match.group(1)
        if target in ALLOWED and target != folder and target not in allowed:
            yield (f"{path.relative_to(root)}:{number}: {folder}/ includes {target}/ "
                   f"({line.strip()}); {folder}/ may include only "
                   f"{', '.join(sorted(allowed | {folder}))}")


def kinds_named(root, path):
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        match = KIND_NAME.search(line) or FIELD.search(line)
        if match:
            yield (f"{path.relative_to(root)}:{number}: a generic file names "
                   f"\"{match.group(0)}\" of a kind ({line.strip()[:80]}); what a kind needs "
                   f"belongs in its files (check-layers.py KIND_FILES), reached through its "
                   f"strategy")


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    own = {f for files in KIND_FILES.values() for f in files} | set(NAMING_FILES)
    violations = []
    checked = generic = 0
    for folder, allowed in ALLOWED.items():
        for path in sources(root, folder):
            checked += 1
            violations += upward_includes(root, folder, allowed, path)
            if folder in GENERIC_FOLDERS and str(path.relative_to(root)) not in own:
                generic += 1
                violations += kinds_named(root, path)
    if checked == 0:
        print(f"check-layers: no source files under {root}", file=sys.stderr)
        return 1
    for v in violations:
        print(v)
    print(f"check-layers: {checked} files ({generic} generic), {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
