use super::distribution::component_file::check_header;
use super::distribution::imports;
use super::*;

/// Tests that need the built guests are `#[ignore]`d with this reason, so a bare
/// `cargo test` reports them as skipped; tests/run builds the guests and runs them with
/// `--include-ignored`, and then a missing guest directory fails them.
const NEEDS_GUESTS: &str = "needs the built guests (guests/build); tests/run runs it";

/// The policy example, built by `guests/build` (tests/run sets the variable).
fn policy_guest() -> PathBuf {
    let dir = std::env::var_os("JUPYTER_MCP_GUESTS_DIR")
        .unwrap_or_else(|| panic!("JUPYTER_MCP_GUESTS_DIR is not set: this test {NEEDS_GUESTS}"));
    PathBuf::from(dir).join("policy.wasm")
}

fn host() -> WasmHost {
    let cache = std::env::temp_dir().join(format!("jmcp-wasm-unit-{}", std::process::id()));
    WasmHost::new(Some(cache)).unwrap()
}

#[test]
fn headers_say_what_a_file_is() {
    assert!(
        check_header(b"hello world")
            .unwrap_err()
            .contains("not a WebAssembly file")
    );
    assert!(
        check_header(b"\0asm\x01\0\0\0")
            .unwrap_err()
            .contains("core WebAssembly module")
    );
    assert_eq!(check_header(b"\0asm\x0d\0\x01\0"), Ok(()));
}

#[test]
#[ignore = "needs the built guests (guests/build); tests/run runs it"]
fn a_missing_import_is_refused_before_anything_is_compiled() {
    let dir = policy_guest().parent().map(Path::to_path_buf).unwrap();
    let cache = std::env::temp_dir().join(format!("jmcp-imports-{}", std::process::id()));
    let host = WasmHost::new(Some(cache.clone())).unwrap();
    let started = std::time::Instant::now();
    let refused = host
        .template(
            &dir.join("unknown-import.wasm"),
            Arc::new(GuestSettings::for_tests("intruder")),
        )
        .err()
        .unwrap();
    let took = started.elapsed();
    assert!(
        refused.contains("it imports evil:escape/door, which this host does not offer"),
        "{refused}"
    );
    assert!(
        refused.contains("wasi:io/{error,poll,streams}")
            && refused.contains("jupyter-mcp:extension/{types,log,config,notebook}@0.1.x"),
        "{refused}"
    );
    // Nothing was compiled (so nothing cached), and the refusal took no compile's time.
    let compiled = std::fs::read_dir(&cache)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        })
        .unwrap_or(false);
    assert!(!compiled, "a refused guest was compiled");
    let _ = std::fs::remove_dir_all(&cache);
    assert!(took < Duration::from_secs(1), "{took:?}");
}

/// `bytes` with a custom section appended (valid anywhere in a component).
fn with_custom_section(mut bytes: Vec<u8>, name: &str, data: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(data);
    bytes.push(0);
    leb(payload.len(), &mut bytes);
    bytes.extend(payload);
    bytes
}

