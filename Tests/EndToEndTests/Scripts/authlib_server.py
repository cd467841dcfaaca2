"""An OAuth2 authorization server and a protected API, both from Authlib
(https://authlib.org), for pinproxy's credential tests: a real provider this
project did not write. HTTPS on loopback port 0; prints "PORT <n>".

usage: authlib_server.py CHAIN KEY SEED_REFRESH_TOKEN

Clients: cc-basic / cc-post (client_credentials, client_secret_basic /
client_secret_post), rt-client (refresh_token with rotation, post or basic),
ac-public (a public client: PKCE alone) and ac-post (client_secret_post), both
authorization_code with PKCE S256 required, then refresh_token.
Endpoints besides /oauth/token (all JSON):
  GET  /oauth/authorize  approves at once (no sign-in page): redirects to the
                     client's loopback redirect_uri with a code and the state
  GET  /api/whoami   200 {"client": id} for a valid access token, else 401
  GET  /api/echo     200 with the Authorization and X-Api-Key it received
  GET  /api/limited  429 Retry-After: N once after POST /_control/throttle?seconds=N
  POST /_control/revoke?client=ID   revokes that client's access tokens
  GET  /_stats       token calls per client, forms seen, requests seen
"""
import json
import secrets
import sys
import threading

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc7636 import CodeChallenge
from flask import Flask, jsonify, request
from werkzeug.serving import make_server

CHAIN, KEY, SEED = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
stats = {"token_calls": {}, "forms": [], "auth_methods": [], "whoami": [], "echo": [], "limited": 0,
         "refresh_tokens_issued": [], "access_tokens": {}, "authorize": []}
access_tokens = {}   # token -> {"client": id, "revoked": bool}
refresh_tokens = {SEED: {"client": "rt-client", "revoked": False, "scope": "read"}}
codes = {}           # authorization code -> AuthorizationCode
throttle = {"seconds": 0}


class Client(ClientMixin):
    def __init__(self, client_id, secret, methods, grant_types):
        self.client_id, self.secret, self.methods, self.grant_types = client_id, secret, methods, grant_types

    def get_client_id(self): return self.client_id
    def get_default_redirect_uri(self): return None
    def get_allowed_scope(self, scope): return scope or ""
    # Only the login clients have an authorization endpoint, and only to a loopback listener.
    def check_redirect_uri(self, redirect_uri):
        return "authorization_code" in self.grant_types and redirect_uri.startswith("http://127.0.0.1:")

    def check_client_secret(self, client_secret): return self.secret is not None and secrets.compare_digest(client_secret, self.secret)
    def check_response_type(self, response_type): return response_type == "code" and "authorization_code" in self.grant_types
    def check_grant_type(self, grant_type): return grant_type in self.grant_types

    def check_endpoint_auth_method(self, method, endpoint):
        with lock:
            stats["auth_methods"].append([self.client_id, method])
        return method in self.methods


CLIENTS = {
    "cc-basic": Client("cc-basic", "s3cret-basic", ["client_secret_basic"], ["client_credentials"]),
    "cc-post": Client("cc-post", "s3cret-post", ["client_secret_post"], ["client_credentials"]),
    "rt-client": Client("rt-client", "s3cret-rt", ["client_secret_post", "client_secret_basic"], ["refresh_token"]),
    "ac-public": Client("ac-public", None, ["none"], ["authorization_code", "refresh_token"]),
    "ac-post": Client("ac-post", "s3cret-ac", ["client_secret_post"], ["authorization_code", "refresh_token"]),
}


class AuthorizationCode:
    def __init__(self, client_id, redirect_uri, scope, challenge, method):
        self.client_id, self.redirect_uri, self.scope = client_id, redirect_uri, scope
        self.code_challenge, self.code_challenge_method = challenge, method

    def is_expired(self): return False
    def get_redirect_uri(self): return self.redirect_uri
    def get_scope(self): return self.scope


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def save_authorization_code(self, code, request):
        data = request.payload.data
        with lock:
            codes[code] = AuthorizationCode(request.client.client_id, request.payload.redirect_uri, request.payload.scope or "",
                                            data.get("code_challenge"), data.get("code_challenge_method"))

    def query_authorization_code(self, code, client):
        with lock:
            row = codes.get(code)
        return row if row and row.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code):
        with lock:
            for code, row in list(codes.items()):
                if row is authorization_code:
                    del codes[code]

    def authenticate_user(self, authorization_code): return {"id": "user"}


