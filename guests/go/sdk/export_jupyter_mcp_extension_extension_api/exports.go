// Package export_jupyter_mcp_extension_extension_api answers the host's extension-api calls
// from what jmcp.Register was given (the generated wit_exports.go calls these functions).
package export_jupyter_mcp_extension_extension_api

import (
	"encoding/json"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/jmcp"
	api "wit_component/jupyter_mcp_extension_extension_api"
	types "wit_component/jupyter_mcp_extension_types"
)

func Identity() api.ExtensionIdentity {
	e := jmcp.Registered()
	return api.ExtensionIdentity{Name: e.Name, Version: e.Version}
}

func Capabilities() []types.Capability {
	var out []types.Capability
	for _, c := range jmcp.Registered().Capabilities {
		out = append(out, types.Capability{Name: c.Name, Description: c.Description, Enabled: c.Enabled})
	}
	return out
}

func Tools() []types.ToolSpec {
	var out []types.ToolSpec
	for _, t := range jmcp.Registered().Tools {
		schema := t.InputSchema
		if schema == "" {
			schema = `{"type":"object"}`
		}
		out = append(out, types.ToolSpec{
			Name: t.Name, Description: t.Description, InputSchema: schema,
			OutputSchema: jmcp.Optional(t.OutputSchema),
			Annotations: types.ToolAnnotations{Title: jmcp.Optional(t.Title),
				ReadOnlyHint: t.ReadOnly.Option(), DestructiveHint: t.Destructive.Option(),
				IdempotentHint: t.Idempotent.Option(), OpenWorldHint: t.OpenWorld.Option()},
			Capability: jmcp.Optional(t.Capability),
		})
	}
	return out
}

// answer turns a handler's (value, error) into the WIT's result.
func answer[T any](value T, err error) witTypes.Result[T, types.GuestError] {
	if err != nil {
		return witTypes.Err[T, types.GuestError](jmcp.GuestError(err))
	}
	return witTypes.Ok[T, types.GuestError](value)
}

// decode reads the JSON arguments the host sent.
func decode[A any](text, what string) (A, error) {
	var args A
	if err := json.Unmarshal([]byte(text), &args); err != nil {
		return args, jmcp.InvalidArguments("%s: %v", what, err)
	}
	return args, nil
}

func CallTool(name string, arguments string) witTypes.Result[types.ToolResult, types.GuestError] {
	e := jmcp.Registered()
	for _, t := range e.Tools {
		if t.Name == name {
			args, err := decode[map[string]any](arguments, "the tool's arguments")
			if err != nil {
				return answer(types.ToolResult{}, err)
			}
			return answer(t.Call(args))
		}
	}
	return answer(types.ToolResult{}, jmcp.NotFound("extension '%s' has no tool '%s'", e.Name, name))
}

func Resources() []types.ResourceSpec {
	var out []types.ResourceSpec
	for _, r := range jmcp.Registered().Resources {
		out = append(out, types.ResourceSpec{Uri: r.URI, Name: r.Name, Title: jmcp.Optional(r.Title),
			Description: jmcp.Optional(r.Description), MimeType: jmcp.Optional(r.MimeType)})
	}
	return out
}

func ResourceTemplates() []types.ResourceTemplate { return nil }

func ReadResource(uri string) witTypes.Result[[]types.ResourceContents, types.GuestError] {
	e := jmcp.Registered()
	for _, r := range e.Resources {
		if r.URI == uri {
			return answer(r.Read(uri))
		}
	}
	return answer[[]types.ResourceContents](nil, jmcp.NotFound("extension '%s' has no resource '%s'", e.Name, uri))
}

func Prompts() []types.Prompt {
	var out []types.Prompt
	for _, p := range jmcp.Registered().Prompts {
		var arguments []types.PromptArgument
		for _, a := range p.Arguments {
			arguments = append(arguments, types.PromptArgument{Name: a.Name,
				Description: jmcp.Optional(a.Description), Required: a.Required})
		}
		out = append(out, types.Prompt{Name: p.Name, Title: jmcp.Optional(p.Title),
			Description: jmcp.Optional(p.Description), Arguments: arguments})
	}
	return out
}

func GetPrompt(name string, arguments string) witTypes.Result[types.PromptResult, types.GuestError] {
	e := jmcp.Registered()
	for _, p := range e.Prompts {
		if p.Name == name {
			args, err := decode[map[string]string](arguments, "the prompt's arguments")
			if err != nil {
				return answer(types.PromptResult{}, err)
			}
			return answer(p.Get(args))
		}
	}
	return answer(types.PromptResult{}, jmcp.NotFound("extension '%s' has no prompt '%s'", e.Name, name))
}
