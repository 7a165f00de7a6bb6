use std::os::unix::fs::PermissionsExt;

use super::*;
use notebook_format::outputs::StreamName;

fn settings(dir: &Path) -> StateSettings {
    StateSettings {
        dir: dir.to_path_buf(),
        retention: Duration::from_secs(3600),
        max_bytes: 1 << 20,
    }
}

fn record(id: &str, started_ms: u64, ended: bool, key: Option<&str>) -> Record {
    Record {
        id: id.to_owned(),
        place: Place::Code {
            kernel: "the default kernel".into(),
        },
        code_sha256: "00".into(),
        cell_version: None,
        timeout: Duration::from_secs(60),
        background: true,
        started_ms,
        idempotency_key: key.map(str::to_owned),
        sent: Some(Sent {
            kernel_id: "k".into(),
            session_id: "s".into(),
            msg_id: "m".into(),
            v1: true,
        }),
        outputs: vec![Output::stream(StreamName::Stdout, "hi\n")],
        end: ended.then(|| EndRecord {
            elapsed: Duration::from_millis(1500),
            state: State::Failed("the code raised ValueError: x".into()),
            result: std::sync::Arc::new(Ok(Executed {
                outcome: outcome_of(vec![], Duration::from_millis(1400)),
                replaced: None,
            })),
        }),
        runner: None,
        task_id: None,
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "jupyter-mcp-store-{name}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    dir.join("state")
}

#[test]
fn records_survive_reopening_and_stay_private() {
    let dir = temp_dir("reopen");
    let now = unix_ms(SystemTime::now());
    {
        let store = Store::open(settings(&dir)).unwrap();
        store
            .put("", &record("a", now - 10, true, Some("key-1")))
            .unwrap();
        store.put("", &record("b", now - 5, false, None)).unwrap();
        store
            .put("user:ann", &record("c", now, true, Some("key-1")))
            .unwrap();
    }
    let store = Store::open(settings(&dir)).unwrap();
    let a = store.get("", "a").unwrap().expect("kept");
    let end = a.end.expect("ended");
    assert_eq!(
        end.state,
        State::Failed("the code raised ValueError: x".into())
    );
    assert_eq!(end.elapsed, Duration::from_millis(1500));
    assert!(store.get("", "b").unwrap().unwrap().end.is_none());
    // Each owner's keys and records apart.
    assert_eq!(store.by_key("", "key-1").unwrap().unwrap().id, "a");
    assert_eq!(store.by_key("user:ann", "key-1").unwrap().unwrap().id, "c");
    assert!(store.get("user:ann", "a").unwrap().is_none());
    let listed: Vec<String> = store.list("").unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(listed, ["a", "b"]);

    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(FILE)), 0o600);
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn a_second_server_on_the_same_directory_is_told_so() {
    let dir = temp_dir("locked");
    let _first = Store::open(settings(&dir)).unwrap();
    let second = Store::open(settings(&dir)).unwrap_err();
    assert!(matches!(second, StoreError::InUse { .. }), "{second}");
    assert!(second.to_string().contains("--state-dir"), "{second}");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn an_open_directory_is_made_private_and_a_shared_one_refused() {
    let dir = temp_dir("modes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    drop(Store::open(settings(&dir)).unwrap());
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let refused = Store::open(settings(&dir)).unwrap_err();
    assert!(
        refused.to_string().contains("other users may write"),
        "{refused}"
    );
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn pruning_drops_expired_records_then_the_oldest_ended_beyond_the_cap() {
    let dir = temp_dir("prune");
    let store = Store::open(settings(&dir)).unwrap();
    let now = SystemTime::now();
    let now_ms = unix_ms(now);
    let hour = 3_600_000;
    store
        .put("", &record("old", now_ms - 2 * hour, true, Some("old-key")))
        .unwrap();
    // Running, started before the retention but within its timeout beyond it: kept.
    let mut running = record("running", now_ms - hour - 1000, false, None);
    running.timeout = Duration::from_secs(600);
    store.put("", &running).unwrap();
    store.put("", &record("new", now_ms, true, None)).unwrap();
    assert_eq!(
        store.prune(now).unwrap(),
        Pruned {
            expired: 1,
            over_size: 0
        }
    );
    assert!(store.get("", "old").unwrap().is_none());
    assert!(store.by_key("", "old-key").unwrap().is_none());
    assert!(store.get("", "running").unwrap().is_some());

    // Over the cap: the oldest ended go first, running ones stay.
    let big = Output::stream(StreamName::Stdout, "x".repeat(300_000));
    for (i, id) in ["b1", "b2", "b3", "b4"].iter().enumerate() {
        let mut r = record(id, now_ms - 1000 + i as u64, true, None);
        r.outputs = vec![big.clone()];
        store.put("", &r).unwrap();
    }
    let pruned = store.prune(now).unwrap();
    assert!(pruned.over_size >= 1, "{pruned:?}");
    assert!(
        store.get("", "b1").unwrap().is_none(),
        "the oldest goes first"
    );
    assert!(store.get("", "b4").unwrap().is_some());
    assert!(store.get("", "running").unwrap().is_some());
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn every_state_and_result_round_trips() {
    for state in [
        State::Running,
        State::Finished,
        State::Failed("f".into()),
        State::Interrupted("i".into()),
        State::Lost("the server restarted and the kernel k is gone".into()),
    ] {
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(serde_json::from_str::<State>(&json).unwrap(), state);
    }
    let failed: Result<Executed, Error> = Err(Error::Kernel("gone".into()));
    let json = serde_json::to_string(&failed).unwrap();
    let back: Result<Executed, Error> = serde_json::from_str(&json).unwrap();
    assert!(matches!(back, Err(Error::Kernel(m)) if m == "gone"));
}

#[test]
fn an_unreadable_store_is_moved_aside_whole_and_a_new_one_started() {
    let dir = temp_dir("damaged");
    {
        let store = Store::open(settings(&dir)).unwrap();
        store.put("", &record("a", 1, true, None)).unwrap();
    }
    // A file that is not a store: a disk error, another program, a half-copied backup.
    let damaged = b"not a redb file, but somebody's bytes".repeat(200);
    std::fs::write(dir.join(FILE), &damaged).unwrap();
    let store = Store::open(settings(&dir)).unwrap();
    assert!(store.get("", "a").unwrap().is_none(), "a new, empty store");
    store.put("", &record("b", 2, true, None)).unwrap();
    let aside: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".unreadable-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), damaged, "kept whole");
    let mode = std::fs::metadata(&aside[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "still private");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn a_flush_persists_what_was_written_and_is_free_when_nothing_was() {
    let dir = temp_dir("flush");
    let now = unix_ms(SystemTime::now());
    let store = Store::open(settings(&dir)).unwrap();
    // Nothing written: no commit at all.
    store.sync().unwrap();
    assert!(!store.unsynced.load(std::sync::atomic::Ordering::Acquire));
    store.put("", &record("a", now, true, None)).unwrap();
    assert!(store.unsynced.load(std::sync::atomic::Ordering::Acquire));
    store.sync().unwrap();
    assert!(!store.unsynced.load(std::sync::atomic::Ordering::Acquire));
    drop(store);
    let store = Store::open(settings(&dir)).unwrap();
    assert!(store.get("", "a").unwrap().is_some());
}
