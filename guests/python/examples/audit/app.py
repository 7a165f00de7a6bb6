"""An optional hook handler in Python: logs every tool call and how it ended through the host's
log. Build (from guests/python):
componentize-py -d ../../wit/v0.2.0 -w hook-handler componentize -p . -p examples/audit app -o audit.wasm
"""

from jupyter_mcp_extension import Hooks, log
from componentize_py_types import Ok

audit = Hooks(propagate_errors=False)  # auditing must never break a call


@audit.on("before_tool_call")
def before(call, context):
    log.info(f"audit-py: tool {call.tool_name} called with {call.arguments}")
    # The before and after events of one call share this context.
    return {**context, "seen": True}


@audit.on("after_tool_call")
def after(call, context):
    how = "succeeded" if isinstance(call.outcome, Ok) else f"failed: {call.outcome.value}"
    print(f"audit-py: tool {call.tool_name} {how} ({'paired' if context.get('seen') else 'unpaired'})")


@audit.on("kernel_lifecycle")
def kernel(change, context):
    log.info(f"audit-py: kernel {change.kernel_id} {type(change.change).__name__.split('_')[-1].lower()}")


Hooks = audit.export()
