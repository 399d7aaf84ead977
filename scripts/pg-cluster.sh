#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the ledger's tests, from Debian's
# postgresql package: `pg-cluster.sh start URLFILE` initialises a cluster in a
# temp folder (as the postgres user when run as root: initdb refuses root),
# starts it on a private Unix socket, and writes its libpq connection string
# to URLFILE. `pg-cluster.sh stop URLFILE` stops it and removes the folder.
# Any failure exits non-zero with the reason: the tests then fail, loudly.
set -euo pipefail
cmd=${1:?start or stop}
urlfile=${2:?URLFILE}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
[ -x "$bindir/initdb" ] || { echo "pg-cluster: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$cmd" in
  start)
    dir=$(mktemp -d /tmp/hone-pg.XXXXXX)
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    as_owner "$bindir/initdb" -D "$dir/data" -U hone -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; echo "pg-cluster: initdb failed" >&2; exit 1; }
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-k $dir -c listen_addresses='' -c fsync=off -c max_connections=50" start >/dev/null ||
      { cat "$dir/server.log" >&2; echo "pg-cluster: the server did not start" >&2; exit 1; }
    mkdir -p "$(dirname "$urlfile")"
    echo "host=$dir port=5432 user=hone dbname=postgres" >"$urlfile"
    echo "$dir" >"$urlfile.dir"
    echo "pg-cluster: started in $dir"
    ;;
  stop)
    [ -f "$urlfile.dir" ] || exit 0
    dir=$(cat "$urlfile.dir")
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir" "$urlfile" "$urlfile.dir"
    echo "pg-cluster: stopped"
    ;;
  *) echo "usage: pg-cluster.sh start|stop URLFILE" >&2; exit 2 ;;
esac
