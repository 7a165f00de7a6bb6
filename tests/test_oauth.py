"""OAuth 2.1 on Streamable HTTP against a real authorization server: oidc-provider (OpenID
certified, from npm; `tests/ensure-oauth`) on loopback, configured by `tests/oauth/provider.mjs`.
Tokens come from it by client credentials and by the authorization code flow with PKCE."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from conftest import HttpServer, free_port, joined, raw, start_http_server
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
PROVIDER = ROOT / "tests" / "oauth" / "provider.mjs"
INTROSPECTION_ENV = {"OAUTH_CLIENT_ID": "mcp-server", "OAUTH_CLIENT_SECRET": "secret-mcp-server"}


@pytest.fixture(scope="session")
def oauth_modules() -> str:
    if os.environ.get("JUPYTER_MCP_OAUTH_MODULES"):
        return os.environ["JUPYTER_MCP_OAUTH_MODULES"]
    return subprocess.run([str(ROOT / "tests" / "ensure-oauth")], check=True, capture_output=True,
                          text=True).stdout.strip()


@dataclass
class AuthServer:
    process: subprocess.Popen
    port: int
    key_file: Path

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def start_auth_server(modules: str, key_file: Path, port: int | None = None,
                      clock_offset: int = 0) -> AuthServer:
    port = port or free_port()
    options = {"modules": modules, "port": port, "keyFile": str(key_file), "clockOffset": clock_offset}
    process = subprocess.Popen(["node", str(PROVIDER), json.dumps(options)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    assert line.startswith("ready"), f"the authorization server did not start: {line!r}"
    return AuthServer(process=process, port=port, key_file=key_file)


@pytest.fixture
def auth_server(oauth_modules, tmp_path):
    server = start_auth_server(oauth_modules, tmp_path / "keys.json")
    yield server
    server.stop()


def post_form(url: str, form: dict, user: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if user:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:secret-{user}".encode()).decode()
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def client_token(auth: AuthServer, client: str, scope: str, resource: str) -> str:
    status, body = post_form(auth.issuer + "/token", {
        "grant_type": "client_credentials", "scope": scope, "resource": resource}, user=client)
    assert status == 200, body
    return body["access_token"]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def pkce_token(auth: AuthServer, scope: str, resource: str) -> str:
    """The authorization code flow with PKCE (S256) as a public client; the provider's
    interaction logs the person in and their consent is the grant it keeps."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect_uri = "http://127.0.0.1/callback"
    jar = urllib.request.HTTPCookieProcessor()
    opener = urllib.request.build_opener(jar, NoRedirect)
    url = auth.issuer + "/auth?" + urllib.parse.urlencode({
        "client_id": "agent", "response_type": "code", "redirect_uri": redirect_uri, "scope": scope,
        "resource": resource, "code_challenge": challenge, "code_challenge_method": "S256",
        "state": "s1"})
    for _ in range(10):
        try:
            opener.open(url, timeout=30)
            raise AssertionError("the authorization server answered without a redirect")
        except urllib.error.HTTPError as e:
            assert e.code in (302, 303), e.read()
            url = urllib.parse.urljoin(url, e.headers["Location"])
        if url.startswith(redirect_uri):
            break
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    assert "code" in query, url
    status, body = post_form(auth.issuer + "/token", {
        "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": redirect_uri,
        "client_id": "agent", "code_verifier": verifier, "resource": resource})
    assert status == 200, body
    return body["access_token"]


def start_oauth_server(jupyter_server, auth: AuthServer, tmp_path, *extra: str) -> HttpServer:
    return start_http_server(
        ["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token, *extra],
        env=INTROSPECTION_ENV, log_dir=tmp_path, auth_args=["--oauth-issuer", auth.issuer])


@contextlib.asynccontextmanager
async def client_with(server: HttpServer, token: str, mode: str = "legacy", **kwargs):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60)) as hc:
        async with Client(streamable_http_client(server.mcp_url, http_client=hc), mode=mode,
                          read_timeout_seconds=60, **kwargs) as client:
            yield client


