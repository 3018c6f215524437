//! The controllers with a real backend on the in-process API server, and the end-to-end
//! scenario every backend must pass (the swap-the-provisioner proof).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::{
    BareMetalHost, ErrorType, HostClaim, HostDeployPolicy, OperationalStatus,
    ProvisioningState as S,
};
use ferrometal_apiserver::{ApiServer, ServerConfig};
use ferrometal_controller::ControllerConfig;
use ferrometal_provisioner::Provisioner;
use ferrometal_test_support::{peers, poll};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Real backends take seconds per step (Ironic): 50 ms polls, 2 minutes at most.
pub const PATIENCE: poll::Patience = poll::Patience {
    tries: 2400,
    every: Duration::from_millis(50),
};
/// Events follow the step that caused them: 30 s at most.
const EVENT_PATIENCE: poll::Patience = poll::Patience {
    tries: 600,
    every: Duration::from_millis(50),
};

pub const NS: &str = "default";

pub struct Stack {
    _server: ApiServer,
    pub client: kube::Client,
    pub hosts: Api<BareMetalHost>,
    pub secrets: Api<Secret>,
    pub events: Api<k8s_openapi::api::events::v1::Event>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

/// Test timing: seconds instead of metal3's minutes.
pub fn fast_config() -> ControllerConfig {
    ControllerConfig {
        power_poll_interval: Duration::from_millis(500),
        backoff_base: Duration::from_millis(200),
        backoff_cap: Duration::from_secs(2),
        delayed_retry: Duration::from_millis(200),
        ..ControllerConfig::default()
    }
}

impl Stack {
    pub async fn start(provisioner: Arc<dyn Provisioner>) -> Stack {
        Stack::start_with(provisioner, fast_config()).await
    }

    pub async fn start_with(provisioner: Arc<dyn Provisioner>, config: ControllerConfig) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let server = ApiServer::open(ServerConfig::new(dir.path()))
            .await
            .unwrap();
        let client = server.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in ferrometal_api::crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(ferrometal_controller::run(
            client.clone(),
            provisioner,
            config,
            async move {
                let _ = stopped.await;
            },
        ));
        Stack {
            client: client.clone(),
            hosts: Api::namespaced(client.clone(), NS),
            secrets: Api::namespaced(client.clone(), NS),
            events: Api::namespaced(client, NS),
            _server: server,
            stop: Some(stop),
            _dir: dir,
        }
    }

