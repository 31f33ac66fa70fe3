#!/usr/bin/env bash
# ThreadSanitizer over the unit tests and end-to-end suites with the real server:
# clang 14, -fsanitize=thread -O1 -g, in build-tsan/. Any data race, lock-order
# inversion or other TSan report fails the run (reports are printed).
#
# TSan only sees synchronisation in instrumented code, and Debian's libabsl is not:
# every absl::Mutex would look like no lock at all. So abseil is built here from
# Debian's source package of the installed version (apt-get source, Debian's
# archive as the machine's apt is configured, with a private apt state under
# build-tsan/apt), with the same flags, through POOLCOORD_ABSL_SOURCE_DIR.
# libstdc++, OpenSSL, libcurl and Boost.Test stay uninstrumented; their locks are
# pthread's, which TSan intercepts. scripts/tsan.supp lists what is suppressed, and why.
#
#   scripts/check-tsan.sh              # build, unit tests, e2e suites
#   scripts/check-tsan.sh unit         # only the unit tests
#   scripts/check-tsan.sh e2e          # only the e2e suites
# Environment: JOBS (default 2), TSAN_E2E (the e2e runs, default below).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
BUILD="${TSAN_BUILD_DIR:-$ROOT/build-tsan}"
JOBS="${JOBS:-2}"
WHAT="${1:-all}"
CXX="${TSAN_CXX:-clang++}"
command -v "$CXX" >/dev/null || { echo "error: $CXX not found (scripts/install-deps.sh --test)" >&2; exit 1; }
mkdir -p "$BUILD"
t_start=$SECONDS
step() { echo "== check-tsan: $* ($((SECONDS - t_start)) s)"; }

# --- abseil, from the source of the installed Debian package --------------------
ABSL_VERSION="$(dpkg-query -W -f='${Version}' libabsl-dev)"
ABSL_SRC="$BUILD/absl-src"
if [ "$(cat "$ABSL_SRC/.poolcoord-version" 2>/dev/null)" != "$ABSL_VERSION" ]; then
  step "fetching abseil $ABSL_VERSION source"
  command -v dpkg-source >/dev/null || { echo "error: dpkg-source not found (scripts/install-deps.sh --test)" >&2; exit 1; }
  apt_dir="$BUILD/apt"
  rm -rf "$apt_dir" "$ABSL_SRC"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts" "$apt_dir/get"
  : >"$apt_dir/sources.list"
  # The machine's own Debian entries (deb822 or one-line form), as source entries;
  # other repositories the machine may have configured play no part.
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -qi 'debian' "$f" || continue
    sed -E 's/^Types:.*/Types: deb-src/' "$f" >"$apt_dir/parts/$(basename "$f")"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -nE '/debian/s/^deb (.*)/deb-src \1/p' "$f" >>"$apt_dir/sources.list"
  done
  APT=(-q -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts="$apt_dir/parts"
       -o Dir::State::Lists="$apt_dir/lists" -o APT::Sandbox::User="$(id -un)")
  apt-get "${APT[@]}" update >"$apt_dir/update.log" 2>&1 || { cat "$apt_dir/update.log" >&2; exit 1; }
  # The installed version's source; if the archive has moved on (a point release
  # since the package was installed), the suite's current one: same upstream release,
  # and nothing of the installed libabsl is linked into this build.
  (cd "$apt_dir/get" && { apt-get "${APT[@]}" source --download-only "abseil=$ABSL_VERSION" \
     || apt-get "${APT[@]}" source --download-only abseil; } >"$apt_dir/source.log" 2>&1) \
    || { cat "$apt_dir/source.log" >&2; exit 1; }
  # apt checked the files against the signed Sources index; dpkg-source applies
  # Debian's patches (its options.h: absl types, inline namespace), as the package has.
  # (Its own signature check needs Debian's keyring, not installed: it only warns.)
  dpkg-source -x "$apt_dir/get"/abseil_*.dsc "$ABSL_SRC" >"$apt_dir/extract.log" 2>&1 \
    || { cat "$apt_dir/extract.log" >&2; exit 1; }
  echo "$ABSL_VERSION" >"$ABSL_SRC/.poolcoord-version"
  rm -rf "$apt_dir/get"
fi

