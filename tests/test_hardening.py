"""Hardening: what the server leaves behind and how it takes abuse, through the real binary."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid

import nbformat
import pytest
import websockets

from conftest import RawStdio, client_for, joined, server_binary, server_env, start_http_server
from harness import peak_rss_mb, start_jupyter, stop_jupyter, wait_gone

pytestmark = pytest.mark.anyio


def kernel_ids(jupyter) -> set[str]:
    return jupyter.kernel_ids()


def wait_for_kernels(jupyter, predicate, seconds: float = 20) -> set[str]:
    deadline = time.monotonic() + seconds
    while True:
        ids = kernel_ids(jupyter)
        if predicate(ids) or time.monotonic() > deadline:
            return ids
        time.sleep(0.2)


def notebook_on_disk(jupyter, prefix: str) -> str:
    path = f"{prefix}-{uuid.uuid4().hex[:6]}.ipynb"
    (jupyter.root / path).write_text(nbformat.writes(nbformat.v4.new_notebook()))
    return path


def args_for(jupyter) -> list[str]:
    return ["start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token]


def closed_by_server(s: socket.socket, seconds: float) -> bool:
    """Whether the server closes the connection within `seconds`, whatever it sends first."""
    s.settimeout(seconds)
    try:
        while s.recv(1024):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


@pytest.mark.parametrize("exit_by", ["eof", signal.SIGTERM, signal.SIGINT])
async def test_no_orphans_but_shared_kernels_keep_running(jupyter_server, exit_by):
    """Kernels we started for our own use stop with us, by any exit path; a kernel we started
    that someone else now uses (here: a second websocket, as JupyterLab would hold) keeps running."""
    before = kernel_ids(jupyter_server)
    private = notebook_on_disk(jupyter_server, "private")
    shared = notebook_on_disk(jupyter_server, "shared")
    server = RawStdio(args_for(jupyter_server), env=server_env())
    try:
        assert not server.call_tool(2, "use_notebook", {"notebook_name": "p", "notebook_path": private}).get("isError")
        assert not server.call_tool(3, "use_notebook", {"notebook_name": "s", "notebook_path": shared}).get("isError")
        ours = kernel_ids(jupyter_server) - before
        assert len(ours) == 2, ours
        sessions = jupyter_server.request("GET", "/api/sessions")[1]
        shared_kernel = next(s["kernel"]["id"] for s in sessions if s["path"] == shared)
        url = jupyter_server.url.replace("http", "ws") + f"/api/kernels/{shared_kernel}/channels"
        async with websockets.connect(url, additional_headers={"Authorization": f"token {jupyter_server.token}"}):
            if exit_by == "eof":
                server.proc.stdin.close()
            else:
                server.proc.send_signal(exit_by)
            assert server.proc.wait(timeout=40) == 0
        left = wait_for_kernels(jupyter_server, lambda ids: ids - before == {shared_kernel})
        assert left - before == {shared_kernel}, f"expected only the shared kernel to remain: {left - before}"
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        for kernel in kernel_ids(jupyter_server) - before:
            jupyter_server.request("DELETE", f"/api/kernels/{kernel}")


async def test_unused_notebook_kernel_shared_by_a_person_keeps_running(jupyter_server):
    path = notebook_on_disk(jupyter_server, "unuse")
    async with client_for(jupyter_server, "legacy") as client:
        used = joined(await client.call_tool("use_notebook", {"notebook_name": "u", "notebook_path": path}))
        kernel = used.split("Started kernel '")[1].split("'")[0]
        url = jupyter_server.url.replace("http", "ws") + f"/api/kernels/{kernel}/channels"
        async with websockets.connect(url, additional_headers={"Authorization": f"token {jupyter_server.token}"}):
            released = joined(await client.call_tool("unuse_notebook", {"notebook_name": "u"}))
        assert "is shared with someone else and keeps running" in released
    assert kernel in kernel_ids(jupyter_server)
    jupyter_server.request("DELETE", f"/api/kernels/{kernel}")


def read_reply(server: RawStdio, want_id) -> dict:
    while True:
        line = server.proc.stdout.readline()
        assert line, "the server closed stdout"
        reply = json.loads(line)
        if reply.get("id") == want_id:
            return reply


def raw_line(server: RawStdio, data: bytes) -> None:
    server.proc.stdin.write(data)
    server.proc.stdin.flush()


def test_hostile_stdio_input_is_answered_and_memory_stays_bounded(jupyter_server):
    server = RawStdio(args_for(jupyter_server), env=server_env())
    try:
        assert read_reply(server, "init")["result"]["serverInfo"]
        # 50 MB in one argument: refused as too large, never held whole.
        huge = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"' \
            + b"x" * (50 << 20) + b'"}}}\n'
        raw_line(server, huge)
        refused = read_reply(server, None)
        assert refused["error"]["code"] == -32700 and "longer than" in refused["error"]["message"]
        # Deeply nested JSON and invalid UTF-8: parse errors, not crashes.
        raw_line(server, b"[" * 100_000 + b"\n")
        assert read_reply(server, None)["error"]["code"] == -32700
        raw_line(server, b'{"jsonrpc":"2.0","id":6,"method":"\xff\xfe"}\n')
        assert read_reply(server, None)["error"]["code"] == -32700
        # A number JSON cannot hold (found by fuzzing: rmcp dropped it without a word).
        raw_line(server, b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}\n')
        assert read_reply(server, None)["error"]["code"] == -32700
        # The server is still fine.
        assert not server.call_tool(7, "list_kernels", {}).get("isError")
        assert peak_rss_mb(server.proc.pid) < 150, f"peak RSS {peak_rss_mb(server.proc.pid):.0f} MB"
    finally:
        server.proc.kill()


def test_a_flood_without_reading_answers_is_held_back_then_answered(jupyter_server):
    server = RawStdio(args_for(jupyter_server), env=server_env())
    try:
        assert read_reply(server, "init")["result"]
        count = 20_000
        lines = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(count))
        garbage = b"not json\n" * count
        writer = threading.Thread(target=raw_line, args=(server, lines + garbage), daemon=True)
        writer.start()
        time.sleep(3)  # nobody reads: the pipes fill up and everything waits
        assert peak_rss_mb(server.proc.pid) < 150
        answered, errors = 0, 0
        while answered < count or errors < count:
            reply = json.loads(server.proc.stdout.readline())
            if reply.get("id") is None:
                errors += 1
            else:
                answered += 1
        writer.join(timeout=30)
        assert answered == count and errors == count
        assert peak_rss_mb(server.proc.pid) < 150, f"peak RSS {peak_rss_mb(server.proc.pid):.0f} MB"
    finally:
        server.proc.kill()


def test_a_kernel_printing_100_mb_is_cut_and_memory_stays_bounded(tmp_path):
    # Jupyter's own iopub rate limit would drop the flood before it reached us: lift it.
    jupyter = start_jupyter(tmp_path, extra=["--ServerApp.iopub_data_rate_limit=1e12"])
    server = RawStdio(args_for(jupyter), env=server_env())
    try:
        code = "import sys\nchunk = 'y' * 65536 + '\\n'\nfor _ in range(1600):\n    sys.stdout.write(chunk)"
        result = server.call_tool(2, "execute_code", {"code": code, "timeout": 120})
        assert not result.get("isError"), result
        text = "".join(c.get("text", "") for c in result["content"])
        assert len(text) < 100_000 and "characters" in text  # cut at --max-output-chars, with a note
        # Odd numbers where seconds are expected: clamped, not a panic.
        odd = server.call_tool(3, "execute_code", {"code": "print('ok')", "timeout": 1e300, "progress_interval": 1e300})
        assert "".join(c.get("text", "") for c in odd["content"]).strip() == "ok"
        # ipykernel sends the flood as a few huge messages; each is held while decoded (frame
        # and parsed copy), capped by the 128 MiB frame limit, and only 16 MiB of text is kept.
        assert peak_rss_mb(server.proc.pid) < 600, f"peak RSS {peak_rss_mb(server.proc.pid):.0f} MB"
    finally:
        server.proc.kill()
        stop_jupyter(jupyter)


def raw_http(port: int, data: bytes, timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        # The server may answer (413) and close before all of a huge request is sent.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)
        chunks = []
        with contextlib.suppress(OSError):
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


def healthz_ok(server) -> bool:
    with urllib.request.urlopen(server.base + "/api/healthz", timeout=5) as reply:
        return reply.status == 200


def test_hostile_http_requests_cost_only_themselves(jupyter_server, tmp_path):
    server = start_http_server(args_for(jupyter_server), log_dir=tmp_path)
    try:
        # Loopback only unless told otherwise.
        assert f"serving MCP over Streamable HTTP at http://127.0.0.1:{server.port}/mcp" in server.log.read_text()
        # Huge headers: refused by the HTTP layer.
        head = b"GET /api/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
        answer = raw_http(server.port, head)
        assert answer == b"" or answer.split(b" ")[1] in (b"431", b"400"), answer[:100]
        # A 50 MB body: 413, never read whole.
        body = b"x" * (50 << 20)
        post = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token\r\n"
                b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body)) + body
        assert raw_http(server.port, post, timeout=60).split(b" ")[1] == b"413"
        # Slowloris: many connections trickling headers; others are served meanwhile, and the
        # slow ones are dropped after the header timeout.
        slow = []
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(s)
        started = time.monotonic()
        assert healthz_ok(server) and time.monotonic() - started < 2
        # A body that never finishes arriving.
        trickle = socket.create_connection(("127.0.0.1", server.port))
        trickle.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token\r\n"
                        b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                        b"Content-Length: 1000\r\n\r\n{\"jsonrpc\"")
        # Each half-sent request is dropped once the header timeout (10 s) passes: the server
        # closes the socket (an error answer may come first).
        for s in slow:
            assert closed_by_server(s, 30), "a slow connection was kept open"
            s.close()
        assert healthz_ok(server)
        trickle.settimeout(30)
        assert trickle.recv(1024).split(b" ")[1] == b"408"
        trickle.close()
        assert healthz_ok(server)
        assert peak_rss_mb(server.process.pid) < 250, f"peak RSS {peak_rss_mb(server.process.pid):.0f} MB"
    finally:
        server.stop()


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def test_http2_cleartext_and_connection_floods_cost_only_themselves(jupyter_server, tmp_path):
    """HTTP/2 without TLS gets the header timeout HTTP/1.1 has, and connections past the cap are
    refused with a 503 while the ones already open keep being served."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # The cap follows the descriptor limit (soft limit - 256, at least 64): 400 gives 144.
    resource.setrlimit(resource.RLIMIT_NOFILE, (400, hard))
    try:
        server = start_http_server(args_for(jupyter_server), log_dir=tmp_path,
                                   env={"RUST_LOG": "jupyter_mcp_server=debug"})
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    cap = 144
    try:
        assert f"serving at most {cap} HTTP connections at once" in server.log.read_text()
        # Prior-knowledge HTTP/2: a preface and settings, then nothing. Dropped at the timeout.
        h2 = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(H2_PREFACE + H2_EMPTY_SETTINGS)
            h2.append(s)
        # Silent connections up to the cap (the h2 ones count); the next one is told 503.
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(cap - len(h2))]
        time.sleep(0.5)
        refused = raw_http(server.port, b"GET /api/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 503"), refused[:200]
        assert b"too many connections at once" in refused and b"Retry-After: 1" in refused
        assert "new ones are refused (503)" in server.log.read_text()
        started = time.monotonic()
        for s in h2 + idle:
            assert closed_by_server(s, 30), "a connection that sent no request was kept open"
            s.close()
        waited = time.monotonic() - started
        assert waited < 25, f"connections without a request closed after {waited:.1f} s (timeout 10 s)"
        assert healthz_ok(server)
        assert server.process.poll() is None
    finally:
        server.stop()


