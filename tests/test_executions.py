"""Executions as records: background runs answered at once with an execution_id, read with
get_execution and list_executions, stopped by interrupt_kernel, and idempotency keys that make a
retried call return the first call's execution, through the official client and a real Jupyter."""

from __future__ import annotations

import json
import time
import uuid

import anyio
import mcp.types as types
import pytest

from conftest import call, client_for, joined

pytestmark = pytest.mark.anyio

ID_KEY = "io.jupyter-mcp/execution_id"


def notebook_client(jupyter_server, *args, **kwargs):
    return client_for(jupyter_server, "auto", "--document-backend", "file", *args, **kwargs)


async def started(client, tool, **arguments) -> str:
    result = await call(client, tool, background=True, **arguments)
    execution_id = result.meta[ID_KEY]
    assert execution_id in joined(result) and "get_execution" in joined(result), joined(result)
    return execution_id


async def state_of(client, execution_id, wait=0.0) -> tuple[str, str]:
    result = await call(client, "get_execution", execution_id=execution_id, wait_seconds=wait)
    return result.meta["io.jupyter-mcp/execution_state"], joined(result)


async def test_background_code_answers_at_once_and_get_execution_waits_for_it(jupyter_server):
    async with notebook_client(jupyter_server) as client:
        await call(client, "execute_code", code="warm = 1")  # the default kernel started

        execution_id = await started(client, "execute_code", code="import time; time.sleep(3); print('done')",
                                     timeout=60)
        state, text = await state_of(client, execution_id)
        assert state == "running", text
        assert "the default kernel" in text and "running for" in text, text

        state, text = await state_of(client, execution_id, wait=30)
        assert state == "finished", text
        assert "done" in text and "ran for" in text, text

        listed = joined(await call(client, "list_executions"))
        line = next(line for line in listed.splitlines() if line.startswith(execution_id))
        assert "\tfinished\t" in line and "the default kernel" in line, listed

        unknown = await client.call_tool("get_execution", {"execution_id": "nope"})
        assert unknown.is_error
        assert "No execution 'nope'" in joined(unknown) and "list_executions" in joined(unknown)

        # A long wait is not silent: a client that asked for progress hears of it every 5 s.
        execution_id = await started(client, "execute_code", code="import time; time.sleep(6); print('slept')",
                                     timeout=60)
        updates = []

        async def on_progress(progress, total, message):
            updates.append(message)

        waited = await client.call_tool("get_execution", {"execution_id": execution_id, "wait_seconds": 30},
                                        progress_callback=on_progress)
        assert "slept" in joined(waited) and waited.meta["io.jupyter-mcp/execution_state"] == "finished"
        assert any(m.startswith(f"Waiting for execution {execution_id}") for m in updates), updates

        # A code error ends the run as failed, with the error's name as the reason.
        execution_id = await started(client, "execute_code", code="1/0")
        state, text = await state_of(client, execution_id, wait=30)
        assert state == "failed" and "ZeroDivisionError" in text, text