    /// Creates the credentials Secret, or changes its password.
    pub async fn secret(&self, name: &str, password: &str) {
        let data = BTreeMap::from([
            ("username".to_string(), ByteString(b"admin".to_vec())),
            (
                "password".to_string(),
                ByteString(password.as_bytes().to_vec()),
            ),
        ]);
        if self.secrets.get_opt(name).await.unwrap().is_some() {
            self.secrets
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": data})),
                )
                .await
                .unwrap();
        } else {
            let mut s = Secret::default();
            s.metadata.name = Some(name.into());
            s.data = Some(data);
            self.secrets
                .create(&PostParams::default(), &s)
                .await
                .unwrap();
        }
    }

    /// A host (offline unless `extra` says otherwise); `extra` is merged into its spec.
    pub async fn host(&self, name: &str, address: &str, secret: &str, extra: serde_json::Value) {
        let mut spec =
            json!({"online": false, "bmc": {"address": address, "credentialsName": secret}});
        if let (Some(b), serde_json::Value::Object(e)) = (spec.as_object_mut(), extra) {
            b.extend(e);
        }
        let host: BareMetalHost = serde_json::from_value(json!({
            "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name, "namespace": NS}, "spec": spec,
        }))
        .unwrap();
        self.hosts
            .create(&PostParams::default(), &host)
            .await
            .unwrap();
    }

    pub async fn patch(&self, name: &str, patch: serde_json::Value) {
        self.hosts
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// Sets (`Some`) or removes (`None`) one annotation on the host.
    pub async fn annotate(&self, name: &str, key: &str, value: Option<&str>) {
        self.patch(name, json!({"metadata": {"annotations": {key: value}}}))
            .await;
    }

    /// Polls (bounded; Ironic's steps take seconds) until `ok` holds for the host.
    pub async fn wait(
        &self,
        name: &str,
        what: &str,
        ok: impl Fn(&BareMetalHost) -> bool,
    ) -> BareMetalHost {
        poll::host(&self.hosts, PATIENCE, name, what, ok).await
    }

    /// Creates a BMCJob from its spec (YAML/JSON shape) in the test namespace.
    pub async fn job(&self, name: &str, spec: serde_json::Value) {
        let jobs: Api<ferrometal_api::job::BMCJob> = Api::namespaced(self.client.clone(), NS);
        let job = serde_json::from_value(json!({
            "apiVersion": "ferrometal.io/v1alpha1", "kind": "BMCJob",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }

    pub async fn wait_job(
        &self,
        name: &str,
        what: &str,
        ok: impl Fn(&ferrometal_api::job::BMCJob) -> bool,
    ) -> ferrometal_api::job::BMCJob {
        let jobs: Api<ferrometal_api::job::BMCJob> = Api::namespaced(self.client.clone(), NS);
        poll::object(&jobs, PATIENCE, name, what, ok).await
    }

    pub async fn wait_gone(&self, name: &str) {
        poll::host_gone(&self.hosts, PATIENCE, name).await
    }

    pub async fn event_reasons(&self, name: &str) -> Vec<String> {
        poll::host_events(&self.events, name)
            .await
            .into_iter()
            .map(|e| e.reason.unwrap_or_default())
            .collect()
    }

    pub async fn wait_event(&self, name: &str, reason: &str) {
        poll::host_event(&self.events, EVENT_PATIENCE, name, reason).await;
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The host's operational status (`OK` before it has a status).
pub fn operational(h: &BareMetalHost) -> OperationalStatus {
    h.status
        .as_ref()
        .map(|s| s.operational_status)
        .unwrap_or(OperationalStatus::Ok)
}

/// The host's `ferrometal.io/Blocked` condition while it is True.
pub fn blocked(h: &BareMetalHost) -> Option<ferrometal_api::Condition> {
    h.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "ferrometal.io/Blocked" && c.status == "True")
        .cloned()
}

/// Milestones of [`sushy_lifecycle`], for backend-specific checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Milestone {
    Available,
    Provisioned,
    Deleted,
    /// The tenant's claim provisioned its host (`lent`).
    ClaimProvisioned,
    /// The claim deleted, its host deprovisioned and free.
    ClaimReleased,
}

/// The scenario every backend passes against sushy-tools: a host whose inspection cannot work
/// gets a clear inspection error; another goes available → provisioned with a live ISO (media,
/// Cd boot and power checked on the peer) → deprovisioned → deleted. `extra` is merged into the
/// lifecycle host's spec; `at` runs the backend's own checks at each milestone.
pub async fn sushy_lifecycle(
    stack: &Stack,
    sushy: &peers::Sushy,
    files: &peers::FileServer,
    extra: serde_json::Value,
    at: impl Fn(Milestone),
) {
    stack.secret("bmc", "password").await;

    // sushy-tools' fake systems have no processors. Ironic's inspection fails on that, naming
    // it; the redfish backend records what the BMC reports and names the gap in the
    // InspectionIncomplete condition. (Under load another failure may come first; the
    // controller retries after its backoff.)
    stack
        .host(
            "inspected",
            &sushy.address("00000000-0000-4000-8000-000000000001"),
            "bmc",
            json!({}),
        )
        .await;
    stack
        .wait("inspected", "the missing processors named", |h| {
            h.status.as_ref().is_some_and(|s| {
                let failed = s.error_type == Some(ErrorType::Inspection)
                    && s.error_message.to_ascii_lowercase().contains("processors");
                let recorded = s.conditions.iter().any(|c| {
                    c.type_ == "ferrometal.io/InspectionIncomplete"
                        && c.message.contains("no processors")
                }) && s.hardware.as_ref().is_some_and(|hw| !hw.nics.is_empty());
                failed || recorded
            })
        })
        .await;

    // So the lifecycle host skips inspection.
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");
    let mut spec = json!({"inspectionMode": "disabled"});
    if let (Some(b), serde_json::Value::Object(e)) = (spec.as_object_mut(), extra) {
        b.extend(e);
    }
    stack.host("node", &address, "bmc", spec).await;
    stack
        .wait("node", "available", |h| h.state() == S::Available)
        .await;
    at(Milestone::Available);

    let url = files.url("live.iso");
    stack
        .patch(
            "node",
            json!({"spec": {"online": true, "image": {"url": url, "format": "live-iso"}}}),
        )
        .await;
    stack
        .wait("node", "provisioned", |h| h.state() == S::Provisioned)
        .await;
    let cd = sushy.virtual_cd(peers::SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true);
    assert_eq!(cd["Image"], url.as_str());
    let system = sushy.system(peers::SUSHY_SYSTEM_0);
    assert_eq!(system["PowerState"], "On");
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Cd");
    at(Milestone::Provisioned);

    stack
        .patch("node", json!({"spec": {"image": null, "online": false}}))
        .await;
    stack
        .wait("node", "available again", |h| h.state() == S::Available)
        .await;
    assert_eq!(sushy.virtual_cd(peers::SUSHY_SYSTEM_0)["Inserted"], false);
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "Off");

    stack
        .hosts
        .delete("node", &DeleteParams::default())
        .await
        .unwrap();
    stack.wait_gone("node").await;
    at(Milestone::Deleted);

    claim_lifecycle(stack, sushy, files, at).await;
}

fn claim_condition(c: &HostClaim, t: &str) -> bool {
    c.status.as_ref().is_some_and(|s| s.is_true(t))
}

async fn wait_claim(claims: &Api<HostClaim>, what: &str, ok: impl Fn(Option<&HostClaim>) -> bool) {
    for _ in 0..PATIENCE.tries {
        let c = claims.get_opt("web").await.unwrap();
        if ok(c.as_ref()) {
            return;
        }
        tokio::time::sleep(PATIENCE.every).await;
    }
    panic!("claim never {what}: {:?}", claims.get_opt("web").await);
}

/// The same backend from a tenant's HostClaim: bound by policy and selector, provisioned with
/// the tenant's user data copied next to the host, powered off through the claim, released.
async fn claim_lifecycle(
    stack: &Stack,
    sushy: &peers::Sushy,
    files: &peers::FileServer,
    at: impl Fn(Milestone),
) {
    let c = &stack.client;
    let pp = PostParams::default();
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "tenant"}})).unwrap();
    Api::all(c.clone()).create(&pp, &ns).await.unwrap();
    let policy: HostDeployPolicy = serde_json::from_value(json!({
        "apiVersion": "metal3.io/v1alpha1", "kind": "HostDeployPolicy",
        "metadata": {"name": "lend", "namespace": NS},
        "spec": {"hostClaimNamespaces": {"names": ["tenant"]}},
    }))
    .unwrap();
    Api::namespaced(c.clone(), NS)
        .create(&pp, &policy)
        .await
        .unwrap();
    let ud: Secret = serde_json::from_value(json!({
        "metadata": {"name": "ud", "namespace": "tenant"},
        "stringData": {"userData": "#cloud-config\nhostname: lent\n"},
    }))
    .unwrap();
    Api::namespaced(c.clone(), "tenant")
        .create(&pp, &ud)
        .await
        .unwrap();
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");
    stack
        .host(
            "lent",
            &address,
            "bmc",
            json!({"inspectionMode": "disabled", "automatedCleaningMode": "disabled"}),
        )
        .await;
    stack
        .patch("lent", json!({"metadata": {"labels": {"pool": "tenants"}}}))
        .await;
    stack
        .wait("lent", "available", |h| h.state() == S::Available)
        .await;
    let url = files.url("live.iso");
    let claims: Api<HostClaim> = Api::namespaced(c.clone(), "tenant");
    let claim: HostClaim = serde_json::from_value(json!({
        "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim",
        "metadata": {"name": "web", "namespace": "tenant"},
        "spec": {"poweredOn": true, "hostSelector": {"matchLabels": {"pool": "tenants"}},
                 "userData": {"name": "ud"}, "image": {"url": url, "format": "live-iso"}},
    }))
    .unwrap();
    claims.create(&PostParams::default(), &claim).await.unwrap();
    wait_claim(&claims, "provisioned", |c| {
        c.is_some_and(|c| claim_condition(c, "Provisioned") && claim_condition(c, "Ready"))
    })
    .await;
    let cd = sushy.virtual_cd(peers::SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true);
    assert_eq!(cd["Image"], url.as_str());
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");
    let host = stack.hosts.get("lent").await.unwrap();
    assert_eq!(
        host.spec.user_data.as_ref().and_then(|r| r.name.as_deref()),
        Some("lent-userdata")
    );
    at(Milestone::ClaimProvisioned);

    claims
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"poweredOn": false}})),
        )
        .await
        .unwrap();
    stack
        .wait("lent", "powered off through the claim", |h| {
            h.status.as_ref().is_some_and(|s| !s.powered_on)
        })
        .await;
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "Off");

    claims
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_claim(&claims, "released", |c| c.is_none()).await;
    let host = stack.hosts.get("lent").await.unwrap();
    assert_eq!(host.state(), S::Available);
    assert!(host.spec.consumer_ref.is_none() && host.spec.image.is_none());
    assert_eq!(sushy.virtual_cd(peers::SUSHY_SYSTEM_0)["Inserted"], false);
    assert!(
        stack
            .secrets
            .get_opt("lent-userdata")
            .await
            .unwrap()
            .is_none()
    );
    at(Milestone::ClaimReleased);
}
