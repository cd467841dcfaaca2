#!/usr/bin/env bash
# A container's network namespace (Docker, Podman, a systemd-nspawn
# machine): the rule goes in the container's namespace, so only its apps are
# redirected; pinproxy runs in the same namespace as a separate user.
# Usage: netns.sh PID-OF-A-PROCESS-IN-THE-CONTAINER [PINPROXY-UID]
set -euo pipefail
pid=$1 uid=${2:-10001}
nsenter --target "$pid" --net nft -f - <<RULES
table inet pinproxy_transparent {
  chain output {
    type nat hook output priority -100; policy accept;
    meta skuid $uid return
    ip daddr 127.0.0.0/8 return
    tcp dport { 80, 443 } redirect to :15001
  }
}
RULES
