use super::*;

fn settings(config: &[(&str, bool)], env: Option<&str>, cli: &[&str]) -> Settings {
    Settings {
        config: config.iter().map(|(n, e)| (n.to_string(), *e)).collect(),
        env: env.map(str::to_owned),
        cli: cli.iter().map(|s| s.to_string()).collect(),
    }
}

fn extension(name: &str, caps: &[(&str, bool)]) -> (String, Result<Vec<Declaration>, String>) {
    let declarations = caps
        .iter()
        .map(|(n, e)| Declaration {
            name: n.to_string(),
            description: "test".into(),
            enabled: *e,
        })
        .collect();
    (name.to_owned(), Ok(declarations))
}

#[test]
fn values_parse_like_the_spec() {
    assert_eq!(parse_setting("a.b"), Some(("a.b".into(), true)));
    for off in ["off", "FALSE", "0", "No", " disabled "] {
        assert_eq!(
            parse_setting(&format!("a.b={off}")),
            Some(("a.b".into(), false)),
            "{off}"
        );
    }
    assert_eq!(parse_setting("a.b=whatever"), Some(("a.b".into(), true)));
    assert_eq!(parse_setting("  "), None);
}

#[test]
fn defaults_are_off_but_compact_output() {
    let registry = Capabilities::build(&[], &Settings::default()).unwrap();
    assert!(!registry.enabled(AUTO_RESTART));
    assert_eq!(registry.get(ADOPT_SESSION).unwrap().source, Source::Default);
    assert_eq!(registry.block()["capabilities"], json!([COMPACT_OUTPUT]));
    let off = Capabilities::build(&[], &settings(&[], None, &["output.compact=off"])).unwrap();
    assert!(!off.enabled(COMPACT_OUTPUT));
    assert_eq!(off.block()["capabilities"], json!([]));
    assert_eq!(registry.block()["version"], "1");
}

#[test]
fn precedence_later_wins_and_operators_beat_extensions() {
    let ext = [extension("snap", &[("snap.snapshots", true)])];
    let r = Capabilities::build(&ext, &settings(&[(AUTO_RESTART, true)], None, &[])).unwrap();
    assert_eq!(r.get(AUTO_RESTART).unwrap().source, Source::Config);
    assert!(r.enabled("snap.snapshots"));
    assert_eq!(
        r.get("snap.snapshots").unwrap().source,
        Source::Extension("snap".into())
    );
    let r = Capabilities::build(
        &ext,
        &settings(
            &[(AUTO_RESTART, true)],
            Some("kernel.auto-restart=off, ,snap.snapshots=off"),
            &["kernel.auto-restart"],
        ),
    )
    .unwrap();
    assert!(r.enabled(AUTO_RESTART));
    assert_eq!(r.get(AUTO_RESTART).unwrap().source, Source::Cli);
    assert!(
        !r.enabled("snap.snapshots"),
        "an operator turns off what an extension turned on"
    );
    assert_eq!(r.get("snap.snapshots").unwrap().source, Source::Env);
    assert_eq!(
        r.block()["capabilities"],
        json!(["kernel.auto-restart", COMPACT_OUTPUT])
    );
}

#[test]
fn a_redeclaration_replaces_an_extensions_capabilities_and_keeps_operator_settings() {
    let ext = [extension("snap", &[("snap.a", true), ("snap.b", true)])];
    let r = Capabilities::build(&ext, &settings(&[("snap.a", false)], None, &[])).unwrap();
    let mut changes = r.changes();
    changes.borrow_and_update();
    // The next version drops snap.b, adds snap.c and still declares snap.a on.
    r.redeclare(
        "snap",
        &extension("snap", &[("snap.a", true), ("snap.c", true)]).1,
    );
    assert!(changes.has_changed().unwrap());
    let a = r.get("snap.a").unwrap();
    assert_eq!((a.enabled, a.source), (false, Source::Config));
    assert!(r.get("snap.b").is_none());
    assert!(r.enabled("snap.c"));
    r.withdraw("snap");
    assert!(r.get("snap.a").is_none() && r.get("snap.c").is_none());
    assert!(r.get(AUTO_RESTART).is_some(), "the core stays");
}

#[test]
fn unknown_names_list_what_exists() {
    let err = Capabilities::build(&[], &settings(&[], None, &["kernel.autorestart"])).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("'kernel.autorestart'") && text.contains("--capability"));
    assert!(text.contains("kernel.adopt-session, kernel.auto-restart"));
    assert!(Capabilities::build(&[], &settings(&[], Some("nope.x"), &[])).is_err());
}

#[test]
fn extension_declarations_follow_the_rules() {
    let r = Capabilities::default();
    let decl = |n: &str| Declaration {
        name: n.into(),
        description: "d".into(),
        enabled: true,
    };
    assert!(r.declare("e1", decl("nodot")).is_err());
    assert!(r.declare("e1", decl("kernel.mine")).is_err());
    assert!(r.declare("e1", decl("server.x")).is_err());
    assert!(r.declare("e1", decl("e1.feature")).is_ok());
    assert!(r.declare("e1", decl("e1.feature")).is_err());
    let foreign = r.declare("e2", decl("e1.other")).unwrap_err();
    assert!(foreign.to_string().contains("under its own identity only"));
    assert!(r.declare("alpha", decl("beta.on")).is_err());
    assert!(r.declare("alpha", decl("alphabet.x")).is_err());
    assert!(r.declare("alpha", decl("alpha.x.y")).is_ok());
    // One extension failing costs only its own declarations.
    let exts = [
        ("bad".to_string(), Err("trap".to_string())),
        extension("good", &[("good.x", false)]),
    ];
    let built = Capabilities::build(&exts, &Settings::default()).unwrap();
    assert!(built.get("good.x").is_some());
}
