"""An app that knows nothing of proxies: TLS to ADDRESS:PORT with SNI (or
none, when SNI is "-"), then GET / with Host SNI. Prints one JSON line:
{"status", "body"} when answered, {"alert"} when the handshake was refused."""
import json
import socket
import ssl
import sys

address, port, sni, ca_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
context = ssl.create_default_context(cafile=ca_file)
if sni == "-":
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
try:
    with socket.create_connection((address, port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=None if sni == "-" else sni) as tls:
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    print(json.dumps({"status": status, "body": body.decode(errors="replace")}))
except ssl.SSLError as error:
    print(json.dumps({"alert": error.reason or str(error)}))
except (ConnectionError, OSError) as error:
    print(json.dumps({"closed": str(error)}))
