#!/usr/bin/env bash
# One call through pinproxy with curl.
#
# Trust step: curl is given pinproxy's CA with --cacert (the file written by
# `pinproxy ca export --out pinproxy-ca.pem`, or state/ca.pem next to a local
# `pinproxy run`). --cacert replaces curl's default trust store for this call;
# to trust the CA system-wide instead, see docs/trusting-the-ca.md.
#
# An unmodified app needs only the environment:
#   HTTPS_PROXY=http://127.0.0.1:8080 CURL_CA_BUNDLE=state/ca.pem curl https://api.spotify.com/v1/markets
set -euo pipefail

PINPROXY="${PINPROXY:-http://127.0.0.1:8080}"
PINPROXY_CA="${PINPROXY_CA:-state/ca.pem}"
API_URL="${API_URL:-https://api.spotify.com/v1/markets}"

# The body goes to standard output, the HTTP status to standard error. A
# refusal by pinproxy carries `X-Pinproxy-Error: <code>` and a JSON body
# naming the host and the rule (docs/policies.md, "What clients see").
exec curl --silent --show-error \
  --proxy "$PINPROXY" \
  --cacert "$PINPROXY_CA" \
  --write-out '%{stderr}HTTP %{http_code}\n' \
  "$API_URL"
