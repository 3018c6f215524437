//! The `ironic` backend: OpenStack Ironic does the BMC work (every dialect its drivers speak,
//! image writing, cleaning) and ferrometal drives it through its REST API.
//!
//! Each host is one Ironic node named `namespace~name`. Every call reads the node once (one
//! `GET /v1/nodes/{name}`), looks at its `provision_state`, and issues at most one action, so
//! calls never block and repeat safely. What the process remembers per host is small: which
//! action it issued and has not reported yet, the driver_info it wrote, and the phase the host
//! reached (manageable, available, active with which deployment). That memory is what lets a
//! host recover when Ironic loses its database: a node that vanished is created again and
//! brought back to that phase, and an active host is adopted, never deployed again.

pub mod client;
pub mod node;
pub mod supervisor;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferrometal_api::annotations::Operation;
use ferrometal_api::{AutomatedCleaningMode, HardwareDetails, InspectionMode};
use ferrometal_bmc::{Flavour, PowerState};
use reqwest::Method;
use serde_json::{Value, json};

use client::Client;
pub use client::{API_VERSION, ApiError, IronicEndpoint, LockRetry};
use node::{DeploySpec, DriverInfoOptions};
pub use supervisor::{IronicSupervisor, SupervisorConfig};

use crate::{
    Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner, ProvisionerError, Registration,
    Result, Step,
};

/// Knobs of the ironic backend.
#[derive(Debug, Clone)]
pub struct IronicOptions {
    pub endpoint: IronicEndpoint,
    /// Per-request timeout towards Ironic.
    pub request_timeout: Duration,
    /// Nodes Ironic may be inspecting, cleaning, deploying or tearing down at once (metal3: 20).
    pub max_busy: usize,
    /// Requeue while Ironic works on a node.
    pub poll_interval: Duration,
    /// Retries of a request that met a locked node before the call answers `Waiting`.
    pub lock_retry: LockRetry,
    /// `ipmi_cipher_suite` for IPMI BMCs (3 is the suite IPMI 2.0 makes mandatory).
    pub ipmi_cipher_suite: Option<u8>,
    /// Agent ramdisk URLs for disk-image deploys and cleaning (kernel + initramfs for network
    /// boot, ISO for virtual media). Live ISOs and adoption need none.
    pub deploy_kernel: Option<String>,
    pub deploy_ramdisk: Option<String>,
    pub deploy_iso: Option<String>,
    /// How long a soft power-off may take before the host is switched off hard.
    pub soft_power_off_grace: Duration,
    /// How long a positive readiness answer and a capacity count are reused.
    pub cache_ttl: Duration,
    /// Page size when listing nodes.
    pub page_size: usize,
}

impl IronicOptions {
    pub fn new(endpoint: IronicEndpoint) -> IronicOptions {
        IronicOptions {
            endpoint,
            request_timeout: Duration::from_secs(30),
            max_busy: 20,
            poll_interval: Duration::from_secs(2),
            lock_retry: LockRetry::default(),
            ipmi_cipher_suite: Some(3),
            deploy_kernel: None,
            deploy_ramdisk: None,
            deploy_iso: None,
            soft_power_off_grace: Duration::from_secs(180),
            cache_ttl: Duration::from_secs(5),
            page_size: 500,
        }
    }
}

/// A provision-state action this process issued and has not reported the outcome of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Manage,
    Inspect,
    Provide,
    Deploy,
    Undeploy,
    Adopt,
}

/// How far the host got, as far as this process knows.
#[derive(Debug, Clone, Default, PartialEq)]
enum Phase {
    #[default]
    Unknown,
    Manageable,
    Available,
    Active(DeploySpec),
}

#[derive(Debug, Clone)]
struct PowerRequest {
    target: &'static str,
    issued: Instant,
    /// The node's last_error when the request was made: a new one is this request's failure.
    error_before: Option<String>,
}

/// A power change Ironic still has not made after this long is issued again.
const POWER_ACTION_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Default)]
struct Memo {
    /// Hash of the driver_info last written (with the password); none: not written by us.
    written: Option<u64>,
    pending: Option<Pending>,
    phase: Phase,
    power: Option<PowerRequest>,
}

/// Errors inside a call: a locked node becomes `Waiting`, everything else a `ProvisionerError`.
enum Fail {
    Api(ApiError, String),
    P(ProvisionerError),
}

impl From<ProvisionerError> for Fail {
    fn from(e: ProvisionerError) -> Self {
        Fail::P(e)
    }
}

type Inner<T> = std::result::Result<T, Fail>;

/// Adds what the request was about to an API error.
trait Context<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Inner<T>;
}

impl<T> Context<T> for std::result::Result<T, ApiError> {
    fn ctx(self, what: impl FnOnce() -> String) -> Inner<T> {
        self.map_err(|e| Fail::Api(e, what()))
    }
}

/// The ironic backend. Cheap to share; per-host memory sits behind a short-held lock and
/// one async lock per host keeps two calls for the same node from interleaving.
pub struct IronicProvisioner {
    options: IronicOptions,
    client: Client,
    memos: Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<Memo>>>>,
    ready: Mutex<Option<Instant>>,
    capacity: Mutex<Option<(Instant, usize)>>,
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

