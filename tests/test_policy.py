"""Extension policies through the real binary, a real guest and loopback HTTP servers the tests
start: `allowed_hosts` over wasi:http (listed, unlisted, a redirect to an unlisted port, a
loopback address named rather than listed, the response and time caps), `storage` (a read grant, a
read-only write refused, nothing outside visible), `env`, grants changed while the server runs
(subcommands and routes, written back to the config file with its comments), and the spans of
every use with a redacted argument. The guest (`guests/tests/reach`) is built against WIT
v0.1.0: policies apply to guests of every WIT version."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from conftest import (guest, http_client, joined, route, serve_guests, server_binary, toml_str,
                      wait_for_log, write_config)

pytestmark = pytest.mark.anyio


class Site:
    """An HTTP server on a free loopback port: `/hello`, `/to?port=N` (a redirect to `/hello`
    on port N), `/big` (100 kB), `/slow` (answers when `release` is set)."""

    def __init__(self, label: str):
        label_bytes = label.encode()
        site = self
        self.slow_started = threading.Event()
        self.release = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.startswith("/hello"):
                    body = b"hello from " + label_bytes
                elif self.path.startswith("/to?port="):
                    port = self.path.split("=", 1)[1]
                    self.send_response(302)
                    self.send_header("Location", f"http://127.0.0.1:{port}/hello")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                elif self.path.startswith("/big"):
                    body = b"x" * 100_000
                elif self.path.startswith("/slow"):
                    # Answers once the test lets it (or after 30 s).
                    site.slow_started.set()
                    site.release.wait(30)
                    body = b"slow answer"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sites():
    a, b = Site("A"), Site("B")
    yield a, b
    a.close()
    b.close()


def reach_entry(*lines: str) -> str:
    return "\n".join(["# the operator's own note, kept through grants", "[[extension]]",
                      f"path = {toml_str(guest('reach'))}", *lines]) + "\n"


async def said(client, tool: str, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, joined(result)
    return joined(result)


@contextlib.contextmanager
def served(jupyter_server, config, *args, env=None):
    server = serve_guests(jupyter_server, "--config", str(config), *args, env=env)
    try:
        yield server
    finally:
        server.stop()


async def test_http_goes_only_to_listed_hosts(jupyter_server, tmp_path, sites):
    a, b = sites
    config = write_config(tmp_path, reach_entry(
        f'allowed_hosts = ["127.0.0.1:{a.port}"]',
        "limits = { http_response_bytes = 10000, http_ms_per_request = 1000 }"))
    with served(jupyter_server, config) as server:
        async with http_client(server, "auto") as client:
            assert await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/hello") == "status 200: hello from A"

            refused = await said(client, "reach_fetch", url=f"http://127.0.0.1:{b.port}/hello")
            assert refused.startswith("error:") and "hello from B" not in refused
            assert f"'127.0.0.1:{b.port}' is not in allowed_hosts of extension 'reach'" in refused, refused
            assert f"grant reach host:127.0.0.1:{b.port}" in refused, refused

            # Listed host, redirected to an unlisted port: the second request is refused.
            redirected = await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/to?port={b.port}")
            assert f"'127.0.0.1:{b.port}' is not in allowed_hosts" in redirected, redirected
            # ... and to a listed one it goes through.
            assert await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/to?port={a.port}") == \
                "status 200: hello from A"

            too_big = await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/big")
            assert too_big.startswith("error:") and "exceeds limit: 10000 bytes" in too_big, too_big[:300]

            # An exchange is cut at limits.http_ms_per_request.
            started = time.monotonic()
            slow = await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/slow")
            assert slow.startswith("error:") and "slow answer" not in slow, slow
            assert time.monotonic() - started < 20, "cut at its 1 s limit, not at the server's 30 s"
            a.release.set()

            # Only http and https, never another scheme.
            ftp = await said(client, "reach_fetch", url=f"ftp://127.0.0.1:{a.port}/hello")
            assert ftp.startswith("error:"), ftp
        log = server.log.read_text()
        assert f"HTTP request to http://127.0.0.1:{b.port} refused" in log


@pytest.mark.parametrize("language", ["js", "py"])
async def test_javascript_fetch_and_python_http_go_only_to_listed_hosts(jupyter_server, tmp_path, sites, language):
    a, b = sites
    config = write_config(tmp_path, "\n".join([
        "[[extension]]", f"path = {toml_str(guest(f'reach-{language}'))}",
        f'allowed_hosts = ["127.0.0.1:{a.port}"]']) + "\n")
    tool = f"reach_{language}_fetch"
    with served(jupyter_server, config) as server:
        async with http_client(server, "auto") as client:
            allowed = await said(client, tool, url=f"http://127.0.0.1:{a.port}/hello")
            assert allowed == "status 200: hello from A", allowed
            refused = await said(client, tool, url=f"http://127.0.0.1:{b.port}/hello")
            assert refused.startswith("error:") and "hello from B" not in refused, refused
            if language == "py":
                # wasi:http hands the host's words to the guest as they are.
                assert f"'127.0.0.1:{b.port}' is not in allowed_hosts of extension 'reach-py'" in refused, refused
            # The redirect is followed by a second request, checked and refused like the first.
            redirected = await said(client, tool, url=f"http://127.0.0.1:{a.port}/to?port={b.port}")
            assert redirected.startswith("error:") and "hello from B" not in redirected, redirected
        # JavaScript's fetch reports a bare NetworkError; the operator's log names the host and
        # the setting either way.
        log = server.log.read_text()
        assert f"HTTP request to http://127.0.0.1:{b.port} refused: '127.0.0.1:{b.port}' is not in allowed_hosts" in log


async def test_a_loopback_address_needs_the_address_itself_listed(jupyter_server, tmp_path, sites):
    a, _ = sites
    # `localhost` is listed by name: it resolves to a loopback address, refused unless the
    # address itself is listed.
    config = write_config(tmp_path, reach_entry(f'allowed_hosts = ["localhost:{a.port}", "127.0.0.1:{a.port}"]'))
    with served(jupyter_server, config) as server:
        async with http_client(server, "auto") as client:
            named = await said(client, "reach_fetch", url=f"http://localhost:{a.port}/hello")
            assert "a loopback or private address" in named, named
            assert f'add "127.0.0.1:{a.port}"' in named or f'add "[::1]:{a.port}"' in named, named
            literal = await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/hello")
            assert literal == "status 200: hello from A"


async def test_storage_and_env_reach_only_what_is_granted(jupyter_server, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("granted words")
    (tmp_path / "scratch").mkdir()
    (tmp_path / "secret.txt").write_text("outside words")
    (tmp_path / "scratch" / "escape").symlink_to(tmp_path / "secret.txt")
    config = write_config(tmp_path, reach_entry(
        'storage = [{ path = "data", access = "read" }, { path = "scratch", access = "read-write" }]',
        'env = ["REACH_GRANTED", "REACH_ABSENT"]'))
    env = {"REACH_GRANTED": "granted value", "REACH_OTHER": "other value"}
    env.pop("REACH_ABSENT", None)
    with served(jupyter_server, config, env=env) as server:
        async with http_client(server, "auto") as client:
            assert await said(client, "reach_read", path="data/notes.txt") == "read: granted words"
            assert (await said(client, "reach_list", path="data")) == "entries: notes.txt"

            refused = await said(client, "reach_write", path="data/new.txt", text="nope")
            assert refused.startswith("error:"), refused
            assert not (tmp_path / "data" / "new.txt").exists()
            assert await said(client, "reach_write", path="scratch/out.txt", text="kept") == "written"
            assert (tmp_path / "scratch" / "out.txt").read_text() == "kept"

            for outside in ["secret.txt", "data/../secret.txt", str(tmp_path / "secret.txt"), "/etc/hostname",
                            "scratch/../../secret.txt", "scratch/escape"]:
                seen = await said(client, "reach_read", path=outside)
                assert seen.startswith("error:") and "outside words" not in seen, (outside, seen)
            for directory in [".", "/", ".."]:
                listed = await said(client, "reach_list", path=directory)
                assert listed.startswith("error:"), (directory, listed)

            assert await said(client, "reach_env", name="REACH_GRANTED") == "env: granted value"
            assert (await said(client, "reach_env", name="REACH_OTHER")).startswith("error:")
            assert (await said(client, "reach_env", name="REACH_ABSENT")).startswith("error:")
            assert (await said(client, "reach_env", name="PATH")).startswith("error:")


def run_cli(server, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MCP_TOKEN=server.token)
    return subprocess.run([server_binary(), *args, "--server-url", server.base], env=env,
                          capture_output=True, text=True, timeout=60)


async def test_grants_change_while_running_and_last(jupyter_server, tmp_path, sites):
    a, _ = sites
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("granted words")
    config = write_config(tmp_path, reach_entry("grants = []  # none yet"))
    env = {"REACH_GRANTED": "granted value"}
    url = f"http://127.0.0.1:{a.port}/hello"
    with served(jupyter_server, config, env=env) as server:
        async with http_client(server, "auto") as client:
            assert "not in allowed_hosts" in await said(client, "reach_fetch", url=url)
            assert (await said(client, "reach_env", name="REACH_GRANTED")).startswith("error:")
            assert (await said(client, "reach_read", path="data/notes.txt")).startswith("error:")

            assert "NotGranted" in await said(client, "reach_cells", notebook="")

            # The subcommands.
            for grant in [f"host:127.0.0.1:{a.port}", "env:REACH_GRANTED", "storage:data:read", "read-cells"]:
                done = run_cli(server, "grant", "reach", grant)
                assert done.returncode == 0, done.stderr
            assert await said(client, "reach_fetch", url=url) == "status 200: hello from A"
            assert await said(client, "reach_env", name="REACH_GRANTED") == "env: granted value"
            assert await said(client, "reach_read", path="data/notes.txt") == "read: granted words"
            # Granted now: it gets as far as looking for a notebook in use (there is none).
            cells = await said(client, "reach_cells", notebook="")
            assert "NotGranted" not in cells, cells

            text = config.read_text()
            assert "# the operator's own note, kept through grants" in text and "# none yet" in text, text
            assert f'allowed_hosts = ["127.0.0.1:{a.port}"]' in text, text
            assert 'grants = ["read-cells"]  # none yet' in text, text
            assert 'env = ["REACH_GRANTED"]' in text and 'storage = [{ path = "data", access = "read" }]' in text, text

            shown = run_cli(server, "policy", "reach")
            assert shown.returncode == 0, shown.stderr
            policy = json.loads(shown.stdout)
            assert policy["allowed_hosts"] == [f"127.0.0.1:{a.port}"] and policy["env"] == ["REACH_GRANTED"]

            # The routes; revoking takes effect on the next call.
            status, answer = route(server, "POST", "/api/extensions/reach/policy/revoke",
                                   {"grant": f"host:127.0.0.1:{a.port}"})
            assert status == 200 and answer["changed"] is True, answer
            assert "not in allowed_hosts" in await said(client, "reach_fetch", url=url)
            assert run_cli(server, "revoke", "reach", "env:REACH_GRANTED").returncode == 0
            assert (await said(client, "reach_env", name="REACH_GRANTED")).startswith("error:")
            assert run_cli(server, "revoke", "reach", "storage:data").returncode == 0
            assert (await said(client, "reach_read", path="data/notes.txt")).startswith("error:")
            text = config.read_text()
            assert "allowed_hosts" not in text and "env =" not in text and "storage" not in text, text
            assert "# none yet" in text

            # Bad requests are refused with what to do, and change nothing.
            status, answer = route(server, "POST", "/api/extensions/reach/policy/grant", {"grant": "format-disk"})
            assert status == 400 and "host:HOST" in answer["error"], answer
            status, answer = route(server, "POST", "/api/extensions/nobody/policy/grant", {"grant": "env:X"})
            assert status == 404 and "no extension named 'nobody'" in answer["error"], answer
            status, _ = route(server, "GET", "/api/extensions/reach/policy", token="wrong-token")
            assert status == 401
            again = run_cli(server, "revoke", "reach", "env:REACH_GRANTED")
            assert again.returncode != 0 and "has no grant env:REACH_GRANTED" in again.stderr, again.stderr
            assert run_cli(server, "grant", "reach", "env:REACH_GRANTED").returncode == 0

    # A grant lasts: the restarted server reads it from the file.
    with served(jupyter_server, config, env=env) as server:
        async with http_client(server, "auto") as client:
            assert await said(client, "reach_env", name="REACH_GRANTED") == "env: granted value"
        assert run_cli(server, "revoke", "reach", "env:REACH_GRANTED").returncode == 0
    assert "env =" not in config.read_text()


async def test_a_grant_revoked_while_in_use_fails_that_use_cleanly(jupyter_server, tmp_path, sites):
    a, _ = sites
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("granted words")
    config = write_config(tmp_path, reach_entry(
        f'allowed_hosts = ["127.0.0.1:{a.port}"]',
        'storage = [{ path = "data", access = "read" }, { path = "scratch", access = "read-write" }]'))
    (tmp_path / "scratch").mkdir()
    mark = tmp_path / "scratch" / "started"
    with served(jupyter_server, config) as server:
        async with http_client(server, "auto") as client:
            # An HTTP request in flight when its host is revoked is cut; the guest gets the error.
            outcome = {}

            async def slow_fetch():
                outcome["fetch"] = await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/slow")

            async with anyio.create_task_group() as group:
                group.start_soon(slow_fetch)
                await anyio.to_thread.run_sync(a.slow_started.wait, 30)
                status, _ = await anyio.to_thread.run_sync(
                    lambda: route(server, "POST", "/api/extensions/reach/policy/revoke",
                                  {"grant": f"host:127.0.0.1:{a.port}"}))
                assert status == 200
            a.release.set()
            assert "cut: the operator revoked host '127.0.0.1'" in outcome["fetch"], outcome

            # A call reading a directory when it is revoked is stopped, with the reason; the
            # guest is not counted as failing, and the next call runs under the new policy.
            async def hold():
                outcome["hold"] = await client.call_tool(
                    "reach_hold", {"path": "data/notes.txt", "mark": "scratch/started", "ms": 20000})

            async with anyio.create_task_group() as group:
                group.start_soon(hold)
                with anyio.fail_after(30):
                    while not mark.exists():
                        await anyio.sleep(0.02)
                status, _ = await anyio.to_thread.run_sync(
                    lambda: route(server, "POST", "/api/extensions/reach/policy/revoke", {"grant": "storage:data"}))
                assert status == 200
            held = outcome["hold"]
            assert held.is_error, joined(held)
            assert "the operator revoked storage:data:read, which the call had in use" in joined(held), joined(held)
            assert "failure" not in joined(held)
            assert (await said(client, "reach_read", path="data/notes.txt")).startswith("error:")
            assert await said(client, "reach_env", name="PATH") != ""


def read_spans(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_every_use_is_a_child_span_with_redacted_values(jupyter_server, tmp_path, sites):
    a, b = sites
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("granted words")
    spans_file = tmp_path / "spans.jsonl"
    config = write_config(tmp_path, reach_entry(
        f'allowed_hosts = ["127.0.0.1:{a.port}"]',
        'storage = [{ path = "data", access = "read" }]',
        'redact = ["api_key"]'))
    secret = "sk-THE-SECRET-VALUE"
    with served(jupyter_server, config, "--otel-file", str(spans_file)) as server:
        async with http_client(server, "auto") as client:
            await said(client, "reach_fetch", url=f"http://127.0.0.1:{a.port}/hello?api_key={secret}&q=1",
                       api_key=secret)
            await said(client, "reach_fetch", url=f"http://127.0.0.1:{b.port}/hello")
            await said(client, "reach_read", path="data/notes.txt")
            await said(client, "reach_write", path="data/x.txt", text="no")
            await said(client, "reach_cells", notebook="")
    spans = read_spans(spans_file)
    assert secret not in spans_file.read_text(), "a redacted value reached the spans file"

    def children(tool: str, index: int = 0):
        calls = [s for s in spans if s["name"] == f"tool_call:{tool}"]
        parent = calls[index]
        return [s for s in spans if s["parent_id"] == parent["context"]["span_id"]]

    allowed = children("reach_fetch", 0)
    call = next(s for s in allowed if s["name"] == "extension.tool_call")
    assert call["attributes"]["extension.name"] == "reach"
    assert json.loads(call["attributes"]["tool.arguments"])["api_key"] == "[redacted]"
    http = next(s for s in allowed if s["name"] == "extension.http")
    assert http["attributes"]["allowed"] is True and http["attributes"]["http.status_code"] == 200
    assert "api_key=[redacted]&q=1" in http["attributes"]["http.url"]
    assert http["attributes"]["http.response.body.size"] == len("hello from A")

    refused = next(s for s in children("reach_fetch", 1) if s["name"] == "extension.http")
    assert refused["attributes"]["allowed"] is False and "allowed_hosts" in refused["attributes"]["error.message"]

    read = next(s for s in children("reach_read") if s["name"] == "extension.storage")
    assert read["attributes"]["allowed"] is True and read["attributes"]["storage.access"] == "read"
    write = next(s for s in children("reach_write") if s["name"] == "extension.storage")
    assert write["attributes"]["allowed"] is False and write["attributes"]["storage.access"] == "write"

    host_function = next(s for s in children("reach_cells") if s["name"] == "extension.host_function")
    assert host_function["attributes"]["host_function.name"] == "read-cells"
    assert host_function["attributes"]["allowed"] is False
    for span in spans:
        if span["name"].startswith("extension."):
            assert span["start_time"] <= span["end_time"]


def test_hub_mode_refuses_a_read_write_directory_every_user_would_share(tmp_path):
    (tmp_path / "scratch").mkdir()
    config = write_config(tmp_path, reach_entry('storage = [{ path = "scratch", access = "read-write" }]'))
    done = subprocess.run([server_binary(), "start", "--transport", "streamable-http", "--jupyterhub-url",
                           "http://127.0.0.1:1", "--config", str(config)],
                          env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "is granted a read-write directory, which Hub mode" in done.stderr, done.stderr

