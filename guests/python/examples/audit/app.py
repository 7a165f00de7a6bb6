"""A critical hook handler in Python: logs every tool call and how it ended through the host's
log, and asks the person before code that installs packages with pip runs. Build (from
guests/python):
componentize-py -d ../../wit/v0.3.0 -w hook-handler componentize -p . -p examples/audit app -o audit.wasm
"""

from jupyter_mcp_extension import Hooks, confirm, log
from componentize_py_types import Ok

# Critical, so that the host honours its confirmation; it fails no call otherwise.
audit = Hooks(propagate_errors=True)


@audit.on("before_tool_call")
def before(call, context):
    log.info(f"audit-py: tool {call.tool_name} called with {call.arguments}")
    # The before and after events of one call share this context.
    return {**context, "seen": True}


@audit.on("after_tool_call")
def after(call, context):
    how = "succeeded" if isinstance(call.outcome, Ok) else f"failed: {call.outcome.value}"
    print(f"audit-py: tool {call.tool_name} {how} ({'paired' if context.get('seen') else 'unpaired'})")


@audit.on("before_execute")
def execute(execution, context):
    # The host asks the person through the client; a no (or a client that cannot ask) refuses.
    if "%pip install" in execution.code or "!pip install" in execution.code:
        return confirm("the code installs packages with pip")


@audit.on("kernel_lifecycle")
def kernel(change, context):
    log.info(f"audit-py: kernel {change.kernel_id} {type(change.change).__name__.split('_')[-1].lower()}")


Hooks = audit.export()
