"""kernel.sandbox's caps: a kernel cannot take the machine down. Its memory and its processes
are capped with its subprocesses included; a kernel killed at its memory cap is reported as
exactly that, and so is its replacement under kernel.auto-restart; and everything a kernel
started (a subprocess server, a `nohup` job, a double-forked daemon) is gone when it restarts,
is replaced or stops."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from conftest import joined, server_binary
from test_sandbox import ON, home, processes, sandbox_env  # noqa: F401 (home: a fixture)

pytestmark = pytest.mark.anyio

MEMORY_MB = 256
PROCESSES = 64

# Three ways a cell leaves processes behind; each runs `sleep` with the marker as its length.
LEAVE_BEHIND = r'''
import os, subprocess
server = subprocess.Popen(["sleep", "{marker}1"])
os.system("nohup sleep {marker}2 >/dev/null 2>&1 &")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{marker}3"])
    os._exit(0)
import time; time.sleep(0.5)
print("left behind")
'''


def left_behind(client_code_marker: str) -> list[int]:
    """Host pids of the processes a cell started with `marker`."""
    wanted = client_code_marker.encode()
    return [pid for pid, _, argv in processes()
            if len(argv) > 1 and argv[0].endswith(b"sleep") and argv[1].startswith(wanted)]


def marker() -> str:
    # A length `sleep` takes: 4242.<digits>, then the probe's own digit.
    return "4242." + str(uuid.uuid4().int)[:12]


def wait_until_gone(mark: str, seconds: float = 20) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not left_behind(mark):
            return []
        time.sleep(0.2)
    return left_behind(mark)


async def leave_processes(client, mark: str) -> None:
    said = joined(await client.call_tool("execute_code", {"code": LEAVE_BEHIND.format(marker=mark), "timeout": 60}))
    assert "left behind" in said, said
    assert len(left_behind(mark)) == 3, f"the three processes run: {said}"


async def test_caps_hold_and_a_kernel_leaves_nothing_behind(tmp_path, home):  # noqa: F811
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    root = tmp_path / "root"
    root.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f"[kernel_sandbox]\nmemory_mb = {MEMORY_MB}\nprocesses = {PROCESSES}\n")
    params = StdioServerParameters(
        command=server_binary(),
        args=[*ON, "--capability", "kernel.auto-restart", "--config", str(config)],
        env=sandbox_env(tmp_path, home), cwd=str(root))
    stopped = marker()
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        await client.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": "nb.ipynb", "mode": "create"})

        # Restarted: what the kernel started goes with its state.
        restarted = marker()
        await leave_processes(client, restarted)
        await client.call_tool("restart_notebook", {"notebook_name": "nb"})
        assert wait_until_gone(restarted) == [], "left behind after restart_notebook"

        # The process cap counts the kernel's subprocesses.
        said = joined(await client.call_tool("execute_code", {"code": (
            "import subprocess\nstarted = []\n"
            "try:\n"
            "    for _ in range(200):\n"
            "        started.append(subprocess.Popen(['sleep', '30']))\n"
            "    print('no cap')\n"
            "except OSError as error:\n"
            "    print('capped after', len(started), type(error).__name__)\n"
            "for p in started:\n    p.kill(); p.wait()\n"), "timeout": 60}))
        assert "capped after" in said, said
        assert int(said.split("capped after ")[1].split()[0]) < PROCESSES, said

        # Killed at the memory cap: named as that, and its processes are gone with it.
        replaced = marker()
        await leave_processes(client, replaced)
        killed = joined(await client.call_tool("execute_code", {
            "code": f"hog = b'x' * ({MEMORY_MB * 2} << 20)\nprint('survived', len(hog))", "timeout": 120}))
        cap = f"was stopped at its memory cap of {MEMORY_MB} MB; raise kernel_sandbox.memory_mb or use less"
        assert cap in killed and "survived" not in killed, killed
        assert wait_until_gone(replaced) == [], "left behind by the kernel killed at its cap"
        # kernel.auto-restart: the replacement says why it was needed.
        after = joined(await client.call_tool("execute_code", {"code": "print(6 * 7)", "timeout": 120}))
        assert "42" in after and "KERNEL REPLACED" in after and cap in after, after
        # Reported once: a later death of the replacement is not put down to the cap.
        again = joined(await client.call_tool("execute_code", {"code": "print(7 * 6)", "timeout": 60}))
        assert "42" in again and "memory cap" not in again, again

        # Stopped: the server's exit takes the kernel, and the kernel its processes.
        await leave_processes(client, stopped)
    assert wait_until_gone(stopped) == [], "left behind after the server stopped"


def test_the_start_log_names_the_caps(tmp_path, home):  # noqa: F811
    import subprocess

    config = tmp_path / "config.toml"
    config.write_text(f"[kernel_sandbox]\nmemory_mb = {MEMORY_MB}\nprocesses = {PROCESSES}\n")
    env = sandbox_env(tmp_path, home)
    # `kernelspec install` runs the same check and says the same.
    lab = tmp_path / "data"
    done = subprocess.run(
        [server_binary(), "kernelspec", "install", "--prefix", str(lab), "--root-dir", str(tmp_path),
         "--config", str(config)],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert f"each kernel capped at {MEMORY_MB} MB of memory and {PROCESSES} processes" in done.stderr, done.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[kernel_sandbox]\nmemory_mb = 0\n")
    refused = subprocess.run([server_binary(), *ON, "--config", str(bad)], env=env, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode != 0 and "memory_mb" in refused.stderr, refused.stderr
    assert Path(lab).exists()
