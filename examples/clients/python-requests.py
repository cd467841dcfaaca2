#!/usr/bin/env python3
"""One call through pinproxy with Python `requests`.

Trust step: requests verifies against its own bundle (certifi), not the
system store, so pinproxy's CA is passed explicitly: `verify=PINPROXY_CA`.
An unmodified app needs only the environment, which requests reads itself:

    HTTPS_PROXY=http://127.0.0.1:8080 REQUESTS_CA_BUNDLE=state/ca.pem python3 app.py

(NO_PROXY still wins over HTTPS_PROXY for the hosts it lists.) This script
passes both explicitly, so it behaves the same whatever the environment says.
"""
import os
import sys

import requests

PINPROXY = os.environ.get("PINPROXY", "http://127.0.0.1:8080")
PINPROXY_CA = os.environ.get("PINPROXY_CA", "state/ca.pem")
API_URL = os.environ.get("API_URL", "https://api.spotify.com/v1/markets")

response = requests.get(
    API_URL,
    proxies={"https": PINPROXY, "http": PINPROXY},
    verify=PINPROXY_CA,  # pinproxy's CA; the upstream's own chain is pinproxy's to check
    timeout=30,
)
# A refusal by pinproxy names its reason (docs/policies.md, "What clients see").
reason = response.headers.get("X-Pinproxy-Error")
print(response.text)
print(f"HTTP {response.status_code}" + (f" (pinproxy: {reason})" if reason else ""), file=sys.stderr)
