/* The C SDK for jupyter-mcp-server guests (WIT jupyter-mcp:extension@0.3.0).
 *
 * An extension describes itself once, in tables (JMCP_EXTENSION below): its tools with their
 * handlers, capabilities, resources and prompts. The SDK implements every export of the WIT
 * from those tables, parses each call's JSON arguments and frees what the host handed over, so a
 * handler only reads borrowed values and fills in its result. A hook handler does the same with
 * JMCP_HOOKS. `jmcp-cc` (beside this file) generates the bindings (`wit.h`), compiles and makes
 * the component.
 *
 * Memory rules (see guests/README.md, "C"):
 * - Everything the SDK passes to a handler (arguments, events, URIs, context) is borrowed: valid
 *   until the handler returns, freed by the SDK afterwards. Copy what you keep.
 * - Everything a handler puts into its result or error must be heap memory (malloc): the
 *   generated post-return functions free it after the host has copied it. The jmcp_* builders
 *   below copy their inputs, so string literals are fine there; never put a literal into a
 *   wit_string_t by hand (wit_string_set does exactly that: use it only for import arguments).
 * - What a host function returns (cells, outputs, errors) belongs to the caller: free it with
 *   the generated *_free function (jmcp_cells_free, jmcp_host_error_free) or hand it on
 *   (jmcp_host_failed moves a host error into your error).
 */
#ifndef JMCP_H
#define JMCP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jmcp_json.h"
#include "wit.h"

/* ---- Short names for the generated types ---- */

typedef wit_string_t jmcp_string;
typedef jupyter_mcp_extension_types_host_error_t jmcp_host_error;
typedef jupyter_mcp_extension_types_guest_error_t jmcp_error;
typedef jupyter_mcp_extension_types_cell_t jmcp_cell;
typedef jupyter_mcp_extension_notebook_list_cell_t jmcp_cells;
typedef jupyter_mcp_extension_types_hook_event_t jmcp_event;
typedef jupyter_mcp_extension_types_tool_result_t jmcp_tool_result;
typedef jupyter_mcp_extension_types_prompt_result_t jmcp_prompt_result;
typedef jupyter_mcp_extension_types_resource_contents_t jmcp_resource_item;

/* A resource read's answer: a list of items. */
typedef struct {
  jmcp_resource_item *ptr;
  size_t len;
} jmcp_resource_contents;

/* ---- Strings ---- */

/* A borrowed view of a NUL-terminated string, for arguments of host functions (no copy). */
jmcp_string jmcp_str(const char *s);
/* A malloc'ed, NUL-terminated copy of a WIT string (the caller frees it). */
char *jmcp_cstr(const jmcp_string *s);
/* Sets `out` to a heap copy of `s` (what results and errors need). */
void jmcp_set(jmcp_string *out, const char *s);
/* ---- Results and errors ---- */

