//! Notebook files: parsing fails cleanly, or what we write parses again to the same notebook.
#![no_main]

use notebook_format::notebook::Notebook;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(notebook) = Notebook::parse(text) {
        let written = notebook.to_ipynb();
        let again = Notebook::parse(&written).expect("what we write parses");
        assert_eq!(again.to_ipynb(), written, "writing is stable");
    }
});
