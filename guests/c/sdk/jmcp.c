/* The C SDK for jupyter-mcp-server guests: JSON, results, host functions and the WIT exports
 * implemented from the guest's tables (see jmcp.h). jmcp-cc compiles it with
 * -DJMCP_WORLD_EXTENSION and/or -DJMCP_WORLD_HOOKS, after the world the guest is built for. */
#include "jmcp.h"

#include <math.h>
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

char *jmcp_vformat(const char *fmt, va_list args) {
  va_list again;
  va_copy(again, args);
  int n = vsnprintf(NULL, 0, fmt, again);
  va_end(again);
  if (n < 0) n = 0;
  char *out = malloc((size_t)n + 1);
  if (!out) abort();
  vsnprintf(out, (size_t)n + 1, fmt, args);
  return out;
}

char *jmcp_format(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char *out = jmcp_vformat(fmt, args);
  va_end(args);
  return out;
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

/* ---- JSON reader ---- */

typedef struct {
  const char *start, *p, *end;
  char *error;
  int depth;
} parser;

static bool parse_value(parser *ps, jmcp_json *out);

static bool fail_at(parser *ps, const char *what) {
  if (!ps->error) ps->error = jmcp_format("%s at byte %zu", what, (size_t)(ps->p - ps->start));
  return false;
}

static void skip_space(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

typedef struct {
  char *data;
  size_t len, cap;
} buffer;

static void put_bytes(buffer *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 32;
    while (cap < b->len + n + 1) cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) abort();
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void put_utf8(buffer *b, uint32_t c) {
  char s[4];
  size_t n;
  if (c < 0x80) {
    s[0] = (char)c;
    n = 1;
  } else if (c < 0x800) {
    s[0] = (char)(0xC0 | (c >> 6));
    s[1] = (char)(0x80 | (c & 0x3F));
    n = 2;
  } else if (c < 0x10000) {
    s[0] = (char)(0xE0 | (c >> 12));
    s[1] = (char)(0x80 | ((c >> 6) & 0x3F));
    s[2] = (char)(0x80 | (c & 0x3F));
    n = 3;
  } else {
    s[0] = (char)(0xF0 | (c >> 18));
    s[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    s[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    s[3] = (char)(0x80 | (c & 0x3F));
    n = 4;
  }
  put_bytes(b, s, n);
}

static bool hex4(parser *ps, uint32_t *out) {
  if (ps->end - ps->p < 4) return fail_at(ps, "short \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = *ps->p++;
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return fail_at(ps, "bad \\u escape");
  }
  *out = v;
  return true;
}

/* After the opening quote; leaves the decoded text in *text and its length in *len. */
static bool parse_string(parser *ps, char **text, size_t *len) {
  buffer b = {0};
  put_bytes(&b, "", 0);
  for (;;) {
    if (ps->p >= ps->end) {
      free(b.data);
      return fail_at(ps, "unterminated string");
    }
    char c = *ps->p++;
    if (c == '"') break;
    if ((unsigned char)c < 0x20) {
      free(b.data);
      return fail_at(ps, "control character in string");
    }
    if (c != '\\') {
      put_bytes(&b, &c, 1);
      continue;
    }
    if (ps->p >= ps->end) {
      free(b.data);
      return fail_at(ps, "unterminated escape");
    }
    char e = *ps->p++;
    const char *simple = NULL;
    switch (e) {
      case '"': simple = "\""; break;
      case '\\': simple = "\\"; break;
      case '/': simple = "/"; break;
      case 'b': simple = "\b"; break;
      case 'f': simple = "\f"; break;
      case 'n': simple = "\n"; break;
      case 'r': simple = "\r"; break;
      case 't': simple = "\t"; break;
      case 'u': {
        uint32_t cp;
        if (!hex4(ps, &cp)) {
          free(b.data);
          return false;
        }
        if (cp >= 0xD800 && cp < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
          parser save = *ps;
          uint32_t low;
          ps->p += 2;
          if (hex4(ps, &low) && low >= 0xDC00 && low < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else {
            free(ps->error);
            *ps = save;
            ps->error = NULL;
            cp = 0xFFFD;
          }
        } else if (cp >= 0xD800 && cp < 0xE000) {
          cp = 0xFFFD; /* a lone surrogate cannot be UTF-8 */
        }
        put_utf8(&b, cp);
        continue;
      }
      default:
        free(b.data);
        return fail_at(ps, "bad escape");
    }
    put_bytes(&b, simple, 1);
  }
  *text = b.data;
  *len = b.len;
  return true;
}

static bool literal(parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return fail_at(ps, "unexpected text");
  ps->p += n;
  return true;
}

static bool parse_number(parser *ps, jmcp_json *out) {
  const char *start = ps->p;
  while (ps->p < ps->end && strchr("+-0123456789.eE", *ps->p)) ps->p++;
  size_t n = (size_t)(ps->p - start);
  char digits[64];
  if (n == 0 || n >= sizeof digits) return fail_at(ps, "bad number");
  memcpy(digits, start, n);
  digits[n] = '\0';
  char *rest;
  out->number = strtod(digits, &rest);
  if (*rest != '\0') return fail_at(ps, "bad number");
  out->kind = JMCP_JSON_NUMBER;
  return true;
}

static bool parse_items(parser *ps, jmcp_json *out, bool object) {
  char close = object ? '}' : ']';
  size_t cap = 0;
  out->kind = object ? JMCP_JSON_OBJECT : JMCP_JSON_ARRAY;
  if (++ps->depth > 64) return fail_at(ps, "nested too deeply");
  skip_space(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    ps->depth--;
    return true;
  }
  for (;;) {
    if (out->length == cap) {
      cap = cap ? cap * 2 : 4;
      out->items = realloc(out->items, cap * sizeof *out->items);
      if (object) out->keys = realloc(out->keys, cap * sizeof *out->keys);
      if (!out->items || (object && !out->keys)) abort();
    }
    jmcp_json *item = &out->items[out->length];
    memset(item, 0, sizeof *item);
    skip_space(ps);
    if (object) {
      size_t key_len;
      if (ps->p >= ps->end || *ps->p != '"') return fail_at(ps, "expected a key");
      ps->p++;
      if (!parse_string(ps, &out->keys[out->length], &key_len)) return false;
      out->length++; /* counted now, so that a failure below frees the key */
      skip_space(ps);
      if (ps->p >= ps->end || *ps->p != ':') return fail_at(ps, "expected ':'");
      ps->p++;
      if (!parse_value(ps, item)) return false;
    } else {
      out->length++;
      if (!parse_value(ps, item)) return false;
    }
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == close) {
      ps->p++;
      ps->depth--;
      return true;
    }
    return fail_at(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static bool parse_value(parser *ps, jmcp_json *out) {
  skip_space(ps);
  if (ps->p >= ps->end) return fail_at(ps, "unexpected end");
  switch (*ps->p) {
    case '{': ps->p++; return parse_items(ps, out, true);
    case '[': ps->p++; return parse_items(ps, out, false);
    case '"':
      ps->p++;
      out->kind = JMCP_JSON_STRING;
      return parse_string(ps, &out->string, &out->length);
    case 't': out->kind = JMCP_JSON_BOOL; out->boolean = true; return literal(ps, "true");
    case 'f': out->kind = JMCP_JSON_BOOL; return literal(ps, "false");
    case 'n': out->kind = JMCP_JSON_NULL; return literal(ps, "null");
    default: return parse_number(ps, out);
  }
}

static void free_inner(jmcp_json *v) {
  free(v->string);
  if (v->kind == JMCP_JSON_ARRAY || v->kind == JMCP_JSON_OBJECT) {
    for (size_t i = 0; i < v->length; i++) {
      free_inner(&v->items[i]);
      if (v->keys) free(v->keys[i]);
    }
  }
  free(v->items);
  free(v->keys);
}

void jmcp_json_free(jmcp_json *value) {
  if (!value) return;
  free_inner(value);
  free(value);
}

jmcp_json *jmcp_json_parse(const char *text, size_t len, char **error) {
  parser ps = {text, text, text + len, NULL, 0};
  jmcp_json *root = calloc(1, sizeof *root);
  if (!root) abort();
  bool ok = parse_value(&ps, root);
  if (ok) {
    skip_space(&ps);
    if (ps.p != ps.end) ok = fail_at(&ps, "text after the value");
  }
  if (ok) return root;
  if (error) *error = jmcp_format("invalid JSON: %s", ps.error ? ps.error : "bad input");
  free(ps.error);
  jmcp_json_free(root);
  return NULL;
}

const jmcp_json *jmcp_json_get(const jmcp_json *object, const char *key) {
  if (!object || object->kind != JMCP_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < object->length; i++)
    if (strcmp(object->keys[i], key) == 0) return &object->items[i];
  return NULL;
}

const char *jmcp_json_string(const jmcp_json *object, const char *key, const char *fallback) {
  const jmcp_json *v = jmcp_json_get(object, key);
  return v && v->kind == JMCP_JSON_STRING ? v->string : fallback;
}

double jmcp_json_number(const jmcp_json *object, const char *key, double fallback) {
  const jmcp_json *v = jmcp_json_get(object, key);
  return v && v->kind == JMCP_JSON_NUMBER ? v->number : fallback;
}

bool jmcp_json_bool(const jmcp_json *object, const char *key, bool fallback) {
  const jmcp_json *v = jmcp_json_get(object, key);
  return v && v->kind == JMCP_JSON_BOOL ? v->boolean : fallback;
}

/* ---- JSON writer ---- */

static void w_put(jmcp_writer *w, const char *s, size_t n) {
  buffer b = {w->data, w->len, w->cap};
  put_bytes(&b, s, n);
  w->data = b.data;
  w->len = b.len;
  w->cap = b.cap;
}

static void w_value(jmcp_writer *w) {
  if (w->after_key) {
    w->after_key = false;
    return;
  }
  if (w->depth > 0) {
    if (w->need_comma[w->depth]) w_put(w, ",", 1);
    w->need_comma[w->depth] = true;
  }
}

static void w_open(jmcp_writer *w, const char *bracket) {
  w_value(w);
  w_put(w, bracket, 1);
  if (w->depth + 1 >= (int)(sizeof w->need_comma / sizeof w->need_comma[0])) {
    w->failed = true;
    return;
  }
  w->need_comma[++w->depth] = false;
}

static void w_close(jmcp_writer *w, const char *bracket) {
  if (w->depth > 0) w->depth--;
  w_put(w, bracket, 1);
}

void jmcp_w_object(jmcp_writer *w) { w_open(w, "{"); }
void jmcp_w_end_object(jmcp_writer *w) { w_close(w, "}"); }
void jmcp_w_array(jmcp_writer *w) { w_open(w, "["); }
void jmcp_w_end_array(jmcp_writer *w) { w_close(w, "]"); }

static void w_quoted(jmcp_writer *w, const char *s, size_t len) {
  w_put(w, "\"", 1);
  size_t run = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    w_put(w, s + run, i - run);
    run = i + 1;
    char escaped[8];
    switch (c) {
      case '"': w_put(w, "\\\"", 2); break;
      case '\\': w_put(w, "\\\\", 2); break;
      case '\n': w_put(w, "\\n", 2); break;
      case '\r': w_put(w, "\\r", 2); break;
      case '\t': w_put(w, "\\t", 2); break;
      default:
        snprintf(escaped, sizeof escaped, "\\u%04x", c);
        w_put(w, escaped, 6);
    }
  }
  w_put(w, s + run, len - run);
  w_put(w, "\"", 1);
}

void jmcp_w_key(jmcp_writer *w, const char *key) {
  if (w->need_comma[w->depth]) w_put(w, ",", 1);
  w->need_comma[w->depth] = true;
  w_quoted(w, key, strlen(key));
  w_put(w, ":", 1);
  w->after_key = true;
}

void jmcp_w_string_n(jmcp_writer *w, const char *s, size_t len) {
  w_value(w);
  w_quoted(w, s, len);
}

void jmcp_w_string(jmcp_writer *w, const char *s) { jmcp_w_string_n(w, s, strlen(s)); }

void jmcp_w_int(jmcp_writer *w, long long n) {
  char text[32];
  w_value(w);
  w_put(w, text, (size_t)snprintf(text, sizeof text, "%lld", n));
}

void jmcp_w_number(jmcp_writer *w, double n) {
  char text[40];
  w_value(w);
  if (!isfinite(n)) {
    w_put(w, "null", 4); /* JSON has no NaN or infinity */
    return;
  }
  w_put(w, text, (size_t)snprintf(text, sizeof text, "%.17g", n));
}

void jmcp_w_bool(jmcp_writer *w, bool b) {
  w_value(w);
  w_put(w, b ? "true" : "false", b ? 4 : 5);
}

void jmcp_w_null(jmcp_writer *w) {
  w_value(w);
  w_put(w, "null", 4);
}

void jmcp_w_raw(jmcp_writer *w, const char *json) {
  w_value(w);
  w_put(w, json, strlen(json));
}

char *jmcp_w_finish(jmcp_writer *w) {
  char *out = w->data;
  if (w->failed) {
    free(out);
    out = NULL;
  }
  memset(w, 0, sizeof *w);
  return out;
}

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
  static const char *const kinds[] = {"not-granted", "not-available", "not-found", "conflict",
                                      "kernel",      "invalid",       "failed"};
  return e->tag < JMCP_COUNT(kinds) ? kinds[e->tag] : "failed";
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

bool exports_jupyter_mcp_extension_hooks_on_event(jmcp_event *event, jmcp_string *context,
                                                  wit_option_string_t *ret, jmcp_error *err) {
  memset(ret, 0, sizeof *ret);
  memset(err, 0, sizeof *err);
  bool ok = false;
  jmcp_json *parsed = parse_sent(context, "the hook context", err);
  if (parsed) {
    char *replacement = NULL;
    ok = jmcp_hooks_definition.on_event(event, parsed, &replacement, err);
    if (ok && replacement) {
      ret->is_some = true;
      take(&ret->val, replacement);
    } else {
      free(replacement);
    }
    jmcp_json_free(parsed);
  }
  jupyter_mcp_extension_types_hook_event_free(event);
  wit_string_free(context);
  return ok;
}

#endif /* JMCP_WORLD_HOOKS */
