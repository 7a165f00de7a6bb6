"""Write a jupyter-mcp-server extension or hook handler in Python (componentize-py, WIT
jupyter-mcp:extension@0.3.0).

An author registers tools, resources, prompts and hook handlers with decorators; this module
builds the exports the WIT asks for, with empty lists for whatever is left out. Every export is
guarded: whatever a handler raises (any exception, a refused host call) reaches the host as a
`guest-error` with its message, because componentize-py traps on any exception but
`componentize_py_types.Err` carrying the WIT's own variant. `print`, `sys.stderr` and the
`logging` module go to the server's log (WASI stdout is discarded by the host).

Build an app that uses it with
`componentize-py -d wit/v0.3.0 -w extension componentize -p guests/python -p . app -o app.wasm`.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union
from urllib.parse import unquote

from componentize_py_types import Err
from wit_world.imports import client as _client
from wit_world.imports import config as _config
from wit_world.imports import host_info as _host_info
from wit_world.imports import log as _log
from wit_world.imports import secrets as _secrets
from wit_world.imports import types as t

__all__ = [
    "Extension", "Hooks", "GuestError", "InvalidArguments", "NotFound", "Argument", "log",
    "text", "structured", "error_result", "guest_error", "host_error", "guard", "config",
    "api_version", "unsupported_by_client", "Answer", "elicit", "sample", "progress", "secret",
    "Reply", "confirm",
]


# ---- logging ----

class _Log:
    """Logging into the server's log, tagged with this guest's name (`info` and above also reach
    MCP clients that asked for logging)."""

    def __init__(self) -> None:
        for name in ("trace", "debug", "info", "warn", "error"):
            level = getattr(_log.Level, name.upper())
            setattr(self, name, functools.partial(self._write, level))

    @staticmethod
    def _write(level: _log.Level, *values: Any) -> None:
        _log.log(level, " ".join(v if isinstance(v, str) else repr(v) for v in values))


log = _Log()


class _HostStream:
    """A text stream that sends each line to the host's log (what `print` writes)."""

    def __init__(self, level: _log.Level) -> None:
        self._level = level
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            _log.log(self._level, line)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            _log.log(self._level, self._pending)
            self._pending = ""

    def isatty(self) -> bool:
        return False


class _HostHandler(logging.Handler):
    _LEVELS = [(logging.ERROR, _log.Level.ERROR), (logging.WARNING, _log.Level.WARN),
               (logging.INFO, _log.Level.INFO), (logging.DEBUG, _log.Level.DEBUG)]

    def emit(self, record: logging.LogRecord) -> None:
        level = next((ours for at, ours in self._LEVELS if record.levelno >= at), _log.Level.TRACE)
        _log.log(level, self.format(record))


sys.stdout = _HostStream(_log.Level.INFO)
sys.stderr = _HostStream(_log.Level.ERROR)
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", handlers=[_HostHandler()], force=True)


# ---- errors ----

class GuestError(Exception):
    """An error with the `guest-error` case the host should see; raise it or a subclass."""

    case: Callable[[str], t.GuestError] = t.GuestError_Failed


class InvalidArguments(GuestError):
    """The arguments did not make sense."""

    case = t.GuestError_InvalidArguments


class NotFound(GuestError):
    """No such tool, resource or prompt (or thing the arguments name)."""

    case = t.GuestError_NotFound


_HOST_ERRORS = (t.HostError_NotGranted, t.HostError_NotAvailable, t.HostError_NotFound,
                t.HostError_Conflict, t.HostError_Kernel, t.HostError_Invalid, t.HostError_Failed,
                t.HostError_UnsupportedByClient, t.HostError_Refused)
_GUEST_ERRORS = (t.GuestError_InvalidArguments, t.GuestError_NotFound, t.GuestError_Host,
                 t.GuestError_Failed)


def host_error(exc: BaseException) -> Optional[t.HostError]:
    """A refused host call's `host-error` (its `.value` is the message), else None. Host
    functions raise `componentize_py_types.Err(HostError_…)`."""
    value = getattr(exc, "value", None) if isinstance(exc, Err) else None
    return value if isinstance(value, _HOST_ERRORS) else None


