//! Execution records several replicas share, in Redis (`--state-store redis://HOST:PORT`, TLS
//! with `rediss://`): any replica behind a load balancer answers for the executions, idempotency
//! keys and tasks of every other, and follows again (or ends `lost`) a run whose replica stopped.
//!
//! Keys, all under `jupyter-mcp:`:
//! - `execution:{owner}:{id}`: the record as JSON (what the file store keeps: never the code, a
//!   token or an environment), expiring a retention after it was last written (a running one a
//!   retention plus its timeout);
//! - `executions:{owner}`: a sorted set of the owner's ids by start, for listing; ids whose
//!   record expired are dropped from it when listed or pruned;
//! - `running:{owner}`: the set of the owner's ids still running, what replicas look through
//!   for runs left by one that stopped (an id whose record ended or expired is dropped from it as
//!   it is read);
//! - `key:{owner}:{idempotency key}`: the execution a key began, set with `NX` together with
//!   the first record (one script), so of two replicas asked at once one runs the code;
//! - `task:{owner}:{task id}`: the execution an MCP task ran, so any replica answers
//!   `tasks/get` for it;
//! - `runner:{runner}`: a replica's liveness mark, renewed every [`BEAT_EVERY`] and expiring
//!   after [`RUNNER_GONE_AFTER`]; a running record names its runner, and one whose runner's mark
//!   is gone is followed again by whichever replica claims `follow:{owner}:{id}` first.
//!
//! Writes go through a writer thread (as the file store's), so recording costs the execution a
//! queue push; reads are a round trip on a connection of their own. The calls are synchronous
//! (redis-rs's blocking client): they run in `block_in_place` on the runtime's workers, keeping
//! the domain's record API the same for both stores.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use redis::{Commands, Connection};

use super::records::{Found, Records, WriterThread};
use super::store::{Pruned, Record, StoreError};
use crate::settings::SharedStoreSettings;
use writing::{Claim, MOST_KEPT, Outage, locked, write_until_closed};

const PREFIX: &str = "jupyter-mcp:";

/// How often a replica renews its liveness mark.
const BEAT_EVERY: Duration = Duration::from_secs(2);
/// How long a replica's mark outlives its last renewal: a replica silent this long is taken
/// for stopped and its runs are followed by another.
const RUNNER_GONE_AFTER: Duration = Duration::from_secs(8);
/// How long a replica's claim to follow a left run holds others off.
const FOLLOW_CLAIM: Duration = Duration::from_secs(30);
/// Connecting, and each command, give up after this (a dead Redis never hangs a call).
const REDIS_TIMEOUT: Duration = Duration::from_secs(3);

/// The first record of a keyed execution with its key, unless the key is held: then the
/// record of the execution holding it (nil when that one has expired meanwhile).
const CLAIM_KEY: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
  redis.call('SADD', KEYS[4], ARGV[1])
  return false
end
return redis.call('GET', ARGV[5] .. redis.call('GET', KEYS[1]))
";

/// The records in Redis.
pub struct SharedStore {
    client: redis::Client,
    target: String,
    /// This process, as records name their runner.
    runner: String,
    retention: Duration,
    reads: Mutex<Option<Connection>>,
    outage: Arc<Outage>,
    /// Joined at drop: what is queued is written, and the liveness mark taken back so the
    /// others follow this replica's runs at once.
    writer: Option<WriterThread>,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore")
            .field("target", &self.target)
            .field("runner", &self.runner)
            .finish()
    }
}

fn record_key(owner: &str, id: &str) -> String {
    format!("{PREFIX}execution:{owner}:{id}")
}

fn index_key(owner: &str) -> String {
    format!("{PREFIX}executions:{owner}")
}

fn running_key(owner: &str) -> String {
    format!("{PREFIX}running:{owner}")
}

fn idempotency_key(owner: &str, key: &str) -> String {
    format!("{PREFIX}key:{owner}:{key}")
}

fn task_key(owner: &str, task_id: &str) -> String {
    format!("{PREFIX}task:{owner}:{task_id}")
}

fn runner_key(runner: &str) -> String {
    format!("{PREFIX}runner:{runner}")
}

fn follow_key(owner: &str, id: &str) -> String {
    format!("{PREFIX}follow:{owner}:{id}")
}

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Runs blocking Redis I/O on a runtime worker without stalling the others.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

