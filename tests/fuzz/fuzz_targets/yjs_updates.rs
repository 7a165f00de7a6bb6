//! Updates arriving from a collaboration room: applying one fails cleanly or leaves a document
//! we can still read and edit.
//!
//! yrs asserts on some malformed updates (a client id over 53 bits, found here) and can panic
//! later writing to a document built from one (also found here); `YNotebook` contains those
//! panics and reports errors. libfuzzer-sys counts every
//! panic as a crash, even a caught one, so this target puts the default hook back: what it checks
//! is that no panic escapes our code.
#![no_main]

use jupyter_client::document::Edit;
use jupyter_client::document::ynotebook::YNotebook;
use notebook_format::notebook::{Cell, CellType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        std::panic::set_hook(Box::new(|_| {}));
    },
    |data: &[u8]| {
        let notebook = YNotebook::new();
        if notebook.apply_update(data).is_err() {
            return;
        }
        // yrs can also fail later, writing to a document built from such an update (found
        // here); write and read report that as an error, which is what is checked.
        if notebook.read().is_ok()
            && notebook
                .write(&[Edit::Insert {
                    index: 0,
                    cell: Cell::new(CellType::Code, "x = 1"),
                }])
                .is_ok()
        {
            let _ = notebook.read();
        }
    }
);
