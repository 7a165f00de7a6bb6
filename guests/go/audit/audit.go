// A hook handler in Go: logs every event through the host's `log`, carries the tool's name
// from before_tool_call to after_tool_call in the call's context, and asks the person before
// code that installs packages with pip runs. Critical, so that the host honours its
// confirmation; it fails no call otherwise.
package main

import (
	"strings"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/jmcp"
	types "wit_component/jupyter_mcp_extension_types"
)

func onEvent(event jmcp.HookEvent, context map[string]any) (jmcp.Reply, error) {
	switch event.Tag() {
	case types.HookEvent_BeforeToolCall:
		tool := event.BeforeToolCall().ToolName
		jmcp.Log("go-audit: before_tool_call %s", tool)
		return jmcp.Reply{Context: map[string]any{"tool": tool}}, nil
	case types.HookEvent_AfterToolCall:
		outcome := "ok"
		if event.AfterToolCall().Outcome.Tag() == witTypes.ResultErr {
			outcome = "failed"
		}
		tool, _ := context["tool"].(string)
		jmcp.Log("go-audit: after_tool_call %s %s", tool, outcome)
	case types.HookEvent_BeforeExecute:
		code := event.BeforeExecute().Code
		jmcp.Log("go-audit: before_execute %d bytes of code", len(code))
		// The host asks the person through the client; a no (or a client that cannot ask) refuses.
		if strings.Contains(code, "%pip install") || strings.Contains(code, "!pip install") {
			return jmcp.Reply{Confirm: "the code installs packages with pip"}, nil
		}
	default:
		jmcp.Log("go-audit: %s", jmcp.EventName(event))
	}
	return jmcp.Reply{}, nil
}

func init() {
	jmcp.RegisterHooks(jmcp.Hooks{PropagateErrors: true, OnEvent: onEvent})
}