#[test]
#[ignore = "needs the built guests (guests/build); tests/run runs it"]
fn an_sdk_guest_speaks_0_3_0_and_declares_resources_and_prompts() {
    let dir = policy_guest().parent().map(Path::to_path_buf).unwrap();
    let bytes = std::fs::read(dir.join("wordcount.wasm")).unwrap();
    // The SDK stamps the version it builds against; it survives the component's making.
    let stamps: Vec<Vec<u8>> = wasmtime::wasmparser::Parser::new(0)
        .parse_all(&bytes)
        .filter_map(|payload| match payload.ok()? {
            wasmtime::wasmparser::Payload::CustomSection(section)
                if section.name() == imports::API_VERSION_SECTION =>
            {
                Some(section.data().to_vec())
            }
            _ => None,
        })
        .collect();
    assert_eq!(stamps, [b"0.3.0".to_vec()]);
    assert_eq!(
        imports::check(&bytes, API_VERSION),
        Ok(()),
        "a current guest loads"
    );
    let loaded = host()
        .load(&ExtensionConfig::with_defaults(dir.join("wordcount.wasm")))
        .unwrap();
    assert_eq!(
        loaded.hook_critical,
        Some(false),
        "an optional hook handler"
    );
    let extension = loaded.manifest.extension.clone().unwrap();
    assert_eq!(extension.name, "wordcount", "named after its package");
    let tools: Vec<&str> = extension.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["word_count", "replace_word"]);
    let schema: serde_json::Value = serde_json::from_str(&extension.tools[1].input_schema).unwrap();
    assert_eq!(schema["type"], "object");
    assert_eq!(
        schema["required"],
        serde_json::json!(["cell_id", "word", "replacement"])
    );
    assert!(extension.tools[0].output_schema.is_some());
    let served = &extension.served;
    assert_eq!(served.resources[0].uri, "wordcount://current");
    assert_eq!(
        served.resource_templates[0].uri_template,
        "wordcount://notebooks/{name}"
    );
    assert_eq!(served.prompts[0].listing.name, "word_budget");
    loaded.guest.stop();
    // A 0.1.0 guest declares none of them.
    let hello = host()
        .load(&ExtensionConfig::with_defaults(dir.join("hello.wasm")))
        .unwrap();
    let extension = hello.manifest.extension.clone().unwrap();
    assert!(extension.served.is_empty());
    hello.guest.stop();
}

#[test]
#[ignore = "needs the built guests (guests/build); tests/run runs it"]
fn a_guest_newer_than_the_host_is_refused_naming_both_versions() {
    let dir = policy_guest().parent().map(Path::to_path_buf).unwrap();
    // Built against a WIT 0.4.0 (its imports and exports say so).
    let refused = host()
        .load(&ExtensionConfig::with_defaults(dir.join("too-new.wasm")))
        .err()
        .unwrap()
        .to_string();
    assert!(
        refused.contains(
            "built against WIT jupyter-mcp:extension@0.4.0, newer than this \
             server's API version 0.3.0"
        ) && refused.contains("rebuild the guest against wit/v0.3.0"),
        "{refused}"
    );
    // Stamped newer by its SDK, though its imports would link.
    let hello = std::fs::read(dir.join("hello.wasm")).unwrap();
    let stamped = with_custom_section(hello, imports::API_VERSION_SECTION, b"0.4.1");
    let refused = imports::check(&stamped, API_VERSION).unwrap_err();
    assert!(refused.contains("jupyter-mcp:extension@0.4.1"), "{refused}");
}

#[test]
fn unknown_grants_are_refused() {
    let mut entry = ExtensionConfig::with_defaults("x.wasm".into());
    entry.grants = vec!["format-disk".into()];
    let err = host().load(&entry).err().unwrap();
    assert!(
        err.to_string()
            .contains("'format-disk', which is no host function"),
        "{err}"
    );
}

#[test]
#[ignore = "needs the built guests (guests/build); tests/run runs it"]
fn a_guest_calling_into_itself_is_refused_not_deadlocked() {
    let path = policy_guest();
    let loaded = host().load(&ExtensionConfig::with_defaults(path)).unwrap();
    assert_eq!(loaded.hook_critical, Some(true));
    let guest = loaded.guest.clone();
    let inner = guest.clone();
    let critical = GuestApi::propagate_errors;
    // A call made from the guest's own thread, as a host function firing the guest's own
    // hook would make it.
    let nested = guest
        .call_blocking(CallKind::Load, move |_, _| {
            Ok(inner.call_blocking(CallKind::Load, critical))
        })
        .unwrap();
    assert!(
        matches!(nested, Err(GuestError::Reentrant { .. })),
        "{nested:?}"
    );
    // And the guest still answers.
    assert_eq!(guest.call_blocking(CallKind::Load, critical), Ok(true));
    guest.stop();
}