def status_with(server: HttpServer, token: str | None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, headers, body = raw(server.mcp_url, headers=headers)
    return status, {k.lower(): v for k, v in headers.items()}


ALL = "notebooks:read notebooks:write code:execute server:admin"


def test_metadata_and_challenges(jupyter_server, auth_server, tmp_path):
    server = start_oauth_server(jupyter_server, auth_server, tmp_path)
    try:
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            status, _, body = raw(server.base + path, method="GET")
            assert status == 200, body
            metadata = json.loads(body)
            assert metadata["resource"] == server.mcp_url
            assert metadata["authorization_servers"] == [auth_server.issuer]
            assert set(metadata["scopes_supported"]) == set(ALL.split())
        status, headers = status_with(server, None)
        assert status == 401
        assert headers["www-authenticate"] == (
            f'Bearer resource_metadata="{server.base}/.well-known/oauth-protected-resource/mcp"')
        status, headers = status_with(server, "not-a-token")
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
        # The management routes take the issuer's tokens too, with server:admin.
        status, _, body = raw(server.base + "/api/stop", method="DELETE")
        assert status == 401, body
    finally:
        server.stop()


@pytest.mark.anyio
async def test_tokens_of_every_kind_are_accepted(jupyter_server, auth_server, tmp_path):
    server = start_oauth_server(jupyter_server, auth_server, tmp_path)
    issued = []
    try:
        for client in ("svc-rs256", "svc-es256", "svc-eddsa", "svc-opaque"):
            issued.append((client, client_token(auth_server, client, ALL, server.mcp_url)))
        issued.append(("pkce", pkce_token(auth_server, ALL, server.mcp_url)))
        for kind, token in issued:
            for mode in ("legacy", "auto"):
                async with client_with(server, token, mode) as client:
                    result = await client.call_tool("list_kernels", {})
                    assert not result.is_error, (kind, joined(result))
        log = server.log.read_text()
        for _, token in issued:
            assert token not in log, "a token reached the log"
    finally:
        server.stop()


def test_refused_tokens_say_why(jupyter_server, oauth_modules, auth_server, tmp_path):
    server = start_oauth_server(jupyter_server, auth_server, tmp_path)
    others = []
    try:
        wrong_audience = client_token(auth_server, "svc-es256", ALL, "http://127.0.0.1:1/mcp")
        status, headers = status_with(server, wrong_audience)
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
        _, _, body = raw(server.mcp_url, headers={"Authorization": f"Bearer {wrong_audience}"})
        assert "another resource" in body and server.mcp_url in body
        # The same keys under another issuer: the signature verifies, the issuer does not.
        impostor = start_auth_server(oauth_modules, auth_server.key_file)
        others.append(impostor)
        foreign = client_token(impostor, "svc-es256", ALL, server.mcp_url)
        _, _, body = raw(server.mcp_url, headers={"Authorization": f"Bearer {foreign}"})
        assert "another authorization server" in body, body
        # A tampered signature.
        good = client_token(auth_server, "svc-rs256", ALL, server.mcp_url)
        head, payload, signature = good.split(".")
        forged_payload = base64.urlsafe_b64encode(
            json.dumps({**json.loads(base64.urlsafe_b64decode(payload + "==")), "scope": ALL + " x"}).encode()
        ).rstrip(b"=").decode()
        status, _ = status_with(server, f"{head}.{forged_payload}.{signature}")
        assert status == 401
        # The issuer itself, its clock an hour behind: its tokens expired long ago.
        auth_server.stop()
        behind = start_auth_server(oauth_modules, auth_server.key_file, port=auth_server.port, clock_offset=-3600)
        others.append(behind)
        expired = client_token(behind, "svc-es256", ALL, server.mcp_url)
        _, _, body = raw(server.mcp_url, headers={"Authorization": f"Bearer {expired}"})
        assert "expired" in body, body
        # Introspected: the issuer's clock calls it active, its exp says otherwise.
        expired_opaque = client_token(behind, "svc-opaque", ALL, server.mcp_url)
        _, _, body = raw(server.mcp_url, headers={"Authorization": f"Bearer {expired_opaque}"})
        assert "expired" in body, body
    finally:
        for other in others:
            other.stop()
        server.stop()


def test_rotated_keys_are_fetched(jupyter_server, oauth_modules, auth_server, tmp_path):
    server = start_oauth_server(jupyter_server, auth_server, tmp_path)
    try:
        old = client_token(auth_server, "svc-eddsa", ALL, server.mcp_url)
        assert status_with(server, old)[0] == 200
        auth_server.stop()
        rotated = start_auth_server(oauth_modules, tmp_path / "new-keys.json", port=auth_server.port)
        try:
            new = client_token(rotated, "svc-eddsa", ALL, server.mcp_url)
            # An unknown kid refetches the keys, at most every 5 s: accepted within that (+ margin).
            deadline = time.monotonic() + 15
            while status_with(server, new)[0] != 200:
                assert time.monotonic() < deadline, "a token signed with the rotated key is still refused"
                time.sleep(0.5)
            assert status_with(server, old)[0] == 401
        finally:
            rotated.stop()
    finally:
        server.stop()


def test_a_session_is_its_token_holders_and_unknown_tokens_cost_the_issuer_little(
        jupyter_server, auth_server, tmp_path):
    server = start_oauth_server(jupyter_server, auth_server, tmp_path)
    try:
        mine = client_token(auth_server, "svc-rs256", ALL, server.mcp_url)
        status, headers, body = raw(server.mcp_url, headers={"Authorization": f"Bearer {mine}"})
        assert status == 200, body
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}

        def use(token: str) -> tuple[int, str]:
            status, _, body = raw(server.mcp_url, body=listing, headers={
                "Authorization": f"Bearer {token}", "Mcp-Session-Id": session,
                "MCP-Protocol-Version": "2025-11-25"})
            return status, body

        # Another token of the same holder (the same client) may go on with it...
        status, body = use(client_token(auth_server, "svc-rs256", ALL, server.mcp_url))
        assert status == 200 and "execute_code" in body, body
        # ...a token of another holder may not, whatever its scopes: the session is not theirs.
        for other in ("svc-es256", "svc-opaque"):
            status, body = use(client_token(auth_server, other, ALL, server.mcp_url))
            assert status == 404 and "session not found" in body, (other, body)
        status, body = use(pkce_token(auth_server, ALL, server.mcp_url))
        assert status == 404, body

        # Made-up opaque tokens: each is asked about once (the refusal is remembered), and past
        # 20 new ones a second the rest are told to retry rather than passed to the issuer.
        made_up = [secrets.token_urlsafe(24) for _ in range(40)]
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(len(made_up)) as pool:  # at once, so they fall in one second
            answers = list(pool.map(lambda token: status_with(server, token), made_up))
        refused = [status for status, _ in answers if status == 401]
        busy = [headers for status, headers in answers if status == 503]
        assert refused and busy and len(refused) + len(busy) == 40, [status for status, _ in answers]
        assert all(headers.get("retry-after") == "1" for headers in busy)
        first = made_up[[status for status, _ in answers].index(401)]
        for _ in range(30):  # remembered: no allowance needed
            assert status_with(server, first)[0] == 401
    finally:
        server.stop()