impl SharedStore {
    /// Connects (a first round trip proves Redis answers and the credentials are right) and
    /// starts the writer, which also keeps this replica's liveness mark.
    pub fn connect(settings: &SharedStoreSettings) -> Result<SharedStore, StoreError> {
        let target = settings.target();
        let unreachable = |e: redis::RedisError| StoreError::Shared {
            target: target.clone(),
            reason: explain(&e),
        };
        let mut info = redis::IntoConnectionInfo::into_connection_info(settings.url.as_str())
            .map_err(unreachable)?;
        let mut redis_settings = info.redis_settings().clone();
        if let Some(username) = &settings.username {
            redis_settings = redis_settings.set_username(username);
        }
        if let Some(password) = &settings.password {
            redis_settings = redis_settings.set_password(password.expose());
        }
        info = info.set_redis_settings(redis_settings);
        let client = redis::Client::open(info).map_err(unreachable)?;
        let runner = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let mut reads = open(&client).map_err(unreachable)?;
        beat(&mut reads, &runner).map_err(unreachable)?;
        let mut store = SharedStore {
            client,
            target: target.clone(),
            runner,
            retention: settings.retention,
            reads: Mutex::new(Some(reads)),
            outage: Arc::default(),
            writer: None,
        };
        store.start_writer()?;
        Ok(store)
    }

    fn start_writer(&mut self) -> Result<(), StoreError> {
        let client = self.client.clone();
        let runner = self.runner.clone();
        let retention = self.retention;
        let target = self.target.clone();
        let outage = self.outage.clone();
        let writer = WriterThread::start("execution-store-redis", move |receiver| {
            write_until_closed(client, runner, retention, target, outage, receiver)
        })
        .map_err(|e| StoreError::Database(format!("no writer thread: {e}")))?;
        self.writer = Some(writer);
        Ok(())
    }

    /// Runs `work` on the read connection, opening it again once when it failed.
    fn read<T>(
        &self,
        work: impl Fn(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        blocking(|| {
            let mut held = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(connection) = held.as_mut() {
                match work(connection) {
                    Ok(value) => return Ok(value),
                    Err(e) if !e.is_connection_dropped() && !e.is_io_error() => {
                        return Err(self.failed(&e));
                    }
                    Err(_) => *held = None,
                }
            }
            let mut connection = open(&self.client).map_err(|e| self.failed(&e))?;
            let value = work(&mut connection).map_err(|e| self.failed(&e))?;
            *held = Some(connection);
            Ok(value)
        })
    }

    fn failed(&self, error: &redis::RedisError) -> StoreError {
        StoreError::Shared {
            target: self.target.clone(),
            reason: explain(error),
        }
    }

    /// The record whose id the string key `key` holds.
    fn named_by(&self, owner: &str, key: &str) -> Found {
        let id: Option<String> = self.read(|c| c.get(key))?;
        match id {
            Some(id) => Records::get(self, owner, &id),
            None => Ok(None),
        }
    }

    fn records(&self, owner: &str, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        let mut found = Vec::new();
        for chunk in ids.chunks(256) {
            let keys: Vec<String> = chunk.iter().map(|id| record_key(owner, id)).collect();
            let values: Vec<Option<Vec<u8>>> =
                self.read(|c| redis::cmd("MGET").arg(&keys).query(c))?;
            found.extend(values.iter().flatten().filter_map(|bytes| decode(bytes)));
        }
        Ok(found)
    }
}

fn open(client: &redis::Client) -> redis::RedisResult<Connection> {
    let connection = client.get_connection_with_timeout(REDIS_TIMEOUT)?;
    connection.set_read_timeout(Some(REDIS_TIMEOUT))?;
    connection.set_write_timeout(Some(REDIS_TIMEOUT))?;
    Ok(connection)
}

fn beat(connection: &mut Connection, runner: &str) -> redis::RedisResult<()> {
    connection.pset_ex(runner_key(runner), "running", ms(RUNNER_GONE_AFTER))
}

/// What a Redis failure means to the operator.
fn explain(error: &redis::RedisError) -> String {
    let text = error.to_string();
    let auth = error.kind() == redis::ErrorKind::AuthenticationFailed
        || [
            "NOAUTH",
            "WRONGPASS",
            "invalid password",
            "invalid username",
        ]
        .iter()
        .any(|word| text.contains(word));
    let untrusted = ["certificate", "UnknownIssuer", "NotValidForName"]
        .iter()
        .any(|word| text.contains(word));
    if auth {
        format!(
            "{text}: Redis refused the sign-in; give its password in \
             JUPYTER_MCP_STATE_STORE_PASSWORD (and its user in JUPYTER_MCP_STATE_STORE_USERNAME)"
        )
    } else if untrusted {
        format!(
            "{text}: the store's TLS certificate is not trusted here; add the CA that signed it \
             to the system's roots, or point SSL_CERT_FILE at it"
        )
    } else {
        text
    }
}

/// How long a record stays: a retention after it was written, a running one its timeout more.
fn ttl(record: &Record, retention: Duration) -> u64 {
    let running = if record.end.is_some() {
        Duration::ZERO
    } else {
        record.timeout
    };
    ms(retention.saturating_add(running)).max(1)
}

fn decode(bytes: &[u8]) -> Option<Record> {
    serde_json::from_slice(bytes)
        .inspect_err(|e| tracing::warn!("ignoring an unreadable execution record: {e}"))
        .ok()
}

impl Records for SharedStore {
    fn place(&self) -> String {
        format!("Redis at {}", self.target)
    }

