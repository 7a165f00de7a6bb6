"""The MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, pinned in
tests/ensure-inspector), a client nobody here wrote, in both of its protocol eras: the tool list
with its schema portability check (`--strict`), execute_code on stdio, and a notebook over HTTP
(use_notebook, insert_cell, execute_cell, read_notebook) — each answered as a plain result,
which is all that client reads in either era."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from conftest import server_binary, start_http_server

ERAS = ["legacy", "modern"]


def inspector() -> str:
    path = os.environ.get("JUPYTER_MCP_INSPECTOR")
    if not path:
        pytest.fail("JUPYTER_MCP_INSPECTOR must name tests/ensure-inspector's mcp-inspector; run through tests/run")
    return path


def cli(*args: str, era: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """One Inspector CLI run; its JSON answer (`{"result": …}` or `{"error": …}`) is on stdout."""
    return subprocess.run([inspector(), "--cli", *args, "--protocol-era", era, "--format", "json"],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def result_of(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, f"exit {run.returncode}\nstdout: {run.stdout}\nstderr: {run.stderr}"
    answer = json.loads(run.stdout)
    assert "result" in answer, answer
    return answer["result"]


def text_of(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


def stdio_target(jupyter_server) -> list[str]:
    return [server_binary(), "start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token]


@pytest.mark.parametrize("era", ERAS)
def test_tool_schemas_pass_the_portability_check(jupyter_server, era):
    run = cli(*stdio_target(jupyter_server), "--method", "tools/list", "--strict", era=era)
    listed = result_of(run)
    names = {t["name"] for t in listed["tools"]}
    assert {"execute_code", "use_notebook", "read_notebook", "execute_cell"} <= names
    assert "Warning" not in run.stderr and "Error:" not in run.stderr, run.stderr
    assert "Schema portability" not in run.stderr, run.stderr


@pytest.mark.parametrize("era", ERAS)
def test_execute_code_answers_its_result(jupyter_server, era):
    run = cli(*stdio_target(jupyter_server), "--method", "tools/call", "--tool-name", "execute_code",
              "--tool-args-json", json.dumps({"code": "print(6 * 7)"}), era=era)
    result = result_of(run)
    assert "taskId" not in json.dumps(result), result
    assert text_of(result) == "42\n", result


@pytest.mark.parametrize("era", ERAS)
def test_a_notebook_over_http(jupyter_server, tmp_path, era):
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token,
                                "--document-backend", "file"], log_dir=tmp_path)
    try:
        def call(tool: str, **arguments) -> dict:
            return result_of(cli(server.mcp_url, "--transport", "http", "--header",
                                 f"Authorization: Bearer {server.token}", "--method", "tools/call",
                                 "--tool-name", tool, "--tool-args-json", json.dumps(arguments), era=era))

        path = f"inspector-{era}-{uuid.uuid4().hex[:6]}.ipynb"
        used = call("use_notebook", notebook_name="insp", notebook_path=path, mode="create")
        assert not used.get("isError"), used
        inserted = call("insert_cell", cell_index=-1, cell_type="code", cell_source="print(6 * 7)")
        assert not inserted.get("isError"), inserted
        ran = call("execute_cell", cell_index=0)
        assert "taskId" not in json.dumps(ran), ran
        assert "42" in text_of(ran), ran
        read = call("read_notebook", notebook_name="insp", response_format="detailed")
        assert "print(6 * 7)" in text_of(read), read
        assert read["structuredContent"]["result"] == text_of(read)
    finally:
        server.stop()
