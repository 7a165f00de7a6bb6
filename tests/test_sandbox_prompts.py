"""kernel.egress-prompts: a sandboxed kernel's connection to a host that is not listed is held
while the person is asked through the MCP client whose call runs the code (the official client's
elicitation callback as the person), naming the host, the port, the notebook and the code's first
line. "This run", "this session" and "always" (written to the config's hosts) each hold as long
as they say; a decline, a client that cannot be asked, no answer before the call's deadline and a
background run are refused, saying which; `sandbox hosts` lists what was allowed and `sandbox
revoke` takes it back, on a running server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import mcp.types as types
import pytest

from conftest import http_client, joined, route, server_binary, start_http_server
from test_sandbox import ON, Site, home, sandbox_env  # noqa: F401 (home: a fixture)

pytestmark = pytest.mark.anyio


class Person:
    """Answers each question with the next of `answers`: "run", "session", "always", "decline",
    or a number of seconds to stay silent."""

    def __init__(self) -> None:
        self.answers: list = []
        self.questions: list[str] = []

    async def __call__(self, context, params) -> types.ElicitResult:
        self.questions.append(params.message)
        answer = self.answers.pop(0) if self.answers else "decline"
        if isinstance(answer, (int, float)):
            await asyncio.sleep(answer)
            return types.ElicitResult(action="cancel")
        if answer == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"allow": answer})


def fetch(port: int, path: str = "/x") -> str:
    return ("import urllib.request\n"
            "try:\n"
            f"    print('got', urllib.request.urlopen('http://127.0.0.1:{port}{path}', timeout=60).read().decode())\n"
            "except Exception as error:\n"
            "    print('refused', getattr(error, 'code', ''), getattr(error, 'read', lambda: b'')().decode().strip())\n")


async def test_the_person_is_asked_for_an_unlisted_host_and_each_answer_holds_as_long_as_it_says(tmp_path, home):  # noqa: F811
    root = tmp_path / "root"
    root.mkdir()
    site = Site()
    host = f"127.0.0.1:{site.port}"
    config = tmp_path / "config.toml"
    config.write_text("# the operator's own comment\n[kernel_sandbox]\nhosts = []\nallow_always = true\n")
    server = start_http_server([*ON, "--capability", "kernel.egress-prompts", "--config", str(config),
                                "--root-dir", str(root)], env=sandbox_env(tmp_path, home))
    person = Person()
    try:
        async with http_client(server, "legacy", elicitation_callback=person) as client:
            async def run(code: str, **extra) -> str:
                return joined(await client.call_tool("execute_code", {"code": code, "timeout": 60, **extra}))

            # This run: asked once, then allowed again in the same run without asking.
            person.answers = ["run"]
            said = await run("# fetch the data\n" + fetch(site.port) + fetch(site.port, "/again"))
            assert said.count("got hello from the allowed host") == 2, said
            (question,) = person.questions
            assert f"127.0.0.1 (port {site.port})" in question and "Code: # fetch the data" in question, question
            assert "execute_code" in question, question
            # A new run is asked again; declined, it is refused saying so.
            person.answers = ["decline"]
            said = await run(fetch(site.port))
            assert "refused 403" in said and "the person declined it when asked" in said, said
            assert len(person.questions) == 2

            # This session: asked once, then every run of the session goes through.
            person.answers = ["session"]
            assert "got hello" in await run(fetch(site.port))
            assert "got hello" in await run(fetch(site.port))
            assert len(person.questions) == 3
            status, listed = route(server, "GET", "/api/sandbox/hosts")
            assert status == 200 and [(a["host"], a["for"]) for a in listed["allowed"]] == [(host, "session")], listed
            status, revoked = route(server, "POST", "/api/sandbox/revoke", {"host": "127.0.0.1"})
            assert status == 200 and revoked["revoked"] == 1, revoked

            # Revoked: asked again. Always: written to the config's hosts, comments kept.
            person.answers = ["always"]
            assert "got hello" in await run(fetch(site.port))
            assert len(person.questions) == 4
            text = config.read_text()
            assert host in text and "# the operator's own comment" in text, text
            status, listed = route(server, "GET", "/api/sandbox/hosts")
            assert [(a["host"], a["for"]) for a in listed["allowed"]] == [(host, "always")], listed
            env = {**sandbox_env(tmp_path, home), "MCP_TOKEN": server.token}
            done = subprocess.run([server_binary(), "sandbox", "revoke", host, "--server-url", server.base],
                                  env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            assert done.returncode == 0 and json.loads(done.stdout)["revoked"] == 1, done.stdout + done.stderr
            assert host not in config.read_text()
            # Listed no more once the kernels' policy has caught up: asked again (and the person is
            # silent past the call's deadline). The config is looked at once a second, so the
            # "always" and the revoke may both fall between two looks (the policy then never
            # listed the host); when a look saw the host added, a later one re-reads it gone.
            def kernels_list_the_host() -> bool:
                since = server.log.read_text().split("allowed by the person for good")[-1]
                rereads = [line for line in since.splitlines() if "re-read from" in line]
                return bool(rereads) and host in rereads[-1]

            time.sleep(1.5)  # at least one look at the config since the revoke
            deadline = time.monotonic() + 45
            while kernels_list_the_host():
                assert time.monotonic() < deadline, "the kernels' policy still lists the revoked host"
                time.sleep(0.2)
            person.answers = [30]
            started = time.monotonic()
            said = await run(fetch(site.port), timeout=4)
            assert "did not answer before the call's deadline" in said, said
            assert time.monotonic() - started < 20

            # A background run: its call has ended, so nobody is asked.
            asked = len(person.questions)
            started_run = await client.call_tool("execute_code", {"code": "import time; time.sleep(1)\n" + fetch(site.port),
                                                                   "timeout": 60, "background": True})
            execution = started_run.structured_content or {}
            text = joined(started_run)
            execution_id = execution.get("execution_id") or text.split("execution_id")[1].split()[0].strip("'\":,")
            for _ in range(100):
                got = joined(await client.call_tool("get_execution", {"execution_id": execution_id}))
                if "refused 403" in got:
                    break
                await asyncio.sleep(0.2)
            assert "in the background after the call that started it ended" in got, got
            assert len(person.questions) == asked

        # A client without elicitation cannot be asked.
        async with http_client(server, "legacy") as plain:
            said = joined(await plain.call_tool("execute_code", {"code": fetch(site.port), "timeout": 60}))
            assert "refused 403" in said and "the person could not be asked" in said, said
        assert site.asked.count("/x") == 4, site.asked
    finally:
        server.stop()
        site.close()


async def test_without_the_capability_nobody_is_asked(tmp_path, home):  # noqa: F811
    site = Site()
    config = tmp_path / "config.toml"
    config.write_text("[kernel_sandbox]\nhosts = []\n")
    server = start_http_server([*ON, "--config", str(config), "--root-dir", str(tmp_path)],
                               env=sandbox_env(tmp_path, home))
    person = Person()
    try:
        async with http_client(server, "legacy", elicitation_callback=person) as client:
            said = joined(await client.call_tool("execute_code", {"code": fetch(site.port), "timeout": 60}))
            assert "refused 403" in said and "is not in [kernel_sandbox] hosts" in said, said
            assert person.questions == []
    finally:
        server.stop()
        site.close()
