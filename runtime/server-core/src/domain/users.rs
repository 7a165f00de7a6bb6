//! Hub mode: every user of a JupyterHub gets a domain of their own — notebooks in use, default
//! kernel, kernels we started, spare kernels, change notifications — pointed at their own
//! single-user server with their own API token. A caller reaches only the domain of the user
//! their token belongs to, so no id or name they pass can name another user's notebook or
//! kernel: it is simply not in their domain, and their traffic goes to their server only.
//!
//! Tokens are checked with the Hub and the answer kept for [`IDENTITY_TTL`], so a revoked
//! token is refused within that time. A user's server is started on demand, with the Hub's
//! spawn progress passed on to the caller.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{Domain, Error, Message, Settings, Step};
use crate::capabilities::Capabilities;
use crate::hooks::Hooks;
use crate::say;
use jupyter_client::Jupyter;
use jupyter_client::auth::{Auth, RotatingToken, Secret};
use jupyter_client::hub::{HubClient, HubError, HubUser, ServerState};
use jupyter_client::rest::JupyterRest;

/// How long the Hub's answer about a token is trusted: a revoked token is refused at most
/// this long after the Hub stops accepting it.
pub const IDENTITY_TTL: Duration = Duration::from_secs(10);
/// How often the Hub is asked, while a call runs, whether the caller's server still runs: a
/// server stopped under a call (a kernel's websocket is then redirected to the Hub, which
/// looks like a network blip) ends the call within about this long.
pub const WATCH_EVERY: Duration = Duration::from_secs(4);
/// How many token answers are kept before the expired ones are swept.
const SWEEP_AT: usize = 1024;

/// Where spawn progress goes: (done, total, message).
pub type Progress<'a> = &'a (dyn Fn(f64, Option<f64>, String) + Send + Sync);

/// Who a caller is, as the Hub said for their token.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: String,
    pub token: Secret,
}

/// Every user's domain, and what the Hub said about the tokens we were shown.
pub struct Users {
    hub: HubClient,
    settings: Settings,
    capabilities: Arc<Capabilities>,
    hooks: Arc<Hooks>,
    /// By SHA-256 of the token, so a lookup compares digests, never the secret itself.
    identities: Mutex<HashMap<[u8; 32], (Instant, HubUser)>>,
    users: Mutex<HashMap<String, Arc<UserState>>>,
}

/// One user's state.
struct UserState {
    domain: Arc<Domain>,
    /// The token their traffic carries: the latest one they presented.
    token: Arc<RotatingToken>,
    /// Held while their server is checked or started, so concurrent calls start it once.
    /// `true` once the domain's Jupyter is known to be their running server.
    serving: tokio::sync::Mutex<bool>,
}

fn digest(token: &Secret) -> [u8; 32] {
    Sha256::digest(token.expose().as_bytes()).into()
}

impl Users {
    pub fn new(
        hub: HubClient,
        settings: Settings,
        capabilities: Arc<Capabilities>,
        hooks: Arc<Hooks>,
    ) -> Self {
        Users {
            hub,
            settings,
            capabilities,
            hooks,
            identities: Mutex::default(),
            users: Mutex::default(),
        }
    }

    /// The Hub's public URL, as messages name it.
    pub fn hub(&self) -> String {
        self.hub.shown()
    }

    /// Who a token belongs to: the Hub's answer, kept for [`IDENTITY_TTL`].
    pub async fn identify(&self, token: &Secret) -> Result<Caller, HubError> {
        let key = digest(token);
        let cached = {
            let identities = self.identities.lock().expect("identities lock");
            identities
                .get(&key)
                .filter(|(at, _)| at.elapsed() < IDENTITY_TTL)
                .map(|(_, user)| user.clone())
        };
        let user = match cached {
            Some(user) => user,
            None => self.ask_hub(token).await?,
        };
        // Checked before the token is used or kept: a token that may not reach its user's
        // server (e.g. read:servers only) never replaces the one that may, and never rides a
        // connection someone else's token opened.
        if !user.may_use_own_server() {
            return Err(HubError::ScopeMissing {
                hub: self.hub.shown(),
                user: user.name,
            });
        }
        Ok(Caller {
            user: user.name,
            token: token.clone(),
        })
    }