    fn retention(&self) -> Duration {
        self.retention
    }

    fn enqueue(&self, owner: &str, record: Record) -> Result<(), StoreError> {
        match &self.writer {
            Some(writer) if writer.send(owner, record) => Ok(()),
            _ => Err(StoreError::Database(
                "the state store's writer stopped".into(),
            )),
        }
    }

    fn get(&self, owner: &str, id: &str) -> Found {
        let key = record_key(owner, id);
        let bytes: Option<Vec<u8>> = self.read(|c| c.get(&key))?;
        Ok(bytes.as_deref().and_then(decode))
    }

    fn by_key(&self, owner: &str, key: &str) -> Found {
        self.named_by(owner, &idempotency_key(owner, key))
    }

    fn by_task(&self, owner: &str, task_id: &str) -> Found {
        self.named_by(owner, &task_key(owner, task_id))
    }

    fn list(&self, owner: &str) -> Result<Vec<Record>, StoreError> {
        let index = index_key(owner);
        let ids: Vec<String> = self.read(|c| c.zrange(&index, 0, -1))?;
        let mut listed = self.records(owner, &ids)?;
        listed.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
        Ok(listed)
    }

    /// The running set's records; ids whose record has ended or expired leave the set.
    fn running(&self, owner: &str) -> Result<Vec<Record>, StoreError> {
        let set = running_key(owner);
        let ids: Vec<String> = self.read(|c| c.smembers(&set))?;
        let mut running = self.records(owner, &ids)?;
        let stale: Vec<&String> = ids
            .iter()
            .filter(|id| {
                !running
                    .iter()
                    .any(|record| &record.id == *id && record.end.is_none())
            })
            .collect();
        if !stale.is_empty() {
            let _: () = self.read(|c| c.srem(&set, &stale))?;
        }
        running.retain(|record| record.end.is_none());
        running.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
        Ok(running)
    }

    fn claim_key(&self, owner: &str, key: &str, record: &Record) -> Found {
        let mut record = record.clone();
        record.runner = Some(self.runner.clone());
        let json = serde_json::to_vec(&record).map_err(|e| StoreError::Database(e.to_string()))?;
        let (keyed, row, index, running) = (
            idempotency_key(owner, key),
            record_key(owner, &record.id),
            index_key(owner),
            running_key(owner),
        );
        let prefix = record_key(owner, "");
        let claimed: Result<Option<Vec<u8>>, StoreError> = self.read(|c| {
            redis::cmd("EVAL")
                .arg(CLAIM_KEY)
                .arg(4)
                .arg(&keyed)
                .arg(&row)
                .arg(&index)
                .arg(&running)
                .arg(&record.id)
                .arg(&json)
                .arg(ttl(&record, self.retention))
                .arg(record.started_ms)
                .arg(&prefix)
                .query(c)
        });
        match claimed {
            Ok(earlier) => Ok(earlier.as_deref().and_then(decode)),
            Err(e) => {
                // Redis is away: the run goes ahead here, its key claimed when Redis answers
                // (then a key another replica took meanwhile is a conflict, reported).
                let mut claims = locked(&self.outage.claims);
                if claims.len() >= MOST_KEPT {
                    claims.remove(0);
                }
                claims.push(Claim {
                    owner: owner.to_owned(),
                    key: key.to_owned(),
                    id: record.id.clone(),
                    ttl: ttl(&record, self.retention),
                });
                drop(claims);
                locked(&self.outage.failing)
                    .get_or_insert_with(|| (SystemTime::now(), e.to_string()));
                Records::enqueue(self, owner, record)?;
                Ok(None)
            }
        }
    }

