//! The execution store's life beside the server: opened at start (the state directory's file,
//! or the Redis replicas share), flushed and pruned while serving, and, with a shared store,
//! watched for runs a stopped replica left.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::records::Records;
use super::shared::SharedStore;
use super::store::{Store, StoreError};
use crate::domain::Domain;
use crate::settings::{SharedStoreSettings, StateSettings};

/// The store the server's domains record into: the shared one when `--state-store` names it
/// (its failure stops the start: serving without it would answer from this replica's memory
/// alone), else the state directory's file, or none (memory only, the reason logged).
pub fn open(
    state: Option<StateSettings>,
    shared: Option<&SharedStoreSettings>,
) -> Result<Option<Arc<dyn Records>>, StoreError> {
    if let Some(shared) = shared {
        let store = SharedStore::connect(shared)?;
        tracing::info!(
            "execution records are kept in {}, shared with every replica using it",
            store.place()
        );
        return Ok(Some(Arc::new(store)));
    }
    let Some(settings) = state else {
        return Ok(None);
    };
    let dir = settings.dir.display().to_string();
    match Store::open(settings) {
        Ok(store) => {
            tracing::info!("execution records are kept in {}", store.path().display());
            Ok(Some(Arc::new(store)))
        }
        Err(e) => {
            tracing::warn!(
                "{e}; execution records are kept in memory only, so a restart forgets them \
                 (the state directory was {dir})"
            );
            Ok(None)
        }
    }
}

/// How often a replica looks for runs another one left (its liveness mark expired).
const LEFT_RUNS_EVERY: Duration = Duration::from_secs(2);

/// With a shared store: runs whose replica stopped are followed again here (or ended lost), by
/// whichever replica claims each first, in each of the `domains` (the server's, or in Hub mode
/// every user's this replica has served).
pub fn watch_left_runs(domains: impl Fn() -> Vec<Arc<Domain>> + Send + 'static) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(LEFT_RUNS_EVERY);
        every.tick().await;
        loop {
            every.tick().await;
            for domain in domains() {
                domain.resume_executions().await;
            }
        }
    });
}

/// How often the execution store is pruned (retention and size) while the server runs (a
/// prune commits with immediate durability, so it flushes too).
const PRUNE_EVERY: Duration = Duration::from_secs(300);

/// How often records written since are flushed to the disk (`Store::sync`): the most a power
/// cut can lose.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// Flushes the store every [`SYNC_EVERY`] and prunes it every [`PRUNE_EVERY`], off the runtime's
/// workers. A shared store has nothing to flush (its durability is its server's).
pub fn keep(store: Arc<dyn Records>) {
    if !store.shared() {
        let syncing = store.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SYNC_EVERY);
            loop {
                every.tick().await;
                let store = syncing.clone();
                match tokio::task::spawn_blocking(move || store.sync()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!("could not flush the execution store: {e}"),
                    Err(e) => tracing::warn!("the execution store's flush failed: {e}"),
                }
            }
        });
    }
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PRUNE_EVERY);
        every.tick().await; // opening pruned it
        loop {
            every.tick().await;
            let store = store.clone();
            let pruned = tokio::task::spawn_blocking(move || store.prune(SystemTime::now())).await;
            match pruned {
                Ok(Ok(pruned)) => tracing::debug!(?pruned, "execution store pruned"),
                Ok(Err(e)) => tracing::warn!("could not prune the execution store: {e}"),
                Err(e) => tracing::warn!("the execution store's pruning failed: {e}"),
            }
        }
    });
}
