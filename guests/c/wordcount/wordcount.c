/* wordcount-c: counts the words in a notebook's cells through the granted `read-cells` host
 * function; also a resource (how it counts) and a prompt (trim a notebook to N words). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "jmcp.h"

static size_t count_words(const jmcp_string *text) {
  size_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < text->len; i++) {
    bool space = isspace(text->ptr[i]);
    if (!space && !in_word) words++;
    in_word = !space;
  }
  return words;
}

static bool word_count(const jmcp_json *args, jmcp_tool_result *ret, jmcp_error *err) {
  const char *notebook = jmcp_json_string(args, "notebook", "");
  const char *kind = jmcp_json_string(args, "kind", "all");
  bool code = strcmp(kind, "code") == 0, markdown = strcmp(kind, "markdown") == 0;
  if (!code && !markdown && strcmp(kind, "all") != 0)
    return jmcp_invalid_arguments(err, "kind must be 'code', 'markdown' or 'all', not '%s'", kind);

  jmcp_cells cells;
  jmcp_host_error refused;
  if (!jmcp_read_cells(notebook, &cells, &refused))
    return jmcp_host_failed(err, &refused); /* e.g. not-granted: the message names the grant */

  size_t words = 0, counted = 0;
  jmcp_writer out = {0};
  jmcp_w_object(&out);
  jmcp_w_key(&out, "cells");
  jmcp_w_array(&out);
  for (size_t i = 0; i < cells.len; i++) {
    const jmcp_cell *cell = &cells.ptr[i];
    if ((code && cell->kind != JUPYTER_MCP_EXTENSION_TYPES_CELL_KIND_CODE) ||
        (markdown && cell->kind != JUPYTER_MCP_EXTENSION_TYPES_CELL_KIND_MARKDOWN))
      continue;
    size_t n = count_words(&cell->source);
    words += n;
    counted++;
    jmcp_w_object(&out);
    jmcp_w_key(&out, "id");
    jmcp_w_string_n(&out, (const char *)cell->id.ptr, cell->id.len);
    jmcp_w_key(&out, "words");
    jmcp_w_int(&out, (long long)n);
    jmcp_w_end_object(&out);
  }
  jmcp_w_end_array(&out);
  jmcp_w_key(&out, "words");
  jmcp_w_int(&out, (long long)words);
  jmcp_w_end_object(&out);
  jmcp_cells_free(&cells);

  jmcp_structured(ret, jmcp_w_finish(&out));
  return jmcp_text(ret, "%zu words in %zu cells", words, counted);
}

static bool rules(const char *uri, jmcp_resource_contents *ret, jmcp_error *err) {
  (void)err;
  jmcp_resource_text(ret, uri, "text/plain",
                     "A word is a run of characters between whitespace, in the cell's source.");
  return true;
}

static bool trim_to(const jmcp_json *args, jmcp_prompt_result *ret, jmcp_error *err) {
  const char *limit = jmcp_json_string(args, "limit", NULL);
  if (!limit) return jmcp_invalid_arguments(err, "the prompt needs 'limit', a number of words");
  jmcp_prompt_text(ret, false,
                   "Call word_count on this notebook, then shorten its markdown cells until the "
                   "notebook has at most %s words.", limit);
  return true;
}

static const jmcp_tool TOOLS[] = {{
    .name = "word_count",
    .description = "Counts the words in the cells of a notebook (\"\" or no notebook: the current one).",
    .input_schema = "{\"type\": \"object\", \"properties\": {"
                    "\"notebook\": {\"type\": \"string\"},"
                    "\"kind\": {\"type\": \"string\", \"enum\": [\"all\", \"code\", \"markdown\"]}}}",
    .read_only = JMCP_YES,
    .call = word_count,
}};

static const jmcp_resource RESOURCES[] = {{
    .uri = "wordcount-c://rules",
    .name = "wordcount-c-rules",
    .description = "How word_count counts.",
    .mime_type = "text/plain",
    .read = rules,
}};

static const jmcp_prompt_argument LIMIT[] = {{"limit", "The most words to keep.", true}};

static const jmcp_prompt PROMPTS[] = {{
    .name = "trim_to_words",
    .description = "Asks to shorten the notebook to a number of words.",
    .arguments = JMCP_ITEMS(LIMIT),
    .get = trim_to,
}};

JMCP_EXTENSION(.name = "wordcount-c", .version = "0.1.0", .tools = JMCP_ITEMS(TOOLS),
               .resources = JMCP_ITEMS(RESOURCES), .prompts = JMCP_ITEMS(PROMPTS));
