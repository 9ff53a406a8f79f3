#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 for the tests: run as the postgres user,
# a temp data dir, loopback only, on a port of its own; installs it with apt
# where it is missing.
#
#   source scripts/pgtest.sh start   # exports PYEXEC_TEST_PG_URL, PGTEST_DIR
#   scripts/pgtest.sh stop DIR       # stops it and removes DIR
set -euo pipefail

pg_bin() {
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/pg_ctl" ] && { echo "$d"; return; }
	done
	return 1
}

pgtest_start() {
	local bin port dir
	if ! bin=$(pg_bin); then
		echo "== installing PostgreSQL (apt)" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
		bin=$(pg_bin)
	fi
	id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
	dir=$(mktemp -d /tmp/pyexec-pgtest.XXXXXX)
	chown postgres "$dir"
	port=${PGTEST_PORT:-$((20000 + RANDOM % 20000))}
	runuser -u postgres -- "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
	# fsync on (the store's real cost is measured), loopback only, our own
	# socket dir so nothing touches /var/run.
	cat >>"$dir/data/postgresql.conf" <<-CONF
		listen_addresses = '127.0.0.1'
		port = $port
		unix_socket_directories = '$dir'
		max_connections = 300
	CONF
	runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
	runuser -u postgres -- "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE pyexec_test" >/dev/null
	export PGTEST_DIR="$dir" PGTEST_BIN="$bin"
	export PYEXEC_TEST_PG_URL="postgres://postgres@127.0.0.1:$port/pyexec_test?sslmode=disable"
	export PYEXEC_TEST_PG_CTL="runuser -u postgres -- $bin/pg_ctl -D $dir/data -l $dir/log"
	echo "== PostgreSQL on 127.0.0.1:$port (data dir $dir)" >&2
}

pgtest_stop() {
	local dir=$1 bin
	bin=$(pg_bin) || return 0
	[ -d "$dir/data" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}

case "${1:-}" in
start) pgtest_start ;;
stop) pgtest_stop "${2:?data dir}" ;;
*) echo "usage: source scripts/pgtest.sh start | scripts/pgtest.sh stop DIR" >&2; exit 2 ;;
esac
