# shellcheck shell=bash
# Sourced by .ci/run: start a throwaway PostgreSQL server on loopback for the checkpointer tests
# and export TENXGRAPH_TEST_PG_DSN. Installs the server with apt-get when its binaries are
# missing (Debian/Ubuntu). The server and its files are removed when the calling shell exits.

start_postgres() {
  if [ -n "${TENXGRAPH_TEST_PG_DSN:-}" ]; then
    echo "+ using the PostgreSQL server of TENXGRAPH_TEST_PG_DSN"
    return 0
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo -n"

  pg_bin=$(find_pg_bin)
  if [ -z "$pg_bin" ]; then
    echo "+ installing PostgreSQL (apt-get)"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      postgresql </dev/null >/dev/null
    pg_bin=$(find_pg_bin)
    [ -n "$pg_bin" ] || { echo "PostgreSQL server binaries not found after install" >&2; return 1; }
  fi

  # initdb and postgres refuse to run as root: use the package's `postgres` user, or our own.
  if [ "$(id -u)" -eq 0 ]; then
    pg_user=postgres
    if ! id "$pg_user" >/dev/null 2>&1; then
      pg_user=tenxgraph_ci
      id "$pg_user" >/dev/null 2>&1 || useradd --system --no-create-home "$pg_user"
    fi
  else
    pg_user=$(id -un)
  fi

  pg_dir=$(mktemp -d /tmp/tenxgraph-pg.XXXXXX)
  trap stop_postgres EXIT
  [ "$(id -u)" -ne 0 ] || chown "$pg_user" "$pg_dir"
  chmod 700 "$pg_dir"
  pg_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

  echo "+ starting PostgreSQL ($pg_bin) as $pg_user on 127.0.0.1:$pg_port"
  as_pg_user "$pg_bin/initdb" -D "$pg_dir/data" -U "$pg_user" --auth=trust -E UTF8 --no-sync \
    >"$pg_dir/initdb.log" 2>&1 || { cat "$pg_dir/initdb.log" >&2; return 1; }
  as_pg_user "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $pg_dir -c fsync=off -c max_connections=200" \
    >/dev/null || { cat "$pg_dir/server.log" >&2; return 1; }
  as_pg_user "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U "$pg_user" tenxgraph_test
  export TENXGRAPH_TEST_PG_DSN="postgresql://$pg_user@127.0.0.1:$pg_port/tenxgraph_test"
  echo "+ TENXGRAPH_TEST_PG_DSN=$TENXGRAPH_TEST_PG_DSN"
}

find_pg_bin() {
  local dir
  dir=$(find /usr/lib/postgresql -maxdepth 2 -type d -name bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
    echo "$dir"
  elif command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
  fi
}

as_pg_user() {
  # run from the data folder: the server user may not be allowed into the current directory
  if [ "$(id -u)" -eq 0 ]; then
    (cd "$pg_dir" && runuser -u "$pg_user" -- "$@")
  else
    (cd "$pg_dir" && "$@")
  fi
}

stop_postgres() {
  if [ -n "${pg_dir:-}" ] && [ -d "$pg_dir" ]; then
    as_pg_user "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
}
