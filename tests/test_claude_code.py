"""Claude Code (tests/ensure-claude-code, pinned) as its users run it, with no model reached:
`claude mcp add` / `claude mcp get` see our server connected, and `claude -p` against a stand-in
for the Messages API on loopback sees all our tools at the model's first turn, calls
execute_code as the model asks, and hands 42 back. The stand-in answers as the API does
(streamed events, or one JSON message)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import server_binary, server_env

OUR_PREFIX = "mcp__jupyter__"


def claude() -> str:
    binary = os.environ.get("JUPYTER_MCP_CLAUDE_CODE")
    if not binary:
        pytest.skip("run the suite through tests/run (tests/ensure-claude-code installs Claude Code)")
    return binary


class ModelApi:
    """The Messages API as Claude Code calls it: the first turn that offers our tools gets a
    tool_use of execute_code; the turn carrying its result gets that result back as text."""

    def __init__(self):
        self.turns: list[dict] = []
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path.split("?")[0].endswith("/count_tokens"):
                    return self.reply({"input_tokens": 100})
                api.turns.append(body)
                content, stop = api.answer(body)
                if body.get("stream"):
                    return self.stream(body, content, stop)
                self.reply({"id": "msg_test", "type": "message", "role": "assistant", "model": body.get("model"),
                            "content": content, "stop_reason": stop, "stop_sequence": None,
                            "usage": {"input_tokens": 100, "output_tokens": 10}})

            def reply(self, value):
                data = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def stream(self, body, content, stop):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()

                def event(kind, data):
                    self.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())
                    self.wfile.flush()

                event("message_start", {"message": {
                    "id": "msg_test", "type": "message", "role": "assistant", "model": body.get("model"),
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": 100, "output_tokens": 1}}})
                for index, block in enumerate(content):
                    if block["type"] == "tool_use":
                        event("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
                        event("content_block_delta", {"index": index, "delta": {
                            "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
                    else:
                        event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                        event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": block["text"]}})
                    event("content_block_stop", {"index": index})
                event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                        "usage": {"output_tokens": 10}})
                event("message_stop", {})

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def answer(body: dict) -> tuple[list[dict], str]:
        tools = [tool.get("name", "") for tool in body.get("tools", [])]
        results = [block for message in body.get("messages", []) if message.get("role") == "user"
                   and isinstance(message.get("content"), list)
                   for block in message["content"] if block.get("type") == "tool_result"]
        if results:
            given = results[-1].get("content")
            text = given if isinstance(given, str) else " ".join(b.get("text", "") for b in given or [])
            return [{"type": "text", "text": f"The kernel said: {text}"}], "end_turn"
        if OUR_PREFIX + "execute_code" in tools:
            return [{"type": "tool_use", "id": "toolu_test", "name": OUR_PREFIX + "execute_code",
                     "input": {"code": "6 * 7"}}], "tool_use"
        return [{"type": "text", "text": "ok"}], "end_turn"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def claude_env(home: Path, api: ModelApi | None = None) -> dict[str, str]:
    env = server_env({"HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
                      "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                      "DISABLE_TELEMETRY": "1"})
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.url
    for name in ("XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR"):
        env.pop(name, None)
    return env


def test_claude_mcp_add_and_get_see_our_server_connected(jupyter_server, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = claude_env(home)
    added = subprocess.run(
        [claude(), "mcp", "add", "--scope", "user", "jupyter", "-e", f"JUPYTER_URL={jupyter_server.url}",
         "-e", f"JUPYTER_TOKEN={jupyter_server.token}", "--", server_binary(), "start"],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert added.returncode == 0, added.stdout + added.stderr
    got = subprocess.run([claude(), "mcp", "get", "jupyter"], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    said = got.stdout + got.stderr
    assert got.returncode == 0 and "Connected" in said, said


def print_mode(claude_home: Path, api: ModelApi, config: Path, cwd: Path, **extra_env) -> str:
    done = subprocess.run(
        [claude(), "-p", "What is six times seven? Use the kernel.", "--mcp-config", str(config),
         "--strict-mcp-config", "--allowedTools", OUR_PREFIX + "execute_code", "--output-format", "text"],
        env={**claude_env(claude_home, api), **extra_env}, cwd=str(cwd), capture_output=True, text=True,
        timeout=180, stdin=subprocess.DEVNULL)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    return said


def test_claude_print_mode_sees_every_tool_at_the_first_turn_and_gets_42(jupyter_server, tmp_path):
    import re

    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"jupyter": {
        "command": server_binary(), "args": ["start"],
        "env": {"JUPYTER_URL": jupyter_server.url, "JUPYTER_TOKEN": jupyter_server.token,
                "JUPYTER_MCP_STATE_DIR": "none"}}}}))
    api = ModelApi()
    try:
        # As installed: MCP tools are deferred behind Claude Code's tool search, and the first
        # turn lists them by name for the model to load.
        print_mode(home, api, config, tmp_path)
        named = set(re.findall(OUR_PREFIX + r"[a-z_]+", json.dumps(api.turns[0])))
        assert len(named) == 27, sorted(named)
        # With the tools given whole (ENABLE_TOOL_SEARCH=false): the first turn carries all 27
        # schemas, the model calls execute_code, and the answer comes back.
        api.turns.clear()
        said = print_mode(home, api, config, tmp_path, ENABLE_TOOL_SEARCH="false")
        first = next(turn for turn in api.turns if turn.get("tools"))
        ours = sorted(t["name"] for t in first["tools"] if t["name"].startswith(OUR_PREFIX))
        assert len(ours) == 27, [t.get("name") for t in first["tools"]]
        assert "The kernel said:" in said and "42" in said, said
    finally:
        api.close()
