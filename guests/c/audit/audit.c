/* A hook handler in C: logs every event through the host's `log`, carries the tool's name
 * from before_tool_call to after_tool_call in the call's context, and asks the person before
 * code that installs packages with pip runs. Critical, so that the host honours its
 * confirmation; it fails no call otherwise. */
#include <stdlib.h>
#include <string.h>

#include "jmcp.h"

static bool on_event(const jmcp_event *event, const jmcp_json *context, jmcp_reply *reply,
                     jmcp_error *err) {
  (void)err;
  switch (event->tag) {
    case JUPYTER_MCP_EXTENSION_TYPES_HOOK_EVENT_BEFORE_TOOL_CALL: {
      char *tool = jmcp_cstr(&event->val.before_tool_call.tool_name);
      jmcp_log(JMCP_INFO, "c-audit: before_tool_call %s", tool);
      jmcp_writer w = {0};
      jmcp_w_object(&w);
      jmcp_w_key(&w, "tool");
      jmcp_w_string(&w, tool);
      jmcp_w_end_object(&w);
      reply->context = jmcp_w_finish(&w);
      free(tool);
      return true;
    }
    case JUPYTER_MCP_EXTENSION_TYPES_HOOK_EVENT_AFTER_TOOL_CALL: {
      bool failed = event->val.after_tool_call.outcome.is_err;
      jmcp_log(JMCP_INFO, "c-audit: after_tool_call %s %s",
               jmcp_json_string(context, "tool", "(no context)"), failed ? "failed" : "ok");
      return true;
    }
    case JUPYTER_MCP_EXTENSION_TYPES_HOOK_EVENT_BEFORE_EXECUTE: {
      char *code = jmcp_cstr(&event->val.before_execute.code);
      jmcp_log(JMCP_INFO, "c-audit: before_execute %zu bytes of code", event->val.before_execute.code.len);
      /* The host asks the person through the client; a no (or a client that cannot ask) refuses. */
      if (strstr(code, "%pip install") || strstr(code, "!pip install"))
        jmcp_confirm(reply, "the code installs packages with pip");
      free(code);
      return true;
    }
    default:
      jmcp_log(JMCP_INFO, "c-audit: %s", jmcp_event_name(event));
      return true;
  }
}

JMCP_HOOKS(.propagate_errors = true, .on_event = on_event);
