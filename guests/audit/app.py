"""An optional hook handler in Python: logs every tool call, and how it ended, through the host's
logging import. Build: componentize-py -d wit/v0.1.0 -w hook-handler componentize app -o audit.wasm
"""

import json

from wit_world import exports
from wit_world.imports import log
from wit_world.imports.types import HookEvent_AfterToolCall, HookEvent_BeforeToolCall


class Hooks(exports.Hooks):
    def propagate_errors(self) -> bool:
        # Auditing must never break a call.
        return False

    def on_event(self, event, context: str):
        if isinstance(event, HookEvent_BeforeToolCall):
            call = event.value
            log.log(log.Level.INFO, f"audit: tool {call.tool_name} called with {call.arguments}")
            # Counted here and read back in the after event: the pair shares this context.
            state = json.loads(context)
            state["audit_seen"] = True
            return json.dumps(state)
        if isinstance(event, HookEvent_AfterToolCall):
            call = event.value
            paired = json.loads(context).get("audit_seen", False)
            outcome = f"failed: {call.error}" if call.error is not None else "succeeded"
            log.log(
                log.Level.INFO,
                f"audit: tool {call.tool_name} {outcome} (paired with its before event: {paired})",
            )
        return None