def test_sigterm_during_a_burst_exits_cleanly_and_flushes_spans(tmp_path):
    """SIGTERM while calls are running: the server exits cleanly in bounded time, every span it
    finished is a whole JSON line on disk, and the embedded Jupyter and its kernels are gone."""
    env = server_env()
    env.pop("JUPYTER_URL", None)
    spans = tmp_path / "spans.jsonl"
    server = RawStdio(["start", "--otel-file", str(spans)], env=env, cwd=tmp_path)
    assert read_reply(server, "init")["result"]
    pids = server.call_tool(2, "execute_code", {"code": "import os; print(os.getpid(), os.getppid())"})
    kernel_pid, jupyter_pid = map(int, pids["content"][0]["text"].split())
    for i in range(20):
        server.send({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {
            "name": "execute_code" if i % 2 else "list_files",
            "arguments": {"code": "import time; time.sleep(0.2)"} if i % 2 else {}}})
    time.sleep(1.0)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=40) == 0
    answered = [json.loads(line) for line in server.proc.stdout.read().splitlines() if line.strip()]
    assert all("result" in a or "error" in a or "method" in a for a in answered)
    lines = spans.read_text().splitlines()
    assert lines and all(json.loads(line)["name"] for line in lines), "every span line is whole JSON"
    assert any(json.loads(line)["name"] == "tool_call:execute_code" for line in lines)
    assert wait_gone([kernel_pid, jupyter_pid]) == [], "the embedded Jupyter and its kernel are stopped"


