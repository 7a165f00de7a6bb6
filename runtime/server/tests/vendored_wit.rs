//! The Rust SDK carries its own copy of the WIT (so it builds outside this repository); it must
//! be the released `wit/v<version>` it claims to build against, byte for byte.

use std::path::Path;

#[test]
fn the_sdk_vendors_the_wit_it_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sdk = std::fs::read_to_string(root.join("guests/sdk/src/lib.rs")).unwrap();
    let version = sdk
        .lines()
        .find_map(|l| l.strip_prefix("pub const API_VERSION: &str = \""))
        .and_then(|rest| rest.strip_suffix("\";"))
        .expect("the SDK names its API version");
    let vendored = std::fs::read_to_string(root.join("guests/sdk/wit/extension.wit")).unwrap();
    let released =
        std::fs::read_to_string(root.join(format!("wit/v{version}/extension.wit"))).unwrap();
    assert!(
        vendored == released,
        "guests/sdk/wit/extension.wit differs from wit/v{version}/extension.wit: copy the \
         released file into the SDK (cp wit/v{version}/extension.wit guests/sdk/wit/)"
    );
    assert!(released.contains(&format!("package jupyter-mcp:extension@{version};")));
}