    async fn memo(&self, key: &str) -> tokio::sync::OwnedMutexGuard<Memo> {
        let cell = self
            .memos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_string())
            .or_default()
            .clone();
        cell.lock_owned().await
    }

    fn forget(&self, key: &str) {
        self.memos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    fn driver_opts(&self) -> DriverInfoOptions {
        DriverInfoOptions {
            ipmi_cipher_suite: self.options.ipmi_cipher_suite,
            deploy_kernel: self.options.deploy_kernel.clone(),
            deploy_ramdisk: self.options.deploy_ramdisk.clone(),
            deploy_iso: self.options.deploy_iso.clone(),
        }
    }

    fn wait<T>(&self, reason: impl Into<String>) -> Inner<Step<T>> {
        Ok(Step::waiting(self.options.poll_interval, reason))
    }

    /// Turns an inner result into the trait's: locked → Waiting, and no message may carry
    /// the host's password (Ironic may echo driver_info in errors).
    fn finish<T>(&self, host: &HostInfo, r: Inner<Step<T>>) -> Result<Step<T>> {
        match r {
            Ok(step) => Ok(step),
            Err(Fail::Api(ApiError::Locked(m), _)) => Ok(Step::waiting(
                self.options.poll_interval,
                format!("Ironic node busy: {}", redact(&m, host)),
            )),
            Err(e) => Err(self.error(host, e)),
        }
    }

    fn error(&self, host: &HostInfo, e: Fail) -> ProvisionerError {
        let mut e = match e {
            Fail::P(p) => p,
            Fail::Api(api, what) => {
                let kind = match &api {
                    ApiError::Transport(_) => ErrorKind::Unreachable,
                    ApiError::Status { status, .. } if *status >= 500 => ErrorKind::Unreachable,
                    ApiError::Locked(_) => ErrorKind::Unreachable,
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

    fn path(host: &HostInfo) -> String {
        format!("/v1/nodes/{}", host.key)
    }

    /// The node, or `None` when Ironic does not know it.
    async fn get_node(&self, host: &HostInfo) -> Inner<Option<Value>> {
        match self.client.get(&Self::path(host)).await {
            Ok(node) => Ok(Some(node)),
            Err(ApiError::NotFound) => Ok(None),
            Err(e) => Err(Fail::Api(e, format!("reading node {}", host.key))),
        }
    }

    async fn provision_action(
        &self,
        host: &HostInfo,
        node: &Value,
        target: &str,
        extra: Option<Value>,
    ) -> Inner<()> {
        let mut body = extra.unwrap_or_else(|| json!({}));
        body["target"] = json!(target);
        self.client
            .call(
                Method::PUT,
                &format!("/v1/nodes/{}/states/provision", uuid(node)),
                Some(&body),
            )
            .await
            .ctx(|| format!("{target} on node {}", host.key))?;
        tracing::debug!(host = %host.key, target, "ironic provision action issued");
        Ok(())
    }

    async fn patch(&self, host: &HostInfo, node: &Value, ops: Vec<Value>) -> Inner<Value> {
        if ops.is_empty() {
            return Ok(node.clone());
        }
        let fields: Vec<String> = ops
            .iter()
            .filter_map(|o| o.get("path").and_then(Value::as_str).map(String::from))
            .collect();
        let answer = self
            .client
            .call(
                Method::PATCH,
                &format!("/v1/nodes/{}", uuid(node)),
                Some(&Value::Array(ops)),
            )
            .await
            .ctx(|| format!("updating {} of node {}", fields.join(", "), host.key))?;
        Ok(answer.unwrap_or_else(|| node.clone()))
    }

    /// Creates the node (with its boot MAC as a port) and asks Ironic to verify BMC access.
    async fn create(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        deploy: Option<&DeploySpec>,
    ) -> Inner<Value> {
        let mut body = node::create_body(host, &self.driver_opts());
        if let Some(spec) = deploy {
            body["instance_info"] = spec.instance_info.clone();
            if !spec.deploy_interface.is_empty() {
                body["deploy_interface"] = json!(spec.deploy_interface);
            }
            if !spec.boot_interface.is_empty() {
                body["boot_interface"] = json!(spec.boot_interface);
            }
        }
        let created = match self
            .client
            .call(Method::POST, "/v1/nodes", Some(&body))
            .await
        {
            Ok(n) => n.unwrap_or(Value::Null),
            // Another call created it meanwhile: use that one.
            Err(ApiError::Status { status: 409, .. }) => self
                .get_node(host)
                .await?
                .ok_or_else(|| ProvisionerError::new(ErrorKind::Failed, "node vanished"))?,
            Err(e) => return Err(Fail::Api(e, format!("creating node {}", host.key))),
        };
        memo.written = Some(fingerprint(&node::driver_info(host, &self.driver_opts())));
        memo.pending = None;
        if let Some(mac) = &host.boot_mac_address {
            let port = json!({"node_uuid": uuid(&created), "address": mac.to_ascii_lowercase(), "pxe_enabled": true});
            match self
                .client
                .call(Method::POST, "/v1/ports", Some(&port))
                .await
            {
                Ok(_) => {}
                Err(ApiError::Status {
                    status: 409,
                    message,
                }) => {
                    tracing::warn!(host = %host.key, %message, "boot MAC already a port in Ironic");
                }
                Err(e) => {
                    return Err(Fail::Api(
                        e,
                        format!("adding the boot MAC port of {}", host.key),
                    ));
                }
            }
        }
        tracing::info!(host = %host.key, uuid = uuid(&created), "ironic node created");
        Ok(created)
    }

    /// Writes driver_info (and the driver/interfaces) when they differ from what the host says
    /// or when the credentials changed. Ironic masks passwords, so the process remembers a hash
    /// of what it wrote; without that memory it writes once.
    async fn sync_driver_info(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: Value,
        credentials_changed: bool,
    ) -> Inner<Value> {
        let wanted = node::driver_info(host, &self.driver_opts());
        let print = fingerprint(&wanted);
        let shown_differs = node.get("driver_info") != Some(&node::masked(&wanted));
        if !credentials_changed && memo.written == Some(print) && !shown_differs {
            return Ok(node);
        }
        let d = node::driver_for(host.bmc.flavour);
        let mut ops = vec![json!({"op": "add", "path": "/driver_info", "value": wanted})];
        let state = provision_state(&node);
        if str_of(&node, "driver") != d.driver && matches!(state, "enroll" | "manageable") {
            for (path, value) in [
                ("/driver", d.driver),
                ("/boot_interface", d.boot),
                ("/power_interface", d.power),
                ("/management_interface", d.management),
                ("/inspect_interface", d.inspect),
            ] {
                ops.push(json!({"op": "add", "path": path, "value": value}));
            }
        }
        let node = self.patch(host, &node, ops).await?;
        memo.written = Some(print);
        Ok(node)
    }

    /// One step from enroll towards manageable; `None` once the node is past it.
    async fn ensure_managed(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: &Value,
    ) -> Inner<Option<Step<()>>> {
        match provision_state(node) {
            "enroll" => {
                if memo.pending == Some(Pending::Manage) {
                    memo.pending = None;
                    if let Some(err) = last_error(node) {
                        return Err(registration_error(host, &err).into());
                    }
                }
                self.provision_action(host, node, "manage", None).await?;
                memo.pending = Some(Pending::Manage);
                Ok(Some(Step::waiting(
                    self.options.poll_interval,
                    "Ironic is verifying BMC access",
                )))
            }
            "verifying" => Ok(Some(Step::waiting(
                self.options.poll_interval,
                "Ironic is verifying BMC access",
            ))),
            _ => {
                if memo.pending == Some(Pending::Manage) {
                    memo.pending = None;
                }
                Ok(None)
            }
        }
    }

    async fn do_register(
        &self,
        host: &HostInfo,
        credentials_changed: bool,
    ) -> Inner<Step<Registration>> {
        let mut memo = self.memo(&host.key).await;
        let node = match self.get_node(host).await? {
            None => self.create(host, &mut memo, None).await?,
            Some(node) => {
                self.sync_driver_info(host, &mut memo, node, credentials_changed)
                    .await?
            }
        };
        if let Some(Step::Waiting {
            requeue_after,
            reason,
        }) = self.ensure_managed(host, &mut memo, &node).await?
        {
            return Ok(Step::Waiting {
                requeue_after,
                reason,
            });
        }
        if memo.phase == Phase::Unknown {
            memo.phase = Phase::Manageable;
        }
        Ok(Step::Done(Registration {
            provisioner_id: uuid(&node).to_string(),
            power: node::power_of(&node),
        }))
    }

    /// Brings a vanished node back (Ironic lost its database, or someone deleted it): created
    /// again, verified, then taken to the phase this process knew, an active one by adoption.
    /// `Some(node)` once the node is usable for power calls.
    async fn heal(
        &self,
        host: &HostInfo,
        memo: &mut Memo,
        node: Option<Value>,
    ) -> Inner<Option<Value>> {
        let active = match &memo.phase {
            Phase::Active(spec) => Some(spec.clone()),
            _ => None,
        };
        let node = match node {
            Some(n) => n,
            None => {
                tracing::warn!(host = %host.key, "node missing from Ironic; registering it again");
                self.create(host, memo, active.as_ref()).await?;
                return Ok(None);
            }
        };
        if self.ensure_managed(host, memo, &node).await?.is_some() {
            return Ok(None);
        }
        let state = provision_state(&node);
        match (&memo.phase, state) {
            (Phase::Active(spec), "manageable") => {
                let node = self.apply_deploy(host, &node, spec).await?;
                self.provision_action(host, &node, "adopt", None).await?;
                memo.pending = Some(Pending::Adopt);
                Ok(None)
            }
            (Phase::Active(_), "adopting") => Ok(None),
            (Phase::Available, "manageable") => {
                self.provide(host, memo, &node).await?;
                Ok(None)
            }
            (Phase::Available, "cleaning" | "clean wait") => Ok(None),
            _ => {
                if matches!(memo.pending, Some(Pending::Adopt | Pending::Provide))
                    && !is_busy(state)
                {
                    memo.pending = None;
                }
                Ok(Some(node))
            }
        }
    }

    /// The node for a power call, healing it first when it vanished.
    async fn steady(&self, host: &HostInfo, memo: &mut Memo) -> Inner<Option<Value>> {
        let node = self.get_node(host).await?;
        self.heal(host, memo, node).await
    }

    /// The node for a lifecycle call; a vanished one is created again (`None` this time).
    async fn require(&self, host: &HostInfo, memo: &mut Memo) -> Inner<Option<Value>> {
        match self.get_node(host).await? {
            Some(n) => Ok(Some(n)),
            None => {
                tracing::warn!(host = %host.key, "node missing from Ironic; registering it again");
                let active = match &memo.phase {
                    Phase::Active(spec) => Some(spec.clone()),
                    _ => None,
                };
                self.create(host, memo, active.as_ref()).await?;
                Ok(None)
            }
        }
    }

    async fn provide(&self, host: &HostInfo, memo: &mut Memo, node: &Value) -> Inner<()> {
        let clean = host.automated_cleaning_mode != AutomatedCleaningMode::Disabled;
        if node.get("automated_clean").and_then(Value::as_bool) != Some(clean) {
            self.patch(
                host,
                node,
                vec![json!({"op": "add", "path": "/automated_clean", "value": clean})],
            )
            .await?;
        }
        self.provision_action(host, node, "provide", None).await?;
        memo.pending = Some(Pending::Provide);
        Ok(())
    }

    /// Refuses `what` (cleaning, disk-image and custom deploys all run inside Ironic's agent)
    /// when no agent ramdisk is configured for this host's boot interface, naming the flags to
    /// set: Ironic would otherwise fail each attempt with "Missing are: deploy_kernel...".
    fn need_agent(&self, host: &HostInfo, what: &str, alternative: &str) -> Inner<()> {
        let o = &self.options;
        let network = o.deploy_kernel.is_some() && o.deploy_ramdisk.is_some();
        let d = node::driver_for(host.bmc.flavour);
        let iso = o.deploy_iso.is_some() && d.virtual_media_boot == Some(d.boot);
        if network || iso {
            return Ok(());
        }
        Err(ProvisionerError::new(
            ErrorKind::Unsupported,
            format!(
                "{what} runs Ironic's agent ramdisk, and none is configured: start ferrometal with \
                 --deploy-kernel-url and --deploy-ramdisk-url (or --deploy-iso-url for a virtual-media BMC; \
                 environment DEPLOY_KERNEL_URL, DEPLOY_RAMDISK_URL, DEPLOY_ISO_URL), {alternative}"
            ),
        )
        .into())
    }

    /// Writes instance_info and the deploy/boot interfaces a deployment needs.
    async fn apply_deploy(&self, host: &HostInfo, node: &Value, spec: &DeploySpec) -> Inner<Value> {
        let mut ops =
            vec![json!({"op": "add", "path": "/instance_info", "value": spec.instance_info})];
        if !spec.deploy_interface.is_empty()
            && str_of(node, "deploy_interface") != spec.deploy_interface
        {
            ops.push(
                json!({"op": "add", "path": "/deploy_interface", "value": spec.deploy_interface}),
            );
        }
        if !spec.boot_interface.is_empty() && str_of(node, "boot_interface") != spec.boot_interface
        {
            ops.push(json!({"op": "add", "path": "/boot_interface", "value": spec.boot_interface}));
        }
        if let Some(hints) = &host.root_device_hints {
            ops.push(json!({"op": "add", "path": "/properties/root_device", "value": node::root_device(hints)}));
        }
        if let Some(caps) = node::boot_mode_capability(host.boot_mode) {
            ops.push(json!({"op": "add", "path": "/properties/capabilities", "value": caps}));
        }
        self.patch(host, node, ops).await
    }

    async fn do_inspect(&self, host: &HostInfo) -> Inner<Step<Option<HardwareDetails>>> {
        if host.inspection_mode == InspectionMode::Disabled {
            return Ok(Step::Done(None));
        }
        if host.bmc.flavour == Flavour::Ipmi {
            // IPMI has no inventory to read out of band (the agent would need a PXE network).
            tracing::info!(host = %host.key, "IPMI BMC: no out-of-band inspection");
            return Ok(Step::Done(None));
        }
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step.map_done());
        }
        match provision_state(&node) {
            "manageable" if memo.pending == Some(Pending::Inspect) => {
                memo.pending = None;
                let inventory = match self
                    .client
                    .get(&format!("/v1/nodes/{}/inventory", uuid(&node)))
                    .await
                {
                    Ok(v) => v.get("inventory").cloned().unwrap_or(Value::Null),
                    Err(ApiError::NotFound) => Value::Null,
                    Err(e) => {
                        return Err(Fail::Api(
                            e,
                            format!("reading the inventory of {}", host.key),
                        ));
                    }
                };
                let properties = node.get("properties").cloned().unwrap_or(Value::Null);
                let details = node::hardware_details(
                    &inventory,
                    &properties,
                    host.boot_mac_address.as_deref(),
                )?;
                Ok(Step::Done(Some(details)))
            }
            "inspect failed" if memo.pending == Some(Pending::Inspect) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!(
                        "inspection failed: {}",
                        last_error(&node).unwrap_or_default()
                    ),
                )
                .into())
            }
            "manageable" | "inspect failed" => {
                self.provision_action(host, &node, "inspect", None).await?;
                memo.pending = Some(Pending::Inspect);
                self.wait("Ironic inspection started")
            }
            "available" => {
                // Inspection runs from manageable only. The phase goes back too, so a power
                // call meanwhile does not take the node to available again.
                self.provision_action(host, &node, "manage", None).await?;
                memo.phase = Phase::Manageable;
                self.wait("node back to manageable for inspection")
            }
            "inspecting" | "inspect wait" => self.wait("Ironic is inspecting"),
            other => Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!("cannot inspect node {} in Ironic state {other:?}", host.key),
            )
            .into()),
        }
    }

    async fn do_prepare(&self, host: &HostInfo) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step);
        }
        match provision_state(&node) {
            "available" => {
                memo.pending = None;
                memo.phase = Phase::Available;
                Ok(Step::Done(()))
            }
            "active" => Ok(Step::Done(())),
            "manageable" => {
                if host.automated_cleaning_mode != AutomatedCleaningMode::Disabled {
                    self.need_agent(
                        host,
                        "automated cleaning (spec.automatedCleaningMode: metadata)",
                        "or set spec.automatedCleaningMode: disabled",
                    )?;
                }
                self.provide(host, &mut memo, &node).await?;
                self.wait("Ironic is making the node available")
            }
            "clean failed" if memo.pending == Some(Pending::Provide) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("cleaning failed: {}", last_error(&node).unwrap_or_default()),
                )
                .into())
            }
            "clean failed" | "inspect failed" | "adopt failed" => {
                self.provision_action(host, &node, "manage", None).await?;
                self.wait("node back to manageable")
            }
            state => self.wait(format!("Ironic state {state}")),
        }
    }

    async fn do_provision(&self, host: &HostInfo, deployment: &Deployment) -> Inner<Step> {
        let spec = node::deploy_spec(host, deployment)?;
        if spec.deploy_interface != "ramdisk" {
            let what = if spec.deploy_step.is_some() {
                "a custom deploy"
            } else {
                "writing a disk image"
            };
            self.need_agent(host, what, "or deploy a live-iso image")?;
        }
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.require(host, &mut memo).await? else {
            return self.wait("node registered again in Ironic");
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step);
        }
        let state = provision_state(&node);
        match state {
            "active" => {
                if !node::instance_matches(node.get("instance_info").unwrap_or(&Value::Null), &spec)
                {
                    return Err(ProvisionerError::new(
                        ErrorKind::Failed,
                        format!(
                            "node {} is active with another image; deprovision it first",
                            host.key
                        ),
                    )
                    .into());
                }
                memo.pending = None;
                memo.phase = Phase::Active(spec);
                Ok(Step::Done(()))
            }
            "deploy failed" if memo.pending == Some(Pending::Deploy) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("deploy failed: {}", last_error(&node).unwrap_or_default()),
                )
                .into())
            }
            "available" | "deploy failed" => {
                let node = self.apply_deploy(host, &node, &spec).await?;
                let mut extra = json!({});
                if let Some(drive) = node::configdrive(host, uuid(&node), deployment) {
                    extra["configdrive"] = drive;
                }
                if let Some(step) = &spec.deploy_step {
                    extra["deploy_steps"] =
                        json!([{"interface": "deploy", "step": step, "args": {}, "priority": 80}]);
                }
                self.provision_action(host, &node, "active", Some(extra))
                    .await?;
                memo.pending = Some(Pending::Deploy);
                self.wait("Ironic deploy started")
            }
            "manageable" => {
                self.provide(host, &mut memo, &node).await?;
                self.wait("Ironic is making the node available")
            }
            "clean failed" | "inspect failed" | "adopt failed" => {
                self.provision_action(host, &node, "manage", None).await?;
                self.wait("node back to manageable")
            }
            state => self.wait(format!("Ironic state {state}")),
        }
    }

    async fn do_deprovision(&self, host: &HostInfo) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.get_node(host).await? else {
            // Nothing is deployed through Ironic any more.
            memo.phase = Phase::Unknown;
            return Ok(Step::Done(()));
        };
        match provision_state(&node) {
            "available" | "manageable" | "enroll" | "inspect failed" => {
                memo.pending = None;
                memo.phase = if provision_state(&node) == "available" {
                    Phase::Available
                } else {
                    Phase::Manageable
                };
                Ok(Step::Done(()))
            }
            "error" | "clean failed" if memo.pending == Some(Pending::Undeploy) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!(
                        "deprovisioning failed: {}",
                        last_error(&node).unwrap_or_default()
                    ),
                )
                .into())
            }
            "active" | "deploy failed" | "error" | "wait call-back" => {
                self.provision_action(host, &node, "deleted", None).await?;
                memo.pending = Some(Pending::Undeploy);
                self.wait("Ironic tear-down started")
            }
            "clean failed" | "adopt failed" => {
                self.provision_action(host, &node, "manage", None).await?;
                self.wait("node back to manageable")
            }
            state => self.wait(format!("Ironic state {state}")),
        }
    }

    async fn do_adopt(&self, host: &HostInfo, deployment: &Deployment) -> Inner<Step> {
        let spec = if deployment.image.is_some() || deployment.custom_deploy.is_some() {
            Some(node::deploy_spec(host, deployment)?)
        } else {
            None
        };
        let mut memo = self.memo(&host.key).await;
        let node = match self.get_node(host).await? {
            Some(n) => n,
            None => {
                self.create(host, &mut memo, spec.as_ref()).await?;
                return self.wait("node created in Ironic for adoption");
            }
        };
        if let Some(step) = self.ensure_managed(host, &mut memo, &node).await? {
            return Ok(step);
        }
        match provision_state(&node) {
            "active" => {
                memo.pending = None;
                // Without a deployment, what the node carries is what to adopt again later.
                let spec = spec.unwrap_or_else(|| DeploySpec {
                    deploy_interface: str_of(&node, "deploy_interface").to_string(),
                    boot_interface: str_of(&node, "boot_interface").to_string(),
                    instance_info: node.get("instance_info").cloned().unwrap_or(json!({})),
                    deploy_step: None,
                    identity: String::new(),
                });
                memo.phase = Phase::Active(spec);
                Ok(Step::Done(()))
            }
            "adopt failed" if memo.pending == Some(Pending::Adopt) => {
                memo.pending = None;
                Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("adoption failed: {}", last_error(&node).unwrap_or_default()),
                )
                .into())
            }
            "manageable" | "adopt failed" => {
                let node = match &spec {
                    Some(spec) => self.apply_deploy(host, &node, spec).await?,
                    None => node,
                };
                self.provision_action(host, &node, "adopt", None).await?;
                memo.pending = Some(Pending::Adopt);
                self.wait("Ironic adoption started")
            }
            "available" => {
                // Adoption starts from manageable.
                self.provision_action(host, &node, "manage", None).await?;
                memo.phase = Phase::Manageable;
                self.wait("node back to manageable for adoption")
            }
            "deploy failed" => Err(ProvisionerError::new(
                ErrorKind::Failed,
                format!(
                    "cannot adopt: deploy failed: {}",
                    last_error(&node).unwrap_or_default()
                ),
            )
            .into()),
            state => self.wait(format!("Ironic state {state}")),
        }
    }

    /// Moves power towards `target` ("power on", "power off", "soft power off").
    async fn do_power(&self, host: &HostInfo, target: &'static str) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.steady(host, &mut memo).await? else {
            return self.wait("node being registered again in Ironic");
        };
        let want = if target == "power on" {
            PowerState::On
        } else {
            PowerState::Off
        };
        let now = node::power_of(&node);
        if now == want {
            memo.power = None;
            return Ok(Step::Done(()));
        }
        if node.get("target_power_state").is_some_and(|t| !t.is_null()) {
            return self.wait(format!("Ironic is changing power ({now})"));
        }
        let mut issue = target;
        if let Some(req) = memo
            .power
            .clone()
            .filter(|r| same_direction(r.target, target))
        {
            let age = req.issued.elapsed();
            let err = last_error(&node);
            if err.is_some() && err != req.error_before {
                memo.power = None;
                return Err(ProvisionerError::new(
                    ErrorKind::Failed,
                    format!("{} failed: {}", req.target, err.unwrap_or_default()),
                )
                .into());
            }
            let soft = req.target == "soft power off";
            if soft && (target == "power off" || age >= self.options.soft_power_off_grace) {
                // A hard request does not wait out a soft one; a soft one that outlasts its
                // grace period is forced.
                issue = "power off";
            } else if age < POWER_ACTION_TIMEOUT.max(self.options.soft_power_off_grace) {
                return self.wait(format!(
                    "{} issued {}s ago; Ironic reports {now}",
                    req.target,
                    age.as_secs()
                ));
            }
        }
        self.client
            .call(
                Method::PUT,
                &format!("/v1/nodes/{}/states/power", uuid(&node)),
                Some(&json!({"target": issue})),
            )
            .await
            .ctx(|| format!("{issue} on node {}", host.key))?;
        memo.power = Some(PowerRequest {
            target: issue,
            issued: Instant::now(),
            error_before: last_error(&node),
        });
        self.wait(format!("{issue} issued; Ironic reported {now}"))
    }

    async fn do_operation(&self, host: &HostInfo, op: Operation) -> Inner<Step> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.steady(host, &mut memo).await? else {
            return self.wait("node being registered again in Ironic");
        };
        let target = match op {
            Operation::PowerCycle | Operation::ForceRestart => "rebooting",
            Operation::GracefulRestart => "soft rebooting",
            Operation::ForceOff => "power off",
            Operation::ForceOn => "power on",
            Operation::GracefulShutdown => "soft power off",
            Operation::PxeOnce => {
                self.client
                    .call(
                        Method::PUT,
                        &format!("/v1/nodes/{}/management/boot_device", uuid(&node)),
                        Some(&json!({"boot_device": "pxe", "persistent": false})),
                    )
                    .await
                    .ctx(|| format!("one-time PXE boot on node {}", host.key))?;
                return Ok(Step::Done(()));
            }
        };
        self.client
            .call(
                Method::PUT,
                &format!("/v1/nodes/{}/states/power", uuid(&node)),
                Some(&json!({"target": target})),
            )
            .await
            .ctx(|| format!("{target} on node {}", host.key))?;
        memo.power = None;
        Ok(Step::Done(()))
    }

    async fn do_boot_device(&self, host: &HostInfo, device: &str) -> Inner<()> {
        let mut memo = self.memo(&host.key).await;
        let Some(node) = self.steady(host, &mut memo).await? else {
            return Err(ProvisionerError::new(
                ErrorKind::Unreachable,
                format!("node {} is being registered again in Ironic", host.key),
            )
            .into());
        };
        self.client
            .call(
                Method::PUT,
                &format!("/v1/nodes/{}/management/boot_device", uuid(&node)),
                Some(&json!({"boot_device": device, "persistent": false})),
            )
            .await
            .ctx(|| format!("one-time {device} boot on node {}", host.key))?;
        Ok(())
    }

    /// Removes the node without any tear-down: maintenance first, so Ironic neither cleans nor
    /// touches power, then delete.
    async fn do_remove(&self, host: &HostInfo) -> Inner<Step> {
        let memo = self.memo(&host.key).await;
        let Some(node) = self.get_node(host).await? else {
            drop(memo);
            self.forget(&host.key);
            return Ok(Step::Done(()));
        };
        if node.get("maintenance").and_then(Value::as_bool) != Some(true) {
            self.client
                .call(
                    Method::PUT,
                    &format!("/v1/nodes/{}/maintenance", uuid(&node)),
                    Some(&json!({"reason": "removed from ferrometal"})),
                )
                .await
                .ctx(|| format!("maintenance on node {}", host.key))?;
        }
        match self
            .client
            .call(Method::DELETE, &format!("/v1/nodes/{}", uuid(&node)), None)
            .await
        {
            Ok(_) | Err(ApiError::NotFound) => {}
            Err(e) => return Err(Fail::Api(e, format!("deleting node {}", host.key))),
        }
        tracing::info!(host = %host.key, "ironic node deleted");
        drop(memo);
        self.forget(&host.key);
        Ok(Step::Done(()))
    }

    /// Nodes Ironic is busy with, counted over all pages.
    async fn busy_nodes(&self) -> std::result::Result<usize, ApiError> {
        let nodes = self
            .client
            .list(
                "/v1/nodes?fields=uuid,provision_state",
                "nodes",
                self.options.page_size,
            )
            .await?;
        Ok(nodes.iter().filter(|n| is_busy(provision_state(n))).count())
    }
}

