/* The C SDK for jupyter-mcp-server guests: JSON, results, host functions and the WIT exports
 * implemented from the guest's tables (see jmcp.h). jmcp-cc compiles it with
 * -DJMCP_WORLD_EXTENSION and/or -DJMCP_WORLD_HOOKS, after the world the guest is built for. */
#include "jmcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Strings ---- */

jmcp_string jmcp_str(const char *s) {
  jmcp_string out;
  wit_string_set(&out, s ? s : "");
  return out;
}

char *jmcp_cstr(const jmcp_string *s) {
  char *out = malloc(s->len + 1);
  if (!out) abort();
  if (s->len) memcpy(out, s->ptr, s->len);
  out[s->len] = '\0';
  return out;
}

void jmcp_set(jmcp_string *out, const char *s) { wit_string_dup(out, s ? s : ""); }

/* Takes a malloc'ed NUL-terminated string as the WIT string's storage (no copy). */
static void take(jmcp_string *out, char *s) {
  out->ptr = (uint8_t *)s;
  out->len = strlen(s);
  if (out->len == 0) { /* the generated free functions skip empty strings */
    free(s);
    out->ptr = NULL;
  }
}

#ifdef JMCP_WORLD_EXTENSION
/* Helpers of the extension's exports. */
static void set_option(wit_option_string_t *out, const char *s) {
  out->is_some = s != NULL;
  if (s) jmcp_set(&out->val, s);
}

static void set_hint(wit_option_bool_t *out, jmcp_hint hint) {
  out->is_some = hint != JMCP_UNSET;
  out->val = hint == JMCP_YES;
}

/* calloc that never returns NULL for a non-empty request and gives NULL for an empty one (the
 * generated free functions skip empty lists). */
static void *alloc_items(size_t count, size_t size) {
  if (count == 0) return NULL;
  void *p = calloc(count, size);
  if (!p) abort();
  return p;
}
#endif

/* Grows a WIT list by one zeroed item; returns the new item. */
#define PUSH(list)                                                                   \
  ((list)->ptr = realloc((list)->ptr, ((list)->len + 1) * sizeof *(list)->ptr),     \
   (list)->ptr ? (void)0 : abort(),                                                  \
   memset(&(list)->ptr[(list)->len], 0, sizeof *(list)->ptr), &(list)->ptr[(list)->len++])

/* ---- Results and errors ---- */

static void add_text_v(jmcp_tool_result *ret, const char *fmt, va_list args) {
  jupyter_mcp_extension_types_content_t *item = PUSH(&ret->content);
  item->tag = JUPYTER_MCP_EXTENSION_TYPES_CONTENT_TEXT;
  take(&item->val.text, jmcp_vformat(fmt, args));
}

void jmcp_add_text(jmcp_tool_result *ret, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  add_text_v(ret, fmt, args);
  va_end(args);
}

bool jmcp_text(jmcp_tool_result *ret, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  add_text_v(ret, fmt, args);
  va_end(args);
  return true;
}

bool jmcp_text_error(jmcp_tool_result *ret, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  add_text_v(ret, fmt, args);
  va_end(args);
  ret->is_error = true;
  return true;
}

void jmcp_structured(jmcp_tool_result *ret, char *json) {
  if (!json) return;
  if (ret->structured.is_some) wit_string_free(&ret->structured.val);
  ret->structured.is_some = true;
  take(&ret->structured.val, json);
}

static bool guest_error(jmcp_error *err, uint8_t tag, const char *fmt, va_list args) {
  err->tag = tag;
  /* Every variant but `host` holds a string at the same place. */
  take(&err->val.failed, jmcp_vformat(fmt, args));
  return false;
}

