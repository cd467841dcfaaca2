"""A parent proxy that fails on purpose, chosen by the CONNECT target's port.

Prints `PORT n` once listening, then `CONNECT target` for every request head.
Target ports: 1001 answers 407; 1002 answers 403; 1003 sends half a status
line and closes; 1004 never answers; 1005 says 200, then answers the
upstream TLS ClientHello with a fatal internal_error alert; 1006 says 200, then stays
silent (the TLS handshake never completes). Anything else: 502.
"""
import socket
import sys
import threading
import time

HOLD = 60  # seconds a silent connection is held open (longer than any test waits)


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
    return data


def serve(conn):
    try:
        head = read_head(conn)
        if head is None:
            return
        target = head.split(b" ")[1].decode()
        print("CONNECT", target, flush=True)
        port = int(target.rsplit(":", 1)[1])
        if port == 1001:
            conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"x\"\r\nContent-Length: 0\r\n\r\n")
        elif port == 1002:
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        elif port == 1003:
            conn.sendall(b"HTTP/1.1 200 Conn")
        elif port == 1004:
            time.sleep(HOLD)
        elif port == 1005:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            conn.recv(4096)  # the ClientHello
            conn.sendall(b"\x15\x03\x03\x00\x02\x02\x50")  # a fatal internal_error alert
        elif port == 1006:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            time.sleep(HOLD)
        else:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
    except OSError:
        pass
    finally:
        conn.close()


def main():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    print("PORT", server.getsockname()[1], flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
