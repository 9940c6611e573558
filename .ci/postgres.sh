# Sourced by .ci/run (and by hand: `source .ci/postgres.sh`): a throwaway PostgreSQL server on
# 127.0.0.1 for the sweep's shared-study test (tests/sweeps/test_shared_study.py), which reads
# its URL from LOSTCITIES_TEST_POSTGRES and is skipped, saying so, without it. Debian's
# postgresql is installed when missing; the cluster lives in a temporary folder, owned by the
# postgres user (the server refuses to run as root), and trusts local connections.
pg_port=${LOSTCITIES_PG_PORT:-54329}
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -y -q install postgresql >/dev/null ||
    { $sudo apt-get -q update >/dev/null && $sudo env DEBIAN_FRONTEND=noninteractive apt-get -y -q install postgresql >/dev/null; }
fi
pg_bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
pg_data=$(mktemp -d /tmp/lostcities-pg.XXXXXX)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$pg_data"
as_pg "$pg_bin/initdb" -D "$pg_data" -A trust -U postgres >/dev/null
as_pg "$pg_bin/pg_ctl" -D "$pg_data" -l "$pg_data/server.log" -w \
  -o "-h 127.0.0.1 -p $pg_port -k $pg_data" start >/dev/null
as_pg "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres sweeps
export LOSTCITIES_TEST_POSTGRES="postgresql+psycopg2://postgres@127.0.0.1:$pg_port/sweeps"
stop_postgres() { as_pg "$pg_bin/pg_ctl" -D "$pg_data" -m fast stop >/dev/null 2>&1 || true; }
trap stop_postgres EXIT
