# Shared helpers for the peer scripts. Source it; do not run it.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FERROMETAL_VENV:-$REPO_ROOT/.venv}"

# free_port: print a TCP port on 127.0.0.1 nobody listens on right now.
free_port() {
  python3 - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# free_udp_port_pair: print a UDP port P on 127.0.0.1 such that P and P+1 are both free now.
free_udp_port_pair() {
  python3 - <<'PY'
import socket
while True:
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    port = a.getsockname()[1]
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        b.bind(("127.0.0.1", port + 1))
    except OSError:
        a.close(); b.close()
        continue
    a.close(); b.close()
    print(port)
    break
PY
}

# wait_port PORT [SECONDS]: wait until something accepts connections on 127.0.0.1:PORT.
wait_port() {
  local port=$1 limit=${2:-20} i
  for ((i = 0; i < limit * 10; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$port after ${limit}s" >&2
  return 1
}

# stop_with_owner PIDFILE: if FERROMETAL_PEER_OWNER names a process (the test that started this
# peer), a small watcher stops the peer as soon as that process is gone, however it ended (a
# SIGKILLed test runs no clean-up). It exits by itself when the peer stops first.
stop_with_owner() {
  local owner=${FERROMETAL_PEER_OWNER:-}
  [ -n "$owner" ] || return 0
  setsid bash -c '
    owner=$0; pid=$1
    while kill -0 "$owner" 2>/dev/null; do
      kill -0 "$pid" 2>/dev/null || exit 0
      sleep 0.5
    done
    kill "$pid" 2>/dev/null
    for _ in 1 2 3 4; do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.5; done
    pkill -9 -P "$pid" 2>/dev/null
    kill -9 "$pid" 2>/dev/null' "$owner" "$(cat "$1")" </dev/null >/dev/null 2>&1 &
}