class RefreshCredential:
    def __init__(self, token, row): self.token, self.row = token, row
    def get_scope(self): return self.row["scope"]
    def check_client(self, client): return client.client_id == self.row["client"]
    def is_expired(self): return False
    def is_revoked(self): return self.row["revoked"]
    def get_user(self): return None


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


class RefreshTokenGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation: every refresh returns a new refresh token

    def authenticate_refresh_token(self, refresh_token):
        with lock:
            row = refresh_tokens.get(refresh_token)
        if row and not row["revoked"]:
            return RefreshCredential(refresh_token, row)
        return None

    def authenticate_user(self, credential): return {"id": "user"}

    def revoke_old_credential(self, credential):
        with lock:
            credential.row["revoked"] = True


def save_token(token, req):
    client_id = req.client.client_id
    with lock:
        access_tokens[token["access_token"]] = {"client": client_id, "revoked": False}
        stats["access_tokens"].setdefault(client_id, []).append(token["access_token"])
        if "refresh_token" in token:
            refresh_tokens[token["refresh_token"]] = {"client": client_id, "revoked": False, "scope": token.get("scope") or "read"}
            stats["refresh_tokens_issued"].append(token["refresh_token"])


app = Flask(__name__)
app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True  # so that a refresh can rotate
server = AuthorizationServer(app, query_client=CLIENTS.get, save_token=save_token)
server.register_grant(ClientCredentialsGrant)
server.register_grant(RefreshTokenGrant)
server.register_grant(AuthorizationCodeGrant, [CodeChallenge(required=True)])


@app.route("/oauth/authorize")
def authorize():
    with lock:
        stats["authorize"].append({k: v for k, v in request.args.items()})
    user = {"id": "user"}
    try:
        grant = server.get_consent_grant(end_user=user)
    except Exception as error:  # noqa: BLE001 (the test reads the refusal)
        return jsonify(error=getattr(error, "error", str(error))), 400
    return server.create_authorization_response(grant_user=user, grant=grant)


@app.route("/oauth/token", methods=["POST"])
def issue_token():
    form = {k: v for k, v in request.form.items() if k not in ("client_secret", "refresh_token", "code", "code_verifier")}
    with lock:
        stats["forms"].append(form)
    response = server.create_token_response()
    if response.status_code == 200:
        who = request.form.get("client_id") or (request.authorization.username if request.authorization else "?")
        with lock:
            stats["token_calls"][who] = stats["token_calls"].get(who, 0) + 1
    return response


def bearer():
    header = request.headers.get("Authorization", "")
    return header[len("Bearer "):] if header.startswith("Bearer ") else None


@app.route("/api/whoami")
def whoami():
    token = bearer()
    with lock:
        row = access_tokens.get(token)
        stats["whoami"].append({"authorization": request.headers.get("Authorization"), "valid": bool(row and not row["revoked"])})
    if not row or row["revoked"]:
        return jsonify(error="invalid_token"), 401
    return jsonify(client=row["client"])


@app.route("/api/echo")
def echo():
    seen = {"authorization": request.headers.get("Authorization"), "x_api_key": request.headers.get("X-Api-Key")}
    with lock:
        stats["echo"].append(seen)
    return jsonify(seen)


@app.route("/api/limited")
def limited():
    with lock:
        stats["limited"] += 1
        seconds, throttle["seconds"] = throttle["seconds"], 0
    if seconds:
        return jsonify(error="slow_down"), 429, {"Retry-After": str(seconds)}
    return jsonify(ok=True)


@app.route("/_control/revoke", methods=["POST"])
def revoke():
    with lock:
        for row in access_tokens.values():
            if row["client"] == request.args["client"]:
                row["revoked"] = True
    return jsonify(ok=True)


@app.route("/_control/throttle", methods=["POST"])
def set_throttle():
    with lock:
        throttle["seconds"] = int(request.args["seconds"])
    return jsonify(ok=True)


@app.route("/_stats")
def get_stats():
    with lock:
        return jsonify(stats)


httpd = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=(CHAIN, KEY))
print("PORT %d" % httpd.server_port, flush=True)
httpd.serve_forever()
