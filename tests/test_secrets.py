"""No secret another local user can read: command lines, runtime files, health answers, logs."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from conftest import RawStdio, server_env


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


def test_embedded_jupyter_token_is_off_argv_and_its_files_are_private(tmp_path):
    env = server_env()
    env.pop("JUPYTER_URL", None)
    env.pop("JUPYTER_TOKEN", None)
    server = RawStdio(["start"], env=env, cwd=tmp_path)
    try:
        code = "import os, json; print(json.dumps([os.getppid(), os.environ.get('JUPYTER_RUNTIME_DIR')]))"
        result = server.call_tool(2, "execute_code", {"code": code})
        jupyter_pid, runtime_dir = json.loads(result["content"][0]["text"])
        runtime = Path(runtime_dir)
        info = json.loads((runtime / f"jpserver-{jupyter_pid}.json").read_text())
        token = info["token"]
        assert len(token) >= 32
        # Item 1: no process we started carries the token on its command line.
        for pid in (server.proc.pid, jupyter_pid):
            assert token not in cmdline(pid), f"the token is readable in /proc/{pid}/cmdline"
            assert "IdentityProvider.token" not in cmdline(pid)
        assert "JUPYTER_TOKEN" not in environ(jupyter_pid), "kernels would inherit the token"
        # Item 2: the runtime dir is 0700, every file in it 0600, and no HTML page with the token.
        assert stat.S_IMODE(runtime.stat().st_mode) & 0o077 == 0, "the runtime dir is open to others"
        files = list(runtime.rglob("*"))
        assert files, "Jupyter wrote nothing into its runtime dir"
        for path in files:
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode & 0o077 == 0, f"{path.name} is readable by others ({oct(mode)})"
        assert not list(runtime.glob("*open.html")), "the browser-open page holds the token"
    finally:
        server.proc.stdin.close()
        server.proc.wait(timeout=60)


def test_health_and_logs_never_show_url_credentials(jupyter_server, tmp_path):
    import urllib.request

    from conftest import start_http_server

    # A token in the query works (Jupyter accepts it) but is never shown.
    server = start_http_server(["start", "--jupyter-url", f"{jupyter_server.url}/?token={jupyter_server.token}#frag"],
                               log_dir=tmp_path)
    # User info and query on an unreachable server: shown nowhere, not even in the error.
    bad = start_http_server(["start", "--jupyter-url", "http://alice:pa55word@127.0.0.1:9/?token=s3cr3t#x"],
                            log_dir=tmp_path)
    try:
        with urllib.request.urlopen(server.base + "/api/healthz", timeout=30) as reply:
            health = json.loads(reply.read())
        assert health["jupyter"] == {"url": jupyter_server.url + "/", "reachable": True}
        with urllib.request.urlopen(bad.base + "/api/healthz", timeout=30) as reply:
            health = json.loads(reply.read())
        assert health["jupyter"] == {"url": "http://127.0.0.1:9/", "reachable": False}
    finally:
        server.stop()
        bad.stop()
    logs = server.log.read_text() + bad.log.read_text()
    for secret in (jupyter_server.token, "s3cr3t", "pa55word", "alice"):
        assert secret not in logs, f"{secret} appears in the logs"
    # Nor in a tool's error about that server.
    raw = RawStdio(["start", "--jupyter-url", "http://alice:pa55word@127.0.0.1:9/?token=s3cr3t#x"])
    try:
        answer = json.dumps(raw.call_tool(2, "list_kernels", {}))
        assert "127.0.0.1:9" in answer, answer
        for secret in ("s3cr3t", "pa55word", "alice"):
            assert secret not in answer, answer
    finally:
        raw.proc.stdin.close()
        raw.proc.wait(timeout=60)


def test_the_spans_file_is_created_private(jupyter_server, tmp_path):
    from conftest import start_http_server

    spans = tmp_path / "spans.jsonl"
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token,
                                "--otel-file", str(spans)], log_dir=tmp_path)
    try:
        assert spans.exists()
        assert stat.S_IMODE(spans.stat().st_mode) == 0o600, oct(spans.stat().st_mode)
    finally:
        server.stop()


def run_secret(*args: str, home: Path, stdin: str | None = None):
    """`jupyter-mcp-server secret …` with HOME (so the default secrets file) under `home`."""
    import subprocess

    from conftest import server_binary

    env = server_env({"HOME": str(home), "XDG_CONFIG_HOME": ""})
    env.pop("JUPYTER_MCP_SECRETS_FILE", None)
    return subprocess.run([server_binary(), "secret", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=30)


def test_secret_cli_keeps_values_off_argv_in_a_private_file_and_lists_only_names(tmp_path):
    value = "sk-test-7d1f0c2a9b"
    set_one = run_secret("set", "OPENAI_API_KEY", home=tmp_path, stdin=value + "\n")
    assert set_one.returncode == 0, set_one.stderr
    assert "secret:OPENAI_API_KEY" in set_one.stderr, "says how to grant it"
    assert value not in set_one.stdout + set_one.stderr
    assert run_secret("set", "OTHER", home=tmp_path, stdin="x").returncode == 0

    path = tmp_path / ".config" / "jupyter-mcp-server" / "secrets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, oct(path.parent.stat().st_mode)
    assert json.loads(path.read_text())["secrets"]["OPENAI_API_KEY"] == value, "the trailing newline is dropped"

    listed = run_secret("list", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["OPENAI_API_KEY", "OTHER"]
    assert value not in listed.stdout + listed.stderr

    removed = run_secret("rm", "OTHER", home=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert run_secret("list", home=tmp_path).stdout.split() == ["OPENAI_API_KEY"]
    again = run_secret("rm", "OTHER", home=tmp_path)
    assert again.returncode != 0 and "secret list" in again.stderr, again.stderr

    # No value on stdin, a bad name, a file others can read: each refused, saying what to do.
    empty = run_secret("set", "EMPTY", home=tmp_path, stdin="")
    assert empty.returncode != 0 and "standard input" in empty.stderr, empty.stderr
    bad = run_secret("set", "no spaces", home=tmp_path, stdin="v")
    assert bad.returncode != 0 and "not valid" in bad.stderr, bad.stderr
    path.chmod(0o644)
    shared = run_secret("list", home=tmp_path)
    assert shared.returncode != 0 and "chmod 600" in shared.stderr, shared.stderr
    assert value not in shared.stderr
