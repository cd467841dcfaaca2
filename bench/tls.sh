#!/usr/bin/env bash
# TLS engine benchmark (issue 2): pinproxy's handler pair beside openssl's own
# figures, measured in the same run. Bounded: every step runs a fixed time.
# Usage: bench/tls.sh [SECONDS_PER_CASE]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
swift build -c release --product pinproxy-tlsbench >/dev/null
.build/release/pinproxy-tlsbench "$secs"

work=$(mktemp -d)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
  -subj /CN=bench.pinproxy.test -days 1 2>/dev/null
openssl s_server -accept 127.0.0.1:0 -cert "$work/cert.pem" -key "$work/key.pem" -www -tls1_3 -groups P-256 \
  >"$work/s_server.out" 2>&1 &
server_pid=$!
for _ in $(seq 50); do grep -q '^ACCEPT' "$work/s_server.out" && break; sleep 0.1; done
port=$(sed -n 's/^ACCEPT .*:\([0-9]*\)$/\1/p' "$work/s_server.out")

echo "openssl (same machine, same run):"
openssl speed -seconds "$secs" ecdsap256 2>/dev/null | awk '/^ *256 bits ecdsa/ {printf "  ecdsap256 sign/s: %s  verify/s: %s\n", $(NF-1), $NF}'
for mode in -new -reuse; do
  openssl s_time -connect "127.0.0.1:$port" -time "$secs" $mode 2>/dev/null \
    | awk -v m="$mode" '/connections\/user sec/ {cpu=$5} /real seconds/ {printf "  s_time %s: %.0f connections/s wall, %.0f per client CPU second (s_client+s_server over loopback)\n", m, $1/$4, cpu}'
done
openssl speed -seconds "$secs" -bytes 16384 -evp aes-256-gcm 2>/dev/null | awk '/^[Aa][Ee][Ss]-256-[Gg][Cc][Mm]/ {printf "  aes-256-gcm, 16 KiB blocks: %s (1000s of bytes/s)\n", $NF}'