# --- the instrumented build -------------------------------------------------------
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
linker=()
if command -v ld.lld >/dev/null; then linker=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld); fi
step "configuring"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=TSan -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1 -g -fno-omit-frame-pointer" \
  -DPOOLCOORD_ABSL_SOURCE_DIR="$ABSL_SRC" "${launcher[@]}" "${linker[@]}" >"$BUILD/configure.log"

# Only what the runs need: the canary, the unit tests and the server.
targets=(poolcoord-tsan-canary poolcoord-apiserver)
if [ "$WHAT" != e2e ]; then
  mapfile -t tests < <(cd tests && find . -name '*_test.cc' | sed -E 's#^\./([^/]+)/(.*)\.cc$#\1_\2#' | sort)
  targets+=("${tests[@]}")
fi
step "building ${#targets[@]} targets"
nice -n 10 cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}" >"$BUILD/build.log" 2>&1 \
  || { tail -n 60 "$BUILD/build.log" >&2; exit 1; }

# --- the canary: this build can fail, and it sees absl::Mutex ------------------------
step "canary"
canary_out="$(TSAN_OPTIONS="suppressions=$ROOT/scripts/tsan.supp exitcode=66" "$BUILD/poolcoord-tsan-canary" racy 2>&1)" && rc=0 || rc=$?
if [ $rc -ne 66 ] || ! grep -q 'WARNING: ThreadSanitizer: data race' <<<"$canary_out"; then
  echo "$canary_out" >&2
  echo "check-tsan: an unlocked counter written by two threads was not reported (exit $rc): TSan is not working" >&2
  exit 1
fi
canary_out="$(TSAN_OPTIONS="suppressions=$ROOT/scripts/tsan.supp exitcode=66" "$BUILD/poolcoord-tsan-canary" locked 2>&1)" && rc=0 || rc=$?
if [ $rc -ne 0 ] || [ "$canary_out" != 20000 ]; then
  echo "$canary_out" >&2
  echo "check-tsan: a counter under absl::Mutex was reported (exit $rc): abseil is not instrumented" >&2
  exit 1
fi

# --- the runs ----------------------------------------------------------------------
REPORTS="$BUILD/reports"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# halt_on_error=0: one run shows every race; exitcode=66 fails the process that saw one.
export TSAN_OPTIONS="suppressions=$ROOT/scripts/tsan.supp halt_on_error=0 exitcode=66 \
second_deadlock_stack=1 history_size=4 log_path=$REPORTS/tsan"
failed=0
if [ "$WHAT" != e2e ]; then
  step "unit tests"
  (cd "$BUILD" && ctest -L unit -j"$JOBS" --output-on-failure --timeout 900) || failed=1
fi
if [ "$WHAT" != unit ]; then
  # The suites whose server runs the most threads at once: the API on both stores
  # (the etcd3 one with its cacher and etcd watch threads), the real kubectl, many
  # connections, two replicas electing and forwarding over etcd3, the forwarder's
  # faults, delegated authentication (about 2.5 min in all, 40-50 s unloaded).
  for run in ${TSAN_E2E:-memory:test_api etcd3:test_api memory:test_kubectl memory:test_connections etcd3:test_replicas memory:test_forwarder memory:test_delegated_auth}; do
    step "e2e ${run}"
    POOLCOORD_E2E_STORE="${run%%:*}" python3 "tests/e2e/${run#*:}.py" \
      --binary "$BUILD/poolcoord-apiserver" || failed=1
  done
fi

step "done"
# A process writes its log only when TSan had something to say; a report is a
# WARNING/ERROR block (notes such as "Symbolizer buffer too small" are not).
found=()
for r in "$REPORTS"/tsan.*; do
  [ -e "$r" ] || continue
  if grep -q '^WARNING: ThreadSanitizer\|ERROR: ThreadSanitizer' "$r"; then found+=("$r"); fi
done
if [ ${#found[@]} -gt 0 ]; then
  for r in "${found[@]}"; do echo "--- $r"; cat "$r"; done
  echo "check-tsan: $(cat "${found[@]}" | grep -c '^WARNING: ThreadSanitizer') TSan reports in ${#found[@]} processes" >&2
  exit 1
fi
if [ $failed -ne 0 ]; then
  echo "check-tsan: tests failed (no TSan report)" >&2
  exit 1
fi
echo "check-tsan: no TSan report ($((SECONDS - t_start)) s)"
