#!/usr/bin/env python3
"""Does pinproxy give back the memory a burst of connections took?

Starts a TLS upstream and `pinproxy run` on loopback (ports the kernel
picks, a temp dir), then twice: opens N intercepted connections (CONNECT,
TLS to pinproxy's minted leaf, one GET each, kept open), closes them all,
waits for `client_connections` to reach 0, and reads pinproxy's resident
memory (VmRSS) at each step. Every wait is bounded; everything it started
is stopped by PID.

    bench/burst-memory.py --binary .build/release/pinproxy [--connections 2000] [--settle 10]

Extra environment for pinproxy (e.g. MALLOC_ARENA_MAX=2) is passed through.
"""
import argparse
import asyncio
import json
import os
import re
import resource
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

HOST = "burst.test"


def sh(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_pki(d):
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
       "-subj", "/CN=burst root", "-keyout", "root-key.pem", "-out", "root.pem", cwd=d)
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-subj", f"/CN={HOST}", "-keyout", "leaf-key.pem", "-out", "leaf.csr", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write(f"subjectAltName=DNS:{HOST}\n")
    sh("openssl", "x509", "-req", "-in", "leaf.csr", "-CA", "root.pem", "-CAkey", "root-key.pem", "-CAcreateserial",
       "-days", "2", "-extfile", "san.ext", "-out", "leaf.pem", cwd=d)


async def upstream_handler(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                break
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def gauge(admin, name):
    text = urllib.request.urlopen(f"http://{admin}/metrics", timeout=10).read().decode()
    m = re.search(rf"^pinproxy_{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


async def one_client(proxy_port, ca_context):
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy_port)
    writer.write(f"CONNECT {HOST}:443 HTTP/1.1\r\nHost: {HOST}:443\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        raise RuntimeError(head.decode(errors="replace"))
    await writer.start_tls(ca_context, server_hostname=HOST)
    writer.write(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    await writer.drain()
    await reader.readuntil(b"hello")
    return writer


async def burst(n, proxy_port, ca_context, parallel=100):
    gate = asyncio.Semaphore(parallel)

    async def guarded():
        async with gate:
            return await asyncio.wait_for(one_client(proxy_port, ca_context), 30)
    results = await asyncio.gather(*(guarded() for _ in range(n)), return_exceptions=True)
    writers = [r for r in results if not isinstance(r, BaseException)]
    failures = [r for r in results if isinstance(r, BaseException)]
    return writers, failures


async def close_all(writers):
    for w in writers:
        w.close()
    await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--connections", type=int, default=2000)
    p.add_argument("--settle", type=float, default=10, help="seconds to wait after the gauge reaches 0")
    p.add_argument("--bursts", type=int, default=2)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    with tempfile.TemporaryDirectory(prefix="pinproxy-burst-") as d:
        make_pki(d)
        up_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        up_ctx.load_cert_chain(os.path.join(d, "leaf.pem"), os.path.join(d, "leaf-key.pem"))
        server = await asyncio.start_server(upstream_handler, "127.0.0.1", 0, ssl=up_ctx, backlog=4096)
        up_port = server.sockets[0].getsockname()[1]
        os.makedirs(os.path.join(d, "etc/policies"))
        with open(os.path.join(d, "etc/pinproxy.yaml"), "w") as f:
            f.write("listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\nca:\n  cert: ../state/ca.pem\n  key: ../state/ca-key.pem\n"
                    "policies: policies\nnetwork:\n  allow: [127.0.0.0/8]\n")
        with open(os.path.join(d, "etc/policies/p.yaml"), "w") as f:
            f.write(f"hosts:\n  - match: {HOST}\n    upstream: 127.0.0.1:{up_port}\n    probe_interval: 0\n"
                    f"    tls: {{ca_file: {os.path.join(d, 'root.pem')}}}\n")
        log = open(os.path.join(d, "pinproxy.log"), "w+")
        proc = subprocess.Popen([os.path.abspath(args.binary), "run", "--config", os.path.join(d, "etc/pinproxy.yaml")],
                                cwd=d, stdout=log, stderr=subprocess.STDOUT)
        try:
            ports = {}

            def listening():
                log.seek(0)
                for line in log:
                    m = re.search(r'"message":"(proxy|admin API) listening","address":"127\.0\.0\.1:(\d+)"', line)
                    if m:
                        ports[m.group(1)] = int(m.group(2))
                return len(ports) == 2
            if not await asyncio.to_thread(wait_until, listening, 30):
                sys.exit("pinproxy did not start:\n" + open(os.path.join(d, "pinproxy.log")).read())
            admin = f"127.0.0.1:{ports['admin API']}"
            ca_context = ssl.create_default_context(cafile=os.path.join(d, "state/ca.pem"))
            # Warm-up: one connection, so the baseline includes the minted leaf and TLS contexts.
            writers, _ = await burst(1, ports["proxy"], ca_context)
            await close_all(writers)
            await asyncio.to_thread(wait_until, lambda: gauge(admin, "client_connections") == 0, 30)
            await asyncio.sleep(2)
            rows = [("baseline", rss_kib(proc.pid), 0)]
            for number in range(1, args.bursts + 1):
                writers, failures = await burst(args.connections, ports["proxy"], ca_context)
                if failures:
                    print(f"burst {number}: {len(failures)} failed, e.g. {failures[0]!r}", file=sys.stderr)
                rows.append((f"burst {number}: {len(writers)} open", rss_kib(proc.pid), gauge(admin, "client_connections")))
                await close_all(writers)
                drained = await asyncio.to_thread(wait_until, lambda: gauge(admin, "client_connections") == 0, 60)
                rows.append((f"burst {number}: closed, gauge 0" + ("" if drained else " (NOT reached)"), rss_kib(proc.pid), 0))
                await asyncio.sleep(args.settle)
                rows.append((f"burst {number}: {args.settle:g} s later", rss_kib(proc.pid), gauge(admin, "client_connections")))
            print(json.dumps({"binary": args.binary, "connections": args.connections,
                              "env": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}}))
            for label, kib, open_now in rows:
                print(f"{label:40s} {kib / 1024:8.1f} MiB  (client_connections {open_now:g})")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            server.close()
            log.close()


if __name__ == "__main__":
    asyncio.run(main())
