# syntax=docker/dockerfile:1
#
# pinproxy container image (README.md, "Container").
#   docker build -t pinproxy .
#   docker run -d --name pinproxy -p 127.0.0.1:8080:8080 -p 127.0.0.1:9090:9090 \
#     -v pinproxy-state:/var/lib/pinproxy pinproxy
#
# Layout inside the image:
#   /usr/local/bin/pinproxy          the binary (Swift standard library linked in)
#   /etc/pinproxy/pinproxy.yaml      examples/container/pinproxy.yaml (listens on 0.0.0.0)
#   /etc/pinproxy/policies/          etc/policies/ of this repository
#   /var/lib/pinproxy                state volume: the interception CA (ca.pem, ca-key.pem 0600)
# Runs as uid/gid 10001 (numeric, so Kubernetes' runAsNonRoot can check it).

ARG SWIFT_VERSION=6.3
ARG DEBIAN_VERSION=bookworm

# ---- build ------------------------------------------------------------------
FROM swift:${SWIFT_VERSION}-${DEBIAN_VERSION} AS build
# libssl-dev, pkg-config: the build. nginx-light, golang-go, openssl, python3:
# the profile-guided build's training (scripts/build-release runs bench/run's
# loads on loopback against an nginx it starts); none of it reaches the image.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libssl-dev pkg-config nginx-light golang-go openssl python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so a source change does not fetch them again: resolved
# once (Package.resolved, so that the release build's two builds, instrumented
# and optimized, take the same versions) into SwiftPM's shared cache, which
# both RUNs mount and from which each build's scratch directory takes them.
COPY Package.* ./
RUN --mount=type=cache,target=/root/.cache/org.swift.swiftpm swift package resolve && rm -rf .build
# Every target the manifest declares must exist, tests and benchmark included.
COPY Sources ./Sources
COPY Tests ./Tests
COPY Benchmarks ./Benchmarks
COPY scripts ./scripts
COPY bench ./bench
# `pinproxy --version` names this commit (.git is not in the build context):
#   docker build --build-arg PINPROXY_COMMIT="$(git describe --always --dirty)" -t pinproxy .
# scripts/build-release: pinproxy built with a profile of bench/run's loads,
# the Swift runtime linked in (about 25 minutes on two cores; README, Container).
ARG PINPROXY_COMMIT=""
RUN --mount=type=cache,target=/root/.cache/org.swift.swiftpm \
    PINPROXY_COMMIT="${PINPROXY_COMMIT}" scripts/build-release --static-swift-stdlib \
 && install -D -m 0755 .build-release/release/pinproxy /staging/pinproxy \
 && rm -rf .build-release .build-bench

# ---- runtime ----------------------------------------------------------------
FROM debian:${DEBIAN_VERSION}-slim
# libssl3: every TLS leg goes through system OpenSSL 3 (the Swift runtime is
# linked into the binary). ca-certificates: the default upstream trust store.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 pinproxy \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/pinproxy --no-create-home \
      --shell /usr/sbin/nologin pinproxy \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/pinproxy

COPY --from=build /staging/pinproxy /usr/local/bin/pinproxy
# Configuration is root-owned and read-only to pinproxy; mount your own
# /etc/pinproxy (or just /etc/pinproxy/policies) to replace it.
COPY examples/container/pinproxy.yaml /etc/pinproxy/pinproxy.yaml
COPY etc/policies/ /etc/pinproxy/policies/

USER 10001:10001
WORKDIR /var/lib/pinproxy
# The CA is created here on first run when absent; keep it on a volume, or
# every new container mints a new CA that clients do not trust.
VOLUME ["/var/lib/pinproxy"]
# 8080: the proxy (HTTPS_PROXY); 9090: the admin API (/healthz /readyz /metrics /policies /reload).
EXPOSE 8080 9090

# The image has no curl: bash's /dev/tcp asks GET /healthz on the admin port.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9090 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]

# SIGTERM (docker stop): stop accepting, drain for limits.shutdown_grace, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pinproxy"]
CMD ["run", "--config", "/etc/pinproxy/pinproxy.yaml"]
