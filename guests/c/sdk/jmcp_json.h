/* The C SDK's JSON reader and writer, and printf into the heap: plain C with no tie to the
 * WIT bindings (jmcp.h includes it; tests/test_sdk_c_go.py runs it natively under sanitizers). */
#ifndef JMCP_JSON_H
#define JMCP_JSON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* printf into a malloc'ed string (the caller frees it); NULL only when out of memory. */
char *jmcp_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *jmcp_vformat(const char *fmt, va_list args);

/* ---- JSON: a small reader (a tree) and writer ---- */

typedef enum {
  JMCP_JSON_NULL,
  JMCP_JSON_BOOL,
  JMCP_JSON_NUMBER,
  JMCP_JSON_STRING,
  JMCP_JSON_ARRAY,
  JMCP_JSON_OBJECT,
} jmcp_json_kind;

typedef struct jmcp_json jmcp_json;
struct jmcp_json {
  jmcp_json_kind kind;
  bool boolean;
  double number;
  /* JMCP_JSON_STRING: the decoded text, NUL-terminated (`length` bytes; may contain NUL). */
  char *string;
  /* Arrays and objects: `length` items; objects also have `keys` (decoded, NUL-terminated). */
  size_t length;
  jmcp_json *items;
  char **keys;
};

/* Parses `len` bytes of JSON. NULL on bad input, with a malloc'ed reason in *error when
 * `error` is not NULL. Nesting deeper than 64 levels is refused. */
jmcp_json *jmcp_json_parse(const char *text, size_t len, char **error);
void jmcp_json_free(jmcp_json *value);
/* The member `key` of an object; NULL when absent or when `object` is not an object. */
const jmcp_json *jmcp_json_get(const jmcp_json *object, const char *key);
/* Member lookups with a fallback for a missing member or one of another type. */
const char *jmcp_json_string(const jmcp_json *object, const char *key, const char *fallback);
double jmcp_json_number(const jmcp_json *object, const char *key, double fallback);
bool jmcp_json_bool(const jmcp_json *object, const char *key, bool fallback);

/* Writes JSON into a growing buffer; commas are placed for you. */
typedef struct {
  char *data;
  size_t len, cap;
  int depth;
  bool need_comma[64];
  bool after_key;
  bool failed;
} jmcp_writer;

void jmcp_w_object(jmcp_writer *w);
void jmcp_w_end_object(jmcp_writer *w);
void jmcp_w_array(jmcp_writer *w);
void jmcp_w_end_array(jmcp_writer *w);
void jmcp_w_key(jmcp_writer *w, const char *key);
void jmcp_w_string(jmcp_writer *w, const char *s);
void jmcp_w_string_n(jmcp_writer *w, const char *s, size_t len);
void jmcp_w_int(jmcp_writer *w, long long n);
void jmcp_w_number(jmcp_writer *w, double n);
void jmcp_w_bool(jmcp_writer *w, bool b);
void jmcp_w_null(jmcp_writer *w);
/* Inserts text that already is JSON. */
void jmcp_w_raw(jmcp_writer *w, const char *json);
/* The text, malloc'ed and NUL-terminated (the caller owns it); NULL when out of memory. */
char *jmcp_w_finish(jmcp_writer *w);

#endif
