//! The `IronicProvisioner` and what every verb shares: the client, the per-host memo behind its
//! lock, and turning a call's inner result into the trait's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::client::{ApiError, Client};
use super::errors::{Fail, Inner, redact};
use super::memo::Memo;
use super::node::DriverInfoOptions;
use super::options::IronicOptions;
use crate::{ErrorKind, HostInfo, ProvisionerError, Result, Step};

/// The ironic backend. Cheap to share; per-host memory sits behind a short-held lock and
/// one async lock per host keeps two calls for the same node from interleaving.
pub struct IronicProvisioner {
    pub(super) options: IronicOptions,
    pub(super) client: Client,
    memos: Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<Memo>>>>,
    pub(super) ready: Mutex<Option<Instant>>,
    pub(super) capacity: Mutex<Option<(Instant, usize)>>,
}

impl IronicProvisioner {
    pub fn new(options: IronicOptions) -> IronicProvisioner {
        let client = Client::new(
            options.endpoint.clone(),
            options.request_timeout,
            options.lock_retry,
        );
        IronicProvisioner {
            options,
            client,
            memos: Mutex::new(HashMap::new()),
            ready: Mutex::new(None),
            capacity: Mutex::new(None),
        }
    }

    pub fn options(&self) -> &IronicOptions {
        &self.options
    }

    pub(super) async fn memo(&self, key: &str) -> tokio::sync::OwnedMutexGuard<Memo> {
        let cell = self
            .memos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_string())
            .or_default()
            .clone();
        cell.lock_owned().await
    }

    pub(super) fn forget(&self, key: &str) {
        self.memos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    pub(super) fn driver_opts(&self) -> DriverInfoOptions {
        DriverInfoOptions {
            ipmi_cipher_suite: self.options.ipmi_cipher_suite,
            deploy_kernel: self.options.deploy_kernel.clone(),
            deploy_ramdisk: self.options.deploy_ramdisk.clone(),
            deploy_iso: self.options.deploy_iso.clone(),
            bootloader: self.options.deploy_bootloader.clone(),
        }
    }

    /// Why a node failed: its `last_error`, else the newest error of its history (Ironic
    /// clears `last_error` when a failed step's clean-up powers the node off).
    pub(super) async fn failure(&self, node: &serde_json::Value) -> String {
        if let Some(e) = super::node::last_error(node) {
            return e;
        }
        let path = format!("/v1/nodes/{}/history?detail=true", super::node::uuid(node));
        match self.client.get(&path).await {
            Ok(history) => super::node::newest_history_error(&history).unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    pub(super) fn wait<T>(&self, reason: impl Into<String>) -> Inner<Step<T>> {
        Ok(Step::waiting(self.options.poll_interval, reason))
    }

    /// Turns an inner result into the trait's: locked → Waiting, and no message may carry
    /// the host's password (Ironic may echo driver_info in errors).
    pub(super) fn finish<T>(&self, host: &HostInfo, r: Inner<Step<T>>) -> Result<Step<T>> {
        match r {
            Ok(step) => Ok(step),
            Err(Fail::Api(ApiError::Locked(m), _)) => Ok(Step::waiting(
                self.options.poll_interval,
                format!("Ironic node busy: {}", redact(&m, host)),
            )),
            Err(e) => Err(self.error(host, e)),
        }
    }

    pub(super) fn error(&self, host: &HostInfo, e: Fail) -> ProvisionerError {
        let mut e = match e {
            Fail::P(p) => p,
            Fail::Api(api, what) => {
                let kind = match &api {
                    ApiError::Transport(_) => ErrorKind::Unreachable,
                    ApiError::Status { status, .. } if *status >= 500 => ErrorKind::ServerError,
                    ApiError::Locked(_) => ErrorKind::ServerError,
                    _ => ErrorKind::Failed,
                };
                let detail = match &api {
                    ApiError::Status { status: 401, .. } | ApiError::Status { status: 403, .. } => {
                        format!("{api} (Ironic refused ferrometal's API credentials)")
                    }
                    _ => api.to_string(),
                };
                ProvisionerError::new(kind, format!("Ironic: {what}: {detail}"))
            }
        };
        e.message = redact(&e.message, host);
        e
    }

    pub(super) fn path(host: &HostInfo) -> String {
        format!("/v1/nodes/{}", host.key)
    }
}
