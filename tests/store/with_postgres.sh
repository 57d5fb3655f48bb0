#!/usr/bin/env bash
# Runs a command against a real, throw-away PostgreSQL server (Debian's postgresql-15 package):
#   tests/store/with_postgres.sh COMMAND [ARGS...]
# initdb in a fresh temporary folder, the server on a unix socket in that folder only (no TCP),
# started as the `postgres` system user when run as root (PostgreSQL refuses root), as the current
# user otherwise. Exports TESSERA_TEST_PG_URL (postgresql:///postgres?host=DIR&port=PORT&user=postgres)
# and TESSERA_TEST_REQUIRE_PG=1 (so the PostgreSQL tests fail, not skip, without a server), runs
# the command, then stops the server and removes the folder, also when the command fails or the
# script is interrupted. Exit status: the command's, or 1 when the server does not come up.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PORT=${TESSERA_TEST_PG_PORT:-5432}   # only names the socket file in the private folder
if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi
if [ ! -x "$PGBIN/initdb" ]; then
  echo "with_postgres.sh: $PGBIN/initdb not found (install the postgresql package: scripts/setup)" >&2
  exit 1
fi

as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  pg_user=${TESSERA_TEST_PG_OS_USER:-postgres}
  if ! id "$pg_user" >/dev/null 2>&1; then
    echo "with_postgres.sh: running as root needs the system user '$pg_user' (the postgresql package creates it)" >&2
    exit 1
  fi
  as_owner=(runuser -u "$pg_user" --)
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/tessera-pg-XXXXXX")
cleanup() {
  if [ -f "$dir/data/postmaster.pid" ]; then
    "${as_owner[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ ${#as_owner[@]} -gt 0 ]; then chown "$pg_user" "$dir"; fi

if ! "${as_owner[@]}" "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1; then
  echo "with_postgres.sh: initdb failed:" >&2
  cat "$dir/initdb.log" >&2
  exit 1
fi
# pg_ctl -w returns once the server accepts connections (no polling sleeps here).
if ! "${as_owner[@]}" "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-k $dir -p $PORT -c listen_addresses='' -c max_connections=50" start >/dev/null; then
  echo "with_postgres.sh: the server did not start:" >&2
  cat "$dir/server.log" >&2
  exit 1
fi

export TESSERA_TEST_PG_URL="postgresql:///postgres?host=$dir&port=$PORT&user=postgres"
export TESSERA_TEST_REQUIRE_PG=1
rc=0
"$@" || rc=$?
exit "$rc"