    /// Asks the Hub about a token now, and keeps the answer.
    async fn ask_hub(&self, token: &Secret) -> Result<HubUser, HubError> {
        let key = digest(token);
        let answer = self.hub.user(token).await;
        let mut identities = self.identities.lock().expect("identities lock");
        if identities.len() >= SWEEP_AT {
            identities.retain(|_, (at, _)| at.elapsed() < IDENTITY_TTL);
        }
        match &answer {
            Ok(user) => {
                identities.insert(key, (Instant::now(), user.clone()));
            }
            Err(_) => {
                identities.remove(&key);
            }
        }
        answer
    }

    fn state_of(&self, caller: &Caller) -> Arc<UserState> {
        let mut users = self.users.lock().expect("users lock");
        let state = users.entry(caller.user.clone()).or_insert_with(|| {
            let token = Arc::new(RotatingToken::new(caller.token.clone()));
            let url = self.hub.server_url(&caller.user, None);
            let rest = JupyterRest::with_auth(url, Auth::Rotating(token.clone()));
            // Nothing is prepared (spare kernels) until their server is known to run.
            // Each user's execution records apart in the one store.
            let mut settings = self.settings.clone();
            settings.store = settings.store.map(|scope| scope.for_user(&caller.user));
            let domain = Domain::detached(
                settings,
                Jupyter::new(rest, self.hooks.clone()),
                self.capabilities.clone(),
                self.hooks.clone(),
            );
            // The runs a previous process left for this user: followed again or reported lost.
            if domain.executions.scope().is_some() {
                let resuming = domain.clone();
                tokio::spawn(async move { resuming.resume_executions().await });
            }
            Arc::new(UserState {
                domain,
                token,
                serving: tokio::sync::Mutex::new(false),
            })
        });
        state.token.set(&caller.token);
        state.clone()
    }

    /// The caller's domain as it is, without starting anything (resources, subscriptions).
    pub fn domain_of(&self, caller: &Caller) -> Arc<Domain> {
        self.state_of(caller).domain.clone()
    }

