"""An HTTP/2 upstream for the end-to-end tests: Python's `h2` behind Python
`ssl` (ALPN h2), one thread per connection.

  h2_upstream.py CHAIN KEY MODE

Prints "PORT n" once listening, then "REQ path never=names names=names" for
each request (`never`: the fields that came HPACK never-indexed, RFC 7541
§7.1.3; `names`: every field's name, both sorted).

MODE:
  bodiless       /no-content... is answered 204 with DATA after it (bytes an
                 HTTP/1.1 app would read as its next answer); anything else
                 200 "mine"
  never-indexed  200 "ok" with a `set-cookie` sent never-indexed

Gone after ten minutes whatever happens.
"""
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from hpack import NeverIndexedHeaderTuple

chain, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
INJECTED = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\ninjected"
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(chain, key)
ctx.set_alpn_protocols(["h2"])


def answer(conn, stream, path):
    if mode == "bodiless" and path.startswith("/no-content"):
        conn.send_headers(stream, [(":status", "204")])
        conn.send_data(stream, INJECTED, end_stream=True)
    elif mode == "bodiless":
        conn.send_headers(stream, [(":status", "200"), ("content-length", "4")])
        conn.send_data(stream, b"mine", end_stream=True)
    elif mode == "never-indexed":
        conn.send_headers(stream, [(":status", "200"), NeverIndexedHeaderTuple("set-cookie", "session=secret"),
                                   ("content-length", "2")])
        conn.send_data(stream, b"ok", end_stream=True)
    else:
        raise SystemExit("unknown mode " + mode)


def serve(sock):
    try:
        tls = ctx.wrap_socket(sock, server_side=True)
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        tls.sendall(conn.data_to_send())
        while True:
            data = tls.recv(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    path = dict(event.headers)[":path"]
                    never = sorted(field[0] for field in event.headers if isinstance(field, NeverIndexedHeaderTuple))
                    names = sorted(field[0] for field in event.headers)
                    print("REQ %s never=%s names=%s" % (path, ",".join(never), ",".join(names)), flush=True)
                    answer(conn, event.stream_id, path)
            tls.sendall(conn.data_to_send())
    except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as error:
        print("ERR %r" % error, flush=True)


server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
print("PORT %d" % server.getsockname()[1], flush=True)
server.settimeout(1)
deadline = time.time() + 600
while time.time() < deadline:
    try:
        accepted, _ = server.accept()
    except socket.timeout:
        continue
    threading.Thread(target=serve, args=(accepted,), daemon=True).start()
