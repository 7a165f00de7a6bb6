//! The Redis writer: commits records in pipelined batches, renews the liveness mark, and keeps
//! what it cannot write while Redis does not answer (with the keys claimed meanwhile) to replay
//! when it answers again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant, SystemTime};

use redis::{Commands, Connection};

use super::super::records::latest_only;
use super::{
    BEAT_EVERY, RUNNER_GONE_AFTER, Record, idempotency_key, index_key, ms, open, record_key,
    runner_key, running_key, task_key, ttl,
};

/// The most records and key claims kept while Redis does not answer; past it the oldest are
/// dropped, and the log says how many.
pub(super) const MOST_KEPT: usize = 10_000;

/// An idempotency key claimed while Redis did not answer: the run went ahead, and the key is
/// claimed when Redis answers again.
pub(super) struct Claim {
    pub(super) owner: String,
    pub(super) key: String,
    pub(super) id: String,
    pub(super) ttl: u64,
}

/// What the writer holds for Redis while it does not answer, and what replaying it found.
#[derive(Default)]
pub(super) struct Outage {
    pub(super) claims: Mutex<Vec<Claim>>,
    /// Since when, and why, writes fail.
    pub(super) failing: Mutex<Option<(SystemTime, String)>>,
    /// Executions whose key another replica took meanwhile: (owner, id) → what to say.
    pub(super) conflicts: Mutex<HashMap<(String, String), String>>,
}

pub(super) fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The writer thread: commits queued records in pipelined batches and renews the liveness mark.
/// While Redis does not answer, records (the latest of each) and key claims are kept, bounded,
/// and replayed when it answers again: claims first, each only if no other replica took its key
/// meanwhile (a conflict is kept for the execution's answer), then the records.
pub(super) fn write_until_closed(
    client: redis::Client,
    runner: String,
    retention: Duration,
    target: String,
    outage: Arc<Outage>,
    receiver: mpsc::Receiver<(String, Record)>,
) {
    let mut connection: Option<Connection> = None;
    let mut last_beat = Instant::now();
    let mut kept: Vec<(String, Record)> = Vec::new();
    let mut closed = false;
    while !closed {
        let mut batch = std::mem::take(&mut kept);
        match receiver.recv_timeout(BEAT_EVERY) {
            Ok(first) => {
                batch.push(first);
                batch.extend(receiver.try_iter());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => closed = true,
        }
        latest_only(&mut batch);
        let beat_due = last_beat.elapsed() >= BEAT_EVERY;
        if !beat_due && batch.is_empty() && locked(&outage.claims).is_empty() {
            continue;
        }
        let mut written = false;
        for _attempt in 0..2 {
            if connection.is_none() {
                connection = open(&client).ok();
            }
            let Some(open) = connection.as_mut() else {
                continue;
            };
            let replayed = replay_claims(open, &outage, &target)
                .and_then(|()| write_batch(open, &batch, &runner, retention, &outage));
            match replayed {
                Ok(()) => {
                    written = true;
                    break;
                }
                Err(e) => {
                    tracing::debug!("writing to the state store failed: {e}");
                    connection = None;
                }
            }
        }
        if written {
            last_beat = Instant::now();
            if let Some((since, _)) = locked(&outage.failing).take() {
                tracing::info!(
                    "the state store (Redis at {target}) answers again after {} s; the records \
                     and key claims kept meanwhile are written",
                    since.elapsed().map(|d| d.as_secs()).unwrap_or(0)
                );
            }
            continue;
        }
        if closed {
            tracing::warn!(
                "the state store (Redis at {target}) does not answer as the server stops: {} \
                 execution record(s) were not written",
                batch.len()
            );
            break;
        }
        {
            let mut failing = locked(&outage.failing);
            if failing.is_none() {
                tracing::warn!(
                    "the state store (Redis at {target}) does not answer; records and key claims \
                     are kept here (at most {MOST_KEPT}) and written when it answers again"
                );
                *failing = Some((SystemTime::now(), "Redis does not answer".into()));
            }
        }
        if batch.len() > MOST_KEPT {
            let dropped = batch.len() - MOST_KEPT;
            tracing::warn!("{dropped} execution record(s) dropped: the state store is still away");
            batch.drain(..dropped);
        }
        kept = batch;
    }
    // Stopping cleanly: the others need not wait for the mark to expire.
    if let Some(mut connection) = connection.or_else(|| open(&client).ok()) {
        let _: redis::RedisResult<()> = connection.del(runner_key(&runner));
    }
}

/// Claims the keys taken while Redis was away, each only where no other replica took it.
fn replay_claims(
    connection: &mut Connection,
    outage: &Outage,
    target: &str,
) -> redis::RedisResult<()> {
    loop {
        let Some(claim) = locked(&outage.claims)
            .first()
            .map(|c| (c.owner.clone(), c.key.clone(), c.id.clone(), c.ttl))
        else {
            return Ok(());
        };
        let (owner, key, id, ttl) = claim;
        let name = idempotency_key(&owner, &key);
        let set: Option<String> = redis::cmd("SET")
            .arg(&name)
            .arg(&id)
            .arg("NX")
            .arg("PX")
            .arg(ttl)
            .query(connection)?;
        if set.is_none() {
            let holder: Option<String> = connection.get(&name)?;
            if let Some(holder) = holder.filter(|holder| *holder != id) {
                tracing::warn!(
                    "idempotency key {key:?}: while the state store (Redis at {target}) was away \
                     this replica ran it as execution {id}, and another replica ran it as \
                     {holder}; both ran"
                );
                locked(&outage.conflicts).insert(
                    (owner.clone(), id.clone()),
                    format!(
                        "while the state store was unreachable, this run's idempotency key \
                         {key:?} was also run by another replica, as execution {holder}: the code \
                         ran twice. Check what both did; get_execution {holder} shows the other"
                    ),
                );
            }
        }
        locked(&outage.claims).remove(0);
    }
}

/// One pipelined write of `batch` (and the liveness mark). A record whose key another replica
/// holds does not take the key over.
fn write_batch(
    connection: &mut Connection,
    batch: &[(String, Record)],
    runner: &str,
    retention: Duration,
    outage: &Outage,
) -> redis::RedisResult<()> {
    let conflicts = locked(&outage.conflicts);
    let mut pipe = redis::pipe();
    for (owner, record) in batch {
        let Ok(json) = serde_json::to_vec(record) else {
            continue;
        };
        let ttl = ttl(record, retention);
        pipe.pset_ex(record_key(owner, &record.id), json, ttl)
            .ignore()
            .zadd(index_key(owner), &record.id, record.started_ms)
            .ignore();
        if record.end.is_none() {
            pipe.sadd(running_key(owner), &record.id).ignore();
        } else {
            pipe.srem(running_key(owner), &record.id).ignore();
        }
        if let Some(key) = &record.idempotency_key
            && !conflicts.contains_key(&(owner.clone(), record.id.clone()))
        {
            pipe.pset_ex(idempotency_key(owner, key), &record.id, ttl)
                .ignore();
        }
        if let Some(task_id) = &record.task_id {
            pipe.pset_ex(task_key(owner, task_id), &record.id, ttl)
                .ignore();
        }
    }
    drop(conflicts);
    pipe.pset_ex(runner_key(runner), "running", ms(RUNNER_GONE_AFTER))
        .ignore();
    pipe.query::<()>(connection)
}