def unsupported_by_client(exc: BaseException) -> Optional[str]:
    """The message of a host call refused because this call's MCP client cannot do it (it
    declared no elicitation or sampling, or there is no client), else None: the case to fall
    back on (`except Err as e: if unsupported_by_client(e) is None: raise`)."""
    refused = host_error(exc)
    return refused.value if isinstance(refused, t.HostError_UnsupportedByClient) else None


def guest_error(exc: BaseException) -> t.GuestError:
    """Turns any exception into the WIT's `guest-error` variant, keeping its message."""
    if isinstance(exc, GuestError):
        return exc.case(str(exc))
    refused = host_error(exc)
    if refused is not None:
        return t.GuestError_Host(refused)
    if isinstance(exc, Err):
        value = exc.value
        if isinstance(value, _GUEST_ERRORS):
            return value
        return t.GuestError_Failed(value if isinstance(value, str) else repr(value))
    return t.GuestError_Failed(str(exc) or type(exc).__name__)


def guard(fn: Callable) -> Callable:
    """Wraps an export so that whatever it raises reaches the host as a `guest-error`."""

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure must become an `err`, not a trap
            raise Err(guest_error(exc)) from None

    return guarded


def config() -> dict:
    """This guest's `config` table from the operator's config file (`{}` when none)."""
    return json.loads(_config.get_config())


def api_version() -> str:
    """The WIT version the host implements, e.g. `0.3.0`."""
    return _host_info.api_version()


# ---- the client and secrets ----

@dataclass
class Answer:
    """The person's answer to `elicit`: `action` is "accept" (with `content`, the object they
    filled in), "decline" or "cancel"."""

    action: str
    content: Optional[dict] = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


def elicit(message: str, requested_schema: Union[dict, str]) -> Answer:
    """Asks the person a question through the MCP client (`elicitation/create`; grant `elicit`).
    `requested_schema` is a JSON Schema object of flat primitive properties. A refusal raises
    `componentize_py_types.Err(HostError_…)`; `unsupported_by_client(e)` tells a client without
    elicitation apart."""
    answer = _client.elicit(message, _json(requested_schema))
    if isinstance(answer, _client.ElicitAnswer_Accept):
        return Answer("accept", json.loads(answer.value))
    return Answer("decline" if isinstance(answer, _client.ElicitAnswer_Decline) else "cancel")


def sample(request: Union[dict, str]) -> dict:
    """Asks the client's model (`sampling/createMessage`; grant `sample`): `request` is its params
    (`messages`, `maxTokens`, ...); returns its result (`role`, `content`, `model`, `stopReason`).
    Raises as `elicit` does."""
    return json.loads(_client.sample(_json(request)))


def progress(done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
    """Reports progress on the current call to a client that asked for it; nothing otherwise."""
    _client.progress(float(done), None if total is None else float(total), message)


def secret(name: str) -> str:
    """The operator's secret `name` (grant `secret:NAME`); raises `not-granted` or `not-found`."""
    return _secrets.get(name)


# ---- results ----

def text(value: str, is_error: bool = False) -> t.ToolResult:
    """A tool result of one text block."""
    return t.ToolResult(content=[t.Content_Text(value)], structured=None, is_error=is_error)


def structured(value: dict, summary: Optional[str] = None) -> t.ToolResult:
    """A tool result with structured output (a JSON object) and its JSON text."""
    as_json = json.dumps(value)
    return t.ToolResult(content=[t.Content_Text(summary or as_json)], structured=as_json,
                        is_error=False)


def error_result(message: str) -> t.ToolResult:
    """The tool ran and failed; the message says why and what to do next."""
    return text(message, is_error=True)


def _tool_result(value: Any) -> t.ToolResult:
    if isinstance(value, t.ToolResult):
        return value
    if isinstance(value, str):
        return text(value)
    return structured(value if value is not None else {})


def _arguments(arguments: str) -> dict:
    try:
        value = json.loads(arguments or "{}")
    except ValueError as exc:
        raise InvalidArguments(f"the arguments are not JSON: {exc}") from None
    return value if isinstance(value, dict) else {}


def _json(value: Any) -> Optional[str]:
    return value if value is None or isinstance(value, str) else json.dumps(value)


# ---- registrations ----

@dataclass
class Argument:
    """One argument of a prompt."""

    name: str
    description: Optional[str] = None
    required: bool = False


@dataclass
class _Tool:
    spec: t.ToolSpec
    call: Callable[..., Any]


@dataclass
class _Resource:
    spec: Any
    read: Callable[..., Any]
    match: Optional[re.Pattern] = None


@dataclass
class _Prompt:
    spec: t.Prompt
    get: Callable[..., Any]


def _template_pattern(template: str) -> re.Pattern:
    """A matcher for an RFC 6570 template's simple `{name}` expressions (one segment each)."""
    parts = re.split(r"\{([^}]+)\}", template)
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/?#]*)" for i, p in enumerate(parts))
    return re.compile(f"^{regex}$")


def _contents(uri: str, mime_type: Optional[str], value: Any) -> list:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, t.ResourceContents):
            out.append(item)
        elif isinstance(item, str):
            out.append(t.ResourceContents(uri, mime_type, t.ResourceBody_Text(item)))
        elif isinstance(item, (bytes, bytearray)):
            out.append(t.ResourceContents(uri, mime_type, t.ResourceBody_Blob(bytes(item))))
        else:
            out.append(t.ResourceContents(uri, mime_type or "application/json",
                                          t.ResourceBody_Text(json.dumps(item))))
    return out


