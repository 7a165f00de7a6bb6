//! How flags, environment and the config file resolve into a `Config`.

use super::*;
use clap::Parser as _;

fn start_args(argv: &[&str]) -> StartArgs {
    let mut full = vec!["jupyter-mcp-server", "start"];
    full.extend_from_slice(argv);
    match Cli::try_parse_from(full).unwrap().command {
        Some(Command::Start(args)) => *args,
        other => panic!("expected start, got {other:?}"),
    }
}

#[test]
fn booleans_follow_the_python_server() {
    for yes in ["1", "true", "T", "yes", "y", "ON"] {
        assert_eq!(parse_bool(yes), Ok(true), "{yes}");
    }
    for no in ["0", "false", "f", "No", "n", "off"] {
        assert_eq!(parse_bool(no), Ok(false), "{no}");
    }
    assert!(parse_bool("maybe").unwrap_err().contains("maybe"));
}

#[test]
fn timeouts_resolve_and_clamp() {
    let limits = ExecutionLimits {
        default_timeout: Duration::from_secs(120),
        max_timeout: Duration::from_secs(3600),
        keepalive: Duration::from_secs(30),
        memory_budget: server_core::domain::executions::DEFAULT_MEMORY_BUDGET,
    };
    assert_eq!(limits.resolve(0.0), Duration::from_secs(120));
    assert_eq!(limits.resolve(30.0), Duration::from_secs(30));
    assert_eq!(limits.resolve(99_999.0), Duration::from_secs(3600));
    assert_eq!(limits.resolve(-5.0), Duration::from_secs(120));
}

#[test]
fn defaults_and_embedded_jupyter() {
    let config = Config::from_args_and_env(start_args(&[]), |_| None).unwrap();
    assert_eq!(config.transport, Transport::Stdio);
    assert!(matches!(config.jupyter, JupyterSource::Embedded { .. }));
    assert_eq!(config.execution.default_timeout, Duration::from_secs(120));
    assert_eq!(config.execution.max_timeout, Duration::from_secs(3600));
    assert_eq!(config.output.max_chars, 50_000);
    assert!(config.output.allow_images);
    assert_eq!(config.http.port, 4040);
}

#[test]
fn image_output_can_be_switched_off() {
    let config = Config::from_args_and_env(start_args(&[]), |n| {
        (n == "ALLOW_IMG_OUTPUT").then(|| "false".into())
    })
    .unwrap();
    assert!(!config.output.allow_images);
    let err = Config::from_args_and_env(start_args(&[]), |_| Some("perhaps".into())).unwrap_err();
    assert!(err.to_string().contains("ALLOW_IMG_OUTPUT"));
}

#[test]
fn hub_mode_serves_http_under_the_service_environment() {
    let env = |name: &str| {
        (name == "JUPYTERHUB_SERVICE_URL").then(|| "http://127.0.0.1:10101".to_owned())
    };
    let config = Config::from_args_and_env(
        start_args(&[
            "--jupyterhub-url",
            "http://127.0.0.1:8000",
            "--jupyterhub-service-prefix",
            "/services/mcp",
        ]),
        env,
    )
    .unwrap();
    assert_eq!(config.transport, Transport::StreamableHttp);
    assert_eq!(
        (config.http.host.as_str(), config.http.port),
        ("127.0.0.1", 10101)
    );
    assert_eq!(config.http.prefix, "/services/mcp/");
    let JupyterSource::Hub(hub) = config.jupyter else {
        panic!("Hub mode expected");
    };
    assert_eq!(hub.api.as_str(), "http://127.0.0.1:8000/hub/api/");
    // Our own flags win over the service's address.
    let config = Config::from_args_and_env(
        start_args(&["--jupyterhub-url", "http://h:8000", "--port", "5000"]),
        env,
    )
    .unwrap();
    assert_eq!(config.http.port, 5000);
    assert_eq!(config.http.prefix, "/");
}