async def test_read_only_notebook_directory_gives_a_clear_error_and_no_half_written_file(jupyter_server, tmp_path):
    folder = jupyter_server.root / f"locked-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    path = folder / "nb.ipynb"
    path.write_text(nbformat.writes(nbformat.v4.new_notebook()))
    before = path.read_bytes()
    # chattr +i binds root too (CI runs as root, where permission bits do not).
    locked = subprocess.run(["chattr", "+i", str(path), str(folder)], capture_output=True, text=True)
    if locked.returncode != 0:
        pytest.skip(f"cannot make files immutable here: {locked.stderr.strip()}")
    try:
        async with client_for(jupyter_server, "legacy", "--document-backend", "file") as client:
            used = await client.call_tool("use_notebook", {"notebook_name": "ro", "notebook_path": str(path.relative_to(jupyter_server.root))})
            assert not used.is_error, joined(used)
            refused = await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "x = 1"})
            assert refused.is_error and "Permission denied" in joined(refused) and "token" not in joined(refused), joined(refused)
            assert path.read_bytes() == before, "the notebook is untouched"
            subprocess.run(["chattr", "-i", str(path), str(folder)], check=True)
            # The server keeps serving: the same edit works once the directory is writable.
            assert not (await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "x = 1"})).is_error
            assert "x = 1" in path.read_text()
    finally:
        subprocess.run(["chattr", "-i", str(path), str(folder)], capture_output=True)