@pytest.mark.parametrize("other", [["--mcp-token", "t"], ["--insecure-mcp-noauth"]])
def test_oauth_with_another_authentication_is_refused_at_start(jupyter_server, other):
    from conftest import server_binary, server_env
    done = subprocess.run(
        [server_binary(), "start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token,
         "--transport", "streamable-http", "--port", str(free_port()),
         "--oauth-issuer", "http://127.0.0.1:1", *other],
        capture_output=True, text=True, timeout=60, env=server_env(), stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "--oauth-issuer cannot be combined with" in done.stderr and other[0] in done.stderr, done.stderr


def call_raw(server: HttpServer, token: str, name: str, arguments: dict) -> tuple[int, dict, str]:
    status, headers, body = raw(server.mcp_url, headers={"Authorization": f"Bearer {token}"}, body={
        "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    return status, {k.lower(): v for k, v in headers.items()}, body


@pytest.mark.anyio
async def test_scopes_limit_what_a_token_sees_and_calls(jupyter_server, auth_server, tmp_path):
    server = start_oauth_server(jupyter_server, auth_server, tmp_path)
    try:
        reader = client_token(auth_server, "svc-es256", "notebooks:read", server.mcp_url)
        runner = pkce_token(auth_server, "notebooks:read code:execute", server.mcp_url)
        for mode in ("legacy", "auto"):
            async with client_with(server, reader, mode) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"list_kernels", "read_cell", "list_files", "read_file"} <= names
                assert not names & {"execute_code", "run_all_cells", "write_file", "insert_cell",
                                    "interrupt_kernel", "inspect_variables", "connect_to_jupyter"}
                assert not (await client.call_tool("list_kernels", {})).is_error
        for name, scope in (("execute_code", "code:execute"), ("write_file", "notebooks:write"),
                            ("connect_to_jupyter", "server:admin")):
            status, headers, body = call_raw(server, reader, name, {})
            assert status == 403, body
            assert headers["www-authenticate"].startswith(f'Bearer error="insufficient_scope", scope="{scope}"')
            assert scope in body
        # Prompts read cells and tasks carry results: both need notebooks:read.
        executor = client_token(auth_server, "svc-es256", "code:execute", server.mcp_url)
        for method, params in (("prompts/get", {"name": "jupyter_cite", "arguments": {"prompt": "x", "cell_indices": "0"}}),
                               ("prompts/list", {}), ("tasks/get", {"taskId": "none"})):
            status, headers, body = raw(server.mcp_url, headers={"Authorization": f"Bearer {executor}"}, body={
                "jsonrpc": "2.0", "id": 4, "method": method, "params": params})
            assert status == 403, (method, body)
            assert 'scope="notebooks:read"' in {k.lower(): v for k, v in headers.items()}["www-authenticate"], method
        async with client_with(server, runner) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "execute_code" in names and "write_file" not in names
            result = await client.call_tool("execute_code", {"code": "print(6 * 7)"})
            assert "42" in joined(result), joined(result)
        # The management routes need server:admin.
        status, headers, body = raw(server.base + "/api/stop", method="DELETE",
                                    headers={"Authorization": f"Bearer {runner}"})
        assert status == 403 and "server:admin" in body
        admin = client_token(auth_server, "svc-rs256", "server:admin", server.mcp_url)
        status, _, body = raw(server.base + "/api/stop", method="DELETE",
                              headers={"Authorization": f"Bearer {admin}"})
        assert status == 200, body
        server.process.wait(timeout=30)
    finally:
        server.stop()
