// A hook handler in Go: logs every event through the host's `log`, and carries the tool's name
// from before_tool_call to after_tool_call in the call's context. Optional: an error it
// returned would be logged, never fail the call.
package main

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/jmcp"
	types "wit_component/jupyter_mcp_extension_types"
)

func onEvent(event jmcp.HookEvent, context map[string]any) (map[string]any, error) {
	switch event.Tag() {
	case types.HookEvent_BeforeToolCall:
		tool := event.BeforeToolCall().ToolName
		jmcp.Log("go-audit: before_tool_call %s", tool)
		return map[string]any{"tool": tool}, nil
	case types.HookEvent_AfterToolCall:
		outcome := "ok"
		if event.AfterToolCall().Outcome.Tag() == witTypes.ResultErr {
			outcome = "failed"
		}
		tool, _ := context["tool"].(string)
		jmcp.Log("go-audit: after_tool_call %s %s", tool, outcome)
	default:
		jmcp.Log("go-audit: %s", jmcp.EventName(event))
	}
	return nil, nil
}

func init() {
	jmcp.RegisterHooks(jmcp.Hooks{PropagateErrors: false, OnEvent: onEvent})
}
