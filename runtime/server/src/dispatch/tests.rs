use super::*;
use crate::tools::{ToolFuture, ToolOutput, declare};
use schemars::JsonSchema;
use server_core::capabilities::{ADOPT_SESSION, Settings};

#[derive(serde::Deserialize, JsonSchema)]
struct NoArgs {}

#[test]
fn gated_tools_are_hidden_and_refused_while_their_capability_is_off() {
    let mut registry = ToolRegistry::default();
    let gated = declare("adopt_things", "test")
        .read_only()
        .run(|_c, _a: NoArgs| async { Ok(ToolOutput::text("ok")) });
    registry.insert(
        declare("open_tool", "test")
            .read_only()
            .run(|_c, _a: NoArgs| async { Ok(ToolOutput::text("ok")) }),
    );
    let spec = ToolSpec {
        capability: Some(ADOPT_SESSION.into()),
        ..gated.spec().clone()
    };
    struct Gated(ToolSpec);
    impl Tool for Gated {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        fn call(&self, _c: ToolContext, _a: JsonObject) -> ToolFuture<'_> {
            Box::pin(async { Ok(ToolOutput::text("ran")) })
        }
    }
    registry.insert(Arc::new(Gated(spec.clone())));
    let off = Capabilities::build(&[], &Settings::default()).unwrap();
    let names: Vec<_> = registry
        .visible(&off)
        .iter()
        .map(|t| t.spec().name.clone())
        .collect();
    assert_eq!(names, vec!["open_tool"]);
    assert!(
        refusal(&spec, &off)
            .unwrap()
            .contains("'kernel.adopt-session'")
    );
    let on = Capabilities::build(
        &[],
        &Settings {
            cli: vec![ADOPT_SESSION.into()],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(registry.visible(&on).len(), 2);
    assert!(refusal(&spec, &on).is_none());
}

struct Owned(ToolSpec, &'static str);
impl Tool for Owned {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn extension_name(&self) -> Option<&str> {
        Some(self.1)
    }
    fn call(&self, _c: ToolContext, _a: JsonObject) -> ToolFuture<'_> {
        Box::pin(async { Ok(ToolOutput::text("ran")) })
    }
}

#[test]
fn an_extensions_tools_are_replaced_in_one_change_and_core_names_stay_refused() {
    let registry = ToolRegistry::builtin();
    let spec = |name: &str| ToolSpec {
        name: name.into(),
        ..registry.get("list_files").unwrap().spec().clone()
    };
    let tool =
        |name: &str, owner: &'static str| Arc::new(Owned(spec(name), owner)) as Arc<dyn Tool>;
    registry.add(tool("x_old", "x")).unwrap();
    registry.add(tool("x_kept", "x")).unwrap();
    let mut changes = registry.changes();
    let before = *changes.borrow_and_update();
    let refused = registry.replace_extension(
        "x",
        vec![
            tool("x_kept", "x"),
            tool("x_new", "x"),
            tool("list_files", "x"),
        ],
    );
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, "list_files");
    assert_eq!(
        *changes.borrow_and_update(),
        before + 1,
        "one change for the whole replacement"
    );
    assert_eq!(registry.names_of("x"), ["x_kept", "x_new"]);
    assert_eq!(registry.get("list_files").unwrap().extension_name(), None);
    registry.replace_extension("x", Vec::new());
    assert!(registry.names_of("x").is_empty());
}

#[test]
fn toolsets_select_and_view_by_name_and_refuse_unknown_names() {
    let names = |r: &ToolRegistry| r.names().join(",");
    let mut registry = ToolRegistry::builtin();
    let all = registry.names().len();
    let view = registry
        .view(&["notebooks".into(), "list_files".into()])
        .unwrap();
    assert!(view.allows("use_notebook") && view.allows("read_file"));
    let unknown = registry.view(&["nope".into()]).unwrap_err().to_string();
    assert!(unknown.contains("'nope'") && unknown.contains("list_files, list_kernels"));
    registry.select(&[], &[]).unwrap();
    assert_eq!(registry.names().len(), all);
    let error = registry
        .clone()
        .select(&["list_files".into()], &["list_files".into()])
        .unwrap_err();
    assert!(matches!(error, UnknownToolNames::NoneLeft { .. }));
    assert!(registry.clone().select(&["x".into()], &[]).is_err());
    let mut narrowed = registry.clone();
    narrowed
        .select(&["notebooks".into()], &["execute_code".into()])
        .unwrap();
    assert_eq!(narrowed.names().len(), all - 1);
    registry
        .select(&["read_file".into(), "write_file".into()], &[])
        .unwrap();
    assert_eq!(names(&registry), "read_file,write_file");
}

#[test]
fn a_tokens_scopes_narrow_the_view_to_what_it_may_call() {
    use crate::tools::scope::{Grant, Scope};
    let registry = ToolRegistry::builtin();
    let spec = |name: &str| registry.get(name).unwrap().spec().clone();
    let reader = ToolView::default().with_grant(Grant::from_scope_text("notebooks:read"));
    assert!(reader.admits(&spec("read_cell")) && reader.admits(&spec("list_kernels")));
    assert_eq!(
        reader.missing_scope(&spec("execute_code")),
        Some(Scope::CodeExecute)
    );
    assert_eq!(
        reader.missing_scope(&spec("write_file")),
        Some(Scope::NotebooksWrite)
    );
    assert!(!reader.admits(&spec("connect_to_jupyter")));
    // Names and scopes together: `?only=` and a token both narrow.
    let only = registry
        .view(&["read_cell".into(), "execute_code".into()])
        .unwrap()
        .with_grant(Grant::from_scope_text("notebooks:read code:execute"));
    assert!(only.admits(&spec("execute_code")) && !only.admits(&spec("list_kernels")));
    // Without a token (static token, Hub mode) the view is only its names.
    assert!(ToolView::default().admits(&spec("connect_to_jupyter")));
}
