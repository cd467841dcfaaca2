"""A TLS gRPC server and a client, with grpcio's generic handlers (no protoc).

  grpc_peer.py serve CERT KEY          prints "port N", serves until killed
  grpc_peer.py call HOST:PORT CA       calls through https_proxy; prints JSON

Messages are raw bytes (identity serializers). The server's methods:
  /t.T/Echo     unary: answers b"echo:" + request
  /t.T/Count    server streaming: b"n=1" … b"n=K" for request b"K"
  /t.T/Fail     unary: PERMISSION_DENIED, details and trailing metadata
  /t.T/Chat     bidirectional streaming: answers each message with b"re:" + it
"""
import json
import sys
from concurrent import futures

import grpc

IDENTITY = dict(request_deserializer=None, response_serializer=None)


def echo(request, context):
    seen = dict(context.invocation_metadata())
    context.set_trailing_metadata((("x-echo-te", seen.get("te", "-")),))
    return b"echo:" + request


def count(request, context):
    for i in range(1, int(request) + 1):
        yield b"n=%d" % i


def chat(requests, context):
    for message in requests:
        yield b"re:" + message


def fail(request, context):
    context.set_trailing_metadata((("x-reason", "denied-by-test"), ("x-bin-bin", b"\x00\x01\xff")))
    context.abort(grpc.StatusCode.PERMISSION_DENIED, "no access for test")


def serve(cert, key):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.method_handlers_generic_handler("t.T", {
        "Echo": grpc.unary_unary_rpc_method_handler(echo, **IDENTITY),
        "Count": grpc.unary_stream_rpc_method_handler(count, **IDENTITY),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, **IDENTITY),
        "Chat": grpc.stream_stream_rpc_method_handler(chat, **IDENTITY),
    })
    server.add_generic_rpc_handlers((handler,))
    credentials = grpc.ssl_server_credentials(((open(key, "rb").read(), open(cert, "rb").read()),))
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    print("port %d" % port, flush=True)
    server.wait_for_termination()


def call(target, ca):
    credentials = grpc.ssl_channel_credentials(root_certificates=open(ca, "rb").read())
    channel = grpc.secure_channel(target, credentials)
    out = {}
    echo_call = channel.unary_unary("/t.T/Echo")
    response, state = echo_call.with_call(b"hi", timeout=10)
    out["echo"] = response.decode()
    out["echo_trailers"] = {k: v for k, v in state.trailing_metadata()}
    out["count"] = [m.decode() for m in channel.unary_stream("/t.T/Count")(b"5", timeout=10)]
    out["chat"] = [m.decode() for m in channel.stream_stream("/t.T/Chat")(iter([b"a", b"bb", b"ccc"]), timeout=10)]
    try:
        channel.unary_unary("/t.T/Fail")(b"x", timeout=10)
        out["fail"] = "no error"
    except grpc.RpcError as error:
        out["fail"] = {
            "code": error.code().name,
            "details": error.details(),
            "trailers": {k: (v.hex() if isinstance(v, bytes) else v) for k, v in error.trailing_metadata()},
        }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        call(sys.argv[2], sys.argv[3])