/// In a single-user pod JUPYTERHUB_SERVICE_URL is the notebook server's `0.0.0.0`: outside
/// Hub mode and a managed service it moves nothing, and every interface is never a default.
#[test]
fn the_service_address_binds_only_a_hub_service_and_never_everywhere() {
    let pod = |name: &str| {
        (name == "JUPYTERHUB_SERVICE_URL").then(|| "http://0.0.0.0:8888/user/alice/".to_owned())
    };
    let config = Config::from_args_and_env(start_args(&["--port", "4040"]), pod).unwrap();
    assert_eq!(config.http.host, "127.0.0.1");
    let service = |name: &str| match name {
        "JUPYTERHUB_SERVICE_URL" => Some("http://10.0.0.5:9000".to_owned()),
        "JUPYTERHUB_SERVICE_NAME" => Some("mcp".to_owned()),
        _ => None,
    };
    let config = Config::from_args_and_env(start_args(&[]), service).unwrap();
    assert_eq!(
        (config.http.host.as_str(), config.http.port),
        ("10.0.0.5", 9000)
    );
    let everywhere = |name: &str| match name {
        "JUPYTERHUB_SERVICE_URL" => Some("http://[::]:9000".to_owned()),
        "JUPYTERHUB_SERVICE_NAME" => Some("mcp".to_owned()),
        _ => None,
    };
    let config = Config::from_args_and_env(start_args(&[]), everywhere).unwrap();
    assert_eq!(
        (config.http.host.as_str(), config.http.port),
        ("127.0.0.1", 9000)
    );
    let asked = Config::from_args_and_env(start_args(&["--host", "0.0.0.0"]), pod).unwrap();
    assert_eq!(asked.http.host, "0.0.0.0", "--host given is what is used");
}

#[test]
fn hub_mode_refuses_single_server_flags() {
    for extra in [
        &["--transport", "stdio"][..],
        &["--jupyter-url", "http://127.0.0.1:8888"],
        &["--document-id", "a.ipynb"],
        &["--start-new-code-sandbox"],
    ] {
        let mut argv = vec!["--jupyterhub-url", "http://127.0.0.1:8000"];
        argv.extend_from_slice(extra);
        let error = Config::from_args_and_env(start_args(&argv), |_| None).unwrap_err();
        assert!(error.to_string().contains("Hub mode"), "{error}");
    }
}

#[test]
fn bad_values_are_refused() {
    assert!(Cli::try_parse_from(["x", "start", "--transport", "carrier-pigeon"]).is_err());
    assert!(Cli::try_parse_from(["x", "start", "--jupyter-url", "ftp://h"]).is_err());
    assert!(Cli::try_parse_from(["x", "start", "--execution-timeout", "0"]).is_err());
    assert!(Cli::try_parse_from(["x", "start", "--no-such-flag"]).is_err());
    let err = Config::from_args_and_env(
        start_args(&[
            "--execution-timeout",
            "100",
            "--max-execution-timeout",
            "10",
        ]),
        |_| None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("--max-execution-timeout"));
}

