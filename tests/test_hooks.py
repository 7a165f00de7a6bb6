"""Hooks and the OpenTelemetry JSONL handler through the real binary."""

from __future__ import annotations

import json
import re
import signal
import threading
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from conftest import (GUESTS_READY, RawStdio, client_for, extension_entry, guest, server_env, start_http_server, wait_for_log,
                      write_config)

pytestmark = pytest.mark.anyio

KEYS = ["name", "context", "kind", "parent_id", "start_time", "end_time", "status", "attributes", "events",
        "links", "resource"]
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
HEX = re.compile(r"^0x[0-9a-f]+$")


def read_spans(path):
    lines = path.read_text().splitlines()
    spans = []
    for line in lines:
        assert line.startswith('{"name": '), line[:80]
        span = json.loads(line)
        assert list(span) == KEYS, list(span)
        assert list(span["context"]) == ["trace_id", "span_id", "trace_state"]
        assert HEX.match(span["context"]["trace_id"]) and len(span["context"]["trace_id"]) == 34
        assert HEX.match(span["context"]["span_id"]) and len(span["context"]["span_id"]) == 18
        assert span["kind"] == "SpanKind.INTERNAL" and span["status"] == {"status_code": "UNSET"}
        assert TIME.match(span["start_time"]) and TIME.match(span["end_time"])
        assert span["start_time"] <= span["end_time"]
        assert span["events"] == [] and span["links"] == []
        assert span["resource"]["attributes"]["service.name"] == "jupyter-mcp-server"
        spans.append(span)
    return spans


async def test_spans_for_calls_executions_failures_timeouts_and_lifecycle(jupyter_server, tmp_path):
    spans_file = tmp_path / "spans.jsonl"
    path = f"otel-{uuid.uuid4().hex[:6]}.ipynb"
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with client_for(jupyter_server, "legacy", "--otel-file", str(spans_file), "--document-backend", "file") as client:
        await client.call_tool("list_kernels", {})
        await client.call_tool("execute_code", {"code": "print('hi')"}, meta={"traceparent": traceparent})
        failed = await client.call_tool("execute_code", {"code": "1", "kernel_id": "missing"})
        assert failed.is_error
        await client.call_tool("execute_code", {"code": "import time; time.sleep(30)", "timeout": 1})
        await client.call_tool("use_notebook", {"notebook_name": "traced", "notebook_path": path, "mode": "create"})
        await client.call_tool("restart_notebook", {"notebook_name": "traced"})
        await client.call_tool("unuse_notebook", {"notebook_name": "traced"})
    spans = read_spans(spans_file)
    by_name = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)

    listing = by_name["tool_call:list_kernels"][0]
    assert listing["attributes"]["tool.name"] == "list_kernels" and listing["parent_id"] is None
    assert len(listing["attributes"]["result.summary"]) <= 200

    calls = by_name["tool_call:execute_code"]
    traced = next(s for s in calls if s["context"]["trace_id"] == "0x4bf92f3577b34da6a3ce929d0e0e4736")
    assert traced["parent_id"] == "0x00f067aa0ba902b7", "the caller's traceparent is continued"
    executes = by_name["execute"]
    child = next(s for s in executes if s["parent_id"] == traced["context"]["span_id"])
    assert child["context"]["trace_id"] == traced["context"]["trace_id"]
    assert child["attributes"]["code.snippet"] == "print('hi')" and child["attributes"]["output.count"] == 1
    assert child["attributes"]["kernel.id"]

    failing = next(s for s in calls if s["attributes"].get("error") is True and "missing" in s["attributes"]["error.message"])
    assert "result.summary" not in failing["attributes"]
    timed_out = next(s for s in executes if s["attributes"].get("error") is True)
    assert "timed out" in timed_out["attributes"]["error.message"]

    lifecycle = [(s["attributes"]["event_type"], s["attributes"]["kernel.name"]) for s in by_name["kernel_lifecycle"]]
    assert ("started", "default") in lifecycle
    assert ("started", "traced") in lifecycle and ("restarted", "traced") in lifecycle
    assert ("stopped", "traced") in lifecycle and ("stopped", "default") in lifecycle, "flushed at exit"
    assert all(s["parent_id"] is None for s in by_name["kernel_lifecycle"])


