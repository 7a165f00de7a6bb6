/* The C SDK's JSON reader and writer, and printf into the heap (see jmcp_json.h). */
#include "jmcp_json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
