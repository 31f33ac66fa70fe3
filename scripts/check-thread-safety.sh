#!/usr/bin/env bash
# Clang's thread-safety analysis over every translation unit of the project: the
# libraries, the programs (server, simulator, benchmark tools) and the unit tests.
# g++ ignores ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED; clang checks them
# (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html). Any warning fails.
#
# The analysis runs in clang's semantic pass, so each file is compiled with
# -fsyntax-only from build-tsa/compile_commands.json (a clang configuration of
# the same CMake project): no objects, no links, a couple of minutes on 2 cores.
#   scripts/check-thread-safety.sh            # all translation units
#   scripts/check-thread-safety.sh store/     # only files under store/
# Exit status: 0 when clean, 1 on any warning or error (printed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
BUILD="$ROOT/build-tsa"
CXX="${TSA_CXX:-clang++}"
JOBS="${JOBS:-2}"
FILTER="${1:-}"

command -v "$CXX" >/dev/null || { echo "error: $CXX not found (scripts/install-deps.sh --test installs clang)" >&2; exit 1; }
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null

# -Wthread-safety: analysis, attributes, precise and reference checks; every one an error.
# -Wno-everything first: the project's other warnings are g++'s business (build/), not
# this check's; only thread-safety diagnostics (and compile errors) are reported.
FLAGS=(-fsyntax-only -Wno-everything -Wthread-safety ${TSA_EXTRA:-} -Werror=thread-safety)
export FLAGS_STR="${FLAGS[*]}"
python3 - "$BUILD/compile_commands.json" "$ROOT" "$FILTER" >"$BUILD/tsa-commands.txt" <<'PY'
import json, os, shlex, sys
cmds, root, filt = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
seen = set()
for c in cmds:
    src = os.path.relpath(c["file"], root)
    if src in seen or not src.startswith(filt):
        continue
    seen.add(src)
    args = shlex.split(c["command"])
    out, i = [], 0
    while i < len(args):  # drop the object output; -fsyntax-only writes nothing
        if args[i] == "-o":
            i += 2
            continue
        out.append(args[i])
        i += 1
    print(shlex.quote(c["directory"]) + "\t" + " ".join(map(shlex.quote, out)))
PY
total=$(wc -l <"$BUILD/tsa-commands.txt")
[ "$total" -gt 0 ] || { echo "error: no translation unit matches '$FILTER'" >&2; exit 1; }
log="$BUILD/tsa.log"
: >"$log"
# Each command runs in its own directory; output of one file stays together.
set +e
tr '\n' '\0' <"$BUILD/tsa-commands.txt" | xargs -0 -P "$JOBS" -n 1 bash -c '
  dir="${1%%	*}"; cmd="${1#*	}"
  out=$(cd "$dir" && eval "$cmd $FLAGS_STR" 2>&1); rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ]; then printf "%s\n" "$out"; exit 1; fi' _ >>"$log"
rc=$?
set -e
warnings=$(grep -c "warning:\|error:" "$log" || true)
if [ $rc -ne 0 ] || [ "$warnings" -gt 0 ]; then
  cat "$log"
  echo "thread-safety: $warnings diagnostics in $total translation units" >&2
  exit 1
fi
echo "thread-safety: clean, $total translation units (clang $("$CXX" -dumpversion))"
