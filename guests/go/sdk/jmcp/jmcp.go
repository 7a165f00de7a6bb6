// Package jmcp is the Go SDK for jupyter-mcp-server guests (WIT jupyter-mcp:extension@0.2.0).
// An extension registers itself once, from an init function, with its tools (each with its
// handler), capabilities, resources and prompts; a hook handler registers its OnEvent. The SDK's
// export packages answer the host from what was registered. Host functions return Go errors, so
// `if err != nil { return ToolResult{}, err }` passes a host refusal on as it came.
//
// jmcp-go (beside this folder) generates the bindings with wit-bindgen, adds this package, and
// builds with Go's wasip1 port and wasm-tools.
package jmcp

import (
	"encoding/json"
	"fmt"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/jupyter_mcp_extension_config"
	"wit_component/jupyter_mcp_extension_log"
	"wit_component/jupyter_mcp_extension_notebook"
	types "wit_component/jupyter_mcp_extension_types"
)

// Short names for the generated types.
type (
	Cell             = types.Cell
	ToolResult       = types.ToolResult
	ResourceContents = types.ResourceContents
	PromptResult     = types.PromptResult
	HookEvent        = types.HookEvent
)

// Cell kinds.
const (
	Code     = types.CellKind_Code
	Markdown = types.CellKind_Markdown
	Raw      = types.CellKind_Raw
)

// ---- Errors ----

// Error is a guest error with its WIT variant; return it from a handler.
type Error struct{ Variant types.GuestError }

func (e *Error) Error() string {
	switch e.Variant.Tag() {
	case types.GuestError_InvalidArguments:
		return e.Variant.InvalidArguments()
	case types.GuestError_NotFound:
		return e.Variant.NotFound()
	case types.GuestError_Host:
		return (&HostError{e.Variant.Host()}).Error()
	}
	return e.Variant.Failed()
}

func InvalidArguments(format string, a ...any) error {
	return &Error{types.MakeGuestErrorInvalidArguments(fmt.Sprintf(format, a...))}
}

func NotFound(format string, a ...any) error {
	return &Error{types.MakeGuestErrorNotFound(fmt.Sprintf(format, a...))}
}

// HostError is a host function's refusal (not-granted, not-found, ...).
type HostError struct{ Variant types.HostError }

var hostErrorKinds = []string{"not-granted", "not-available", "not-found", "conflict", "kernel",
	"invalid", "failed"}

// Kind is the variant's name, e.g. "not-granted".
func (e *HostError) Kind() string { return hostErrorKinds[e.Variant.Tag()] }

func (e *HostError) Error() string {
	v := e.Variant
	switch v.Tag() {
	case types.HostError_NotGranted:
		return v.NotGranted()
	case types.HostError_NotAvailable:
		return v.NotAvailable()
	case types.HostError_NotFound:
		return v.NotFound()
	case types.HostError_Conflict:
		return v.Conflict()
	case types.HostError_Kernel:
		return v.Kernel()
	case types.HostError_Invalid:
		return v.Invalid()
	}
	return v.Failed()
}

// GuestError turns any error into the WIT's guest-error: a host error is passed on as it came,
// an *Error keeps its variant, anything else is `failed` with its message.
func GuestError(err error) types.GuestError {
	switch e := err.(type) {
	case *Error:
		return e.Variant
	case *HostError:
		return types.MakeGuestErrorHost(e.Variant)
	}
	return types.MakeGuestErrorFailed(err.Error())
}

// ---- Host functions ----

// Log writes into the server's log, tagged with the guest's name (stdout goes nowhere).
func Log(format string, a ...any) {
	jupyter_mcp_extension_log.Log(jupyter_mcp_extension_log.Level_Info, fmt.Sprintf(format, a...))
}

// Config is the guest's `config` table from the operator's config file.
func Config() map[string]any {
	config := map[string]any{}
	_ = json.Unmarshal([]byte(jupyter_mcp_extension_config.GetConfig()), &config)
	return config
}

// ReadCells reads every cell of a notebook ("" = the current one); needs `read-cells`.
func ReadCells(notebook string) ([]Cell, error) {
	r := jupyter_mcp_extension_notebook.ReadCells(notebook)
	if r.Tag() == witTypes.ResultErr {
		return nil, &HostError{r.Err()}
	}
	return r.Ok(), nil
}