def _prompt_result(value: Any, description: Optional[str]) -> t.PromptResult:
    if isinstance(value, t.PromptResult):
        return value
    message = t.PromptMessage(t.Role.USER, t.Content_Text(str(value)))
    return t.PromptResult(description=description, messages=[message])


@dataclass
class Extension:
    """An extension: register its parts with the decorators, then
    `ExtensionApi = extension.export()` in the app module."""

    # A callable is asked when the host loads the guest (e.g. to read `config()`): the host is
    # not there while componentize-py pre-initializes the app.
    name: Union[str, Callable[[], str]]
    version: str
    _capabilities: list = field(default_factory=list)
    _tools: list = field(default_factory=list)
    _resources: list = field(default_factory=list)
    _templates: list = field(default_factory=list)
    _prompts: list = field(default_factory=list)

    def capability(self, name: str, description: str, enabled: bool = True) -> None:
        """Declares a capability (namespaced by the extension, e.g. `wordcount.cells`)."""
        self._capabilities.append(t.Capability(name, description, enabled))

    def tool(self, name: str, description: str, schema: Optional[dict] = None, *,
             output_schema: Optional[dict] = None, title: Optional[str] = None,
             read_only: Optional[bool] = None, destructive: Optional[bool] = None,
             idempotent: Optional[bool] = None, open_world: Optional[bool] = None,
             capability: Optional[str] = None):
        """A tool; the function gets the arguments as keyword arguments and returns a string,
        a dict (structured output) or a `ToolResult`."""
        hints = t.ToolAnnotations(title, read_only, destructive, idempotent, open_world)
        spec = t.ToolSpec(name, description, _json(schema or {"type": "object", "properties": {}}),
                          _json(output_schema), hints, capability)

        def register(fn):
            self._tools.append(_Tool(spec, fn))
            return fn

        return register

    def resource(self, uri: str, name: str, *, title: Optional[str] = None,
                 description: Optional[str] = None, mime_type: Optional[str] = None):
        """A resource; the function gets the URI and returns text, bytes, a JSON-able value or a
        list of them."""
        spec = t.ResourceSpec(uri, name, title, description, mime_type)

        def register(fn):
            self._resources.append(_Resource(spec, fn))
            return fn

        return register

    def resource_template(self, uri_template: str, name: str, *, title: Optional[str] = None,
                          description: Optional[str] = None, mime_type: Optional[str] = None):
        """A resource template; the function gets the URI and the template's variables as
        keyword arguments."""
        spec = t.ResourceTemplate(uri_template, name, title, description, mime_type)

        def register(fn):
            self._templates.append(_Resource(spec, fn, _template_pattern(uri_template)))
            return fn

        return register

    def prompt(self, name: str, *, title: Optional[str] = None, description: Optional[str] = None,
               arguments: Optional[list] = None):
        """A prompt; the function gets its arguments as keyword arguments and returns the text
        of one user message or a `PromptResult`."""
        args = [t.PromptArgument(a.name, a.description, a.required) for a in arguments or []]
        spec = t.Prompt(name, title, description, args)

        def register(fn):
            self._prompts.append(_Prompt(spec, fn))
            return fn

        return register

    def export(self) -> type:
        """The class componentize-py instantiates for the `extension-api` export."""
        ext = self

        def name() -> str:
            return ext.name() if callable(ext.name) else ext.name

        class ExtensionApi:
            def identity(self):
                from wit_world.exports.extension_api import ExtensionIdentity
                return ExtensionIdentity(name=name(), version=ext.version)

            def capabilities(self):
                return list(ext._capabilities)

            def tools(self):
                return [tool.spec for tool in ext._tools]

            @guard
            def call_tool(self, tool_name: str, arguments: str):
                tool = next((x for x in ext._tools if x.spec.name == tool_name), None)
                if tool is None:
                    raise NotFound(f"{name()} has no tool {tool_name!r}")
                return _tool_result(tool.call(**_arguments(arguments)))

            def resources(self):
                return [r.spec for r in ext._resources]

            def resource_templates(self):
                return [r.spec for r in ext._templates]

            @guard
            def read_resource(self, uri: str):
                for r in ext._resources:
                    if r.spec.uri == uri:
                        return _contents(uri, r.spec.mime_type, r.read(uri))
                for r in ext._templates:
                    found = r.match.match(uri)
                    if found:
                        params = {k: unquote(v) for k, v in found.groupdict().items()}
                        return _contents(uri, r.spec.mime_type, r.read(uri, **params))
                raise NotFound(f"{name()} has no resource {uri!r}")

            def prompts(self):
                return [p.spec for p in ext._prompts]

            @guard
            def get_prompt(self, prompt_name: str, arguments: str):
                prompt = next((p for p in ext._prompts if p.spec.name == prompt_name), None)
                if prompt is None:
                    raise NotFound(f"{name()} has no prompt {prompt_name!r}")
                given = _arguments(arguments)
                for a in prompt.spec.arguments:
                    if a.required and a.name not in given:
                        raise InvalidArguments(f"prompt {prompt_name!r} needs the argument {a.name!r}")
                return _prompt_result(prompt.get(**given), prompt.spec.description)

        return ExtensionApi


