//! What a session hears of changes: notebooks it subscribed to, the tool list, the resource and
//! prompt lists (extensions joining), the capability registry; bursts of changes settle into one notification.

use super::resources;

/// Waits for a change and for the burst it starts to settle (a guest adds its tools one by one),
/// so a client hears once; `false` when no change can come any more. The change counts as seen
/// only once this returns, so a wait dropped midway (another branch of a `select!` won) loses
/// nothing: the next wait sees it at once.
pub(super) async fn settled_change(changes: &mut tokio::sync::watch::Receiver<u64>) -> bool {
    if changes.clone().changed().await.is_err() {
        return false;
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    changes.borrow_and_update();
    true
}

/// The key of a session's tool-list watcher among its subscriptions (no URI is empty).
pub(super) const TOOLS_WATCHER: &str = "";

/// Waits for changes to the notebook a URI names; `None` when the change stream ends.
pub(super) async fn next_change_for(
    changes: &mut tokio::sync::broadcast::Receiver<String>,
    uris: &[String],
) -> Option<Vec<String>> {
    loop {
        match changes.recv().await {
            Ok(name) => {
                let hit: Vec<String> = uris
                    .iter()
                    .filter(|u| resources::concerns(u, &name))
                    .cloned()
                    .collect();
                if !hit.is_empty() {
                    return Some(hit);
                }
            }
            // Missed some changes: tell every subscriber to re-read.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return Some(uris.to_vec()),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
        }
    }
}