async def test_concurrent_calls_give_whole_lines(jupyter_server, tmp_path):
    spans_file = tmp_path / "spans.jsonl"
    async with client_for(jupyter_server, "legacy", "--otel-file", str(spans_file)) as client:
        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(client.call_tool, "list_files", {"pattern": f"*{i}*"})
    spans = read_spans(spans_file)
    assert len([s for s in spans if s["name"] == "tool_call:list_files"]) == 200


def test_sigterm_flushes(jupyter_server, tmp_path):
    spans_file = tmp_path / "spans.jsonl"
    server = RawStdio(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token],
                      env=server_env({"JUPYTER_MCP_OTEL_FILE": str(spans_file)}))
    server.call_tool(2, "execute_code", {"code": "2+2"})
    proc = server.proc
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=40) == 0
    names = [s["name"] for s in read_spans(spans_file)]
    assert "tool_call:execute_code" in names and "execute" in names
    assert names.count("kernel_lifecycle") == 2, "started and stopped, the stop written at shutdown"


class OtlpReceiver:
    """A small OTLP/HTTP collector on loopback that keeps the spans it is sent."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        spans = self.spans = []
        self.paths = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.paths.append((self.path, self.headers["Content-Type"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    for scope_spans in resource_spans.scope_spans:
                        spans.extend(scope_spans.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


async def test_otlp_http_export_only_when_asked(jupyter_server):
    receiver = OtlpReceiver()
    try:
        # An ambient collector setting is not enough: spans carry code.
        ambient = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        async with client_for(jupyter_server, "legacy", env=ambient) as client:
            await client.call_tool("execute_code", {"code": "print(1)"})
        assert receiver.spans == []

        async with client_for(jupyter_server, "legacy", "--otel-endpoint", receiver.url) as client:
            await client.call_tool("execute_code", {"code": "print(2)"})
        names = [s.name for s in receiver.spans]
        assert "tool_call:execute_code" in names and "execute" in names and "kernel_lifecycle" in names
        assert all(path == ("/v1/traces", "application/x-protobuf") for path in receiver.paths)
        tool = next(s for s in receiver.spans if s.name == "tool_call:execute_code")
        execute = next(s for s in receiver.spans if s.name == "execute")
        assert execute.parent_span_id == tool.span_id and execute.trace_id == tool.trace_id
        attributes = {a.key: a.value.string_value for a in execute.attributes}
        assert attributes["code.snippet"] == "print(2)"
    finally:
        receiver.close()


def test_api_connect_fires_the_tool_hooks_and_writes_a_span(jupyter_server, tmp_path):
    """Switching Jupyter Servers over HTTP is the connect_to_jupyter tool's path: the hook handlers
    see it (here the audit guest) and the OpenTelemetry handler writes its span."""
    spans_file = tmp_path / "spans.jsonl"
    config = write_config(tmp_path, extension_entry(guest("audit")))
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token,
                                "--otel-file", str(spans_file), "--config", str(config)], log_dir=tmp_path)
    wait_for_log(server, GUESTS_READY, timeout=300)
    try:
        body = json.dumps({"jupyter_url": jupyter_server.url, "jupyter_token": jupyter_server.token}).encode()
        request = urllib.request.Request(server.base + "/api/connect", data=body, method="PUT", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {server.token}"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            answer = json.loads(reply.read())
        assert answer["success"] is True and "Successfully connected" in answer["message"], answer
        log = wait_for_log(server, "audit: tool connect_to_jupyter succeeded")
        assert "(paired with its before event: True)" in log, log
        # The guest logs the arguments it sees: the token reaches it only as a placeholder.
        assert '"jupyter_token":"[redacted]"' in log, log
        assert jupyter_server.token not in log, "the Jupyter token reached a hook handler"
    finally:
        server.stop()
    spans = [s for s in read_spans(spans_file) if s["name"] == "tool_call:connect_to_jupyter"]
    assert len(spans) == 1, spans
    assert spans[0]["attributes"]["tool.name"] == "connect_to_jupyter"
    assert "Successfully connected" in spans[0]["attributes"]["result.summary"]
