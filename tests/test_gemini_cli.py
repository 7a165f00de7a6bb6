"""Gemini CLI (tests/ensure-gemini-cli, pinned) as its users run it, with no model reached:
`gemini mcp add` / `gemini mcp list` see our server connected over stdio and Streamable HTTP, and
`gemini -p` against a stand-in for the Gemini API on loopback declares all our tools at the
model's first turn, calls execute_code as the model asks and hands 42 back as a value.

Why 42 matters here: when a tool result has no structuredContent, Gemini CLI parses the first
text block as JSON and takes that as the structured result, so a bare `42` would become the
number 42 and fail the MCP SDK's check that structured content is an object. Our execution
tools answer with an object structuredContent, so the number reaches the model as output."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import TRANSPORTS, server_binary, start_http_server

OUR_PREFIX = "mcp_jupyter_"
OUR_TOOL_COUNT = 27
# Any model name works with the stand-in; naming one skips Gemini CLI's routing step, which asks
# a second model for a JSON verdict and retries with backoff for over a minute without one.
MODEL = "gemini-2.5-flash"


def gemini() -> str:
    binary = os.environ.get("JUPYTER_MCP_GEMINI_CLI")
    if not binary:
        pytest.skip("run the suite through tests/run (tests/ensure-gemini-cli installs Gemini CLI)")
    return binary


class GeminiApi:
    """The Gemini API as Gemini CLI calls it (`models/M:streamGenerateContent?alt=sse`, or
    `:generateContent`): a turn that declares our execute_code gets a functionCall of it; a turn
    carrying a functionResponse gets that response back as text."""

    def __init__(self):
        self.turns: list[dict] = []
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                path = self.path.split("?")[0]
                if path.endswith(":countTokens"):
                    return self.send(json.dumps({"totalTokens": 100}).encode(), "application/json")
                api.turns.append(body)
                data = json.dumps({
                    "candidates": [{"content": {"role": "model", "parts": api.answer(body)},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
                    "modelVersion": MODEL})
                if "alt=sse" in self.path:
                    return self.send(f"data: {data}\r\n\r\n".encode(), "text/event-stream")
                self.send(data.encode(), "application/json")

            def send(self, data: bytes, kind: str):
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def answer(body: dict) -> list[dict]:
        responses = function_responses(body)
        if responses:
            return [{"text": "The kernel said: " + json.dumps(responses[-1].get("response"))}]
        if OUR_PREFIX + "execute_code" in declared(body):
            return [{"functionCall": {"name": OUR_PREFIX + "execute_code", "args": {"code": "6*7"}}}]
        return [{"text": "ok"}]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def declared(body: dict) -> list[str]:
    return [f.get("name", "") for tool in body.get("tools", []) for f in tool.get("functionDeclarations", [])]


def function_responses(body: dict) -> list[dict]:
    return [part["functionResponse"] for content in body.get("contents", []) for part in content.get("parts", [])
            if "functionResponse" in part]


def gemini_home(tmp_path: Path) -> tuple[Path, Path]:
    """A user's home as Gemini CLI leaves it once set up: API-key sign-in chosen, the project
    folder trusted (in an untrusted folder it connects to no MCP server at all), and no usage
    statistics or update checks (nothing beyond loopback)."""
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project.resolve()): "TRUST_FOLDER"}))
    return home, project


def gemini_env(home: Path, api: GeminiApi | None = None) -> dict[str, str]:
    env = {**os.environ, "HOME": str(home), "GEMINI_API_KEY": "test-not-a-key", "NO_COLOR": "1"}
    # Nothing from the caller's own Gemini or Google setup may steer where requests go.
    for name in list(env):
        if name.startswith(("GEMINI_CLI_", "GOOGLE_")) or name in ("XDG_CONFIG_HOME", "GEMINI_MODEL"):
            env.pop(name)
    if api is not None:
        env["GOOGLE_GEMINI_BASE_URL"] = api.url
    return env


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> str:
    done = subprocess.run([gemini(), *args], env=env, cwd=str(cwd), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    return said


def add_ours(transport: str, jupyter_server, home: Path, project: Path, tmp_path: Path):
    """`gemini mcp add` of our server on the transport, as the README's users would; returns the
    HTTP server we started (to stop), if any."""
    env = gemini_env(home)
    if transport == "stdio":
        # Gemini CLI redacts secrets from the environment it hands a stdio server, so the
        # Jupyter token goes in with -e as a user would give it.
        run(["mcp", "add", "--scope", "user", "jupyter", "-e", f"JUPYTER_URL={jupyter_server.url}",
             "-e", f"JUPYTER_TOKEN={jupyter_server.token}", "-e", f"JUPYTER_MCP_STATE_DIR={tmp_path / 'state'}",
             server_binary(), "start"], env, project)
        return None
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token],
                               {"JUPYTER_MCP_STATE_DIR": str(tmp_path / "state")}, log_dir=tmp_path)
    try:
        run(["mcp", "add", "--scope", "user", "--transport", "http", "jupyter", server.mcp_url,
             "--header", f"Authorization: Bearer {server.token}"], env, project)
    except BaseException:
        server.stop()
        raise
    return server


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_gemini_mcp_add_and_list_see_our_server_connected(jupyter_server, tmp_path, transport):
    gemini()
    home, project = gemini_home(tmp_path)
    server = add_ours(transport, jupyter_server, home, project, tmp_path)
    try:
        if server is not None:
            # The same URL with a wrong token: Gemini CLI must say it is not connected, so the
            # line for ours means a real handshake.
            run(["mcp", "add", "--scope", "user", "--transport", "http", "wrong-token", server.mcp_url,
                 "--header", "Authorization: Bearer not-the-token"], gemini_env(home), project)
        said = run(["mcp", "list"], gemini_env(home), project)
        ours = [line for line in said.splitlines() if line.lstrip("✓✗○ ").startswith("jupyter:")]
        assert len(ours) == 1 and ours[0].rstrip().endswith("- Connected"), said
        if server is not None:
            wrong = [line for line in said.splitlines() if "wrong-token:" in line]
            assert len(wrong) == 1 and wrong[0].rstrip().endswith("- Disconnected"), said
    finally:
        if server is not None:
            server.stop()


def unwrapped(output: str) -> str:
    """A tool's output as the model reads it, without the tags Gemini CLI puts around what an
    MCP server says."""
    return re.sub(r"</?untrusted_context[^>]*>", "", output).strip()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_gemini_prompt_sees_every_tool_at_the_first_turn_and_gets_42(jupyter_server, tmp_path, transport):
    gemini()
    home, project = gemini_home(tmp_path)
    server = add_ours(transport, jupyter_server, home, project, tmp_path)
    api = GeminiApi()
    try:
        # yolo: headless runs leave out every tool that would need a confirmation, and with it
        # any MCP tool of the same plain name (its own write_file hides our write_file).
        said = run(["--model", MODEL, "--approval-mode", "yolo", "--output-format", "text",
                    "--prompt", "What is six times seven? Use the kernel."], gemini_env(home, api), project, timeout=180)
        assert api.turns, said
        first = api.turns[0]
        ours = sorted(name for name in declared(first) if name.startswith(OUR_PREFIX))
        assert OUR_PREFIX + "execute_code" in ours and len(ours) == OUR_TOOL_COUNT, declared(first)
        responses = [r for turn in api.turns for r in function_responses(turn)
                     if r.get("name") == OUR_PREFIX + "execute_code"]
        assert responses, [function_responses(turn) for turn in api.turns]
        # The number arrives as the tool's output: no "error" in place of it.
        response = responses[0].get("response") or {}
        assert set(response) == {"output"} and unwrapped(response["output"]) == "42", responses
        assert "The kernel said:" in said and "42" in said, said
    finally:
        api.close()
        if server is not None:
            server.stop()
