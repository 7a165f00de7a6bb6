"""A new user's first hour: no edit lost at exit whichever way the server stops and whichever
backend holds the notebook, and a created notebook that is the same with both backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import nbformat
import pytest

from conftest import RawStdio, client_for, http_client, joined, server_binary, server_env, start_http_server
from harness import wait_gone

pytestmark = pytest.mark.anyio

BACKENDS = ["file", "live"]
WAYS_OUT = ["stdin-eof", "sigterm", "ctrl-c", "api-stop"]


def embedded_env() -> dict[str, str]:
    env = server_env()
    env.pop("JUPYTER_URL", None)
    env.pop("JUPYTER_TOKEN", None)
    return env


def saved_cells(path) -> list[dict]:
    nb = nbformat.reads(path.read_text(), as_version=4)
    nbformat.validate(nb)
    return nb.cells


def assert_holds_the_run_cell(path) -> None:
    cells = saved_cells(path)
    assert [c.source for c in cells] == ["print('kept', 6 * 7)"], f"{path.name} on disk: {cells}"
    assert cells[0].execution_count == 1
    assert "kept 42" in "".join(o.get("text", "") for o in cells[0].outputs)


def edit_over_stdio(tmp_path, backend: str) -> RawStdio:
    server = RawStdio(["start", "--root-dir", str(tmp_path), "--document-backend", backend],
                      env=embedded_env(), cwd=tmp_path)
    used = server.call_tool(2, "use_notebook", {"notebook_name": "n", "notebook_path": "work.ipynb",
                                                "mode": "create"})
    assert not used.get("isError"), used
    inserted = server.call_tool(3, "insert_cell", {"cell_index": -1, "cell_type": "code",
                                                   "cell_source": "print('kept', 6 * 7)"})
    assert not inserted.get("isError"), inserted
    ran = server.call_tool(4, "execute_cell", {"cell_index": 0})
    assert "kept 42" in json.dumps(ran), ran
    return server


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("way_out", [w for w in WAYS_OUT if w != "api-stop"])
def test_an_edit_is_on_disk_when_the_stdio_server_exits_at_once(tmp_path, backend, way_out):
    server = edit_over_stdio(tmp_path, backend)
    proc = server.proc
    if way_out == "stdin-eof":
        proc.stdin.close()
    else:
        proc.send_signal(signal.SIGTERM if way_out == "sigterm" else signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    assert_holds_the_run_cell(tmp_path / "work.ipynb")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_edit_is_on_disk_when_the_http_server_is_stopped_at_once(tmp_path, backend):
    server = start_http_server(["start", "--root-dir", str(tmp_path), "--document-backend", backend],
                               env=embedded_env())
    try:
        async with http_client(server, "legacy") as client:
            for tool, args in [
                ("use_notebook", {"notebook_name": "n", "notebook_path": "work.ipynb", "mode": "create"}),
                ("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "print('kept', 6 * 7)"}),
                ("execute_cell", {"cell_index": 0}),
            ]:
                result = await client.call_tool(tool, args)
                assert not result.is_error, joined(result)
        request = urllib.request.Request(server.base + "/api/stop", method="DELETE",
                                         headers={"Authorization": f"Bearer {server.token}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status in (200, 202, 204)
        assert server.process.wait(timeout=60) == 0
    finally:
        server.stop()
    assert_holds_the_run_cell(tmp_path / "work.ipynb")
    assert "could not confirm" not in server.log.read_text()


async def test_unuse_notebook_leaves_a_live_notebook_saved(jupyter_server):
    path = f"unuse-{uuid.uuid4().hex[:6]}.ipynb"
    async with client_for(jupyter_server, "legacy", "--document-backend", "live") as client:
        for tool, args in [
            ("use_notebook", {"notebook_name": "u", "notebook_path": path, "mode": "create"}),
            ("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "print('kept', 6 * 7)"}),
            ("execute_cell", {"cell_index": 0}),
            ("unuse_notebook", {"notebook_name": "u"}),
        ]:
            result = await client.call_tool(tool, args)
            assert not result.is_error, joined(result)
        # Read while our server still runs: unuse_notebook itself waited for the save.
        assert_holds_the_run_cell(jupyter_server.root / path)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_created_notebook_is_empty_with_either_backend(jupyter_server, backend):
    path = f"created-{backend}-{uuid.uuid4().hex[:6]}.ipynb"
    async with client_for(jupyter_server, "legacy", "--document-backend", backend) as client:
        used = await client.call_tool("use_notebook", {"notebook_name": "c", "notebook_path": path,
                                                        "mode": "create"})
        assert not used.is_error, joined(used)
        assert f"({backend} backend)" in joined(used)
        listing = joined(await client.call_tool("read_notebook", {"notebook_name": "c"}))
        assert "Total cells: 0" in listing or "0 cells" in listing, listing
        inserted = await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "markdown",
                                                          "cell_source": "# first"})
        assert not inserted.is_error, joined(inserted)
        await client.call_tool("unuse_notebook", {"notebook_name": "c"})
    assert [c.source for c in saved_cells(jupyter_server.root / path)] == ["# first"]


def test_the_pip_lab_extra_brings_jupyterlab():
    """tests/ensure-extension-venv installs our package as the README says, with `[lab]`."""
    venv = Path(os.environ["JUPYTER_MCP_EXTENSION_VENV"])
    python = str(venv / "bin" / "python")
    metadata = subprocess.run(
        [python, "-c", "from importlib.metadata import metadata; m = metadata('jupyter-mcp-server-rs');"
                       "print(m.get_all('Provides-Extra')); print(m.get_all('Requires-Dist'))"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    extras, requires = metadata.splitlines()
    assert "lab" in extras, metadata
    assert any(r.startswith("jupyterlab") and "extra ==" in r and "lab" in r.split("extra ==")[1]
               for r in eval(requires)), metadata
    lab = subprocess.run([str(venv / "bin" / "jupyter"), "lab", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert lab.returncode == 0 and lab.stdout.strip().startswith("4."), lab.stdout + lab.stderr
    listed = subprocess.run([str(venv / "bin" / "jupyter"), "server", "extension", "list"], capture_output=True,
                            text=True, timeout=60)
    assert "jupyter_mcp_server_rs" in listed.stdout + listed.stderr


def test_http_without_a_token_is_refused_before_anything_starts(tmp_path):
    """No Jupyter is started (and nothing waited for) when the settings cannot serve."""
    env = embedded_env()
    env.pop("MCP_TOKEN", None)
    started = time.monotonic()
    out = subprocess.run([server_binary(), "start", "--transport", "streamable-http", "--port", "0",
                          "--root-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=30, env=env, stdin=subprocess.DEVNULL)
    assert time.monotonic() - started < 1.0
    assert out.returncode != 0
    assert "--mcp-token" in out.stderr and "--insecure-mcp-noauth" in out.stderr
    assert "embedded Jupyter" not in out.stderr and "Traceback" not in out.stderr
    assert not list(tmp_path.iterdir()), "nothing was created in the root"


@pytest.mark.parametrize("subcommand", ["stop", "connect"])
def test_stop_and_connect_without_a_token_name_the_flag(jupyter_server, subcommand):
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                                jupyter_server.token])
    try:
        env = server_env()
        env.pop("MCP_TOKEN", None)
        extra = ["--jupyter-url", jupyter_server.url] if subcommand == "connect" else []
        out = subprocess.run([server_binary(), subcommand, "--server-url", server.base, *extra],
                             capture_output=True, text=True, env=env, timeout=30)
        assert out.returncode != 0
        assert "401" in out.stderr and "--mcp-token" in out.stderr, out.stderr
        assert server.process.poll() is None, "the server keeps running"
    finally:
        server.stop()


def test_a_normal_shutdown_prints_no_python_traceback(tmp_path):
    """The embedded Jupyter (with collaboration) is stopped through its API, so its extensions
    close cleanly; its routine INFO lines stay out of our stderr."""
    log = tmp_path / "stderr.log"
    root = tmp_path / "root"
    root.mkdir()
    with open(log, "wb") as err:
        server = RawStdio(["start", "--root-dir", str(root), "--document-backend", "live"], env=embedded_env(),
                          stderr=err)
        proc = server.proc
        used = server.call_tool(2, "use_notebook", {"notebook_name": "n", "notebook_path": "t.ipynb",
                                                    "mode": "create"})
        assert "(live backend)" in json.dumps(used), used
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    text = log.read_text()
    assert "Traceback" not in text, text
    assert "[I " not in text, "the embedded Jupyter's INFO lines stay out of our stderr"
    assert "embedded Jupyter Server stopped" in text


async def test_runtime_serve_as_written_says_what_it_uses(tmp_path):
    """The README's start command, as an MCP client would launch it: it builds (a no-op here),
    uses the Jupyter on PATH, and says which Jupyter, backend and root it uses."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    serve = Path(__file__).resolve().parent.parent / "runtime" / "serve"
    (tmp_path / "mine.txt").write_text("x")
    errlog = tmp_path.parent / f"{tmp_path.name}-serve.log"
    params = StdioServerParameters(command=str(serve), args=["--root-dir", str(tmp_path)], env=embedded_env())
    with open(errlog, "w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy", read_timeout_seconds=300) as client:
            listing = joined(await client.call_tool("list_files", {}))
            assert "mine.txt" in listing
    said = errlog.read_text()
    assert "serve: Jupyter: " in said and "notebook backend (auto): live" in said, said
    assert f"root: {tmp_path}" in said
    assert not (Path(__file__).resolve().parent.parent / ".venv-serve").exists()


def test_a_failing_test_leaves_nothing_running(tmp_path):
    """A test that fails before its cleanup (here: our server with its embedded Jupyter and a
    kernel) leaves no process behind once its pytest session ends."""
    pids = tmp_path / "pids"
    (tmp_path / "test_leaky.py").write_text(f'''
from conftest import RawStdio, server_env

def test_fails_before_cleanup():
    env = server_env()
    env.pop("JUPYTER_URL", None)
    server = RawStdio(["start", "--root-dir", "{tmp_path}"], env=env)
    result = server.call_tool(2, "execute_code", {{"code": "import os; print(os.getpid(), os.getppid())"}})
    kernel, jupyter = result["content"][0]["text"].split()
    open("{pids}", "w").write(f"{{server.proc.pid}} {{kernel}} {{jupyter}}")
    assert False, "fails with everything still running"
''')
    tests_dir = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=str(tests_dir))
    out = subprocess.run(["python", "-m", "pytest", str(tmp_path / "test_leaky.py"), "-p", "conftest",
                          "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "stopped" in out.stdout and "processes the tests left running" in out.stdout, out.stdout
    left = [int(p) for p in pids.read_text().split()]
    assert wait_gone(left, seconds=10) == [], "the server, its Jupyter and the kernel are gone"
