//! The state every request shares: the systems, credentials, sessions and counters.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;

use crate::config::EmulatorConfig;
use crate::counters::Counters;
use crate::inventory;
use crate::media::MediaFetcher;
use crate::state::{MethodCells, RESET_TYPES, SystemCell};
use crate::subscriptions::Subscriptions;
use crate::update::Tasks;
use crate::volumes::Volumes;

/// Returned by the service to make hyper drop the connection unanswered.
#[derive(Debug)]
pub struct ResetConnection;

impl std::fmt::Display for ResetConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset by fault injection")
    }
}

impl std::error::Error for ResetConnection {}

#[derive(Default)]
pub struct Sessions {
    next_id: u64,
    by_token: HashMap<String, u64>,
    by_id: HashMap<u64, String>,
}

impl Sessions {
    pub fn create(&mut self) -> (u64, String) {
        self.next_id += 1;
        let id = self.next_id;
        let token = format!("{:032x}", rand::random::<u128>());
        self.by_token.insert(token.clone(), id);
        self.by_id.insert(id, token.clone());
        (id, token)
    }

    pub fn valid(&self, token: &str) -> bool {
        self.by_token.contains_key(token)
    }

    pub fn exists(&self, id: u64) -> bool {
        self.by_id.contains_key(&id)
    }

    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.by_id.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn remove(&mut self, id: u64) -> bool {
        match self.by_id.remove(&id) {
            Some(token) => {
                self.by_token.remove(&token);
                true
            }
            None => false,
        }
    }
}

pub struct App {
    pub systems: Vec<SystemCell>,
    pub power_delay: Duration,
    pub username: String,
    password: String,
    /// `base64(user:password)`, compared against the Basic credentials as is.
    basic_credentials: String,
    pub reset_types: Vec<&'static str>,
    /// `reset_types` as a JSON array, spliced into every system document.
    pub reset_types_json: String,
    pub by_method: MethodCells,
    pub sessions: Mutex<Sessions>,
    /// Documents that never change, rendered once.
    pub service_root: Bytes,
    pub systems_collection: Bytes,
    pub managers_collection: Bytes,
    /// Fetches inserted images; `None` records them unfetched.
    pub media: Option<MediaFetcher>,
    /// The EventService's subscriptions (one service for every system, as a multi-system
    /// BMC service has).
    subscriptions: Mutex<Subscriptions>,
    /// Each system's RAID volumes.
    volumes: Vec<Mutex<Volumes>>,
    /// Firmware update tasks, and how long one takes.
    pub tasks: Mutex<Tasks>,
    pub update_delay: Duration,
}

impl App {
    pub fn new(config: EmulatorConfig) -> Self {
        let basic_credentials = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", config.username, config.password));
        let reset_types: Vec<&'static str> = RESET_TYPES
            .iter()
            .copied()
            .filter(|t| !(config.omit_power_cycle && *t == "PowerCycle"))
            .collect();
        let reset_types_json =
            serde_json::to_string(&reset_types).expect("a list of strings serialises");
        Self {
            systems: (0..config.systems)
                .map(|_| SystemCell::new(config.initial_power))
                .collect(),
            power_delay: config.power_delay,
            basic_credentials,
            username: config.username,
            password: config.password,
            reset_types,
            reset_types_json,
            by_method: MethodCells::default(),
            sessions: Mutex::new(Sessions::default()),
            service_root: inventory::service_root().into(),
            systems_collection: inventory::systems_collection(config.systems).into(),
            managers_collection: inventory::managers_collection(config.systems).into(),
            media: config.fetch_media.then(MediaFetcher::new),
            subscriptions: Mutex::default(),
            volumes: (0..config.systems).map(|_| Mutex::default()).collect(),
            tasks: Mutex::default(),
            update_delay: config.update_delay,
        }
    }

    pub fn check_password(&self, username: &str, password: &str) -> bool {
        username == self.username && password == self.password
    }

    /// Basic credentials or a live session token.
    pub fn authorized(&self, headers: &http::HeaderMap) -> bool {
        if let Some(value) = headers.get(http::header::AUTHORIZATION)
            && let Ok(value) = value.to_str()
            && let Some((scheme, creds)) = value.split_once(' ')
            && scheme.eq_ignore_ascii_case("basic")
            && creds.trim() == self.basic_credentials
        {
            return true;
        }
        if let Some(token) = headers.get("x-auth-token")
            && let Ok(token) = token.to_str()
        {
            return self.sessions().valid(token);
        }
        false
    }

    pub fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subscriptions(&self) -> std::sync::MutexGuard<'_, Subscriptions> {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// System `index`'s RAID volumes; panics if out of range (routes check).
    pub fn volumes(&self, index: usize) -> std::sync::MutexGuard<'_, Volumes> {
        self.volumes[index]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn tasks(&self) -> std::sync::MutexGuard<'_, Tasks> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn counters(&self) -> Counters {
        let by_method = self.by_method.load();
        Counters {
            total: by_method.total(),
            by_method,
            systems: self.systems.iter().map(|s| s.counts.load()).collect(),
            open_sessions: self.sessions().by_id.len() as u64,
        }
    }

    pub fn reset_counters(&self) {
        self.by_method.clear();
        for s in &self.systems {
            s.counts.clear();
        }
    }
}
