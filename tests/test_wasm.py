"""WebAssembly guests through the real binary: the example policy (Rust) and audit (Python) hook
handlers, the config file's [capabilities] and [[extension]] tables, and hostile guests, each
contained with a clear error while the server goes on answering."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from conftest import (GUESTS_READY, serve_guests, CACHE, extension_entry, guest, http_client, joined, log_of, server_binary, server_env,
                      start_http_server, toml_str, wait_for_log, write_config)

pytestmark = pytest.mark.anyio


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_examples_load_and_work_with_the_config_file(jupyter_server, tmp_path):
    config = write_config(tmp_path, '[capabilities]\n"kernel.auto-restart" = true\n'
                          + extension_entry(guest("policy"), {"deny": ["import subprocess", "os.system"]})
                          + extension_entry(guest("declares")))
    # The audit guest comes from the environment, the policy from the config file.
    server = serve_guests(jupyter_server, "--config", str(config),
                   env={"JUPYTER_MCP_EXTENSIONS": str(guest("audit"))})
    try:
        log = log_of(server)
        assert "loaded wasm guest" in log and "policy.wasm (critical hook handler)" in log, log
        assert "audit.wasm (optional hook handler)" in log, log
        lines = []

        async def collect(params):
            lines.append(params)

        async with http_client(server, "legacy", logging_callback=collect) as client:
            allowed = await client.call_tool("execute_code", {"code": "print(6 * 7)"})
            assert not allowed.is_error and "42" in joined(allowed)

            await client.set_logging_level("info")
            refused = await client.call_tool("execute_code", {"code": "import subprocess\nsubprocess.run(['id'])"})
            assert refused.is_error
            # The guest's own log line about this call reached this client (notifications travel
            # apart from the result, so it may land a moment after it).
            def guest_lines():
                return [p for p in lines if 'refused code containing \\"import subprocess\\"' in str(p.data)
                        or 'refused code containing "import subprocess"' in str(p.data)]
            for _ in range(100):
                if guest_lines():
                    break
                await anyio.sleep(0.05)
            assert guest_lines() and guest_lines()[0].level == "info", lines
            message = joined(refused)
            assert "refused by hook handler 'policy'" in message, message
            assert "does not allow code containing \"import subprocess\"" in message, message

            # Only before_execute is policed: the code of a refused call never ran.
            still = await client.call_tool("execute_code", {"code": "'subprocess' in dir()"})
            assert "False" in joined(still)

            block = json.loads((await client.read_resource("capabilities://")).contents[0].text)
            auto = next(c for c in block["declared"] if c["name"] == "kernel.auto-restart")
            assert auto["enabled"] is True and auto["source"] == "config"
            # An extension's declaration joins the registry with its name as the source.
            demo = next(c for c in block["declared"] if c["name"] == "declares.demo")
            assert demo["source"] == "declares" and demo["enabled"] is False, demo
        log = wait_for_log(server, "audit: tool execute_code failed")
        assert "audit: tool execute_code called with {\"code\":\"print(6 * 7)\"" in log, log
        assert "audit: tool execute_code succeeded (paired with its before event: True)" in log, log
        assert "refused code containing \\\"import subprocess\\\"" in log or \
            'refused code containing "import subprocess"' in log, log
        assert list(CACHE.glob("*.cwasm")), "compiled components are cached on disk"
    finally:
        server.stop()


HOSTILE = {
    "loop": "used up its CPU time of 1500 ms for one call (limits.cpu_ms_per_call)",
    "memory": "reached its memory limit of 24 MiB (limits.memory_mb)",
    "trap": "trapped: wasm `unreachable` executed",
    # What the guest wrote to stderr (here Rust's panic message) reaches the caller.
    "panic": "trapped: wasm `unreachable` executed; only this call failed (failure 1 of 5 in a row "
             "before the guest is switched off). The guest's last lines on stderr:\nthread '<unnamed>'",
    # Rust keeps big frames on a stack in linear memory, which runs out before the wasm stack does.
    "stack": ("overflowed its stack", "trapped: wasm trap: out of bounds memory access"),
    # Small frames: the wasm stack (max_wasm_stack) runs out first.
    "deep": "overflowed its stack",
    "ungranted": "host function 'read-cells' is not granted to 'hostile-ungranted'",
}


async def test_hostile_guests_are_contained(jupyter_server, tmp_path):
    body = ""
    for mode in HOSTILE:
        copy = tmp_path / f"hostile-{mode}.wasm"
        shutil.copy(guest("hostile"), copy)
        body += extension_entry(copy, {"mode": mode, "trigger": f"HOSTILE-{mode}"},
                                memory_mb=24, cpu_ms_per_call=1500)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            for mode, expected in HOSTILE.items():
                result = await client.call_tool("execute_code", {"code": f"print('HOSTILE-{mode}')"})
                assert result.is_error, mode
                expected = expected if isinstance(expected, tuple) else (expected,)
                assert any(e in joined(result) for e in expected), (mode, joined(result))
                if mode != "ungranted":
                    assert "only this call failed (failure 1 of 5" in joined(result), joined(result)
                # The guest was rebuilt from its InstancePre: the next call is served as usual.
                after = await client.call_tool("execute_code", {"code": "print('fine')"})
                assert not after.is_error and "fine" in joined(after), (mode, joined(after))

            # While a guest loops, the server keeps answering what does not wait on that guest,
            # and calls that do wait are answered once its CPU cap ends the loop.
            finished = {}

            async def looping():
                finished["loop"] = await client.call_tool("execute_code", {"code": "HOSTILE-loop"})
                finished["loop_at"] = time.monotonic()

            async with anyio.create_task_group() as tg:
                started = time.monotonic()
                tg.start_soon(looping)
                await anyio.sleep(0.3)
                await client.read_resource("capabilities://")
                await client.list_tools()
                answered_at = time.monotonic()
                other = await client.call_tool("list_kernels", {})
            assert answered_at - started < 1.2, "resources and tools/list answered while the guest looped"
            assert answered_at < finished["loop_at"]
            assert not other.is_error
            assert "used up its CPU time" in joined(finished["loop"])
            panicked = await client.call_tool("execute_code", {"code": "print('HOSTILE-panic')"})
            assert "the hostile guest panics on purpose" in joined(panicked), joined(panicked)
            # The error claims no language: stderr says what the guest's runtime knows.
            assert "Rust" not in joined(panicked)
        log = log_of(server)
        # What a guest prints reaches the log, named by the guest.
        assert "the hostile guest is about to panic" in log, log
        line = next(line for line in log.splitlines() if "the hostile guest is about to panic" in line)
        assert "hostile-panic" in line and "stdout" in line, line
        assert "refused a call to host function 'read-cells': not granted" in log, log
        assert "add \"read-cells\" to grants" in log, log
    finally:
        server.stop()


async def test_repeated_failures_switch_a_guest_off(jupyter_server, tmp_path):
    optional = tmp_path / "lenient.wasm"
    shutil.copy(guest("hostile"), optional)
    body = extension_entry(optional, {"mode": "trap", "critical": False, "trigger": "LENIENT",
                                      "name": "lenient"},
                           max_consecutive_failures=1)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            # An optional guest's failure is logged and suppressed; the call goes on.
            result = await client.call_tool("execute_code", {"code": "print('LENIENT')"})
            assert not result.is_error and "LENIENT" in joined(result)
            wait_for_log(server, "switching the guest off: 1 calls failed in a row")
            result = await client.call_tool("execute_code", {"code": "print('LENIENT again')"})
            assert not result.is_error
    finally:
        server.stop()

    critical = tmp_path / "strict.wasm"
    shutil.copy(guest("hostile"), critical)
    body = extension_entry(critical, {"mode": "panic", "always": True, "name": "strict"},
                           max_consecutive_failures=2)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            # Failures count in a row (any answer resets the count); this guest fails on every
            # event, so the before and after events of one call switch it off.
            first = await client.call_tool("list_kernels", {})
            assert "failure 1 of 2" in joined(first), (joined(first), log_of(server))
            wait_for_log(server, "switching the guest off: 2 calls failed in a row")
            # A critical guest that is off keeps refusing every call it sees (fail closed: crashing
            # a policy must not be a way around it), and the server keeps answering.
            second = await client.call_tool("list_kernels", {})
            assert second.is_error and "wasm guest 'strict' is switched off" in joined(second)
            assert (await client.read_resource("capabilities://")).contents
    finally:
        server.stop()


async def test_bad_files_are_refused_and_the_others_still_load(jupyter_server, tmp_path):
    text = tmp_path / "notes.wasm"
    text.write_text("this is not wasm\n")
    core = tmp_path / "core.wasm"
    core.write_bytes(b"\0asm\x01\x00\x00\x00")
    broken = tmp_path / "broken.wasm"
    broken.write_bytes(b"\0asm\x0d\x00\x01\x00\x07garbage")
    missing = tmp_path / "missing.wasm"
    body = (extension_entry(guest("policy"), {"deny": ["forbidden"]})
            + extension_entry(guest("policy"), grants=["launch-missiles"]))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)),
                   "--extension", str(text), "--extension", str(core), "--extension", str(broken),
                   "--extension", str(guest("unknown-import")),
                   env={"JUPYTER_MCP_EXTENSIONS": str(missing)})
    try:
        async with http_client(server, "legacy") as client:
            result = await client.call_tool("execute_code", {"code": "'forbidden'"})
            assert result.is_error and "refused by hook handler 'policy'" in joined(result)
            assert not (await client.call_tool("execute_code", {"code": "print(2)"})).is_error
        log = log_of(server)
        assert f"refused wasm guest {text}: not a WebAssembly file" in log, log
        assert f"refused wasm guest {core}: a core WebAssembly module, not a component" in log, log
        assert f"refused wasm guest {broken}: not a valid component" in log, log
        assert f"refused wasm guest {missing}: cannot read it" in log, log
        unknown = next(line for line in log.splitlines() if "unknown-import.wasm:" in line)
        assert "it imports evil:escape/door, which this host does not offer" in unknown, unknown
        assert "its grants name 'launch-missiles', which is no host function" in log, log
        assert log.count("loaded wasm guest") == 1, log
    finally:
        server.stop()


def test_a_planted_compiled_artifact_is_refused(jupyter_server, tmp_path):
    """The compile cache loads only artifacts this user's server wrote: a file planted under a
    guest's cache key (once run as native code) is refused with a log line and the guest compiled
    afresh."""
    cache = tmp_path / "cache"

    def start(name: str, grants: list[str] | None = None):
        config = tmp_path / f"{name}.toml"
        config.write_text(f"cache_dir = {toml_str(cache)}\n" + extension_entry(guest(name), grants=grants))
        return serve_guests(jupyter_server, "--config", str(config))

    def artifacts() -> set[Path]:
        return set(cache.glob("*.cwasm"))

    start("hello", ["read-cells"]).stop()
    (hello_artifact,) = artifacts()
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert oct((cache / "key").stat().st_mode & 0o777) == "0o600"
    assert oct(hello_artifact.stat().st_mode & 0o777) == "0o600"
    start("snapshot", ["read-cells"]).stop()
    (snapshot_artifact,) = artifacts() - {hello_artifact}
    ours = hello_artifact.read_bytes()
    # Raw wasmtime code (what an attacker can produce), and a whole artifact of ours moved
    # under another key: neither may load as the snapshot guest.
    raw = ours[40:] if ours.startswith(b"JMCPC01\n") else ours
    for planted in (raw, ours):
        snapshot_artifact.write_bytes(planted)
        server = start("snapshot", ["read-cells"])
        try:
            log = log_of(server)
            assert f"refusing the cached component {snapshot_artifact}: it was not written by this server" in log, log
            assert "compiled a component" in log and "(extension 'snapshot', 3 tools)" in log, log
        finally:
            server.stop()
        assert snapshot_artifact.read_bytes() != planted, "the fresh compilation replaced the planted file"


def test_no_shared_or_foreign_cache_directory(jupyter_server, tmp_path):
    # No HOME and no XDG_CACHE_HOME (empty counts as unset): no fallback to the temp dir.
    env = {"HOME": "", "XDG_CACHE_HOME": "", "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    config = tmp_path / "no-home.toml"
    config.write_text(extension_entry(guest("hello"), grants=["read-cells"]))
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token,
                                "--config", str(config)], env=env)
    wait_for_log(server, GUESTS_READY, timeout=300)
    try:
        log = log_of(server)
        assert "compiled guests are kept in memory only" in log, log
        assert "(extension 'hello', 1 tool)" in log, log
    finally:
        server.stop()
    assert not list((tmp_path / "tmp").rglob("*.cwasm")), "nothing compiled lands in a shared temp dir"
    # A cache directory others may write to is not used.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    config.write_text(f"cache_dir = {toml_str(shared)}\n" + extension_entry(guest("hello"), grants=["read-cells"]))
    server = serve_guests(jupyter_server, "--config", str(config))
    try:
        log = log_of(server)
        assert f"not using {shared} as the compile cache: other users may write to it (mode 777)" in log, log
        assert "(extension 'hello', 1 tool)" in log, log
    finally:
        server.stop()
    assert not list(shared.iterdir())


async def log_count_reaches(server, text: str, count: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while log_of(server).count(text) < count:
        assert time.monotonic() < deadline, f"{text!r} not {count} times in:\n{log_of(server)[-4000:]}"
        await anyio.sleep(0.05)


async def test_a_guest_parked_in_a_wasi_wait_is_stopped_at_its_deadline(jupyter_server, tmp_path):
    """A guest sleeping forever inside WASI, as a hook handler (default hook deadline: 2 s) and as
    a tool (the operator's wall_ms_per_call), is stopped at its deadline; meanwhile another
    client's calls are answered at once, and SIGTERM ends the server within 2 s."""
    hook = tmp_path / "napper.wasm"
    shutil.copy(guest("hostile"), hook)
    tool = tmp_path / "sleeper.wasm"
    shutil.copy(guest("hostile"), tool)
    body = (extension_entry(hook, {"mode": "sleep", "trigger": "NAP", "name": "napper"})
            + extension_entry(tool, {"mode": "sleep", "trigger": "NEVER", "name": "sleeper"},
                              wall_ms_per_call=1500))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client, http_client(server, "legacy") as other:
            await other.call_tool("list_kernels", {})  # warm: instances and connections exist
            finished = {}

            async def napping():
                started = time.monotonic()
                finished["nap"] = await client.call_tool("execute_code", {"code": "print('NAP')"})
                finished["nap_took"] = time.monotonic() - started

            async def sleeping():
                started = time.monotonic()
                finished["sleep"] = await client.call_tool("sleeper_run", {})
                finished["sleep_took"] = time.monotonic() - started

            async with anyio.create_task_group() as tg:
                tg.start_soon(napping)
                tg.start_soon(sleeping)
                # Both guests are parked now (each said so on stderr); the other client's core
                # tool goes through both guests' hooks (on instances of their own) at once.
                await log_count_reaches(server, "goes to sleep", 2)
                timings = []
                for _ in range(5):
                    started = time.monotonic()
                    answer = await other.call_tool("list_kernels", {})
                    timings.append(time.monotonic() - started)
                    assert not answer.is_error, joined(answer)
                assert "nap" not in finished and "sleep" not in finished, "still parked meanwhile"
            # The median against the bound of 100 ms (one call may meet a busy machine).
            assert sorted(timings)[len(timings) // 2] < 0.1, timings

            nap = joined(finished["nap"])
            assert finished["nap"].is_error, nap
            assert "wasm guest 'napper' exceeded its wall-clock time of 2000 ms for one call " \
                   "(limits.wall_ms_per_call)" in nap, nap
            assert "only this call failed (failure 1 of 5" in nap, nap
            assert 1.9 < finished["nap_took"] < 10, finished["nap_took"]
            slept = joined(finished["sleep"])
            assert "wasm guest 'sleeper' exceeded its wall-clock time of 1500 ms" in slept, slept
            assert 1.4 < finished["sleep_took"] < 10, finished["sleep_took"]

            # Rebuilt: both answer the next calls.
            assert not (await client.call_tool("execute_code", {"code": "print('awake')"})).is_error

        # A call parked in a guest does not hold up shutdown. (The session's own teardown then
        # finds the server gone, which is not what this checks.)
        took = None
        with contextlib.suppress(Exception):
            async with http_client(server, "legacy") as doomed, anyio.create_task_group() as tg:
                async def parked():
                    with contextlib.suppress(Exception):
                        await doomed.call_tool("execute_code", {"code": "print('NAP')"})
                tg.start_soon(parked)
                await log_count_reaches(server, "goes to sleep", 3)
                started = time.monotonic()
                server.process.terminate()
                await anyio.to_thread.run_sync(server.process.wait, 10)
                took = time.monotonic() - started
                tg.cancel_scope.cancel()
        assert took is not None and took < 2, f"SIGTERM took {took} s\n{log_of(server)[-3000:]}"
    finally:
        server.stop()


async def test_one_name_and_the_operators_critical(jupyter_server, tmp_path):
    """A guest is named by what it declares (not its file), and `critical` from the config wins
    over the guest's own flag, in both directions, with the log saying which applied."""
    lenient = tmp_path / "wordcount.wasm"
    shutil.copy(guest("hostile"), lenient)
    strict = tmp_path / "lenient-by-its-flag.wasm"
    shutil.copy(guest("hostile"), strict)
    body = (extension_entry(lenient, {"mode": "trap", "trigger": "WORDS", "name": "jsdemo"})
            .replace("[[extension]]\n", "[[extension]]\ncritical = false\n")
            + extension_entry(strict, {"mode": "trap", "trigger": "FLAG", "name": "flagged",
                                       "critical": False})
            .replace("[[extension]]\n", "[[extension]]\ncritical = true\n"))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            # The guest asks to be critical; the operator said no: its trap is logged, not fatal.
            result = await client.call_tool("execute_code", {"code": "print('WORDS')"})
            assert not result.is_error and "WORDS" in joined(result), joined(result)
            # The guest asks to be optional; the operator said critical: its trap fails the call.
            result = await client.call_tool("execute_code", {"code": "print('FLAG')"})
            assert result.is_error and "wasm guest 'flagged' trapped" in joined(result), joined(result)
        log = log_of(server)
        assert "hook handler is optional: critical = false in its [[extension]] entry (the guest " \
               "asks to be critical)" in log, log
        assert "hook handler is critical: critical = true in its [[extension]] entry (the guest " \
               "asks to be optional)" in log, log
        failed = next(line for line in log.splitlines() if "call failed (1 of 5 in a row)" in line)
        assert "jsdemo" in failed and "wordcount" not in failed, failed
    finally:
        server.stop()


def test_extension_compile_fills_the_cache_ahead_of_a_start(jupyter_server, tmp_path):
    """`extension compile` compiles what a config names into its cache_dir, so the server's first
    start compiles nothing; a file that is not a usable component fails the command, named."""
    cache = tmp_path / "cache"
    component = tmp_path / "greeting.wasm"
    shutil.copy(guest("hello"), component)
    config = tmp_path / "server.toml"
    config.write_text(f"cache_dir = {json.dumps(str(cache))}\n" + extension_entry(component))
    done = subprocess.run([server_binary(), "extension", "compile", "--config", str(config)],
                          capture_output=True, text=True, env=server_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{component} is compiled and cached in {cache}" in done.stderr, done.stderr
    assert len(list(cache.glob("*.cwasm"))) == 1

    server = serve_guests(jupyter_server, "--config", str(config))
    try:
        log = wait_for_log(server, "loaded wasm guest")
        assert "compiled a component" not in log, log
    finally:
        server.stop()

    broken = tmp_path / "broken.wasm"
    broken.write_text("not wasm")
    failed = subprocess.run([server_binary(), "extension", "compile", str(guest("unknown-import")), str(broken)],
                            capture_output=True, text=True, env=server_env({"XDG_CACHE_HOME": str(tmp_path)}),
                            timeout=300)
    assert failed.returncode != 0
    assert f"refused wasm guest {broken}: not a WebAssembly file" in failed.stderr, failed.stderr
    assert "it imports evil:escape/door, which this host does not offer" in failed.stderr, failed.stderr


# ---- start never waits for a compile (guests load after the handshake) ----

def raw_server(jupyter_server, config: Path) -> subprocess.Popen:
    return subprocess.Popen([server_binary(), "start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                             jupyter_server.token, "--document-backend", "file", "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=server_env())


class Lines:
    """JSON-RPC lines from a server's stdout, read on a thread so waits can time out."""

    def __init__(self, proc: subprocess.Popen):
        import queue
        import threading
        self.proc, self.queue, self.seen = proc, queue.Queue(), []

        def pump():
            for line in proc.stdout:
                self.queue.put(json.loads(line))
        threading.Thread(target=pump, daemon=True).start()

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def wait_for(self, match, timeout: float) -> dict:
        import queue
        for message in self.seen:
            if match(message):
                self.seen.remove(message)
                return message
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no matching message within {timeout} s; seen: {self.seen}"
            try:
                message = self.queue.get(timeout=left)
            except queue.Empty:
                continue
            if match(message):
                return message
            self.seen.append(message)

    def reply(self, request_id, timeout: float = 60) -> dict:
        return self.wait_for(lambda m: m.get("id") == request_id, timeout)


def initialize(lines: Lines) -> float:
    """Sends initialize and returns how long its answer took."""
    started = time.monotonic()
    lines.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    answer = lines.reply("init", timeout=30)
    took = time.monotonic() - started
    assert answer["result"]["capabilities"]["tools"]["listChanged"] is True, answer
    lines.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return took


def tool_names(lines: Lines, request_id: int) -> set[str]:
    lines.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
    return {t["name"] for t in lines.reply(request_id)["result"]["tools"]}


def declared_capabilities(lines: Lines, request_id: int) -> set[str]:
    lines.send({"jsonrpc": "2.0", "id": request_id, "method": "resources/read",
                "params": {"uri": "capabilities://"}})
    text = lines.reply(request_id)["result"]["contents"][0]["text"]
    return {c["name"] for c in json.loads(text)["declared"]}


def stop(proc: subprocess.Popen) -> float:
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    return time.monotonic() - started


def test_initialize_never_waits_for_a_compile(jupyter_server, tmp_path):
    """A cold cache and a large guest (the Python example, ~18 MB): initialize is answered at once,
    the guest's tool and capabilities appear later with tools/list_changed and an update of
    capabilities://; the next start lists them at once from the cache, and a call made before the
    guest is ready waits for it."""
    cold = tmp_path / "cold-cache"
    config = tmp_path / "cold.toml"
    config.write_text(f"cache_dir = {toml_str(cold)}\n" + extension_entry(guest("greeter"))
                      + extension_entry(guest("declares")))
    started = time.monotonic()
    proc = raw_server(jupyter_server, config)
    lines = Lines(proc)
    try:
        took = initialize(lines)
        since_start = time.monotonic() - started
        assert since_start < 1.0, f"initialize answered {since_start:.2f} s after the start ({took:.2f} s)"
        lines.send({"jsonrpc": "2.0", "id": "sub", "method": "resources/subscribe",
                    "params": {"uri": "capabilities://"}})
        lines.reply("sub")
        before = tool_names(lines, 1)
        assert "greet" not in before, "the Python guest cannot have compiled this soon"
        assert "list_kernels" in before
        lines.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed", timeout=300)
        lines.wait_for(lambda m: m.get("method") == "notifications/resources/updated"
                       and m["params"]["uri"] == "capabilities://", timeout=300)
        # Both guests ready: every tool and capability of theirs is listed.
        deadline = time.monotonic() + 300
        while not {"greet", "declares_run"} <= tool_names(lines, 2):
            assert time.monotonic() < deadline, "the guests' tools never appeared"
            lines.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed", timeout=300)
        assert "declares.demo" in declared_capabilities(lines, 3)
    finally:
        stop(proc)
    assert list(cold.glob("*.manifest.json")), "what the guests declared is cached"

    # Warm: listed at once, and a call that arrives while the guest loads waits for it.
    proc = raw_server(jupyter_server, config)
    lines = Lines(proc)
    try:
        initialize(lines)
        assert {"greet", "declares_run"} <= tool_names(lines, 1)
        assert "declares.demo" in declared_capabilities(lines, 2)
        lines.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "greet", "arguments": {"who": "Ada"}}})
        result = lines.reply(3, timeout=120)["result"]
        assert not result.get("isError"), result
        assert "Ada" in json.dumps(result["content"]), result
    finally:
        stop(proc)


def test_sigterm_while_a_guest_compiles_exits_at_once(jupyter_server, tmp_path):
    config = tmp_path / "cold.toml"
    config.write_text(f"cache_dir = {toml_str(tmp_path / 'cold-cache')}\n" + extension_entry(guest("greeter")))
    proc = raw_server(jupyter_server, config)
    lines = Lines(proc)
    try:
        initialize(lines)
    finally:
        took = stop(proc)
    assert took < 2.0, f"exit took {took:.2f} s while a guest compiled"