async def test_an_idempotency_key_runs_the_code_once(jupyter_server):
    count = "counter = globals().get('counter', 0) + 1; print('count', counter)"
    async with notebook_client(jupyter_server) as client:
        first = await call(client, "execute_code", code=count, idempotency_key="retry-1")
        again = await call(client, "execute_code", code=count, idempotency_key="retry-1")
        assert "count 1" in joined(first) and "count 1" in joined(again), joined(again)
        assert "count 1" in joined(await call(client, "execute_code", code="print('count', counter)"))

        one = await started(client, "execute_code", code=count, idempotency_key="retry-2")
        other = await call(client, "execute_code", code=count, idempotency_key="retry-2", background=True)
        assert other.meta[ID_KEY] == one and "was not run again" in joined(other), joined(other)
        state, text = await state_of(client, one, wait=30)
        assert state == "finished" and "count 2" in text, text
        assert "count 2" in joined(await call(client, "execute_code", code="print('count', counter)"))

        # A retried insert_execute_code_cell inserts no second cell.
        path = f"idem-{uuid.uuid4().hex[:6]}.ipynb"
        await call(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
        arguments = {"cell_index": -1, "cell_source": "print('inserted')", "idempotency_key": "cell-1"}
        await call(client, "insert_execute_code_cell", **arguments)
        await call(client, "insert_execute_code_cell", **arguments)
        cells = json.loads((jupyter_server.root / path).read_text())["cells"]
        sources = ["".join(c["source"]) for c in cells]
        assert sources.count("print('inserted')") == 1, sources


async def test_a_background_cell_writes_into_the_notebook_and_interrupt_stops_it(jupyter_server):
    path = f"background-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server) as client:
        await call(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
        execution_id = await started(client, "insert_execute_code_cell", cell_index=-1,
                                     cell_source="import time\nprint('start', flush=True)\ntime.sleep(1)\n"
                                                 "print('end')")
        state, text = await state_of(client, execution_id, wait=30)
        assert state == "finished" and "end" in text and "notebook 'nb'" in text, text
        cell = joined(await call(client, "read_cell", cell_index=0))
        assert "start" in cell and "end" in cell, cell

        await call(client, "insert_cell", cell_index=-1, cell_type="code",
                   cell_source="print('sleeping', flush=True)\nimport time\ntime.sleep(60)")
        execution_id = await started(client, "execute_cell", cell_index=1, timeout=120)
        deadline = time.monotonic() + 60
        while not joined(await call(client, "interrupt_kernel", notebook_name="nb")).startswith("Interrupted"):
            assert time.monotonic() < deadline, "the background run never started"
            await anyio.sleep(0.1)
        state, text = await state_of(client, execution_id, wait=30)
        assert state == "interrupted" and "KeyboardInterrupt" in text, text
        assert "sleeping" in joined(await call(client, "read_cell", cell_index=1))
        listed = joined(await call(client, "list_executions"))
        assert sum("notebook 'nb'" in line for line in listed.splitlines()) == 2, listed


class Person:
    """The elicitation callback: answers what `next` says, remembering every question."""

    def __init__(self) -> None:
        self.next = "decline"
        self.questions: list[str] = []

    async def __call__(self, context, params) -> types.ElicitResult:
        self.questions.append(params.message)
        return types.ElicitResult(action=self.next)


async def test_a_background_run_still_asks_the_person_first(jupyter_server):
    person = Person()
    async with client_for(jupyter_server, "legacy", "--capability", "execution.confirm",
                          elicitation_callback=person) as client:
        refused = await client.call_tool("execute_code", {"code": "asked = 1", "background": True})
        assert refused.is_error and "Nothing ran" in joined(refused), joined(refused)
        assert len(person.questions) == 1 and "asked = 1" in person.questions[0]

        person.next = "accept"
        execution_id = await started(client, "execute_code", code="asked = 2; print('yes', asked)")
        assert len(person.questions) == 2
        state, text = await state_of(client, execution_id, wait=30)
        assert state == "finished" and "yes 2" in text, text


async def test_a_silent_call_still_tells_a_client_that_asked_for_progress(jupyter_server):
    """Item 6: a foreground run whose tool reports nothing of its own (progress_interval 0) still
    sends progress at least every --progress-interval seconds to a client with a progress token,
    so clients that give up on silent calls keep waiting."""
    async with client_for(jupyter_server, "legacy", "--progress-interval", "1") as client:
        heard = []

        async def on_progress(progress, total, message):
            heard.append((progress, message or ""))

        result = await client.call_tool("execute_code", {
            "code": "import time; time.sleep(3.5); print('slept')", "progress_interval": 0, "timeout": 30,
        }, progress_callback=on_progress)
        assert not result.is_error and "slept" in joined(result), joined(result)
        still = [p for p, m in heard if m.startswith("Still working on execute_code")]
        assert len(still) >= 2, heard
        assert still == sorted(still) and len(set(still)) == len(still), "progress must only grow"
