#!/usr/bin/env bash
# Runs inside a network namespace of its own (`unshare -n`), so nothing here
# reaches outside the machine or sees another test: lo up, a TLS upstream on
# 127.0.0.3:8443, pinproxy with a transparent listener on 127.0.0.1:15001,
# and an nftables rule redirecting 127.0.0.2:443 and :80 to it. Then apps
# that know nothing of proxies connect to 127.0.0.2. Results go to DIR/results.
# Usage: transparent_netns.sh DIR PINPROXY SCRIPTS
set -u
dir=$1 pinproxy=$2 scripts=$3
mkdir -p "$dir/results"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

ip link set lo up
python3 "$scripts/transparent_upstream.py" 127.0.0.3 8443 "$dir/upstream-chain.pem" "$dir/upstream-key.pem" > "$dir/upstream.log" 2>&1 &
pids+=($!)
"$pinproxy" run --config "$dir/pinproxy.yaml" > "$dir/pinproxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do
  grep -q "transparent listening" "$dir/pinproxy.log" && grep -q ready "$dir/upstream.log" && break
  sleep 0.1
done
grep -q "transparent listening" "$dir/pinproxy.log" || { echo "pinproxy did not start" >&2; cat "$dir/pinproxy.log" >&2; exit 2; }

nft -f - <<'RULES' || exit 3
table ip pinproxy_test {
  chain output {
    type nat hook output priority -100; policy accept;
    ip daddr 127.0.0.2 tcp dport { 80, 443 } redirect to :15001
  }
}
RULES

ca=$dir/state/ca.pem
run_curl() {  # NAME ARGS...: status, headers and body of curl without --proxy
  local name=$1; shift
  curl -sS -o "$dir/results/$name.body" -D "$dir/results/$name.headers" -w '%{http_code}' --max-time 10 "$@" \
    > "$dir/results/$name.status" 2> "$dir/results/$name.stderr"
  echo $? > "$dir/results/$name.exit"
}
run_curl pinned --cacert "$ca" --resolve api.test:443:127.0.0.2 https://api.test/
run_curl mismatch --cacert "$ca" --resolve pinbad.test:443:127.0.0.2 https://pinbad.test/
run_curl denied --cacert "$ca" --resolve denied.test:443:127.0.0.2 https://denied.test/
run_curl plain --resolve api.test:80:127.0.0.2 http://api.test/
python3 "$scripts/transparent_client.py" 127.0.0.2 443 api.test "$ca" > "$dir/results/python-pinned.json"
python3 "$scripts/transparent_client.py" 127.0.0.2 443 denied.test "$ca" > "$dir/results/python-denied.json"
python3 "$scripts/transparent_client.py" 127.0.0.2 443 - "$ca" > "$dir/results/no-sni.json"
python3 "$scripts/transparent_client.py" 127.0.0.1 15001 api.test "$ca" > "$dir/results/loop.json"
python3 "$scripts/transparent_client.py" 127.0.0.2 443 loop.test "$ca" > "$dir/results/own-loop.json"
exit 0
