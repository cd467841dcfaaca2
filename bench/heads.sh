#!/usr/bin/env bash
# One HTTP/1 head read by NIO's decoder and by pinproxy's HeadParser
# (Benchmarks/HeadBench): nanoseconds per head, best of five runs each, on
# the request bench/run's client sends and nginx's response to it.
# Bounded: a fixed count of heads per run.
#   bench/heads.sh [HEADS]           default 200000
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product pinproxy-headbench >/dev/null
.build/release/pinproxy-headbench "${1:-200000}"
