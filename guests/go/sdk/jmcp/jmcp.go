// Package jmcp is the Go SDK for jupyter-mcp-server guests (WIT jupyter-mcp:extension@0.3.0).
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
	"errors"
	"fmt"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/jupyter_mcp_extension_client"
	"wit_component/jupyter_mcp_extension_config"
	"wit_component/jupyter_mcp_extension_log"
	"wit_component/jupyter_mcp_extension_notebook"
	"wit_component/jupyter_mcp_extension_secrets"
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
	"invalid", "failed", "unsupported-by-client", "refused"}

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
	case types.HostError_UnsupportedByClient:
		return v.UnsupportedByClient()
	case types.HostError_Refused:
		return v.Refused()
	}
	return v.Failed()
}

// IsUnsupportedByClient tells whether err is a host call refused because the call's MCP client
// cannot do it (it declared no elicitation or sampling, or there is no client): the case to fall
// back on rather than fail.
func IsUnsupportedByClient(err error) bool {
	var host *HostError
	return errors.As(err, &host) && host.Variant.Tag() == types.HostError_UnsupportedByClient
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

// ---- The client (of the call the guest runs in) and secrets ----

// Answer is the person's answer to Elicit: Action is "accept" (Content is what they filled
// in), "decline" or "cancel".
type Answer struct {
	Action  string
	Content map[string]any
}

// Elicit asks the person through the MCP client (elicitation/create; grant `elicit`).
// requestedSchema is a JSON Schema object of flat primitive properties. A client that cannot
// ask gives an error for which IsUnsupportedByClient is true.
func Elicit(message, requestedSchema string) (Answer, error) {
	r := jupyter_mcp_extension_client.Elicit(message, requestedSchema)
	if r.Tag() == witTypes.ResultErr {
		return Answer{}, &HostError{r.Err()}
	}
	switch answer := r.Ok(); answer.Tag() {
	case jupyter_mcp_extension_client.ElicitAnswer_Accept:
		content := map[string]any{}
		if err := json.Unmarshal([]byte(answer.Accept()), &content); err != nil {
			return Answer{}, err
		}
		return Answer{Action: "accept", Content: content}, nil
	case jupyter_mcp_extension_client.ElicitAnswer_Decline:
		return Answer{Action: "decline"}, nil
	}
	return Answer{Action: "cancel"}, nil
}

// Sample asks the client's model (sampling/createMessage; grant `sample`): request is the JSON
// of its params, the answer the JSON of its result. Fails as Elicit does.
func Sample(request string) (string, error) {
	r := jupyter_mcp_extension_client.Sample(request)
	if r.Tag() == witTypes.ResultErr {
		return "", &HostError{r.Err()}
	}
	return r.Ok(), nil
}

// Progress reports progress to a client that asked for it (nothing otherwise); total < 0:
// unknown, message "": none.
func Progress(done, total float64, message string) {
	known := witTypes.None[float64]()
	if total >= 0 {
		known = witTypes.Some(total)
	}
	jupyter_mcp_extension_client.Progress(done, known, Optional(message))
}

// Secret is the operator's secret name (grant `secret:NAME`).
func Secret(name string) (string, error) {
	r := jupyter_mcp_extension_secrets.Get(name)
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

// Reply is a hook handler's answer to one event: Context (nil: keep) replaces the call's
// context; Confirm (a reason shown to the person, "" for none) holds a before_* call of a
// critical handler until they confirm it; a no, or a client that cannot ask, refuses the call.
type Reply struct {
	Context map[string]any
	Confirm string
}

// Hooks: OnEvent gets the call's context (decoded; {} on the first event) and returns a Reply
// (Reply{} keeps the context and asks nothing); an error refuses (when PropagateErrors).
type Hooks struct {
	PropagateErrors bool
	OnEvent         func(event HookEvent, context map[string]any) (Reply, error)
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
