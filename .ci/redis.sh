# shellcheck shell=bash
# Sourced by .ci/run: start a throwaway Redis server on loopback for the serve tests' RedisBus
# and export TENXGRAPH_TEST_REDIS_URL. Installs redis-server with apt-get when it is missing
# (Debian/Ubuntu). The server is stopped when the calling shell exits.

start_redis() {
  if [ -n "${TENXGRAPH_TEST_REDIS_URL:-}" ]; then
    echo "+ using the Redis server of TENXGRAPH_TEST_REDIS_URL"
    return 0
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
  if ! command -v redis-server >/dev/null 2>&1; then
    echo "+ installing Redis (apt-get)"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      redis-server </dev/null >/dev/null
    command -v redis-server >/dev/null 2>&1 || { echo "redis-server not found after install" >&2; return 1; }
  fi

  redis_dir=$(mktemp -d /tmp/tenxgraph-redis.XXXXXX)
  redis_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  echo "+ starting Redis on 127.0.0.1:$redis_port"
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --dir "$redis_dir" --pidfile "$redis_dir/redis.pid" --logfile "$redis_dir/redis.log" \
    --daemonize yes || { cat "$redis_dir/redis.log" >&2; return 1; }
  # add to whatever EXIT trap is set already (PostgreSQL's)
  local previous
  previous=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
  # shellcheck disable=SC2064
  trap "stop_redis; ${previous:-:}" EXIT
  local tries=0
  until redis_ping; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || { echo "Redis did not start:" >&2; cat "$redis_dir/redis.log" >&2; return 1; }
    sleep 0.1
  done
  export TENXGRAPH_TEST_REDIS_URL="redis://127.0.0.1:$redis_port/0"
  echo "+ TENXGRAPH_TEST_REDIS_URL=$TENXGRAPH_TEST_REDIS_URL"
}

redis_ping() {
  python3 - "$redis_port" <<'PY' 2>/dev/null
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1) as s:
    s.sendall(b"PING\r\n")
    sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
PY
}

stop_redis() {
  if [ -n "${redis_dir:-}" ] && [ -d "$redis_dir" ]; then
    if [ -f "$redis_dir/redis.pid" ]; then
      kill "$(cat "$redis_dir/redis.pid")" 2>/dev/null || true
    fi
    rm -rf "$redis_dir"
  fi
}
