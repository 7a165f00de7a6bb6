//! What a session hears of changes: notebooks it subscribed to, the tool list, the resource and
//! prompt lists (extensions joining), the capability registry; bursts of changes settle into one
//! notification. Heard through the 2025-11-25 era's `resources/subscribe` and list-changed
//! notifications, or the 2026-07-28 era's `listen` stream.

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};

use super::{McpServer, resources};

/// Waits for a change and for the burst it starts to settle (a guest adds its tools one by one),
/// so a client hears once; `false` when no change can come any more. The change counts as seen
/// only once this returns, so a wait dropped midway (another branch of a `select!` won) loses
/// nothing: the next wait sees it at once.
async fn settled_change(changes: &mut tokio::sync::watch::Receiver<u64>) -> bool {
    if changes.clone().changed().await.is_err() {
        return false;
    }
    settle(changes).await;
    true
}

/// Lets the burst a change started settle, marking its changes seen. In a `select!`, wait with
/// `changed()` (which is cancel-safe) and settle in the branch: a `settled_change` dropped while
/// it settles would lose the change it had seen.
async fn settle(changes: &mut tokio::sync::watch::Receiver<u64>) {
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    changes.borrow_and_update();
}

/// The key of a session's tool-list watcher among its subscriptions (no URI is empty).
const TOOLS_WATCHER: &str = "";

/// Waits for changes to the notebook a URI names; `None` when the change stream ends.
async fn next_change_for(
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

/// What a `resources/subscribe` watches: the capability registry (an extension still loading at
/// start declares its capabilities), or the notebooks in use.
enum Watched {
    Capabilities(tokio::sync::watch::Receiver<u64>),
    Notebooks(tokio::sync::broadcast::Receiver<String>),
}

impl Watched {
    /// Waits for a change of what `uris` name; `false` when no change can come any more.
    async fn changed(&mut self, uris: &[String]) -> bool {
        match self {
            Watched::Capabilities(changes) => settled_change(changes).await,
            Watched::Notebooks(changes) => next_change_for(changes, uris).await.is_some(),
        }
    }
}

/// What a `listen` stream tells next.
enum News {
    ToolList,
    ResourceList,
    PromptList,
    Capabilities,
    /// Subscribed notebook URIs that changed.
    Notebooks(Vec<String>),
}

impl McpServer {
    /// Keeps a session's watcher under `key`, stopping the one it replaces.
    fn keep_watcher(&self, key: String, watcher: tokio::task::AbortHandle) {
        if let Some(old) = self
            .subscriptions
            .lock()
            .expect("subscriptions lock")
            .insert(key, watcher)
        {
            old.abort();
        }
    }

    /// A session of the 2025-11-25 era hears of every change of the tools, resources and
    /// prompts (an extension ready after the handshake); the 2026-07-28 era asks for them in
    /// `listen`.
    pub(super) fn watch_lists(&self, context: NotificationContext<RoleServer>) {
        let mut tools = self.state.tools.changes();
        let mut resources = self.state.catalog.resource_changes();
        let mut prompts = self.state.catalog.prompt_changes();
        let peer = context.peer;
        let watcher = tokio::spawn(async move {
            loop {
                let sent = tokio::select! {
                    changed = settled_change(&mut tools) => {
                        changed && peer.notify_tool_list_changed().await.is_ok()
                    }
                    changed = settled_change(&mut resources) => {
                        changed && peer.notify_resource_list_changed().await.is_ok()
                    }
                    changed = settled_change(&mut prompts) => {
                        changed && peer.notify_prompt_list_changed().await.is_ok()
                    }
                };
                if !sent {
                    break;
                }
            }
        });
        self.keep_watcher(TOOLS_WATCHER.to_owned(), watcher.abort_handle());
    }

    /// `resources/subscribe`: a watcher that tells the session of each change of the resource.
    pub(super) fn subscribe_to(
        &self,
        request: SubscribeRequestParams,
        context: &RequestContext<RoleServer>,
    ) {
        let uri = request.uri;
        let peer = context.peer.clone();
        let mut watched = if uri == resources::CAPABILITIES_URI {
            Watched::Capabilities(self.state.domain.capabilities.changes())
        } else {
            Watched::Notebooks(self.domain(context).notebooks.watch_changes())
        };
        let changed = uri.clone();
        let watcher = tokio::spawn(async move {
            while watched.changed(std::slice::from_ref(&changed)).await {
                let param = ResourceUpdatedNotificationParam::new(changed.clone());
                if peer.notify_resource_updated(param).await.is_err() {
                    break;
                }
            }
        });
        self.keep_watcher(uri, watcher.abort_handle());
    }

    /// `resources/unsubscribe`: the resource's watcher stopped.
    pub(super) fn unsubscribe_from(&self, request: &UnsubscribeRequestParams) {
        if let Some(watcher) = self
            .subscriptions
            .lock()
            .expect("subscriptions lock")
            .remove(&request.uri)
        {
            watcher.abort();
        }
    }

    /// A `listen` stream: what the client accepted to hear, until it cancels or goes.
    pub(super) async fn listen_to(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let accepted = context.accepted();
        let uris = accepted.resource_subscriptions.clone().unwrap_or_default();
        let tools_wanted = accepted.tools_list_changed == Some(true);
        let resources_wanted = accepted.resources_list_changed == Some(true);
        let prompts_wanted = accepted.prompts_list_changed == Some(true);
        let capabilities_wanted = uris.iter().any(|u| u == resources::CAPABILITIES_URI);
        let mut tools = self.state.tools.changes();
        let mut resources = self.state.catalog.resource_changes();
        let mut prompts = self.state.catalog.prompt_changes();
        let mut capabilities = self.state.domain.capabilities.changes();
        let mut changes = self
            .domain(context.request_context())
            .notebooks
            .watch_changes();
        loop {
            // `changed()` is cancel-safe; the burst settles once its branch has won.
            let news = tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = tools.changed(), if tools_wanted => changed.ok().map(|()| News::ToolList),
                changed = resources.changed(), if resources_wanted => {
                    changed.ok().map(|()| News::ResourceList)
                }
                changed = prompts.changed(), if prompts_wanted => {
                    changed.ok().map(|()| News::PromptList)
                }
                changed = capabilities.changed(), if capabilities_wanted => {
                    changed.ok().map(|()| News::Capabilities)
                }
                hit = next_change_for(&mut changes, &uris), if !uris.is_empty() => {
                    hit.map(News::Notebooks)
                }
            };
            let Some(news) = news else { return Ok(()) };
            let sink = context.sink();
            let sent = match news {
                News::ToolList => {
                    settle(&mut tools).await;
                    sink.notify_tool_list_changed().await
                }
                News::ResourceList => {
                    settle(&mut resources).await;
                    sink.notify_resource_list_changed().await
                }
                News::PromptList => {
                    settle(&mut prompts).await;
                    sink.notify_prompt_list_changed().await
                }
                News::Capabilities => {
                    settle(&mut capabilities).await;
                    sink.notify_resource_updated(resources::CAPABILITIES_URI)
                        .await
                }
                News::Notebooks(hit) => {
                    let mut sent = Ok(());
                    for uri in hit {
                        sent = sink.notify_resource_updated(uri).await;
                        if sent.is_err() {
                            break;
                        }
                    }
                    sent
                }
            };
            if sent.is_err() {
                return Ok(());
            }
        }
    }
}
