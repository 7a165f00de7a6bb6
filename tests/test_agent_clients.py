"""Agent frameworks as their users run them, each against a scripted stand-in for the model: the
framework converts our tools for its model, the stand-in calls one as a model would, and the
framework hands our answer back. No model API is reached."""

from __future__ import annotations

import json
import os

import pytest

from conftest import server_binary, server_env

pytestmark = pytest.mark.anyio

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


def strict_arguments(schema: dict, given: dict) -> dict:
    """What a model in strict mode sends: every property (strict schemas require them all), the
    ones it has nothing for at their declared default."""
    return {name: given.get(name, prop.get("default")) for name, prop in schema["properties"].items()}


async def test_openai_agents_sdk_takes_every_tool_in_strict_mode(jupyter_server):
    from agents import Agent, ModelSettings, RunConfig, Runner
    from agents.items import ModelResponse
    from agents.mcp import MCPServerStdio
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    seen: dict = {}

    class ScriptedModel(Model):
        """Calls execute_code once with strict arguments, then answers with what it got back."""

        async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                               handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                               prompt=None, **_):
            if "tools" not in seen:
                seen["tools"] = {t.name: t for t in tools}
                execute = seen["tools"]["execute_code"]
                arguments = strict_arguments(execute.params_json_schema, {"code": "6 * 7"})
                call = ResponseFunctionToolCall(type="function_call", name="execute_code", call_id="call-1",
                                                arguments=json.dumps(arguments), id="fc-1", status="completed")
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            outputs = [item for item in input if isinstance(item, dict) and item.get("type") == "function_call_output"]
            output = outputs[-1]["output"]
            # The SDK hands a tool's content on as input items (text items for our text).
            seen["output"] = output if isinstance(output, str) else " ".join(i.get("text", "") for i in output)
            text = ResponseOutputText(type="output_text", text=f"it is {seen['output']}", annotations=[])
            message = ResponseOutputMessage(type="message", id="msg-1", role="assistant", status="completed",
                                            content=[text])
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        async def stream_response(self, *args, **kwargs):
            raise NotImplementedError("this test runs without streaming")
            yield  # pragma: no cover

    params = {
        "command": server_binary(),
        "args": ["start", "--jupyter-url", jupyter_server.url],
        "env": server_env({"JUPYTER_TOKEN": jupyter_server.token}),
    }
    async with MCPServerStdio(params=params, client_session_timeout_seconds=120, cache_tools_list=True) as server:
        agent = Agent(name="notebooks", instructions="Use the tools.", model=ScriptedModel(),
                      model_settings=ModelSettings(), mcp_servers=[server],
                      mcp_config={"convert_schemas_to_strict": True})
        result = await Runner.run(agent, "What is six times seven?", run_config=RunConfig(tracing_disabled=True))

    tools = seen["tools"]
    assert {"execute_code", "list_kernels", "list_notebooks", "use_notebook", "read_cell"} <= set(tools)
    loose = sorted(name for name, tool in tools.items() if not tool.strict_json_schema)
    assert not loose, f"tools the SDK could not make strict: {loose}"
    for name in ("list_kernels", "list_notebooks"):
        assert tools[name].params_json_schema["additionalProperties"] is False, name
    assert "42" in seen["output"], seen["output"]
    assert "42" in result.final_output


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_pydantic_ai_test_model_calls_every_tool_and_a_scripted_model_gets_42(tmp_path, transport):
    """pydantic-ai's own TestModel calls each of our tools once with arguments it makes from the
    tool's schema (so every schema must be one it can fill, and every answer one it can read);
    then a FunctionModel calls execute_code as a model would and reads 42 back."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.test import TestModel

    from conftest import start_http_server

    server = None
    if transport == "stdio":
        def connect():
            return MCPToolset(StdioTransport(command=server_binary(), args=["start"], env=server_env(),
                                             cwd=str(tmp_path)), tool_error_behavior="failed", init_timeout=60)
    else:
        server = start_http_server(["start", "--root-dir", str(tmp_path)])

        def connect():
            return MCPToolset(server.mcp_url, headers={"Authorization": f"Bearer {server.token}"},
                              tool_error_behavior="failed", init_timeout=60)
    try:
        toolset = connect()
        agent = Agent(TestModel(call_tools="all"), toolsets=[toolset])
        async with agent:
            result = await agent.run("use every tool")
        called = json.loads(result.output)
        assert len(called) == 27, sorted(called)
        assert "NameError" in json.dumps(called["execute_code"]), called["execute_code"]

        def model(messages, info):
            returned = [part for message in messages for part in getattr(message, "parts", [])
                        if isinstance(part, ToolReturnPart)]
            if not returned:
                return ModelResponse(parts=[ToolCallPart("execute_code", {"code": "6 * 7"})])
            return ModelResponse(parts=[TextPart(f"it is {returned[-1].model_response_str()}")])

        scripted = Agent(FunctionModel(model), toolsets=[connect()])
        async with scripted:
            answer = await scripted.run("six times seven?")
        assert "42" in answer.output, answer.output
    finally:
        if server is not None:
            server.stop()