impl<T> Step<T> {
    fn map_done<U>(self) -> Step<U> {
        match self {
            Step::Waiting {
                requeue_after,
                reason,
            } => Step::Waiting {
                requeue_after,
                reason,
            },
            Step::Done(_) => unreachable!("only waiting steps are mapped"),
        }
    }
}

/// Ironic's virtual media API needs API version 1.89 (1.93 to read it back); this client
/// speaks 1.81 throughout, so media tasks are refused with the way out.
fn vmedia_unsupported(host: &HostInfo) -> ProvisionerError {
    ProvisionerError::new(
        ErrorKind::Unsupported,
        format!(
            "virtual media tasks for host {} are not run through Ironic (its vmedia API needs API 1.89; ferrometal speaks 1.81): use the redfish provisioner for media tasks",
            host.key
        ),
    )
}

fn uuid(node: &Value) -> &str {
    str_of(node, "uuid")
}

fn str_of<'a>(node: &'a Value, key: &str) -> &'a str {
    node.get(key).and_then(Value::as_str).unwrap_or("")
}

fn provision_state(node: &Value) -> &str {
    str_of(node, "provision_state")
}

fn last_error(node: &Value) -> Option<String> {
    node.get("last_error")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

fn is_busy(state: &str) -> bool {
    node::BUSY_STATES.contains(&state)
}

fn same_direction(a: &str, b: &str) -> bool {
    (a == "power on") == (b == "power on")
}

fn fingerprint(v: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

/// Never let the host's password through, whatever Ironic echoed.
fn redact(message: &str, host: &HostInfo) -> String {
    let password = host.credentials.password();
    if password.len() >= 3 {
        message.replace(password, "******")
    } else {
        message.to_string()
    }
}

/// A failed BMC verification, as credentials or other trouble.
fn registration_error(host: &HostInfo, last_error: &str) -> ProvisionerError {
    let lower = last_error.to_ascii_lowercase();
    let kind = if [
        "401",
        "unauthorized",
        "authentication",
        "access denied",
        "accesserror",
        "password",
    ]
    .iter()
    .any(|w| lower.contains(w))
    {
        ErrorKind::Credentials
    } else {
        ErrorKind::Failed
    };
    ProvisionerError::new(
        kind,
        redact(
            &format!(
                "Ironic could not verify BMC {}: {last_error}",
                host.bmc.authority()
            ),
            host,
        ),
    )
}

#[async_trait::async_trait]
impl Provisioner for IronicProvisioner {
    fn name(&self) -> &'static str {
        "ironic"
    }

    /// Ironic answers `/v1`; a positive answer is reused for `cache_ttl` so a reconcile does not
    /// cost an extra request.
    async fn is_ready(&self) -> bool {
        let fresh = self
            .ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at.elapsed() < self.options.cache_ttl);
        if fresh {
            return true;
        }
        let ok = self.client.get("/v1").await.is_ok();
        *self.ready.lock().unwrap_or_else(|p| p.into_inner()) = ok.then(Instant::now);
        ok
    }

    /// Ironic's own count of busy nodes against `max_busy`. The count is reused for
    /// `cache_ttl`, and each grant adds one so a burst of hosts cannot all pass on one count.
    async fn has_capacity(&self, _busy: usize) -> bool {
        {
            let mut cached = self.capacity.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, count)) = cached.as_mut()
                && at.elapsed() < self.options.cache_ttl
            {
                if *count < self.options.max_busy {
                    *count += 1;
                    return true;
                }
                return false;
            }
        }
        match self.busy_nodes().await {
            Ok(count) => {
                let ok = count < self.options.max_busy;
                *self.capacity.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((Instant::now(), count + usize::from(ok)));
                ok
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot count busy Ironic nodes");
                false
            }
        }
    }

    async fn register(
        &self,
        host: &HostInfo,
        credentials_changed: bool,
    ) -> Result<Step<Registration>> {
        let r = self.do_register(host, credentials_changed).await;
        self.finish(host, r)
    }

    async fn inspect(
        &self,
        host: &HostInfo,
        _refresh: bool,
    ) -> Result<Step<Option<HardwareDetails>>> {
        let r = self.do_inspect(host).await;
        self.finish(host, r)
    }

    async fn prepare(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_prepare(host).await;
        self.finish(host, r)
    }

    async fn provision(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step> {
        let r = self.do_provision(host, deployment).await;
        self.finish(host, r)
    }

    async fn deprovision(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_deprovision(host).await;
        self.finish(host, r)
    }

    async fn adopt(&self, host: &HostInfo, deployment: &Deployment) -> Result<Step> {
        let r = self.do_adopt(host, deployment).await;
        self.finish(host, r)
    }

    /// Ironic's view of the power (one request). While a vanished node is being brought back
    /// the answer is `Unknown`, which changes nothing in the host's status.
    async fn power_state(&self, host: &HostInfo) -> Result<PowerState> {
        let mut memo = self.memo(&host.key).await;
        match self.steady(host, &mut memo).await {
            Ok(Some(node)) => Ok(node::power_of(&node)),
            Ok(None) | Err(Fail::Api(ApiError::Locked(_), _)) => Ok(PowerState::Unknown),
            Err(e) => Err(self.error(host, e)),
        }
    }

    async fn power_on(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_power(host, "power on").await;
        self.finish(host, r)
    }

    async fn power_off(&self, host: &HostInfo, mode: PowerOffMode) -> Result<Step> {
        if host.disable_power_off {
            return Err(ProvisionerError::new(
                ErrorKind::Unsupported,
                format!(
                    "host {} has disablePowerOff set: its power is never switched off",
                    host.key
                ),
            ));
        }
        let target = match mode {
            PowerOffMode::Soft => "soft power off",
            PowerOffMode::Hard => "power off",
        };
        let r = self.do_power(host, target).await;
        self.finish(host, r)
    }

    async fn operation(&self, host: &HostInfo, op: Operation) -> Result<Step> {
        if host.disable_power_off && matches!(op, Operation::ForceOff | Operation::GracefulShutdown)
        {
            return Err(ProvisionerError::new(
                ErrorKind::Unsupported,
                format!(
                    "host {} has disablePowerOff set: {} would switch it off",
                    host.key,
                    op.as_str()
                ),
            ));
        }
        let r = self.do_operation(host, op).await;
        self.finish(host, r)
    }

    async fn boot_device(
        &self,
        host: &HostInfo,
        device: Option<ferrometal_bmc::BootDevice>,
        _efi: bool,
    ) -> Result<()> {
        use ferrometal_bmc::BootDevice as B;
        // Ironic clears a one-time device itself at the next boot; the node's boot mode
        // capability, not the request, says UEFI or BIOS.
        let Some(device) = device else {
            return Ok(());
        };
        let name = match device {
            B::Pxe => "pxe",
            B::Hdd => "disk",
            B::Cd => "cdrom",
            B::BiosSetup => "bios",
            B::UefiHttp => {
                return Err(ProvisionerError::new(
                    ErrorKind::Unsupported,
                    "Ironic's boot device API has no UEFI HTTP boot",
                ));
            }
        };
        let r = self.do_boot_device(host, name).await;
        self.finish(host, r.map(Step::Done))?;
        Ok(())
    }

    async fn virtual_media(&self, host: &HostInfo, _url: Option<&str>) -> Result<()> {
        Err(vmedia_unsupported(host))
    }

    async fn media_state(&self, host: &HostInfo) -> Result<ferrometal_bmc::MediaStatus> {
        Err(vmedia_unsupported(host))
    }

    async fn detach(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_remove(host).await;
        self.finish(host, r)
    }

    async fn delete(&self, host: &HostInfo) -> Result<Step> {
        let r = self.do_remove(host).await;
        self.finish(host, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_bmc::{BmcAddress, Credentials};

    #[test]
    fn passwords_never_leave_in_messages() {
        let host = HostInfo {
            key: "ns~h".into(),
            provisioner_id: String::new(),
            bmc: BmcAddress::parse("redfish://10.0.0.1/redfish/v1/Systems/1").unwrap(),
            credentials: Credentials::new("admin", "hunter22"),
            disable_certificate_verification: false,
            boot_mac_address: None,
            boot_mode: None,
            inspection_mode: InspectionMode::Disabled,
            root_device_hints: None,
            automated_cleaning_mode: AutomatedCleaningMode::Disabled,
            disable_power_off: false,
        };
        let e = registration_error(&host, "HTTP 401 Unauthorized for user admin / hunter22");
        assert_eq!(e.kind, ErrorKind::Credentials);
        assert!(!e.message.contains("hunter22"), "{e}");
        assert!(e.message.contains("10.0.0.1:443"), "{e}");
        let e = registration_error(&host, "connection refused");
        assert_eq!(e.kind, ErrorKind::Failed);
    }
}
