#!/usr/bin/env python3
"""Nothing includes upward: every #include "<folder>/..." of the project's own code
must name a folder that the including folder may depend on (docs/architecture.md,
"The floors"). Prints each violation as file:line and exits 1; exits 0 when the
house is in order. Run by ctest (test `layers`), so the README's test command and
CI catch an upward include the day it is written.

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
    "handlers": {"base", "api", "store", "cloud", "election"},
    "apiservice": {"base", "api", "store", "cloud", "election", "handlers"},
    "agent": {"base", "api", "store", "cloud", "election"},
    "kubectl-pool": {"base", "api", "cloud"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_.-]+)/')


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    violations = []
    checked = 0
    for folder, allowed in ALLOWED.items():
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".h", ".cc") or not path.is_file():
                continue
            checked += 1
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = match.group(1)
                if target in ALLOWED and target != folder and target not in allowed:
                    violations.append(f"{path.relative_to(root)}:{number}: {folder}/ includes "
                                      f"{target}/ ({line.strip()}); {folder}/ may include only "
                                      f"{', '.join(sorted(allowed | {folder}))}")
    if checked == 0:
        print(f"check-layers: no source files under {root}", file=sys.stderr)
        return 1
    for v in violations:
        print(v)
    print(f"check-layers: {checked} files, {len(violations)} upward or sideways includes")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
