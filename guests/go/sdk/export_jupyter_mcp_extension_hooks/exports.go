// Package export_jupyter_mcp_extension_hooks answers the host's hooks calls from what
// jmcp.RegisterHooks was given (the generated wit_exports.go calls these functions).
package export_jupyter_mcp_extension_hooks

import (
	"encoding/json"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/jmcp"
	types "wit_component/jupyter_mcp_extension_types"
)

func PropagateErrors() bool { return jmcp.RegisteredHooks().PropagateErrors }

func OnEvent(event types.HookEvent, context string) witTypes.Result[types.HookReply, types.GuestError] {
	fail := witTypes.Err[types.HookReply, types.GuestError]
	decoded := map[string]any{}
	if err := json.Unmarshal([]byte(context), &decoded); err != nil {
		return fail(jmcp.GuestError(jmcp.InvalidArguments("the hook context: %v", err)))
	}
	reply, err := jmcp.RegisteredHooks().OnEvent(event, decoded)
	if err != nil {
		return fail(jmcp.GuestError(err))
	}
	answer := types.HookReply{Context: witTypes.None[string](), Confirm: jmcp.Optional(reply.Confirm)}
	if reply.Context != nil {
		data, err := json.Marshal(reply.Context)
		if err != nil {
			return fail(jmcp.GuestError(err))
		}
		answer.Context = witTypes.Some(string(data))
	}
	return witTypes.Ok[types.HookReply, types.GuestError](answer)
}
