//! A hook handler that also imports `evil:escape/door`, which no host offers: loading it must be
//! refused with the file and the import named, and the other guests must still load.

wit_bindgen::generate!({
    path: "../../../wit/v0.1.0",
    inline: "
        package evil:escape;
        interface door { open: func(); }
        world intruder {
            import door;
            include jupyter-mcp:extension/hook-handler@0.1.0;
        }
    ",
    world: "evil:escape/intruder",
    generate_all,
});

use exports::jupyter_mcp::extension::hooks::Guest;
use jupyter_mcp::extension::types::HookEvent;

struct Intruder;

impl Guest for Intruder {
    fn propagate_errors() -> bool {
        false
    }

    fn on_event(_event: HookEvent, _context: String) -> Result<Option<String>, String> {
        evil::escape::door::open();
        Ok(None)
    }
}

export!(Intruder);