async def test_full_disk_gives_a_clear_error_and_no_half_written_file(jupyter_server):
    folder = jupyter_server.root / f"full-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {mounted.stderr.strip()}")
    try:
        path = folder / "nb.ipynb"
        path.write_text(nbformat.writes(nbformat.v4.new_notebook()))
        before = path.read_bytes()
        with contextlib.suppress(OSError):
            with open(folder / "filler", "wb") as f:
                f.write(b"x" * (64 << 10))  # fills the file system to the last byte
        async with client_for(jupyter_server, "legacy", "--document-backend", "file") as client:
            relative = str(path.relative_to(jupyter_server.root))
            assert not (await client.call_tool("use_notebook", {"notebook_name": "full", "notebook_path": relative})).is_error
            refused = await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code",
                                                             "cell_source": "y = 2" * 1000})
            assert refused.is_error and "No space left" in joined(refused), joined(refused)
            assert path.read_bytes() == before, "the notebook is untouched"
            (folder / "filler").unlink()
            # Space again: the same edit goes through, and the server kept serving throughout.
            assert not (await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code",
                                                               "cell_source": "y = 2"})).is_error
            assert "y = 2" in path.read_text()
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def fd_flags(pid: int, fd: int) -> int:
    line = next(l for l in open(f"/proc/{pid}/fdinfo/{fd}") if l.startswith("flags:"))
    return int(line.split()[1], 8)


O_NONBLOCK = 0o4000


def test_stdio_over_socket_pairs_and_streams_left_as_they_were(jupyter_server, tmp_path):
    """Clients built on libuv (Node) start a server with socket pairs, not pipes: requests are
    answered over them, garbage gets a parse error, and closing stdin ends the server cleanly.
    Pipes and sockets are polled non-blocking; stdout to a file shared with others (as a
    terminal would be) is left blocking, as the server found it."""
    args = [server_binary(), "start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token]
    ours_in, theirs_in = socket.socketpair()
    ours_out, theirs_out = socket.socketpair()
    process = subprocess.Popen(args, stdin=theirs_in.fileno(), stdout=theirs_out.fileno(),
                               stderr=subprocess.DEVNULL, env=server_env())
    theirs_in.close()
    theirs_out.close()
    try:
        ours_out.settimeout(60)
        pending = b""

        def answer(message: bytes) -> dict:
            nonlocal pending
            ours_in.sendall(message + b"\n")
            while b"\n" not in pending:
                chunk = ours_out.recv(65536)
                assert chunk, "the server closed stdout"
                pending += chunk
            line, pending = pending.split(b"\n", 1)
            return json.loads(line)

        hello = answer(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pair", "version": "0"}}}).encode())
        assert hello["id"] == 1 and "serverInfo" in hello["result"], hello
        assert answer(b"{not json")["error"]["code"] == -32700
        for fd in (0, 1):
            assert fd_flags(process.pid, fd) & O_NONBLOCK, f"fd {fd} is not polled"
        ours_in.close()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    with open(tmp_path / "stdout.txt", "wb") as stdout:
        process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.DEVNULL,
                                   env=server_env())
        try:
            process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "file", "version": "0"}}}).encode() + b"\n")
            process.stdin.flush()
            deadline = time.monotonic() + 60
            while b'"id":7' not in (tmp_path / "stdout.txt").read_bytes():
                assert time.monotonic() < deadline, "no answer to initialize in the file"
                time.sleep(0.05)
            assert fd_flags(process.pid, 0) & O_NONBLOCK, "the pipe on stdin is not polled"
            assert not fd_flags(process.pid, 1) & O_NONBLOCK, "the file on stdout was made non-blocking"
            process.stdin.close()
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
