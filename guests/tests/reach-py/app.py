"""The policy tests' Python guest: an HTTP GET over wasi:http from CPython (componentize-py),
under the guest's allowed_hosts. Built against our WIT v0.1.0 plus wasi:http's client (world.wit).
componentize-py's own `poll_loop` helper imports `wit_world.imports.types`, a name that two
packages share in this world, so the request is made here with the same bindings, blocking.
Build: guests/tests/reach-py/build OUT_DIR
"""

import json

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.exports.extension_api import ExtensionIdentity
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as http
from wit_world.imports.jupyter_mcp_extension_types import (
    Content_Text, ToolAnnotations, ToolResult, ToolSpec,
)

SCHEMA = {"type": "object", "properties": {"url": {"type": "string"}}}


def described(error) -> str:
    """The host's words when it gave some (a refusal says what to change), else the code."""
    if isinstance(error, http.ErrorCode_InternalError) and error.value:
        return error.value
    return type(error).__name__


def get(url: str) -> tuple[int, str | None, bytes]:
    scheme, rest = url.split("://", 1)
    authority, _, path = rest.partition("/")
    request = http.OutgoingRequest(http.Fields())
    request.set_scheme(http.Scheme_Https() if scheme == "https" else http.Scheme_Http())
    request.set_authority(authority)
    request.set_path_with_query("/" + path)
    pending = outgoing_handler.handle(request, None)
    pending.subscribe().block()
    outcome = pending.get()
    if isinstance(outcome, Ok) and isinstance(outcome.value, Ok):
        response = outcome.value.value
    else:
        raise RuntimeError(described(outcome.value.value if isinstance(outcome, Ok) else outcome))
    location = response.headers().get("location")
    body = response.consume()
    stream = body.stream()
    data = b""
    while True:
        try:
            data += stream.blocking_read(65536)
        except Err as end:
            if isinstance(end.value, streams.StreamError_Closed):
                break
            raise RuntimeError(end.value.value.to_debug_string())
    return response.status(), location[0].decode() if location else None, data


def fetch(url: str) -> str:
    for _ in range(5):
        try:
            status, location, body = get(url)
        except (Err, RuntimeError) as error:
            reason = described(error.value) if isinstance(error, Err) else str(error)
            return f"error: {reason}"
        if 300 <= status < 400 and location:
            url = location
            continue
        return f"status {status}: {body.decode(errors='replace')}"
    return "error: too many redirects"


class ExtensionApi(exports.ExtensionApi):
    def identity(self) -> ExtensionIdentity:
        return ExtensionIdentity(name="reach-py", version="0.1.0")

    def capabilities(self):
        return []

    def tools(self):
        annotations = ToolAnnotations(title=None, read_only_hint=True, destructive_hint=None,
                                      idempotent_hint=None, open_world_hint=True)
        return [ToolSpec(name="reach_py_fetch", description="GETs a URL over wasi:http.",
                         input_schema=json.dumps(SCHEMA), annotations=annotations, capability=None)]

    def call_tool(self, name: str, arguments: str) -> ToolResult:
        text = fetch(json.loads(arguments).get("url", ""))
        return ToolResult(content=[Content_Text(text)], structured=None, is_error=False)