    /// The caller's domain, their server running: started (with the Hub's progress reported)
    /// when it is not.
    pub async fn ready_domain(
        &self,
        caller: &Caller,
        progress: Option<Progress<'_>>,
    ) -> Result<Arc<Domain>, Error> {
        let state = self.state_of(caller);
        let mut serving = state.serving.lock().await;
        let known = {
            let identities = self.identities.lock().expect("identities lock");
            identities
                .get(&digest(&caller.token))
                .filter(|(at, _)| at.elapsed() < IDENTITY_TTL)
                .map(|(_, user)| user.server.clone())
        };
        // The common case: a recent answer says it runs and the domain already uses it.
        if *serving && matches!(known, Some(ServerState::Ready(_))) {
            return Ok(state.domain.clone());
        }
        let report = |done: f64, message: String| {
            if let Some(progress) = progress {
                progress(done, Some(100.0), message);
            }
        };
        let mut user = self.ask_hub(&caller.token).await.map_err(Error::failed)?;
        let deadline = Instant::now() + self.hub.spawn_limit();
        loop {
            match user.server.clone() {
                ServerState::Ready(path) => {
                    if !*serving {
                        self.serve_from(&state, &caller.user, &path);
                        *serving = true;
                    }
                    return Ok(state.domain.clone());
                }
                ServerState::Unreported => {
                    // The Hub will not say whether it runs: the server itself is asked, on every
                    // call (such tokens are rare; a stopped server must not look alive).
                    let url = self.hub.server_url(&caller.user, None);
                    let probe =
                        JupyterRest::with_auth(url.clone(), Auth::Rotating(state.token.clone()));
                    if probe.status().await.is_err() {
                        if *serving {
                            *serving = false;
                            state.domain.notebooks.clear();
                        }
                        return Err(Error::failed(HubError::ServerUnreported {
                            hub: self.hub(),
                            user: caller.user.clone(),
                        }));
                    }
                    if !*serving {
                        self.serve_from(&state, &caller.user, url.path());
                        *serving = true;
                    }
                    return Ok(state.domain.clone());
                }
                ServerState::Stopped => {
                    // Whatever the domain held belonged to a server that is gone.
                    *serving = false;
                    tracing::info!(user = %caller.user, "starting the user's server on the Hub");
                    report(
                        0.0,
                        format!("Starting your server on the JupyterHub at {}", self.hub()),
                    );
                    self.hub
                        .start_server(&caller.token, &caller.user)
                        .await
                        .map_err(Error::failed)?;
                    self.follow(caller, deadline, &report).await?;
                }
                ServerState::Pending(what) if what == "spawn" => {
                    report(0.0, "Your server on the JupyterHub is starting".into());
                    self.follow(caller, deadline, &report).await?;
                }
                ServerState::Pending(what) => {
                    // Stopping: wait until it has stopped, then start it.
                    *serving = false;
                    report(
                        0.0,
                        format!("Your server on the JupyterHub is pending '{what}'; waiting"),
                    );
                    if Instant::now() > deadline {
                        return Err(Error::failed(HubError::SpawnTimeout {
                            hub: self.hub(),
                            seconds: self.hub.spawn_limit().as_secs(),
                        }));
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
            user = self.ask_hub(&caller.token).await.map_err(Error::failed)?;
        }
    }

    /// Follows a spawn until the Hub says it ended.
    async fn follow(
        &self,
        caller: &Caller,
        deadline: Instant,
        report: &(dyn Fn(f64, String) + Sync),
    ) -> Result<(), Error> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.hub
            .follow_progress(&caller.token, &caller.user, left, |event| {
                if let Some(message) = &event.message {
                    report(
                        event.progress.unwrap_or(0.0).clamp(0.0, 99.0),
                        message.clone(),
                    );
                }
            })
            .await
            .map_err(Error::failed)?;
        Ok(())
    }

    /// Points the user's domain at their (new) server: what it held is forgotten.
    fn serve_from(&self, state: &UserState, user: &str, path: &str) {
        let url = self.hub.server_url(user, Some(path));
        let rest = JupyterRest::with_auth(url, Auth::Rotating(state.token.clone()));
        state
            .domain
            .switch_to(Jupyter::new(rest, self.hooks.clone()));
    }

    /// After a failed call: when the caller's server is no longer running, says so (the next
    /// call starts it again); `None` when it runs, so the failure was something else.
    pub async fn explain_failure(&self, caller: &Caller) -> Option<Message> {
        let state = self.state_of(caller);
        let user = self.ask_hub(&caller.token).await.ok()?;
        if matches!(user.server, ServerState::Ready(_) | ServerState::Unreported) {
            return None;
        }
        let mut serving = state.serving.lock().await;
        if *serving {
            *serving = false;
            // Its kernels and rooms are gone with it.
            state.domain.notebooks.clear();
        }
        Some(say![
            format!(
                "Your Jupyter server on the JupyterHub at {} is not running (it was stopped or \
                 culled): its kernels, variables and notebooks in use are gone. Call again: the \
                 next call starts it, then ",
                self.hub()
            ),
            Step::OpenNotebook,
            " to reopen a notebook."
        ])
    }

    /// Resolves, with the explanation, once the caller's server is found not running; polls
    /// the Hub every [`WATCH_EVERY`] (run beside a call, which it outlives only if the server
    /// stops).
    pub async fn watch_server(&self, caller: &Caller) -> Message {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            if let Some(why) = self.explain_failure(caller).await {
                return why;
            }
        }
    }

    /// Every user's domain (to stop what we started at exit).
    pub fn all(&self) -> Vec<Arc<Domain>> {
        let users = self.users.lock().expect("users lock");
        users.values().map(|s| s.domain.clone()).collect()
    }
}