_EVENTS = {
    "before_tool_call": t.HookEvent_BeforeToolCall,
    "after_tool_call": t.HookEvent_AfterToolCall,
    "before_execute": t.HookEvent_BeforeExecute,
    "after_execute": t.HookEvent_AfterExecute,
    "kernel_lifecycle": t.HookEvent_KernelLifecycle,
}


@dataclass
class Reply:
    """A hook handler's whole answer: `context` (a dict) replaces the call's context, `confirm` (a
    reason shown to the person) holds a `before_*` call until they confirm it."""

    context: Optional[dict] = None
    confirm: Optional[str] = None


def confirm(reason: str, context: Optional[dict] = None) -> Reply:
    """Holds the call until the person confirms it through the client, `reason` shown to them; a
    no, or a client that cannot ask, refuses the call. Honoured on `before_*` events of a
    critical handler (`propagate_errors=True`); `context`, when given, replaces the context."""
    return Reply(context, reason)


@dataclass
class Hooks:
    """A hook handler: register per-event functions with `@hooks.on("before_tool_call")` etc.,
    then `Hooks = hooks.export()` in the app module. Each function gets the event's data and the
    call's context (a dict); it returns a dict to replace the context, None to leave it,
    `confirm(reason)` to ask the person first, or raises to refuse (which fails the call only
    when `propagate_errors` is true)."""

    propagate_errors: bool = False
    _handlers: dict = field(default_factory=dict)

    def on(self, event: str):
        if event not in _EVENTS:
            raise ValueError(f"no hook event {event!r}; one of {', '.join(_EVENTS)}")

        def register(fn):
            self._handlers[_EVENTS[event]] = fn
            return fn

        return register

    def export(self) -> type:
        """The class componentize-py instantiates for the `hooks` export."""
        hooks = self

        class Hooks:
            def propagate_errors(self) -> bool:
                return hooks.propagate_errors

            @guard
            def on_event(self, event, context: str):
                handler = hooks._handlers.get(type(event))
                answer = None if handler is None else handler(event.value, json.loads(context or "{}"))
                if not isinstance(answer, Reply):
                    answer = Reply(answer)
                return t.HookReply(None if answer.context is None else json.dumps(answer.context),
                                   answer.confirm)

        return Hooks
