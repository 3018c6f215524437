//! The controller against the in-process API server and the fixture provisioner.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrometal_api::annotations::Operation;
use ferrometal_api::{
    BareMetalHost, BareMetalHostSpec, BmcDetails, HardwareDetails, ProvisioningState,
};
use ferrometal_apiserver::{ApiServer, ServerConfig};
use ferrometal_bmc::PowerState;
use ferrometal_controller::ControllerConfig;
use ferrometal_provisioner::fixture::FixtureProvisioner;
use ferrometal_provisioner::{
    Deployment, ErrorKind, HostInfo, PowerOffMode, Provisioner, ProvisionerError, Registration,
    Result, Step,
};
use ferrometal_test_support::poll;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

/// The fixture answers at once: 20 ms polls, 30 s at most.
const PATIENCE: poll::Patience = poll::Patience {
    tries: 1500,
    every: Duration::from_millis(20),
};

/// (type, reason, note) of an Event.
fn triple(e: k8s_openapi::api::events::v1::Event) -> (String, String, String) {
    (
        e.type_.unwrap_or_default(),
        e.reason.unwrap_or_default(),
        e.note.unwrap_or_default(),
    )
}

pub const NS: &str = "default";
pub const GOOD_PASSWORD: &str = "right-password";

/// The fixture behind a BMC that only accepts [`GOOD_PASSWORD`].
pub struct Checked {
    pub fixture: Arc<FixtureProvisioner>,
    pub password: Mutex<String>,
    /// `is_ready` calls so far.
    pub readiness_checks: std::sync::atomic::AtomicUsize,
}

impl Checked {
    fn check(&self, host: &HostInfo) -> Result<()> {
        if host.credentials.password() == self.password.lock().unwrap().as_str() {
            Ok(())
        } else {
            Err(ProvisionerError::new(
                ErrorKind::Credentials,
                format!("BMC {} refused the credentials (401)", host.bmc.authority()),
            ))
        }
    }
}

#[async_trait::async_trait]
impl Provisioner for Checked {
    fn name(&self) -> &'static str {
        "checked-fixture"
    }
    async fn is_ready(&self) -> bool {
        self.readiness_checks
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.fixture.is_ready().await
    }
    async fn has_capacity(&self, busy: usize) -> bool {
        self.fixture.has_capacity(busy).await
    }
    async fn register(&self, host: &HostInfo, changed: bool) -> Result<Step<Registration>> {
        self.check(host)?;
        self.fixture.register(host, changed).await
    }
    async fn inspect(
        &self,
        host: &HostInfo,
        refresh: bool,
    ) -> Result<Step<Option<HardwareDetails>>> {
        self.fixture.inspect(host, refresh).await
    }
    async fn prepare(&self, host: &HostInfo) -> Result<Step> {
        self.fixture.prepare(host).await
    }
    async fn provision(&self, host: &HostInfo, d: &Deployment) -> Result<Step> {
        self.fixture.provision(host, d).await
    }
    async fn deprovision(&self, host: &HostInfo) -> Result<Step> {
        self.fixture.deprovision(host).await
    }
    async fn adopt(&self, host: &HostInfo, d: &Deployment) -> Result<Step> {
        self.fixture.adopt(host, d).await
    }
    async fn power_state(&self, host: &HostInfo) -> Result<PowerState> {
        self.fixture.power_state(host).await
    }
    async fn power_on(&self, host: &HostInfo) -> Result<Step> {
        self.fixture.power_on(host).await
    }
    async fn power_off(&self, host: &HostInfo, mode: PowerOffMode) -> Result<Step> {
        self.fixture.power_off(host, mode).await
    }
    async fn operation(&self, host: &HostInfo, op: Operation) -> Result<Step> {
        self.fixture.operation(host, op).await
    }
    async fn detach(&self, host: &HostInfo) -> Result<Step> {
        self.fixture.detach(host).await
    }
    async fn delete(&self, host: &HostInfo) -> Result<Step> {
        self.fixture.delete(host).await
    }
}

pub struct Harness {
    pub server: ApiServer,
    pub client: Client,
    pub fixture: Arc<FixtureProvisioner>,
    pub checked: Arc<Checked>,
    pub hosts: Api<BareMetalHost>,
    pub secrets: Api<Secret>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
}

/// Test timing: seconds and milliseconds instead of metal3's minutes.
pub fn fast_config() -> ControllerConfig {
    ControllerConfig {
        power_poll_interval: Duration::from_millis(500),
        backoff_base: Duration::from_millis(100),
        backoff_cap: Duration::from_secs(2),
        delayed_retry: Duration::from_millis(100),
        detached_recheck: Duration::from_secs(5),
        not_ready_retry: Duration::from_millis(100),
        api_error_backoff: Duration::from_millis(50),
        ..ControllerConfig::default()
    }
}

impl Harness {
    pub async fn start(fixture: FixtureProvisioner) -> Harness {
        Harness::start_with(fixture, fast_config()).await
    }