#define GUEST_ERROR(tag)                            \
  va_list args;                                     \
  va_start(args, fmt);                              \
  guest_error(err, JUPYTER_MCP_EXTENSION_TYPES_GUEST_ERROR_##tag, fmt, args); \
  va_end(args);                                     \
  return false

bool jmcp_fail(jmcp_error *err, const char *fmt, ...) { GUEST_ERROR(FAILED); }
bool jmcp_invalid_arguments(jmcp_error *err, const char *fmt, ...) { GUEST_ERROR(INVALID_ARGUMENTS); }
bool jmcp_not_found(jmcp_error *err, const char *fmt, ...) { GUEST_ERROR(NOT_FOUND); }

bool jmcp_host_failed(jmcp_error *err, jmcp_host_error *host) {
  err->tag = JUPYTER_MCP_EXTENSION_TYPES_GUEST_ERROR_HOST;
  err->val.host = *host;
  memset(host, 0, sizeof *host);
  return false;
}

const char *jmcp_host_error_kind(const jmcp_host_error *e) {
  static const char *const kinds[] = {"not-granted", "not-available", "not-found",
                                      "conflict",    "kernel",        "invalid",
                                      "failed",      "unsupported-by-client", "refused"};
  return e->tag < JMCP_COUNT(kinds) ? kinds[e->tag] : "failed";
}

bool jmcp_unsupported_by_client(const jmcp_host_error *e) {
  return e->tag == JUPYTER_MCP_EXTENSION_TYPES_HOST_ERROR_UNSUPPORTED_BY_CLIENT;
}

const jmcp_string *jmcp_host_error_message(const jmcp_host_error *e) {
  /* Every variant holds one string, at the same place. */
  return &e->val.failed;
}

void jmcp_host_error_free(jmcp_host_error *e) { jupyter_mcp_extension_types_host_error_free(e); }

/* ---- Host functions ---- */

void jmcp_log(jmcp_level level, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char *text = jmcp_vformat(fmt, args);
  va_end(args);
  jmcp_string message = jmcp_str(text);
  jupyter_mcp_extension_log_log((jupyter_mcp_extension_log_level_t)level, &message);
  free(text);
}

static jmcp_json *empty_object(void) {
  jmcp_json *v = calloc(1, sizeof *v);
  if (!v) abort();
  v->kind = JMCP_JSON_OBJECT;
  return v;
}

jmcp_json *jmcp_config(void) {
  jmcp_string text;
  jupyter_mcp_extension_config_get_config(&text);
  jmcp_json *config = jmcp_json_parse((const char *)text.ptr, text.len, NULL);
  wit_string_free(&text);
  return config ? config : empty_object();
}

char *jmcp_api_version(void) {
  jmcp_string text;
  jupyter_mcp_extension_host_info_api_version(&text);
  char *out = jmcp_cstr(&text);
  wit_string_free(&text);
  return out;
}

bool jmcp_read_cells(const char *notebook, jmcp_cells *cells, jmcp_host_error *err) {
  jmcp_string name = jmcp_str(notebook);
  return jupyter_mcp_extension_notebook_read_cells(&name, cells, err);
}

void jmcp_cells_free(jmcp_cells *cells) { jupyter_mcp_extension_notebook_list_cell_free(cells); }

bool jmcp_execute_code(const char *notebook, const char *code, jmcp_string *outputs,
                       jmcp_host_error *err) {
  jmcp_string name = jmcp_str(notebook), source = jmcp_str(code);
  return jupyter_mcp_extension_notebook_execute_code(&name, &source, NULL, outputs, err);
}

bool jmcp_elicit(const char *message, const char *requested_schema, jmcp_action *action,
                 jmcp_json **content, jmcp_host_error *err) {
  jmcp_string text = jmcp_str(message), schema = jmcp_str(requested_schema);
  jupyter_mcp_extension_client_elicit_answer_t answer;
  *content = NULL;
  if (!jupyter_mcp_extension_client_elicit(&text, &schema, &answer, err)) return false;
  switch (answer.tag) {
    case JUPYTER_MCP_EXTENSION_CLIENT_ELICIT_ANSWER_ACCEPT:
      *action = JMCP_ACCEPT;
      *content = jmcp_json_parse((const char *)answer.val.accept.ptr, answer.val.accept.len, NULL);
      break;
    case JUPYTER_MCP_EXTENSION_CLIENT_ELICIT_ANSWER_DECLINE:
      *action = JMCP_DECLINE;
      break;
    default:
      *action = JMCP_CANCEL;
  }
  jupyter_mcp_extension_client_elicit_answer_free(&answer);
  return true;
}

bool jmcp_sample(const char *request, jmcp_string *result, jmcp_host_error *err) {
  jmcp_string text = jmcp_str(request);
  return jupyter_mcp_extension_client_sample(&text, result, err);
}

void jmcp_progress(double done, double total, const char *message) {
  jmcp_string text = jmcp_str(message ? message : "");
  jupyter_mcp_extension_client_progress(done, total < 0 ? NULL : &total, message ? &text : NULL);
}

bool jmcp_secret(const char *name, jmcp_string *value, jmcp_host_error *err) {
  jmcp_string text = jmcp_str(name);
  return jupyter_mcp_extension_secrets_get(&text, value, err);
}

/* Parses a JSON text the host sent; on failure sets *err (invalid-arguments) and returns NULL. */
static jmcp_json *parse_sent(const jmcp_string *text, const char *what, jmcp_error *err) {
  char *why = NULL;
  jmcp_json *value = jmcp_json_parse((const char *)text->ptr, text->len, &why);
  if (!value) {
    jmcp_invalid_arguments(err, "%s: %s", what, why);
    free(why);
  }
  return value;
}

/* ---- The extension's exports, from jmcp_extension_definition ---- */

#ifdef JMCP_WORLD_EXTENSION

extern const jmcp_extension jmcp_extension_definition;
#define DEF jmcp_extension_definition

void jmcp_resource_text(jmcp_resource_contents *ret, const char *uri, const char *mime_type,
                        const char *text) {
  jmcp_resource_item *item = PUSH(ret);
  jmcp_set(&item->uri, uri);
  set_option(&item->mime_type, mime_type);
  item->body.tag = JUPYTER_MCP_EXTENSION_TYPES_RESOURCE_BODY_TEXT;
  jmcp_set(&item->body.val.text, text);
}

void jmcp_prompt_text(jmcp_prompt_result *ret, bool from_assistant, const char *fmt, ...) {
  jupyter_mcp_extension_types_prompt_message_t *message = PUSH(&ret->messages);
  message->role = from_assistant ? JUPYTER_MCP_EXTENSION_TYPES_ROLE_ASSISTANT
                                 : JUPYTER_MCP_EXTENSION_TYPES_ROLE_USER;
  message->content.tag = JUPYTER_MCP_EXTENSION_TYPES_CONTENT_TEXT;
  va_list args;
  va_start(args, fmt);
  take(&message->content.val.text, jmcp_vformat(fmt, args));
  va_end(args);
}

void exports_jupyter_mcp_extension_extension_api_identity(
    exports_jupyter_mcp_extension_extension_api_extension_identity_t *ret) {
  jmcp_set(&ret->name, DEF.name);
  jmcp_set(&ret->version, DEF.version);
}

void exports_jupyter_mcp_extension_extension_api_capabilities(
    exports_jupyter_mcp_extension_extension_api_list_capability_t *ret) {
  ret->len = DEF.capabilities.count;
  ret->ptr = alloc_items(ret->len, sizeof *ret->ptr);
  for (size_t i = 0; i < ret->len; i++) {
    const jmcp_capability *c = &DEF.capabilities.items[i];
    jmcp_set(&ret->ptr[i].name, c->name);
    jmcp_set(&ret->ptr[i].description, c->description);
    ret->ptr[i].enabled = c->enabled;
  }
}

void exports_jupyter_mcp_extension_extension_api_tools(
    exports_jupyter_mcp_extension_extension_api_list_tool_spec_t *ret) {
  ret->len = DEF.tools.count;
  ret->ptr = alloc_items(ret->len, sizeof *ret->ptr);
  for (size_t i = 0; i < ret->len; i++) {
    const jmcp_tool *t = &DEF.tools.items[i];
    jupyter_mcp_extension_types_tool_spec_t *spec = &ret->ptr[i];
    jmcp_set(&spec->name, t->name);
    jmcp_set(&spec->description, t->description);
    jmcp_set(&spec->input_schema, t->input_schema ? t->input_schema : "{\"type\":\"object\"}");
    set_option(&spec->output_schema, t->output_schema);
    set_option(&spec->annotations.title, t->title);
    set_hint(&spec->annotations.read_only_hint, t->read_only);
    set_hint(&spec->annotations.destructive_hint, t->destructive);
    set_hint(&spec->annotations.idempotent_hint, t->idempotent);
    set_hint(&spec->annotations.open_world_hint, t->open_world);
    set_option(&spec->capability, t->capability);
  }
}

bool exports_jupyter_mcp_extension_extension_api_call_tool(
    jmcp_string *name, jmcp_string *arguments, jmcp_tool_result *ret, jmcp_error *err) {
  char *wanted = jmcp_cstr(name);
  const jmcp_tool *tool = NULL;
  for (size_t i = 0; i < DEF.tools.count; i++)
    if (strcmp(DEF.tools.items[i].name, wanted) == 0) tool = &DEF.tools.items[i];
  memset(ret, 0, sizeof *ret);
  memset(err, 0, sizeof *err);
  bool ok = false;
  if (!tool || !tool->call) {
    jmcp_not_found(err, "extension '%s' has no tool '%s'", DEF.name, wanted);
  } else {
    jmcp_json *args = parse_sent(arguments, "the tool's arguments", err);
    if (args) {
      ok = tool->call(args, ret, err);
      jmcp_json_free(args);
    }
  }
  if (!ok) jupyter_mcp_extension_types_tool_result_free(ret);
  free(wanted);
  wit_string_free(name);
  wit_string_free(arguments);
  return ok;
}

void exports_jupyter_mcp_extension_extension_api_resources(
    exports_jupyter_mcp_extension_extension_api_list_resource_spec_t *ret) {
  ret->len = DEF.resources.count;
  ret->ptr = alloc_items(ret->len, sizeof *ret->ptr);
  for (size_t i = 0; i < ret->len; i++) {
    const jmcp_resource *r = &DEF.resources.items[i];
    jmcp_set(&ret->ptr[i].uri, r->uri);
    jmcp_set(&ret->ptr[i].name, r->name);
    set_option(&ret->ptr[i].title, r->title);
    set_option(&ret->ptr[i].description, r->description);
    set_option(&ret->ptr[i].mime_type, r->mime_type);
  }
}

void exports_jupyter_mcp_extension_extension_api_resource_templates(
    exports_jupyter_mcp_extension_extension_api_list_resource_template_t *ret) {
  ret->len = DEF.resource_templates.count;
  ret->ptr = alloc_items(ret->len, sizeof *ret->ptr);
  for (size_t i = 0; i < ret->len; i++) {
    const jmcp_resource_template *r = &DEF.resource_templates.items[i];
    jmcp_set(&ret->ptr[i].uri_template, r->uri_template);
    jmcp_set(&ret->ptr[i].name, r->name);
    set_option(&ret->ptr[i].title, r->title);
    set_option(&ret->ptr[i].description, r->description);
    set_option(&ret->ptr[i].mime_type, r->mime_type);
  }
}

/* RFC 6570 level 1 as far as a server needs it: literal text matches itself, each `{name}` a
 * non-empty run of characters other than '/' and the literal character that follows it. */
static bool matches_template(const char *template, const char *uri) {
  while (*template) {
    if (*template == '{') {
      const char *close = strchr(template, '}');
      if (!close) return false;
      char stop = close[1];
      const char *start = uri;
      while (*uri && *uri != '/' && *uri != stop) uri++;
      if (uri == start) return false;
      template = close + 1;
    } else if (*template++ != *uri++) {
      return false;
    }
  }
  return *uri == '\0';
}

bool exports_jupyter_mcp_extension_extension_api_read_resource(
    jmcp_string *uri, exports_jupyter_mcp_extension_extension_api_list_resource_contents_t *ret,
    jmcp_error *err) {
  char *wanted = jmcp_cstr(uri);
  jmcp_read_fn read = NULL;
  for (size_t i = 0; i < DEF.resources.count && !read; i++)
    if (strcmp(DEF.resources.items[i].uri, wanted) == 0) read = DEF.resources.items[i].read;
  for (size_t i = 0; i < DEF.resource_templates.count && !read; i++)
    if (matches_template(DEF.resource_templates.items[i].uri_template, wanted))
      read = DEF.resource_templates.items[i].read;
  jmcp_resource_contents contents = {0};
  memset(err, 0, sizeof *err);
  bool ok = read ? read(wanted, &contents, err)
                 : jmcp_not_found(err, "extension '%s' has no resource '%s'", DEF.name, wanted);
  ret->ptr = contents.ptr;
  ret->len = contents.len;
  if (!ok) exports_jupyter_mcp_extension_extension_api_list_resource_contents_free(ret);
  free(wanted);
  wit_string_free(uri);
  return ok;
}

void exports_jupyter_mcp_extension_extension_api_prompts(
    exports_jupyter_mcp_extension_extension_api_list_prompt_t *ret) {
  ret->len = DEF.prompts.count;
  ret->ptr = alloc_items(ret->len, sizeof *ret->ptr);
  for (size_t i = 0; i < ret->len; i++) {
    const jmcp_prompt *p = &DEF.prompts.items[i];
    jupyter_mcp_extension_types_prompt_t *out = &ret->ptr[i];
    jmcp_set(&out->name, p->name);
    set_option(&out->title, p->title);
    set_option(&out->description, p->description);
    out->arguments.len = p->arguments.count;
    out->arguments.ptr = alloc_items(p->arguments.count, sizeof *out->arguments.ptr);
    for (size_t j = 0; j < p->arguments.count; j++) {
      jmcp_set(&out->arguments.ptr[j].name, p->arguments.items[j].name);
      set_option(&out->arguments.ptr[j].description, p->arguments.items[j].description);
      out->arguments.ptr[j].required = p->arguments.items[j].required;
    }
  }
}

bool exports_jupyter_mcp_extension_extension_api_get_prompt(jmcp_string *name,
                                                            jmcp_string *arguments,
                                                            jmcp_prompt_result *ret,
                                                            jmcp_error *err) {
  char *wanted = jmcp_cstr(name);
  const jmcp_prompt *prompt = NULL;
  for (size_t i = 0; i < DEF.prompts.count; i++)
    if (strcmp(DEF.prompts.items[i].name, wanted) == 0) prompt = &DEF.prompts.items[i];
  memset(ret, 0, sizeof *ret);
  memset(err, 0, sizeof *err);
  bool ok = false;
  if (!prompt || !prompt->get) {
    jmcp_not_found(err, "extension '%s' has no prompt '%s'", DEF.name, wanted);
  } else {
    jmcp_json *args = parse_sent(arguments, "the prompt's arguments", err);
    if (args) {
      ok = prompt->get(args, ret, err);
      jmcp_json_free(args);
    }
  }
  if (!ok) jupyter_mcp_extension_types_prompt_result_free(ret);
  free(wanted);
  wit_string_free(name);
  wit_string_free(arguments);
  return ok;
}

#endif /* JMCP_WORLD_EXTENSION */

/* ---- The hook handler's exports, from jmcp_hooks_definition ---- */

const char *jmcp_event_name(const jmcp_event *event) {
  static const char *const names[] = {"before_tool_call", "after_tool_call", "before_execute",
                                      "after_execute", "kernel_lifecycle"};
  return event->tag < JMCP_COUNT(names) ? names[event->tag] : "unknown";
}

#ifdef JMCP_WORLD_HOOKS

extern const jmcp_hooks jmcp_hooks_definition;

bool exports_jupyter_mcp_extension_hooks_propagate_errors(void) {
  return jmcp_hooks_definition.propagate_errors;
}

bool jmcp_confirm(jmcp_reply *reply, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  free(reply->confirm);
  reply->confirm = jmcp_vformat(fmt, args);
  va_end(args);
  return true;
}

/* Moves a malloc'ed string (or NULL: none) into an option of the result. */
static void take_option(wit_option_string_t *out, char *text) {
  out->is_some = text != NULL;
  if (text) take(&out->val, text);
}

bool exports_jupyter_mcp_extension_hooks_on_event(jmcp_event *event, jmcp_string *context,
                                                  jupyter_mcp_extension_types_hook_reply_t *ret,
                                                  jmcp_error *err) {
  memset(ret, 0, sizeof *ret);
  memset(err, 0, sizeof *err);
  bool ok = false;
  jmcp_json *parsed = parse_sent(context, "the hook context", err);
  if (parsed) {
    jmcp_reply reply = {0};
    ok = jmcp_hooks_definition.on_event(event, parsed, &reply, err);
    if (ok) {
      take_option(&ret->context, reply.context);
      take_option(&ret->confirm, reply.confirm);
    } else {
      free(reply.context);
      free(reply.confirm);
    }
    jmcp_json_free(parsed);
  }
  jupyter_mcp_extension_types_hook_event_free(event);
  wit_string_free(context);
  return ok;
}

#endif /* JMCP_WORLD_HOOKS */
