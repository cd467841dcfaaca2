"""An HTTP/2 app for the connection-level tests (docs/contract.md §11): the
`h2` library on a real TLS connection through pinproxy's CONNECT.

  h2_app.py PROXY_PORT HOST CA MODE [WAIT]

MODE:
  malformed     a PING frame of 7 bytes (FRAME_SIZE_ERROR, a connection error)
  continuation  HEADERS without END_HEADERS, then 16 KiB CONTINUATION frames
                (a CONTINUATION flood), until the proxy answers or 8 MiB went
  idle          no stream at all
  host-only     one GET with `host` and no `:authority`, then no stream
  no-authority  one GET with neither `host` nor `:authority`, then no stream
  sensitive     one GET with `authorization` sent never-indexed (HPACK, RFC
                7541 §7.1.3), read until its response's head arrives

Then, in every mode, it reads what the proxy sends (answering PINGs, as
HTTP/2 asks, so a graceful GOAWAY can finish) until the proxy ends the
connection or WAIT seconds pass; then, in the first two modes, it tries to
write 32 MiB more (PING frames) and counts what the proxy accepted before
the write failed.
Prints one JSON line:
  {"status": response status or 0, "neverIndexed": [names of the response
   head's fields that came never-indexed], "goaways": [error codes], "resets":
   [RST_STREAM error codes], "end": "eof" | "reset" | "timeout" | "answered",
   "sentAfter": bytes written after the end}
"""
import json
import select
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
from hpack import NeverIndexedHeaderTuple
from hyperframe.frame import Frame, GoAwayFrame, HeadersFrame, PingFrame, RstStreamFrame

port, host, cafile, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
wait = float(sys.argv[5]) if len(sys.argv) > 5 else 15.0
result = {"status": 0, "neverIndexed": [], "goaways": [], "resets": [], "end": "timeout", "sentAfter": 0}

raw = socket.create_connection(("127.0.0.1", port), timeout=10)
raw.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
reply = b""
while b"\r\n\r\n" not in reply:
    chunk = raw.recv(4096)
    if not chunk:
        break
    reply += chunk
if not reply.startswith(b"HTTP/1.1 200"):
    print(json.dumps({"error": "CONNECT answered %r" % reply[:40]}))
    sys.exit(1)
context = ssl.create_default_context(cafile=cafile)
context.set_alpn_protocols(["h2"])
tls = context.wrap_socket(raw, server_hostname=host)
if tls.selected_alpn_protocol() != "h2":
    print(json.dumps({"error": "ALPN chose %r" % tls.selected_alpn_protocol()}))
    sys.exit(1)

conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
conn.initiate_connection()
tls.sendall(conn.data_to_send())
pending = b""


def frames(data):
    """Whole frames out of what has arrived (hyperframe parses them)."""
    global pending
    pending += data
    out = []
    while len(pending) >= 9:
        frame, length = Frame.parse_frame_header(memoryview(pending[:9]))
        if len(pending) < 9 + length:
            break
        frame.parse_body(memoryview(pending[9:9 + length]))
        pending = pending[9 + length:]
        out.append(frame)
    return out


def take(data):
    """Notes GOAWAYs and a response status; acknowledges PINGs and SETTINGS."""
    for frame in frames(data):
        if isinstance(frame, GoAwayFrame):
            result["goaways"].append(frame.error_code)
        elif isinstance(frame, RstStreamFrame):
            result["resets"].append(frame.error_code)
        elif isinstance(frame, PingFrame) and "ACK" not in frame.flags:
            ack = PingFrame(0, frame.opaque_data)
            ack.flags.add("ACK")
            tls.sendall(ack.serialize())
        elif frame.type == 0x4 and "ACK" not in frame.flags:  # SETTINGS
            tls.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
        elif isinstance(frame, HeadersFrame) and not result["status"]:
            for field in conn.decoder.decode(frame.data):
                name, value = field[0], field[1]
                if name in (b":status", ":status"):
                    result["status"] = int(value)
                if isinstance(field, NeverIndexedHeaderTuple):
                    result["neverIndexed"].append(name.decode() if isinstance(name, bytes) else name)


def receive(timeout):
    """One read: the bytes, or "" with how the connection ended."""
    tls.settimeout(timeout)
    try:
        data = tls.recv(65536)
    except socket.timeout:
        return None, None
    except (ConnectionResetError, BrokenPipeError):
        return None, "reset"
    except ssl.SSLError as error:
        return None, "eof" if "EOF" in str(error) else "reset"
    return (data, None) if data else (None, "eof")


def frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


end = None
try:
    if mode == "malformed":
        tls.sendall(frame(0x6, 0, 0, b"\x00" * 7))
    elif mode == "continuation":
        block = conn.encoder.encode([(":method", "GET"), (":scheme", "https"), (":path", "/flood"), (":authority", host)])
        tls.sendall(frame(0x1, 0, 1, block))
        sent = 0
        while sent < 8 << 20 and not result["goaways"] and not end:
            tls.sendall(frame(0x9, 0, 1, b"\x00" * 16384))
            sent += 16384 + 9
            # Everything the proxy answers is read before the next frame goes (a
            # bounded wait for each part): a proxy that closes with bytes of ours
            # still unread resets the connection, and the reset would discard
            # its GOAWAY before this app read it.
            while not end and not result["goaways"] and (tls.pending() or select.select([tls], [], [], 2)[0]):
                data, end = receive(1)
                if data:
                    take(data)
    elif mode == "host-only":
        conn.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":path", "/host-only"), ("host", host)], end_stream=True)
        tls.sendall(conn.data_to_send())
    elif mode == "no-authority":
        # h2 will not send this head, so the frame is built here (END_STREAM | END_HEADERS).
        block = conn.encoder.encode([(":method", "GET"), (":scheme", "https"), (":path", "/no-authority")])
        tls.sendall(frame(0x1, 0x5, 1, block))
    elif mode == "sensitive":
        conn.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":path", "/sensitive"), (":authority", host),
                              NeverIndexedHeaderTuple("authorization", "Bearer app-secret"), ("accept", "*/*")], end_stream=True)
        tls.sendall(conn.data_to_send())
    elif mode != "idle":
        raise SystemExit("unknown mode " + mode)
except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
    end = end or "reset"

deadline = time.monotonic() + wait
while not end and time.monotonic() < deadline:
    data, end = receive(max(0.05, min(1.0, deadline - time.monotonic())))
    if data:
        try:
            take(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            end = "reset"
    if mode == "sensitive" and result["status"]:
        end = end or "answered"
result["end"] = end or "timeout"

# Whatever the proxy still takes now, it takes after it said the connection was over.
junk = frame(0x6, 0, 0, b"\x00" * 8) * 3855  # about 64 KiB of PINGs
try:
    tls.settimeout(5)
    while mode in ("malformed", "continuation") and result["sentAfter"] < 32 << 20:
        tls.sendall(junk)
        result["sentAfter"] += len(junk)
except (OSError, ssl.SSLError):
    pass
print(json.dumps(result))
