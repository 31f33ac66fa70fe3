# Sourced by the benchmark scripts that run one server at a time on the renewal
# fixtures (bench/fixtures.py: 20 pools x 10 nodes): a private folder WORK under
# /tmp, removed on exit with the server whose pid is in PID stopped; FX is the
# fixtures' renew/ folder; free_port prints a free 127.0.0.1 port. Needs ROOT.
# Usage: source "$ROOT/bench/one_server.sh" <mktemp name>
WORK=$(mktemp -d "/tmp/$1.XXXXXX")
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
python3 "$ROOT/bench/fixtures.py" "$WORK" --renew-pools 20 --mem-pools 1 --nodes 10 >/dev/null
FX=$WORK/renew
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
