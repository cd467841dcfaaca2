#!/usr/bin/env bash
# One call through pinproxy from Java (JDK 11+: runs Example.java as a source file).
#
# Trust step: a trust store holding pinproxy's CA, made with keytool, handed to
# the JVM with -Djavax.net.ssl.trustStore. It replaces the JVM's default
# trust store (cacerts) for this process: right for an app whose HTTPS all
# goes through pinproxy. An app that also calls other hosts directly should
# import the CA into a copy of $JAVA_HOME/lib/security/cacerts instead
# (docs/trusting-the-ca.md, "Java").
# Proxy step: -Dhttps.proxyHost/-Dhttps.proxyPort, read by HttpsURLConnection
# and by java.net.http.HttpClient's default ProxySelector alike.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

PINPROXY="${PINPROXY:-http://127.0.0.1:8080}"
PINPROXY_CA="${PINPROXY_CA:-state/ca.pem}"
API_URL="${API_URL:-https://api.spotify.com/v1/markets}"
export API_URL

hostport="${PINPROXY#*://}"; hostport="${hostport%%/*}"
proxy_host="${hostport%:*}"; proxy_port="${hostport##*:}"

store="$(mktemp -d)/pinproxy-truststore.p12"
trap 'rm -rf "$(dirname "$store")"' EXIT
keytool -importcert -noprompt -alias pinproxy-ca -file "$PINPROXY_CA" \
  -keystore "$store" -storetype PKCS12 -storepass changeit >/dev/null

java \
  -Djavax.net.ssl.trustStore="$store" -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit \
  -Dhttps.proxyHost="$proxy_host" -Dhttps.proxyPort="$proxy_port" \
  "$here/Example.java"
