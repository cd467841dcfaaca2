#!/usr/bin/env bash
# bench/store.sh: the session store of docs/contract.md §12, counted.
#
#   1. Token calls per refresh interval for N = 1, 3, 10 replicas of the real
#      binary, without and with the store, under steady requests: every round
#      sends one request per replica per session (refresh_token `user`,
#      client_credentials `app`) through curl, for K refresh intervals
#      (token lifetime 4 s, refresh_before 1 s: one interval = 3 s). The mock
#      accounts service counts every token request; rotation is on.
#   2. The latency a request pays when its session must read the store (a
#      session with nothing cached, a valid token in the store) beside one
#      served from memory: 200 rounds each, median and p90, against the same
#      real PostgreSQL on loopback.
#
# Bounded: each case stops after K intervals (PINPROXY_STORE_BENCH_INTERVALS,
# default 6), each part under `timeout` (20 and 5 min). The figures come from
# `pinproxy-storebench` (Benchmarks/StoreBench), not from the test suite.
# Everything it starts (PostgreSQL, replicas, mocks) it stops by PID.
# Needs scripts/install-deps (postgresql). Prints two Markdown tables.
set -euo pipefail
cd "$(dirname "$0")/.."
intervals=${PINPROXY_STORE_BENCH_INTERVALS:-6}
# Debug, as the tests build: the replicas are the same `pinproxy` the suite drives.
nice -n 19 swift build --product pinproxy >/dev/null
nice -n 19 swift build --product pinproxy-storebench >/dev/null
bench=$(swift build --show-bin-path)/pinproxy-storebench
echo "| replicas | store | measured (s = intervals) | client_credentials calls (per interval) | refresh_token calls (per interval) | superseded refresh tokens sent | failed requests |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
nice -n 19 timeout 1200 "$bench" calls --intervals "$intervals"
echo
echo "| token | median | p90 |"
echo "| --- | --- | --- |"
nice -n 19 timeout 300 "$bench" latency