#[test]
fn config_file_capabilities() {
    let dir = std::env::temp_dir().join(format!("jmcp-config-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, "[capabilities]\n\"kernel.auto-restart\" = true\n").unwrap();
    let config =
        Config::from_args_and_env(start_args(&["--config", good.to_str().unwrap()]), |_| None)
            .unwrap();
    assert_eq!(
        config.capabilities.config,
        vec![("kernel.auto-restart".to_owned(), true)]
    );
    std::fs::write(
        &good,
        "cache_dir = \"cache\"\n[[extension]]\npath = \"policy.wasm\"\ngrants = [\"read-cells\"]\n\
         limits = { memory_mb = 32, wall_ms_per_call = 500 }\nconfig = { deny = [\"rm -rf\"] }\n\
         critical = false\n",
    )
    .unwrap();
    let config = Config::from_args_and_env(
        start_args(&["--config", good.to_str().unwrap(), "--extension", "b.wasm"]),
        |n| (n == "JUPYTER_MCP_EXTENSIONS").then(|| "a1.wasm:a2.wasm".into()),
    )
    .unwrap();
    assert_eq!(config.wasm.cache_dir, Some(dir.join("cache")));
    let paths: Vec<_> = config
        .wasm
        .extensions
        .iter()
        .map(|e| e.path.clone())
        .collect();
    assert_eq!(
        paths,
        [
            dir.join("policy.wasm"),
            "a1.wasm".into(),
            "a2.wasm".into(),
            "b.wasm".into()
        ]
    );
    let policy = &config.wasm.extensions[0];
    assert_eq!(policy.grants, ["read-cells"]);
    assert_eq!(policy.limits.memory_mb, 32);
    assert_eq!(policy.limits.cpu_ms_per_call, 1000);
    assert_eq!(policy.limits.wall_ms_per_call, Some(500));
    assert_eq!(policy.critical, Some(false));
    assert_eq!(config.wasm.extensions[1].critical, None);
    assert_eq!(policy.config, serde_json::json!({"deny": ["rm -rf"]}));
    std::fs::write(&good, "[[extension]]\ngrants = []\n").unwrap();
    let err =
        Config::from_args_and_env(start_args(&["--config", good.to_str().unwrap()]), |_| None)
            .unwrap_err();
    assert!(err.to_string().contains("missing field `path`"), "{err}");
    std::fs::write(
        &good,
        "[[extension]]\npath = \"a.wasm\"\nlimits = { memory_mb = 0 }\n",
    )
    .unwrap();
    let err =
        Config::from_args_and_env(start_args(&["--config", good.to_str().unwrap()]), |_| None)
            .unwrap_err();
    assert!(err.to_string().contains("nonzero"), "{err}");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[capabilities]\nx = \"yes\"\n").unwrap();
    let err = Config::from_args_and_env(start_args(&["--config", bad.to_str().unwrap()]), |_| None)
        .unwrap_err();
    assert!(err.to_string().contains("true or false"), "{err}");
    std::fs::write(&bad, "cache_dirr = \"/tmp\"\n").unwrap();
    let err = Config::from_args_and_env(start_args(&["--config", bad.to_str().unwrap()]), |_| None)
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown field `cache_dirr`"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn python_server_flags_map_to_ours() {
    let config = Config::from_args_and_env(
        start_args(&[
            "--code-sandbox-url",
            "http://127.0.0.1:9001",
            "--jupyter-url",
            "http://127.0.0.1:9002",
            "--document-id",
            "work/a.ipynb",
            "--start-new-code-sandbox",
        ]),
        |_| None,
    )
    .unwrap();
    match &config.jupyter {
        JupyterSource::Remote { url, .. } => assert_eq!(url.port(), Some(9001)),
        other => panic!("{other:?}"),
    }
    assert_eq!(config.documents.as_ref().unwrap().0.port(), Some(9002));
    assert_eq!(config.default_notebook.as_deref(), Some("work/a.ipynb"));
    assert_eq!(config.kernel_at_start, KernelAtStart::Default);
    let plain = Config::from_args_and_env(
        start_args(&["--jupyter-url", "http://127.0.0.1:9002"]),
        |_| None,
    )
    .unwrap();
    assert!(plain.documents.is_none());
    assert_eq!(plain.kernel_at_start, KernelAtStart::DocumentOnly);
    let args = start_args(&["--start-new-code-sandbox", "false"]);
    assert_eq!(args.python.start_new_code_sandbox, Some(false));
    let never = Config::from_args_and_env(args, |_| None).unwrap();
    assert_eq!(never.kernel_at_start, KernelAtStart::None);
}

#[test]
fn start_flags_work_without_the_subcommand() {
    let cli = Cli::try_parse_from(["x", "--jupyter-url", "http://127.0.0.1:8888"]).unwrap();
    assert!(cli.command.is_none());
    assert_eq!(
        cli.start.jupyter_url.unwrap().as_str(),
        "http://127.0.0.1:8888/"
    );
}