    fn failing(&self) -> Option<(SystemTime, String)> {
        locked(&self.outage.failing).clone()
    }

    fn conflict(&self, owner: &str, id: &str) -> Option<String> {
        locked(&self.outage.conflicts)
            .get(&(owner.to_owned(), id.to_owned()))
            .cloned()
    }

    fn runner(&self) -> Option<&str> {
        Some(&self.runner)
    }

    fn followed_elsewhere(&self, record: &Record) -> bool {
        let Some(runner) = record.runner.as_deref() else {
            return false;
        };
        if runner == self.runner {
            return true;
        }
        let key = runner_key(runner);
        // Unanswered: taken as alive, so two replicas never follow one run.
        self.read(|c| c.exists::<_, bool>(&key)).unwrap_or(true)
    }

    fn claim_follow(&self, owner: &str, id: &str) -> bool {
        let key = follow_key(owner, id);
        let claimed: Result<Option<String>, StoreError> = self.read(|c| {
            redis::cmd("SET")
                .arg(&key)
                .arg(&self.runner)
                .arg("NX")
                .arg("PX")
                .arg(ms(FOLLOW_CLAIM))
                .query(c)
        });
        matches!(claimed, Ok(Some(_)))
    }

    fn shared(&self) -> bool {
        true
    }

    /// The writer renews the liveness mark; Redis' own persistence is the operator's.
    fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Drops from each owner's index the ids whose record expired (Redis expires the records).
    fn prune(&self, _now: SystemTime) -> Result<Pruned, StoreError> {
        let pattern = format!("{PREFIX}executions:*");
        let indexes: Vec<String> = self.read(|c| {
            let keys: redis::Iter<String> = c.scan_match(&pattern)?;
            keys.collect()
        })?;
        let mut pruned = Pruned::default();
        for index in indexes {
            let owner = index
                .trim_start_matches(&format!("{PREFIX}executions:"))
                .to_owned();
            let ids: Vec<String> = self.read(|c| c.zrange(&index, 0, -1))?;
            for chunk in ids.chunks(256) {
                let keys: Vec<String> = chunk.iter().map(|id| record_key(&owner, id)).collect();
                let present: Vec<bool> = self.read(|c| {
                    let mut pipe = redis::pipe();
                    for key in &keys {
                        pipe.exists(key);
                    }
                    pipe.query(c)
                })?;
                let gone: Vec<&String> = chunk
                    .iter()
                    .zip(present)
                    .filter_map(|(id, present)| (!present).then_some(id))
                    .collect();
                if !gone.is_empty() {
                    let _: () = self.read(|c| c.zrem(&index, &gone))?;
                    pruned.expired += gone.len();
                }
            }
        }
        Ok(pruned)
    }
}

mod writing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_record_outlives_the_retention_by_its_timeout() {
        let mut record = Record {
            id: "a".into(),
            place: super::super::Place::Code {
                kernel: "the default kernel".into(),
            },
            code_sha256: "00".into(),
            cell_version: None,
            timeout: Duration::from_secs(60),
            background: true,
            started_ms: 1,
            idempotency_key: None,
            sent: None,
            outputs: Vec::new(),
            end: None,
            runner: None,
            task_id: None,
        };
        assert_eq!(ttl(&record, Duration::from_secs(3600)), 3_660_000);
        record.end = Some(super::super::store::EndRecord {
            elapsed: Duration::from_secs(1),
            state: super::super::State::Finished,
            result: std::sync::Arc::new(Err(crate::domain::Error::Failed("x".into()))),
        });
        assert_eq!(ttl(&record, Duration::from_secs(3600)), 3_600_000);
    }

    #[test]
    fn an_untrusted_certificate_says_how_to_trust_it() {
        let error = redis::RedisError::from((
            redis::ErrorKind::Io,
            "invalid peer certificate: UnknownIssuer",
        ));
        let text = explain(&error);
        assert!(text.contains("SSL_CERT_FILE"), "{text}");
    }

    #[test]
    fn a_refused_sign_in_names_the_variables_that_fix_it() {
        let error = redis::RedisError::from((
            redis::ErrorKind::AuthenticationFailed,
            "authentication failed",
        ));
        let text = explain(&error);
        assert!(text.contains("JUPYTER_MCP_STATE_STORE_PASSWORD"), "{text}");
    }
}
