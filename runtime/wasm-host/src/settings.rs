//! What does not change between instances of one guest (its names, config, policy cell,
//! limits, stop signal, log budget), and the link through which its host functions reach the
//! server once it exists. Every capability's slice of a guest's store reads it; it names none of
//! them.

use std::sync::{Arc, OnceLock, Weak};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use super::limits::LogBudget;
use super::policy::prompts::Prompted;
use super::policy::{Policies, Policy, PolicyCell, PromptRules, Revealed};
use server_core::domain::Domain;
use server_core::extensions::GuestLimits;

/// What does not change between instances of one guest.
#[derive(Debug)]
pub struct GuestSettings {
    /// The file's stem: the guest's name until it declares one.
    pub file_name: String,
    /// The name from its `identity`, once asked.
    declared: OnceLock<String>,
    /// The guest's `config` table as JSON.
    pub config_json: String,
    /// Its grants, hosts, directories and variables; the operator may change them while the
    /// server runs.
    pub policy: PolicyCell,
    pub limits: GuestLimits,
    /// Shared by every guest of the process.
    pub link: Arc<HostLink>,
    /// Cancelled when the guest is switched off or the server stops: every wait of its calls
    /// ends at once.
    pub stop: CancellationToken,
    pub log_budget: LogBudget,
    /// The secret values it obtained, redacted from its log lines and errors.
    pub revealed: Revealed,
    /// What the person granted it when asked, while the call or session lasts.
    pub prompted: Prompted,
}

impl GuestSettings {
    pub fn new(
        file_name: String,
        config_json: String,
        policy: Policy,
        limits: GuestLimits,
        link: Arc<HostLink>,
    ) -> Self {
        GuestSettings {
            file_name,
            declared: OnceLock::new(),
            config_json,
            policy: PolicyCell::new(policy),
            limits,
            link,
            stop: CancellationToken::new(),
            log_budget: LogBudget::default(),
            revealed: Revealed::default(),
            prompted: Prompted::default(),
        }
    }

    #[cfg(test)]
    pub fn for_tests(name: &str) -> Self {
        Self::for_tests_with(name, &[])
    }

    #[cfg(test)]
    pub fn for_tests_with(name: &str, grants: &[&str]) -> Self {
        let mut config = server_core::extensions::ExtensionConfig::with_defaults(name.into());
        config.grants = grants.iter().map(|g| g.to_string()).collect();
        Self::new(
            name.into(),
            "{}".into(),
            Policy::of(&config).expect("test grants"),
            GuestLimits::default(),
            Arc::default(),
        )
    }

    /// One name everywhere: the declared one once known, the file's before.
    pub fn name(&self) -> &str {
        self.declared.get().unwrap_or(&self.file_name)
    }

    /// Records the name the guest declared (the first one counts).
    pub fn declare(&self, name: &str) {
        let _ = self.declared.set(name.to_owned());
    }
}

impl super::policy::Governed for GuestSettings {
    fn name(&self) -> &str {
        GuestSettings::name(self)
    }

    fn policy(&self) -> &PolicyCell {
        &self.policy
    }

    fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    fn prompted(&self) -> &Prompted {
        &self.prompted
    }
}

/// The operator's secrets as the `secrets` host functions read them: the server's secret store
/// behind it (`jupyter-mcp-server secret set NAME`), connected by whoever starts the server.
pub trait SecretSource: Send + Sync {
    /// The secret's value, `Ok(None)` when there is none by that name; an error says why the
    /// store could not be read (never a value).
    fn get(&self, name: &str) -> Result<Option<String>, String>;
}

/// The operator's secrets file (`secret set`) as guests read it: the error is the store's own
/// (where the file is, what to do), never a value.
impl SecretSource for server_core::secrets::SecretStore {
    fn get(&self, name: &str) -> Result<Option<String>, String> {
        server_core::secrets::SecretStore::get(self, name)
            .map(|found| found.map(|value| value.expose().to_owned()))
            .map_err(|e| e.to_string())
    }
}

/// Where host functions reach the server. Guests load before the domain exists, so it is
/// connected afterwards; until then notebook functions answer `not-available`.
#[derive(Default)]
pub struct HostLink {
    server: OnceLock<(Weak<Domain>, Handle)>,
    /// Every guest's policy, for the management routes.
    pub policies: Arc<Policies>,
    /// The operator's secrets; until connected, `secrets.get` answers `not-available`.
    secrets: OnceLock<Arc<dyn SecretSource>>,
    /// What grant prompts may ask (`[grant_prompts]`); until set, the defaults.
    prompts: OnceLock<PromptRules>,
}

impl HostLink {
    /// Sets the operator's rules for grant prompts (once).
    pub fn provide_prompt_rules(&self, rules: PromptRules) {
        let _ = self.prompts.set(rules);
    }

    pub(super) fn prompt_rules(&self) -> PromptRules {
        self.prompts.get().cloned().unwrap_or_default()
    }

    /// Connects the secret store (once).
    pub fn provide_secrets(&self, source: Arc<dyn SecretSource>) {
        let _ = self.secrets.set(source);
    }

    pub(super) fn secrets(&self) -> Option<Arc<dyn SecretSource>> {
        self.secrets.get().cloned()
    }

    /// Called once, on the async runtime, when the domain exists.
    pub fn connect(&self, domain: &Arc<Domain>) {
        let _ = self.server.set((Arc::downgrade(domain), Handle::current()));
    }

    pub(super) fn get(&self) -> Option<(Arc<Domain>, Handle)> {
        let (domain, handle) = self.server.get()?;
        Some((domain.upgrade()?, handle.clone()))
    }
}

impl std::fmt::Debug for HostLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLink")
            .field("connected", &self.server.get().is_some())
            .finish()
    }
}
