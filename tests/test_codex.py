"""Codex (tests/ensure-codex, pinned) through its app server, driven as its clients (the VS Code
extension, the desktop app) drive it: JSON-RPC lines on `codex app-server`'s stdio, with
CODEX_HOME in a temporary directory whose config.toml names our server over stdio or Streamable
HTTP and a model provider that is a stand-in for the Responses API on loopback (no model is
reached). `mcpServerStatus/list` shows all our tools and `mcpServer/tool/call` runs one; a turn
shows them to the model, asks this client to approve execute_code as Codex asks a person, runs
it and hands 42 back to the model."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import TRANSPORTS, server_binary, start_http_server, toml_str

OUR_NAMESPACE = "mcp__jupyter"
OUR_TOOL_COUNT = 27
TOKEN_VARIABLE = "JUPYTER_MCP_TEST_TOKEN"


def codex() -> str:
    binary = os.environ.get("JUPYTER_MCP_CODEX")
    if not binary:
        pytest.skip("run the suite through tests/run (tests/ensure-codex installs Codex)")
    return binary


class ResponsesApi:
    """`POST /v1/responses` as Codex calls it (always streamed): a request offering our
    execute_code (in the `mcp__jupyter` tool namespace) gets a function_call of it; a request
    carrying its function_call_output gets that output back as the assistant's text."""

    def __init__(self):
        self.requests: list[dict] = []
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path.split("?")[0] != "/v1/responses":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                api.requests.append(body)
                number = len(api.requests)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                events = [{"type": "response.created", "response": {"id": f"resp_{number}"}}]
                events += [{"type": "response.output_item.done", "output_index": 0, "item": item}
                           for item in api.answer(body)]
                events.append({"type": "response.completed", "response": {"id": f"resp_{number}", "usage": {
                    "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
                    "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}}})
                for event in events:
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def answer(body: dict) -> list[dict]:
        outputs = [item for item in body.get("input", []) if item.get("type") == "function_call_output"]
        if outputs:
            return [message("The kernel said: " + output_text(outputs[-1]))]
        if "execute_code" in namespace_tools(body):
            return [{"type": "function_call", "id": "fc_test", "call_id": "call_test", "namespace": OUR_NAMESPACE,
                     "name": "execute_code", "arguments": json.dumps({"code": "6*7"}), "status": "completed"}]
        return [message("ok")]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def message(text: str) -> dict:
    return {"type": "message", "role": "assistant", "id": "msg_test", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def namespace_tools(body: dict) -> list[str]:
    return [tool.get("name") for entry in body.get("tools", [])
            if entry.get("type") == "namespace" and entry.get("name") == OUR_NAMESPACE
            for tool in entry.get("tools", [])]


def output_text(item: dict) -> str:
    given = item.get("output")
    return given if isinstance(given, str) else " ".join(part.get("text", "") for part in given or [])


class AppServer:
    """`codex app-server` on stdio: newline-delimited JSON-RPC without the "jsonrpc" member.
    Requests the app server sends us (approvals) go to `on_request`, whose answer is sent back."""

    def __init__(self, home: Path, env: dict[str, str], cwd: Path, on_request=None):
        self.stderr = home / "app-server.log"
        self.process = subprocess.Popen([codex(), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(self.stderr, "wb"), env=env, cwd=str(cwd), text=True)
        self.messages: queue.Queue = queue.Queue()
        self.notifications: list[dict] = []
        self.on_request = on_request
        self.next_id = 0
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.process.stdout:
            if line.strip():
                self.messages.put(json.loads(line))
        self.messages.put(None)

    def send(self, value: dict):
        self.process.stdin.write(json.dumps(value) + "\n")
        self.process.stdin.flush()

    def pump(self, deadline: float, what: str) -> dict:
        """The next message that is not a request to us (those are answered here)."""
        while True:
            try:
                found = self.messages.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no {what} from codex app-server in time:\n{self.log()}") from None
            if found is None:
                raise AssertionError(f"codex app-server exited waiting for {what}:\n{self.log()}")
            if "id" in found and "method" in found:
                if self.on_request is None:
                    self.send({"id": found["id"], "error": {"code": -32601, "message": "not handled by this client"}})
                else:
                    self.send({"id": found["id"], "result": self.on_request(found)})
                continue
            return found

    def request(self, method: str, params: dict, timeout: float = 120) -> dict:
        self.next_id += 1
        ours = self.next_id
        self.send({"id": ours, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            found = self.pump(deadline, method)
            if found.get("id") == ours:
                assert "error" not in found, f"{method}: {found['error']}"
                return found["result"]
            self.notifications.append(found)

    def wait_for(self, method: str, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            found = self.pump(deadline, method)
            self.notifications.append(found)
            if found.get("method") == method:
                return found["params"]

    def start(self):
        self.request("initialize", {"clientInfo": {"name": "jupyter_mcp_tests", "title": "jupyter-mcp-server tests",
                                                   "version": "0"}})
        self.send({"method": "initialized"})
        return self

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")[-4000:]

    def close(self):
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def codex_setup(jupyter_server, tmp_path: Path, transport: str, api: ResponsesApi, wrong_token: bool = False):
    """CODEX_HOME with a config.toml naming our server on the transport and the stand-in as the
    model provider; yields (home, project, env) and stops the HTTP server we started."""
    home, project = tmp_path / "codex-home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    lines = [
        'model = "gpt-test"',
        'model_provider = "stand-in"',
        # Codex asks this client before it calls an MCP tool, as it asks a person in its UIs.
        'approval_policy = "on-request"',
        'sandbox_mode = "read-only"',
        "",
        "[model_providers.stand-in]",
        'name = "Responses API stand-in"',
        f"base_url = {toml_str(api.url)}",
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[mcp_servers.jupyter]",
    ]
    server = None
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("OPENAI_", "CODEX_")) and name != "XDG_CONFIG_HOME"}
    env.update({"CODEX_HOME": str(home), "HOME": str(home)})
    state = tmp_path / "state"
    if transport == "stdio":
        # Codex hands a stdio server only a few variables of its own environment, so the run
        # mark (which lets conftest stop what a failed test leaves) goes in by name.
        server_env = {"JUPYTER_URL": jupyter_server.url, "JUPYTER_TOKEN": jupyter_server.token,
                      "JUPYTER_MCP_STATE_DIR": str(state), "JMCP_TEST_RUN": os.environ["JMCP_TEST_RUN"]}
        lines += [f"command = {toml_str(server_binary())}", 'args = ["start"]',
                  "env = { " + ", ".join(f"{k} = {toml_str(v)}" for k, v in server_env.items()) + " }"]
    else:
        server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                                    jupyter_server.token], {"JUPYTER_MCP_STATE_DIR": str(state)}, log_dir=tmp_path)
        lines += [f"url = {toml_str(server.mcp_url)}", f"bearer_token_env_var = {toml_str(TOKEN_VARIABLE)}"]
        env[TOKEN_VARIABLE] = server.token
        if wrong_token:
            lines += ["", "[mcp_servers.wrong-token]", f"url = {toml_str(server.mcp_url)}",
                      'http_headers = { Authorization = "Bearer not-the-token" }']
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    try:
        yield home, project, env
    finally:
        if server is not None:
            server.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_codex_app_server_lists_our_tools_and_calls_one(jupyter_server, tmp_path, transport):
    codex()
    api = ResponsesApi()
    try:
        with codex_setup(jupyter_server, tmp_path, transport, api, wrong_token=True) as (home, project, env):
            app = AppServer(home, env, project).start()
            try:
                listed = app.request("mcpServerStatus/list", {})["data"]
                servers = {entry["name"]: entry for entry in listed}
                ours = servers.get("jupyter")
                assert ours is not None and ours["toolsError"] is None, listed
                assert (ours["serverInfo"] or {}).get("name") == "Jupyter MCP Server", ours["serverInfo"]
                assert "execute_code" in ours["tools"] and len(ours["tools"]) == OUR_TOOL_COUNT, sorted(ours["tools"])
                if transport == "http":
                    # The same URL with a wrong token lists nothing: the catalogue above came
                    # through a real, authenticated session.
                    wrong = servers["wrong-token"]
                    assert wrong["toolsError"] and not wrong["tools"], wrong
                # A client's own tool call, on a thread's connection to our server.
                thread = app.request("thread/start", {"cwd": str(project), "ephemeral": True})["thread"]
                called = app.request("mcpServer/tool/call", {"threadId": thread["id"], "server": "jupyter",
                                                             "tool": "execute_code", "arguments": {"code": "6*7"}})
                assert not called.get("isError"), called
                assert (called.get("structuredContent") or {}).get("result") == ["42"], called
                assert [c.get("text") for c in called.get("content", [])] == ["42"], called
            finally:
                app.close()
        # Listing and a client's call need no model.
        assert api.requests == []
    finally:
        api.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_codex_turn_sees_every_tool_and_gets_42_from_execute_code(jupyter_server, tmp_path, transport):
    codex()
    approvals: list[dict] = []

    def approve(request: dict) -> dict:
        # Only Codex's question before an MCP tool call is expected; anything else is declined
        # (and fails the assertions below).
        approvals.append(request)
        meta = request.get("params", {}).get("_meta") or {}
        if request.get("method") == "mcpServer/elicitation/request" and meta.get("codex_approval_kind") == "mcp_tool_call":
            return {"action": "accept", "content": {}}
        return {"action": "decline"}

    api = ResponsesApi()
    try:
        with codex_setup(jupyter_server, tmp_path, transport, api) as (home, project, env):
            app = AppServer(home, env, project, on_request=approve).start()
            try:
                thread = app.request("thread/start", {"cwd": str(project)})["thread"]
                app.request("turn/start", {"threadId": thread["id"], "input": [
                    {"type": "text", "text": "What is six times seven? Use the kernel."}]})
                turn = app.wait_for("turn/completed", timeout=180)["turn"]
            finally:
                app.close()
        assert turn["status"] == "completed", turn
        # The first request to the model offers all our tools, in our server's namespace.
        offered = namespace_tools(api.requests[0])
        assert "execute_code" in offered and len(offered) == OUR_TOOL_COUNT, api.requests[0].get("tools")
        # Codex asked before running it, naming the tool and the code.
        assert len(approvals) == 1, approvals
        asked = approvals[0]["params"]
        assert asked["serverName"] == "jupyter" and asked["_meta"]["tool_name"] == "execute_code", asked
        assert asked["_meta"]["tool_params"] == {"code": "6*7"}, asked
        # The call's item: completed, our structured result, no error.
        calls = [n["params"]["item"] for n in app.notifications if n.get("method") == "item/completed"
                 and n["params"]["item"].get("type") == "mcpToolCall"]
        assert len(calls) == 1, calls
        call = calls[0]
        assert call["status"] == "completed" and call["error"] is None, call
        assert call["server"] == "jupyter" and call["tool"] == "execute_code", call
        assert ((call["result"] or {}).get("structuredContent") or {}).get("result") == ["42"], call["result"]
        # What the model got back: the structured result, carrying 42 as a value.
        assert len(api.requests) == 2, [r.get("input", [])[-1:] for r in api.requests]
        outputs = [item for item in api.requests[1]["input"] if item.get("type") == "function_call_output"
                   and item.get("call_id") == "call_test"]
        assert len(outputs) == 1, api.requests[1]["input"][-3:]
        # Codex hands the model a tool's structuredContent when it has one, after a timing line.
        given = output_text(outputs[0])
        assert "{" in given, given
        structured = json.loads(given[given.index("{"):])
        assert structured.get("result") == ["42"] and structured.get("kind") == "code.execute", given
        said = [item["text"] for item in turn["items"] if item.get("type") == "agentMessage"]
        assert said and "The kernel said:" in said[-1] and "42" in said[-1], turn["items"]
    finally:
        api.close()