#[test]
fn kernel_start_settings_from_flags_the_file_and_the_environment() {
    let dir = std::env::temp_dir().join(format!("jmcp-config-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("server.toml");
    std::fs::write(
        &config_path,
        "kernel_env = [\"KERNEL_NAMESPACE=from-file\", \"KERNEL_IMAGE=img:1\"]\n",
    )
    .unwrap();
    let args = start_args(&[
        "--config",
        config_path.to_str().unwrap(),
        "--kernel-env",
        "KERNEL_NAMESPACE=team-a",
        "--kernel-env",
        "KERNEL_SECRET",
        "--kernel-start-timeout",
        "42",
    ]);
    let env = |name: &str| (name == "KERNEL_SECRET").then(|| "s3cret".to_owned());
    let config = Config::from_args_and_env(args, env).unwrap();
    assert_eq!(config.kernel_start.timeout, Duration::from_secs(42));
    let pairs: Vec<(&str, &str)> = config
        .kernel_start
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // The command line wins over the file; a bare key reads our own environment.
    assert_eq!(
        pairs,
        [
            ("KERNEL_IMAGE", "img:1"),
            ("KERNEL_NAMESPACE", "team-a"),
            ("KERNEL_SECRET", "s3cret")
        ]
    );
    let default = Config::from_args_and_env(start_args(&[]), |_| None).unwrap();
    assert_eq!(default.kernel_start.timeout, Duration::from_secs(300));

    let unset = Config::from_args_and_env(start_args(&["--kernel-env", "NOPE"]), |_| None);
    let message = unset.unwrap_err().to_string();
    assert!(
        message.contains("NOPE") && message.contains("not set"),
        "{message}"
    );
    let bad = Config::from_args_and_env(start_args(&["--kernel-env", "1X=secret"]), |_| None);
    let message = bad.unwrap_err().to_string();
    assert!(
        message.contains("\"1X\"") && !message.contains("secret"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn execution_confirm_rules_from_the_file() {
    let dir = std::env::temp_dir().join(format!("jmcp-confirm-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("server.toml");
    let read = |text: &str| {
        std::fs::write(&file, text).unwrap();
        Config::from_args_and_env(start_args(&["--config", file.to_str().unwrap()]), |_| None)
    };
    let always = read("").unwrap();
    assert_eq!(always.confirm.ask, server_core::confirm::Ask::Always);
    let defaults = read("[execution_confirm]\nask = \"matching\"\n").unwrap();
    assert!(defaults.confirm.reason("%pip install x").is_some());
    assert!(defaults.confirm.reason("1 + 1").is_none());
    let own =
        read("[execution_confirm]\nask = \"matching\"\npatterns = ['\\bshutil\\b']\n").unwrap();
    assert!(own.confirm.reason("import shutil").is_some());
    assert!(own.confirm.reason("!ls").is_none());
    for (text, says) in [
        ("[execution_confirm]\nask = \"sometimes\"\n", "matching"),
        (
            "[execution_confirm]\nask = \"matching\"\npatterns = ['(']\n",
            "not a valid regular",
        ),
        (
            "[execution_confirm]\nask = \"matching\"\npatterns = []\n",
            "never ask",
        ),
        (
            "[execution_confirm]\nasks = \"always\"\n",
            "unknown field `asks`",
        ),
    ] {
        let err = read(text).unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_state_dir_defaults_to_the_users_state_directory_and_can_be_turned_off() {
    let home = |name: &str| (name == "HOME").then(|| "/home/ann".to_owned());
    let state = Config::from_args_and_env(start_args(&[]), home)
        .unwrap()
        .state
        .expect("on by default");
    assert_eq!(
        state.dir,
        PathBuf::from("/home/ann/.local/state/jupyter-mcp-server")
    );
    assert_eq!(state.retention, Duration::from_secs(24 * 3600));
    assert_eq!(state.max_bytes, 256 << 20);

    let xdg = |name: &str| match name {
        "XDG_STATE_HOME" => Some("/var/ann-state".to_owned()),
        "HOME" => Some("/home/ann".to_owned()),
        _ => None,
    };
    let state = Config::from_args_and_env(start_args(&[]), xdg)
        .unwrap()
        .state
        .unwrap();
    assert_eq!(
        state.dir,
        PathBuf::from("/var/ann-state/jupyter-mcp-server")
    );
    // A relative XDG_STATE_HOME is ignored, as the XDG spec says.
    let relative = |name: &str| match name {
        "XDG_STATE_HOME" => Some("state".to_owned()),
        "HOME" => Some("/home/ann".to_owned()),
        _ => None,
    };
    let state = Config::from_args_and_env(start_args(&[]), relative)
        .unwrap()
        .state
        .unwrap();
    assert_eq!(
        state.dir,
        PathBuf::from("/home/ann/.local/state/jupyter-mcp-server")
    );
    assert!(
        Config::from_args_and_env(start_args(&[]), |_| None)
            .unwrap()
            .state
            .is_none()
    );

    let given = Config::from_args_and_env(
        start_args(&[
            "--state-dir",
            "/tmp/s",
            "--execution-retention",
            "90m",
            "--state-max-mb",
            "8",
        ]),
        home,
    )
    .unwrap()
    .state
    .unwrap();
    assert_eq!(given.dir, PathBuf::from("/tmp/s"));
    assert_eq!(given.retention, Duration::from_secs(90 * 60));
    assert_eq!(given.max_bytes, 8 << 20);
    let off = Config::from_args_and_env(start_args(&["--state-dir", "none"]), home).unwrap();
    assert!(off.state.is_none());
}

#[test]
fn durations_read_as_people_write_them() {
    assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
    assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("3600s"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("3600"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
    assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
    assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
    assert!(parse_duration("soon").unwrap_err().contains("24h"));
    assert!(
        parse_duration("3 weeks")
            .unwrap_err()
            .contains("unknown unit")
    );
    assert!(
        Cli::try_parse_from(["jupyter-mcp-server", "start", "--execution-retention", "x"]).is_err()
    );
    for (duration, shown) in [(86_400, "1d"), (5400, "90m"), (7200, "2h"), (61, "61s")] {
        assert_eq!(humane_duration(Duration::from_secs(duration)), shown);
    }
}
