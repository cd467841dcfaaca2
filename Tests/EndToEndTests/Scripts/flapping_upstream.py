# A TLS upstream that is down, then comes back (DialBackoffTests).
# Down: it accepts each connection and closes it at once, printing "ACCEPT",
# so a test counts how often pinproxy dialled it. After SIGUSR1 it is up: TLS
# (argv[1] a PEM chain, argv[2] its key), and "200 ok" to every request.
# Prints "PORT <n>" first.
import signal, socket, ssl, sys, threading

context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
up = threading.Event()
signal.signal(signal.SIGUSR1, lambda *_: up.set())

server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.bind(("127.0.0.1", 0))
server.listen(256)
print("PORT", server.getsockname()[1], flush=True)


def serve(conn):
    try:
        with context.wrap_socket(conn, server_side=True) as tls:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = tls.recv(65536)
                    if not data:
                        return
                    buf += data
                _, buf = buf.split(b"\r\n\r\n", 1)
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    except (OSError, ssl.SSLError):
        pass


while True:
    conn, _ = server.accept()
    if not up.is_set():
        print("ACCEPT", flush=True)
        conn.close()
        continue
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
