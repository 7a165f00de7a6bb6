use super::*;
use crate::domain::execution::Completion;
use jupyter_client::kernel::ExecutionOutcome;
use notebook_format::outputs::StreamName;

fn new(key: Option<&str>) -> NewExecution {
    NewExecution {
        place: Place::Code {
            kernel: "the default kernel".into(),
        },
        code: "1".into(),
        timeout: Duration::from_secs(5),
        background: true,
        idempotency_key: key.map(str::to_owned),
        task_id: None,
    }
}

fn ended(outputs: Vec<Output>, completion: Completion) -> Result<Executed, Error> {
    Ok(Executed {
        outcome: ExecutionOutcome {
            outputs,
            execution_count: Some(1),
            reply_status: None,
            completion,
            elapsed: Duration::ZERO,
            user_expressions: None,
            widgets: None,
        },
        replaced: None,
    })
}

/// A store of its own in a fresh temporary directory.
fn store_settings(max_bytes: u64) -> crate::settings::StateSettings {
    crate::settings::StateSettings {
        dir: std::env::temp_dir().join(format!(
            "jupyter-mcp-executions-{}",
            uuid::Uuid::new_v4().simple()
        )),
        retention: Duration::from_secs(3600),
        max_bytes,
    }
}

#[test]
fn a_repeated_key_finds_the_first_execution() {
    let executions = Executions::default();
    let Begun::Fresh(first) = executions.begin(new(Some("k"))) else {
        panic!("first call is fresh");
    };
    let Begun::Repeated(again) = executions.begin(new(Some("k"))) else {
        panic!("the key was seen");
    };
    assert_eq!(first.id, again.id);
    assert!(matches!(executions.begin(new(None)), Begun::Fresh(_)));
    assert_eq!(executions.list().len(), 2);
}

#[test]
fn states_say_how_it_ended() {
    let error = |ename: &str| Output::error(ename, "x", vec![]);
    let timeout = Duration::from_secs(5);
    let state = |r| State::of(&r, timeout).name();
    assert_eq!(state(ended(vec![], Completion::Finished)), "finished");
    assert_eq!(
        state(ended(
            vec![error("KeyboardInterrupt")],
            Completion::Finished
        )),
        "interrupted"
    );
    assert_eq!(
        state(ended(vec![error("ValueError")], Completion::Finished)),
        "failed"
    );
    assert_eq!(state(ended(vec![], Completion::TimedOut)), "interrupted");
    assert_eq!(state(Err(Error::Failed("no".into()))), "failed");
}

#[test]
fn a_new_process_reads_the_records_an_earlier_one_wrote() {
    let settings = store_settings(1 << 20);
    let dir = settings.dir.clone();
    let output = Output::stream(StreamName::Stdout, "42\n");
    let (id, running) = {
        let store = Arc::new(store::Store::open(settings.clone()).unwrap());
        let executions = Executions::new(Some(Scope::server(store)), DEFAULT_MEMORY_BUDGET);
        let Begun::Fresh(done) = executions.begin(new(Some("k"))) else {
            panic!()
        };
        done.finish(ended(vec![output.clone()], Completion::Finished));
        // Listed oldest first, by the millisecond each began.
        std::thread::sleep(Duration::from_millis(5));
        let Begun::Fresh(running) = executions.begin(new(None)) else {
            panic!()
        };
        (done.id.clone(), running.id.clone())
    };
    let store = Arc::new(store::Store::open(settings).unwrap());
    let executions = Executions::new(Some(Scope::server(store)), DEFAULT_MEMORY_BUDGET);
    let again = executions.get(&id).expect("from the store");
    let snapshot = again.snapshot();
    assert_eq!(snapshot.state, State::Finished);
    let result = snapshot.result.expect("ended");
    assert_eq!(
        result.as_ref().as_ref().unwrap().outcome.outputs,
        vec![output]
    );
    assert!(again.code_sha256.len() == 64);
    assert!(matches!(executions.begin(new(Some("k"))), Begun::Repeated(e) if e.id == id));
    let listed: Vec<String> = executions.list().iter().map(|e| e.id.clone()).collect();
    assert_eq!(listed, [id, running.clone()]);
    assert_eq!(
        executions.get(&running).unwrap().snapshot().state,
        State::Running
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn only_ended_executions_are_forgotten() {
    let executions = Executions::default();
    let Begun::Fresh(running) = executions.begin(new(None)) else {
        panic!()
    };
    for _ in 0..KEPT + 3 {
        if let Begun::Fresh(e) = executions.begin(new(None)) {
            e.finish(ended(vec![], Completion::Finished));
        }
    }
    assert_eq!(executions.list().len(), KEPT);
    assert!(executions.get(&running.id).is_some());
}

fn printed(megabytes: usize) -> Vec<Output> {
    vec![Output::stream(
        StreamName::Stdout,
        "x".repeat(megabytes << 20),
    )]
}

#[test]
fn ended_outputs_stay_within_the_budget_oldest_shed_first() {
    let executions = Executions::new(None, 8 << 20);
    let mut ids = Vec::new();
    for _ in 0..4 {
        let Begun::Fresh(e) = executions.begin(new(None)) else {
            panic!()
        };
        e.finish(ended(printed(3), Completion::Finished));
        ids.push(e.id.clone());
    }
    assert!(
        executions.held_bytes() <= 8 << 20,
        "{}",
        executions.held_bytes()
    );
    // The two oldest went; the newest two (6 MiB) stayed whole.
    for id in &ids[..2] {
        let shed = executions.get(id).unwrap();
        let note = shed.shed_note().expect("shed").to_owned();
        assert!(
            note.contains("--execution-memory-mb") && note.contains("no --state-dir"),
            "{note}"
        );
        let result = shed.snapshot().result.unwrap();
        let outputs = &result.as_ref().as_ref().unwrap().outcome.outputs;
        assert_eq!(outputs.len(), 1);
        assert!(outputs[0].approx_bytes() < 1000);
    }
    for id in &ids[2..] {
        assert!(executions.get(id).unwrap().shed_note().is_none());
    }
    // Only an ended run counts, and its progress copy went with its end.
    let Begun::Fresh(running) = executions.begin(new(None)) else {
        panic!()
    };
    (running.output_sink())(&printed(1), None, Default::default());
    assert_eq!(running.snapshot().outputs.len(), 1);
    running.finish(ended(printed(1), Completion::Finished));
    assert!(
        running.snapshot().outputs.is_empty(),
        "the result holds them"
    );
}

#[test]
fn with_a_store_shed_outputs_are_read_back_whole() {
    let settings = store_settings(64 << 20);
    let dir = settings.dir.clone();
    let store = Arc::new(store::Store::open(settings).unwrap());
    let executions = Executions::new(Some(Scope::server(store)), 4 << 20);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let Begun::Fresh(e) = executions.begin(new(None)) else {
            panic!()
        };
        e.finish(ended(printed(3), Completion::Finished));
        ids.push(e.id.clone());
    }
    executions.scope().unwrap().store.sync().unwrap();
    assert!(executions.held_bytes() <= 4 << 20);
    let again = executions.get(&ids[0]).unwrap();
    assert!(
        again.shed_note().is_none(),
        "read from the store, not the note"
    );
    let result = again.snapshot().result.unwrap();
    assert_eq!(
        result.as_ref().as_ref().unwrap().outcome.outputs,
        printed(3)
    );
    std::fs::remove_dir_all(dir).unwrap();
}