// ExecuteCode runs code in the notebook's kernel and returns the outputs (a JSON array);
// needs `execute-code`. Other host functions: package jupyter_mcp_extension_notebook.
func ExecuteCode(notebook, code string) (string, error) {
	r := jupyter_mcp_extension_notebook.ExecuteCode(notebook, code, witTypes.None[uint32]())
	if r.Tag() == witTypes.ResultErr {
		return "", &HostError{r.Err()}
	}
	return r.Ok(), nil
}

// ---- Results ----

// Text is a successful result of one text item.
func Text(format string, a ...any) ToolResult {
	return ToolResult{Content: []types.Content{types.MakeContentText(fmt.Sprintf(format, a...))}}
}

// TextError: the tool ran but failed; the text says why and what to do next.
func TextError(format string, a ...any) ToolResult {
	r := Text(format, a...)
	r.IsError = true
	return r
}

// Structured adds structured output (any value encoding/json can write as an object).
func Structured(r ToolResult, value any) ToolResult {
	if data, err := json.Marshal(value); err == nil {
		r.Structured = witTypes.Some(string(data))
	}
	return r
}

// ResourceText is one text item of a resource read.
func ResourceText(uri, mimeType, text string) ResourceContents {
	return ResourceContents{Uri: uri, MimeType: Optional(mimeType), Body: types.MakeResourceBodyText(text)}
}

// UserText is a prompt result of one user message.
func UserText(format string, a ...any) PromptResult {
	return PromptResult{Messages: []types.PromptMessage{{Role: types.Role_User,
		Content: types.MakeContentText(fmt.Sprintf(format, a...))}}}
}

// Optional is none for "", some otherwise.
func Optional(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

// ---- Describing an extension ----

// Hint is an MCP tool annotation: unset, no or yes.
type Hint int

const (
	Unset Hint = iota
	No
	Yes
)

func (h Hint) Option() witTypes.Option[bool] {
	if h == Unset {
		return witTypes.None[bool]()
	}
	return witTypes.Some(h == Yes)
}

type Tool struct {
	Name, Description string
	// JSON Schema of the arguments ("" = any object).
	InputSchema, OutputSchema, Title             string
	ReadOnly, Destructive, Idempotent, OpenWorld Hint
	// The capability that must be on for the tool to be listed and callable.
	Capability string
	// args: the call's arguments, decoded.
	Call func(args map[string]any) (ToolResult, error)
}

type Capability struct {
	Name, Description string
	Enabled           bool
}

type Resource struct {
	URI, Name, Title, Description, MimeType string
	Read                                    func(uri string) ([]ResourceContents, error)
}

type PromptArgument struct {
	Name, Description string
	Required          bool
}

type Prompt struct {
	Name, Title, Description string
	Arguments                []PromptArgument
	Get                      func(args map[string]string) (PromptResult, error)
}

type Extension struct {
	Name, Version string
	Capabilities  []Capability
	Tools         []Tool
	Resources     []Resource
	Prompts       []Prompt
}

// Hooks: OnEvent gets the call's context (decoded; {} on the first event) and returns a new
// one to replace it, or nil to keep it; an error refuses (when PropagateErrors).
type Hooks struct {
	PropagateErrors bool
	OnEvent         func(event HookEvent, context map[string]any) (map[string]any, error)
}

var (
	extension *Extension
	hooks     *Hooks
)

// Register defines the extension; call it from an init function.
func Register(e Extension) { extension = &e }

// RegisterHooks defines the hook handler; call it from an init function.
func RegisterHooks(h Hooks) { hooks = &h }

// Registered is what Register was given (for the SDK's export packages).
func Registered() *Extension {
	if extension == nil {
		panic("jmcp: no extension registered (call jmcp.Register from an init function)")
	}
	return extension
}

// RegisteredHooks is what RegisterHooks was given (for the SDK's export packages).
func RegisteredHooks() *Hooks {
	if hooks == nil {
		panic("jmcp: no hook handler registered (call jmcp.RegisterHooks from an init function)")
	}
	return hooks
}

// EventName is the event's name as in the server's docs: "before_tool_call", ...
func EventName(event HookEvent) string {
	return []string{"before_tool_call", "after_tool_call", "before_execute", "after_execute",
		"kernel_lifecycle"}[event.Tag()]
}