    pub async fn start_with(fixture: FixtureProvisioner, config: ControllerConfig) -> Harness {
        init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let server = ApiServer::open(ServerConfig::new(dir.path()))
            .await
            .unwrap();
        let client = server.client();
        install_crds(&client).await;
        let fixture = Arc::new(fixture);
        let checked = Arc::new(Checked {
            fixture: fixture.clone(),
            password: Mutex::new(GOOD_PASSWORD.into()),
            readiness_checks: Default::default(),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(ferrometal_controller::run(
            client.clone(),
            checked.clone(),
            config,
            async move {
                let _ = stopped.await;
            },
        ));
        Harness {
            hosts: Api::namespaced(client.clone(), NS),
            secrets: Api::namespaced(client.clone(), NS),
            server,
            client,
            fixture,
            checked,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        }
    }

    /// Stops the controller and starts a fresh one (new process memory, same provisioner).
    pub async fn restart(&mut self, config: ControllerConfig) {
        self.stop().await;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        self.task = Some(tokio::spawn(ferrometal_controller::run(
            self.client.clone(),
            self.checked.clone(),
            config,
            async move {
                let _ = stopped.await;
            },
        )));
        self.stop = Some(stop);
    }

    /// Stops the controller and waits for it to return.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("controller stops")
                .unwrap()
                .unwrap();
        }
    }

    pub async fn secret(&self, name: &str, password: &str) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.data = Some(BTreeMap::from([
            ("username".into(), ByteString(b"admin".to_vec())),
            ("password".into(), ByteString(password.as_bytes().to_vec())),
        ]));
        match self.secrets.create(&PostParams::default(), &s).await {
            Ok(s) => s,
            Err(kube::Error::Api(e)) if e.code == 409 => self
                .secrets
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": s.data})),
                )
                .await
                .unwrap(),
            Err(e) => panic!("secret: {e}"),
        }
    }

    pub fn spec(&self, secret: &str) -> BareMetalHostSpec {
        BareMetalHostSpec {
            bmc: Some(BmcDetails {
                address: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1".into(),
                credentials_name: secret.into(),
                disable_certificate_verification: false,
            }),
            online: true,
            ..Default::default()
        }
    }

    pub async fn create(
        &self,
        name: &str,
        spec: BareMetalHostSpec,
        annotations: &[(&str, &str)],
    ) -> BareMetalHost {
        let mut h = BareMetalHost::new(name, spec);
        h.metadata.namespace = Some(NS.into());
        if !annotations.is_empty() {
            h.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        self.hosts.create(&PostParams::default(), &h).await.unwrap()
    }

    /// Secret + host, then wait until the host is available.
    pub async fn available_host(&self, name: &str) -> BareMetalHost {
        self.secret(&format!("{name}-bmc"), GOOD_PASSWORD).await;
        self.create(name, self.spec(&format!("{name}-bmc")), &[])
            .await;
        self.wait(name, "available and on", |h| {
            h.state() == ProvisioningState::Available
                && h.status.as_ref().is_some_and(|s| s.powered_on)
        })
        .await
    }

    pub async fn get(&self, name: &str) -> BareMetalHost {
        self.hosts.get(name).await.unwrap()
    }

    /// Polls (bounded) until `ok` holds for the host.
    pub async fn wait(
        &self,
        name: &str,
        what: &str,
        ok: impl Fn(&BareMetalHost) -> bool,
    ) -> BareMetalHost {
        poll::host(&self.hosts, PATIENCE, name, what, ok).await
    }

    /// Polls (bounded) until `ok` holds.
    pub async fn until(&self, what: &str, ok: impl Fn() -> bool) {
        for _ in 0..PATIENCE.tries {
            if ok() {
                return;
            }
            tokio::time::sleep(PATIENCE.every).await;
        }
        panic!("never: {what}");
    }

    pub async fn wait_gone(&self, name: &str) {
        poll::host_gone(&self.hosts, PATIENCE, name).await
    }

    pub async fn annotate(&self, name: &str, key: &str, value: Option<&str>) {
        self.hosts
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
            )
            .await
            .unwrap();
    }

    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        self.hosts
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .unwrap();
    }

    pub async fn delete(&self, name: &str) {
        self.hosts
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }

    /// (type, reason, note) of the Events about host `name`, oldest first.
    pub async fn events(&self, name: &str) -> Vec<(String, String, String)> {
        poll::host_events(&self.event_api(), name)
            .await
            .into_iter()
            .map(triple)
            .collect()
    }

    fn event_api(&self) -> Api<k8s_openapi::api::events::v1::Event> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn has_event(&self, name: &str, reason: &str) -> bool {
        self.events(name).await.iter().any(|(_, r, _)| r == reason)
    }

    pub async fn wait_event(&self, name: &str, reason: &str) -> (String, String, String) {
        triple(poll::host_event(&self.event_api(), PATIENCE, name, reason).await)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

pub fn key(name: &str) -> String {
    format!("{NS}~{name}")
}

async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in ferrometal_api::crds() {
        let name = crd.name_any();
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating CRD {name}: {e}"),
        }
        let established = kube::runtime::wait::await_condition(
            crds.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .expect("CRD established")
            .unwrap();
    }
}