/* Appends a text item to a tool result. */
void jmcp_add_text(jmcp_tool_result *ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A successful result of one text item; returns true (`return jmcp_text(ret, ...);`). */
bool jmcp_text(jmcp_tool_result *ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The tool ran but failed: one text item saying why and what to do next, is-error set. The
 * client sees it as a failed call; returns true (the call itself completed). */
bool jmcp_text_error(jmcp_tool_result *ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the structured output, taking ownership of the malloc'ed JSON object (jmcp_w_finish). */
void jmcp_structured(jmcp_tool_result *ret, char *json);

/* Guest errors; each returns false, so a handler can `return jmcp_fail(err, ...)`. */
bool jmcp_fail(jmcp_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool jmcp_invalid_arguments(jmcp_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool jmcp_not_found(jmcp_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Passes a host function's error on as it came, taking ownership of it (C's `?`). */
bool jmcp_host_failed(jmcp_error *err, jmcp_host_error *host);

/* A host error's kind (`not-granted`, `not-found`, ..., `unsupported-by-client`, `refused`) and
 * its message (borrowed). */
const char *jmcp_host_error_kind(const jmcp_host_error *e);
/* True when the call's MCP client cannot do what was asked (it declared no elicitation or
 * sampling, or there is no client): the case to fall back on rather than fail. */
bool jmcp_unsupported_by_client(const jmcp_host_error *e);
const jmcp_string *jmcp_host_error_message(const jmcp_host_error *e);
void jmcp_host_error_free(jmcp_host_error *e);

/* ---- Host functions ---- */

typedef enum {
  JMCP_TRACE = JUPYTER_MCP_EXTENSION_LOG_LEVEL_TRACE,
  JMCP_DEBUG = JUPYTER_MCP_EXTENSION_LOG_LEVEL_DEBUG,
  JMCP_INFO = JUPYTER_MCP_EXTENSION_LOG_LEVEL_INFO,
  JMCP_WARN = JUPYTER_MCP_EXTENSION_LOG_LEVEL_WARN,
  JMCP_ERROR = JUPYTER_MCP_EXTENSION_LOG_LEVEL_ERROR,
} jmcp_level;

/* Into the server's log, tagged with the guest's name (stdout and stderr go nowhere). */
void jmcp_log(jmcp_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* This guest's `config` table as parsed JSON (an object); free it with jmcp_json_free. */
jmcp_json *jmcp_config(void);
/* The host's WIT version, e.g. "0.3.0" (malloc'ed). */
char *jmcp_api_version(void);
/* Every cell of a notebook ("" = the current one). On success free *cells with
 * jmcp_cells_free; on failure *err is set and is yours (pass it on with jmcp_host_failed, or
 * free it with jmcp_host_error_free). Needs the `read-cells` grant. */
bool jmcp_read_cells(const char *notebook, jmcp_cells *cells, jmcp_host_error *err);
void jmcp_cells_free(jmcp_cells *cells);
/* Runs code in the notebook's kernel; *outputs is the nbformat outputs (a JSON array,
 * malloc'ed, free it with wit_string_free). Needs the `execute-code` grant. */
bool jmcp_execute_code(const char *notebook, const char *code, jmcp_string *outputs,
                       jmcp_host_error *err);
/* Every other host function is in wit.h under its WIT name, e.g.
 * jupyter_mcp_extension_notebook_insert_cell(...) or _overwrite_cell(..., expected_source,
 * expected_version, &new_version, &err): pass a cell's `version` to refuse an edit if someone
 * changed the cell since. */

/* ---- The client (of the call the guest runs in) and secrets ---- */

/* The person's answer to jmcp_elicit. */
typedef enum { JMCP_ACCEPT, JMCP_DECLINE, JMCP_CANCEL } jmcp_action;

/* Asks the person through the MCP client (`elicitation/create`; grant `elicit`).
 * `requested_schema` is a JSON Schema object of flat primitive properties. On success *action
 * is set and, on JMCP_ACCEPT, *content is their answer (a JSON object; free it with
 * jmcp_json_free), else NULL. On failure *err is set: jmcp_unsupported_by_client(err) when the
 * client cannot ask. */
bool jmcp_elicit(const char *message, const char *requested_schema, jmcp_action *action,
                 jmcp_json **content, jmcp_host_error *err);
/* Asks the client's model (`sampling/createMessage`; grant `sample`): `request` is the JSON of
 * its params; *result the JSON of its result (free it with wit_string_free). Fails as
 * jmcp_elicit does. */
bool jmcp_sample(const char *request, jmcp_string *result, jmcp_host_error *err);
/* Reports progress to a client that asked for it (nothing otherwise); `total` < 0: unknown,
 * `message` NULL: none. */
void jmcp_progress(double done, double total, const char *message);
/* The operator's secret `name` (grant `secret:NAME`); free *value with wit_string_free. */
bool jmcp_secret(const char *name, jmcp_string *value, jmcp_host_error *err);

/* ---- Describing an extension ---- */

#define JMCP_COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* A table and its length, for the list fields below: `.tools = JMCP_ITEMS(TOOLS)`. */
#define JMCP_ITEMS(a) {(a), JMCP_COUNT(a)}

/* An MCP tool annotation left unset, or set to false or true. */
typedef enum { JMCP_UNSET = 0, JMCP_NO, JMCP_YES } jmcp_hint;

/* `args` is the call's arguments (a JSON object that matched the input schema). Return true
 * with *ret filled in, or false with *err set (jmcp_fail & co.). */
typedef bool (*jmcp_tool_fn)(const jmcp_json *args, jmcp_tool_result *ret, jmcp_error *err);

typedef struct {
  const char *name;
  const char *description;
  /* JSON Schema of the arguments, `{"type": "object", ...}`. */
  const char *input_schema;
  /* JSON Schema of the structured output, or NULL. */
  const char *output_schema;
  const char *title;
  jmcp_hint read_only, destructive, idempotent, open_world;
  /* The capability that must be on for the tool to be listed and callable, or NULL. */
  const char *capability;
  jmcp_tool_fn call;
} jmcp_tool;

typedef struct {
  const char *name; /* namespaced: "<extension>.<what>" */
  const char *description;
  bool enabled;
} jmcp_capability;

/* Fills *ret for `uri` (jmcp_resource_text) or sets *err. */
typedef bool (*jmcp_read_fn)(const char *uri, jmcp_resource_contents *ret, jmcp_error *err);

typedef struct {
  const char *uri, *name, *title, *description, *mime_type;
  jmcp_read_fn read;
} jmcp_resource;

/* `uri_template`: RFC 6570 level 1, e.g. "wordcount://cell/{id}" (each {name} matches a
 * non-empty run without '/'). */
typedef struct {
  const char *uri_template, *name, *title, *description, *mime_type;
  jmcp_read_fn read;
} jmcp_resource_template;

typedef struct {
  const char *name, *description;
  bool required;
} jmcp_prompt_argument;

/* `args`: a JSON object of string values. */
typedef bool (*jmcp_prompt_fn)(const jmcp_json *args, jmcp_prompt_result *ret, jmcp_error *err);

typedef struct {
  const char *name, *title, *description;
  struct {
    const jmcp_prompt_argument *items;
    size_t count;
  } arguments;
  jmcp_prompt_fn get;
} jmcp_prompt;

typedef struct {
  const char *name, *version;
  struct {
    const jmcp_capability *items;
    size_t count;
  } capabilities;
  struct {
    const jmcp_tool *items;
    size_t count;
  } tools;
  struct {
    const jmcp_resource *items;
    size_t count;
  } resources;
  struct {
    const jmcp_resource_template *items;
    size_t count;
  } resource_templates;
  struct {
    const jmcp_prompt *items;
    size_t count;
  } prompts;
} jmcp_extension;

/* Defines the extension: `JMCP_EXTENSION(.name = "wordcount", .version = "0.1.0", ...);` */
#define JMCP_EXTENSION(...) const jmcp_extension jmcp_extension_definition = {__VA_ARGS__}

/* Appends one text item to a resource read's answer. */
void jmcp_resource_text(jmcp_resource_contents *ret, const char *uri, const char *mime_type,
                        const char *text);
/* Appends one text message to a prompt's answer. */
void jmcp_prompt_text(jmcp_prompt_result *ret, bool from_assistant, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Describing a hook handler ---- */

/* A hook handler's answer to one event, both fields malloc'ed or NULL (the SDK frees them):
 * `context` a JSON object replacing the call's context (jmcp_w_finish), `confirm` the reason
 * shown to the person when the call must wait for their yes (jmcp_confirm). */
typedef struct {
  char *context;
  char *confirm;
} jmcp_reply;

/* One event. `context` is this handler's JSON object for the call (`{}` on the first event).
 * Fill in *reply (it starts empty: keep the context, ask nothing), or return false with *err
 * set to refuse (a critical handler fails the call). */
typedef bool (*jmcp_event_fn)(const jmcp_event *event, const jmcp_json *context,
                              jmcp_reply *reply, jmcp_error *err);

/* Holds the call until the person confirms it through the client, the reason shown to them; a
 * no, or a client that cannot ask, refuses the call. Honoured on `before_*` events of a
 * critical handler (propagate_errors). Returns true (`return jmcp_confirm(reply, ...);`). */
bool jmcp_confirm(jmcp_reply *reply, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct {
  /* true: an error fails the call it observes (a policy); false: errors are only logged. */
  bool propagate_errors;
  jmcp_event_fn on_event;
} jmcp_hooks;

#define JMCP_HOOKS(...) const jmcp_hooks jmcp_hooks_definition = {__VA_ARGS__}

/* The event's name as in the server's docs: "before_tool_call", "after_execute", ... */
const char *jmcp_event_name(const jmcp_event *event);

#endif
