"""/mcp on the Jupyter Server's port: Jupyter authenticates, the child server answers.

Streamable HTTP answers can be event streams that last as long as a tool runs (progress) or as
long as the client listens, so bodies are relayed chunk by chunk as they arrive, never buffered.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async, origin_matches_pat
from tornado import web
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.ioloop import IOLoop
from tornado.iostream import StreamClosedError

# Request headers the MCP transport needs; everything else (cookies, Jupyter's Authorization,
# Origin, which Jupyter has already checked) stays here.
FORWARDED_REQUEST = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id")
# Response headers the client needs back.
FORWARDED_RESPONSE = ("content-type", "mcp-session-id", "mcp-protocol-version", "cache-control")
# What Jupyter's authorizer must allow for each scope of the server's tools: reading and editing
# notebooks and files are `read` / `write` on contents, running code is `execute` on kernels,
# switching servers and managing extensions is `write` on server (as /api/shutdown needs).
SCOPE_PERMISSIONS = (
    ("notebooks:read", "read", "contents"),
    ("notebooks:write", "write", "contents"),
    ("code:execute", "execute", "kernels"),
    ("server:admin", "write", "server"),
)
SCOPES_HEADER = "X-Jupyter-MCP-Scopes"
# Long enough for the longest execution (3600 s max) and a client listening for notifications.
STREAM_TIMEOUT = 24 * 3600


class McpProxyHandler(APIHandler):
    """Relays MCP requests to the child, after Jupyter's own authentication."""

    def check_xsrf_cookie(self):
        # Token-authenticated API calls skip XSRF in Jupyter; a browser session without a token
        # must still pass it.
        if self.request.headers.get("Authorization"):
            return None
        return super().check_xsrf_cookie()

    @web.authenticated
    async def post(self, path: str = ""):
        await self._relay(path)

    @web.authenticated
    async def get(self, path: str = ""):
        await self._relay(path)

    @web.authenticated
    async def delete(self, path: str = ""):
        await self._relay(path)

    def _origin_allowed(self) -> bool:
        """Jupyter lets any Origin through once a token authenticates; the standalone server does
        not, and neither do we: a web page must not drive the tools with a token it got hold of.
        Allowed: no Origin (scripts), this server's own origin, loopback, or Jupyter's
        `allow_origin` / `allow_origin_pat`."""
        origin = self.request.headers.get("Origin")
        if origin is None or self.allow_origin == "*":
            return True
        if self.allow_origin and origin == self.allow_origin:
            return True
        if self.allow_origin_pat and origin_matches_pat(self.allow_origin_pat, origin):
            return True
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or hostname is None:
            return False
        if parts.netloc.lower() == (self.request.headers.get("Host") or "").lower():
            return True
        return hostname in ("localhost", "127.0.0.1", "::1")

    async def _granted_scopes(self) -> list[str]:
        """The server's scopes this user holds, as Jupyter's authorizer decides (a custom
        authorizer, e.g. JupyterHub's or a read-only role, narrows /mcp as it narrows Jupyter)."""
        granted = []
        for scope, action, resource in SCOPE_PERMISSIONS:
            if await ensure_async(self.authorizer.is_authorized(self, self.current_user, action, resource)):
                granted.append(scope)
        return granted

    async def _relay(self, path: str) -> None:
        if not self._origin_allowed():
            raise web.HTTPError(403, "this Origin may not use /mcp; add it to the Jupyter Server's allow_origin")
        app = self.settings["jupyter_mcp_server_rs"]
        child = app.child
        ready = child is not None and await IOLoop.current().run_in_executor(None, child.ready, 30)
        if not ready:
            raise web.HTTPError(503, "the MCP server is not running; see the Jupyter Server log")
        # Only the MCP endpoint and its health check are relayed; the child's management routes
        # (connect, stop) are not for clients of this Jupyter Server.
        target = {"": "/mcp", "healthz": "/api/healthz"}.get(path)
        if target is None:
            raise web.HTTPError(404)
        scopes = await self._granted_scopes()
        if not scopes:
            raise web.HTTPError(403, "the Jupyter Server's authorizer allows this user nothing /mcp serves "
                                     "(not even 'read' on 'contents'); ask its administrator")
        headers = {k: v for k, v in self.request.headers.items() if k.lower() in FORWARDED_REQUEST}
        headers["Authorization"] = f"Bearer {child.token}"
        # The child shows and lets through only what these allow.
        headers[SCOPES_HEADER] = " ".join(scopes)
        started = False

        def on_header(line: str) -> None:
            nonlocal started
            line = line.strip()
            if line.startswith("HTTP/"):
                parts = line.split(" ", 2)
                self.set_status(int(parts[1]), parts[2] if len(parts) > 2 else None)
                self.clear_header("Content-Type")
            elif ":" in line:
                name, value = line.split(":", 1)
                if name.strip().lower() in FORWARDED_RESPONSE:
                    self.set_header(name.strip(), value.strip())

        def on_chunk(chunk: bytes) -> None:
            nonlocal started
            started = True
            self.write(chunk)
            try:
                self.flush()
            except StreamClosedError:
                pass

        # Only `only` (a client's toolset) is passed on: Jupyter's own token may be in the query.
        only = self.get_query_argument("only", None)
        query = "?" + urlencode({"only": only}) if only is not None and target == "/mcp" else ""
        request = HTTPRequest(
            child.base + target + query,
            method=self.request.method,
            headers=headers,
            body=self.request.body if self.request.method == "POST" else None,
            header_callback=on_header,
            streaming_callback=on_chunk,
            request_timeout=STREAM_TIMEOUT,
            connect_timeout=10,
            decompress_response=False,
        )
        try:
            await app.http_client().fetch(request, raise_error=False)
        except HTTPClientError as e:  # pragma: no cover - raise_error=False makes this rare
            if not started:
                raise web.HTTPError(502, f"the MCP server did not answer: {e}") from e
        except StreamClosedError:
            return
        self.finish()
