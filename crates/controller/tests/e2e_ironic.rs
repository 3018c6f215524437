//! End to end with the ironic backend: the same controllers and the same scenario as the
//! redfish backend's sushy-tools lifecycle in e2e_peers.rs, but every BMC action goes through a
//! real standalone Ironic (PyPI) driving sushy-tools. Only the provisioner differs: the proof
//! that the backend can be swapped. The one spec difference: automated cleaning is disabled,
//! since Ironic cleans with its agent ramdisk, which this environment does not have.

#[path = "../../provisioner/tests/ironic_common/mod.rs"]
mod ironic_peer;
#[path = "../../bmc/tests/common/mod.rs"]
mod peers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::{BareMetalHost, ErrorType, OperationalStatus, ProvisioningState as S};
use ferrometal_apiserver::{ApiServer, ServerConfig};
use ferrometal_controller::ControllerConfig;
use ferrometal_provisioner::ironic::{IronicOptions, IronicProvisioner};
use ironic_peer::Ironic;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const NS: &str = "default";

struct Stack {
    _server: ApiServer,
    hosts: Api<BareMetalHost>,
    secrets: Api<Secret>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Stack {
    async fn start(ironic: &Ironic) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let server = ApiServer::open(ServerConfig::new(dir.path()))
            .await
            .unwrap();
        let client = server.client();
        let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
            Api::all(client.clone());
        for crd in ferrometal_api::crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let mut options = IronicOptions::new(ironic.endpoint());
        options.poll_interval = Duration::from_millis(200);
        options.cache_ttl = Duration::from_millis(200);
        let provisioner = Arc::new(IronicProvisioner::new(options));
        let config = ControllerConfig {
            power_poll_interval: Duration::from_millis(500),
            backoff_base: Duration::from_millis(200),
            backoff_cap: Duration::from_secs(2),
            delayed_retry: Duration::from_millis(200),
            ..ControllerConfig::default()
        };
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
            hosts: Api::namespaced(client.clone(), NS),
            secrets: Api::namespaced(client, NS),
            _server: server,
            stop: Some(stop),
            _dir: dir,
        }
    }

    async fn secret(&self, name: &str, password: &str) {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.data = Some(BTreeMap::from([
            ("username".into(), ByteString(b"admin".to_vec())),
            ("password".into(), ByteString(password.as_bytes().to_vec())),
        ]));
        self.secrets
            .create(&PostParams::default(), &s)
            .await
            .unwrap();
    }

    async fn host(&self, name: &str, address: &str, secret: &str, extra: serde_json::Value) {
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

    async fn patch(&self, name: &str, patch: serde_json::Value) {
        self.hosts
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// Ironic's steps take seconds, so the bound is wider than with the redfish backend.
    async fn wait(
        &self,
        name: &str,
        what: &str,
        ok: impl Fn(&BareMetalHost) -> bool,
    ) -> BareMetalHost {
        let mut last = None;
        for _ in 0..2400 {
            if let Ok(h) = self.hosts.get(name).await {
                if ok(&h) {
                    return h;
                }
                last = Some(h);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "host {name} never {what}; last: {:#?}",
            last.map(|h| (h.metadata.annotations, h.status))
        );
    }

    async fn wait_gone(&self, name: &str) {
        for _ in 0..2400 {
            if self.hosts.get_opt(name).await.unwrap().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "host {name} was never deleted: {:#?}",
            self.hosts.get(name).await.ok().map(|h| h.status)
        );
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn state(h: &BareMetalHost) -> S {
    h.state()
}

/// Requests sushy-tools received that change the machine (power, media, boot).
fn changes(sushy: &peers::Sushy) -> Vec<String> {
    std::fs::read_to_string(sushy.dir.path().join("sushy.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("POST ") || l.contains("PATCH "))
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lifecycle_on_sushy_tools_through_ironic() {
    let sushy = peers::Sushy::start(2, "admin:password");
    let files = peers::FileServer::start();
    let ironic = Ironic::start();
    let stack = Stack::start(&ironic).await;
    stack.secret("bmc", "password").await;
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");

    // sushy-tools' fake systems have no processors: Ironic's inspection fails with a clear
    // error...
    stack
        .host(
            "inspected",
            &sushy.address("00000000-0000-4000-8000-000000000001"),
            "bmc",
            json!({}),
        )
        .await;
    // (Under load another failure may come first; the controller retries after its backoff.)
    stack
        .wait("inspected", "an inspection error naming the cause", |h| {
            h.status.as_ref().is_some_and(|s| {
                s.error_type == Some(ErrorType::Inspection)
                    && s.error_message.contains("Processors")
            })
        })
        .await;

    // ...so the lifecycle host skips inspection.
    stack
        .host(
            "node",
            &address,
            "bmc",
            // Ironic cleans disks with its agent ramdisk, which this environment does not have.
            json!({"inspectionMode": "disabled", "automatedCleaningMode": "disabled"}),
        )
        .await;
    let available = stack
        .wait("node", "available", |h| state(h) == S::Available)
        .await;
    let node = ironic.node("default~node").expect("an Ironic node");
    assert_eq!(node["provision_state"], "available");
    assert_eq!(
        available.status.unwrap().provisioning.id,
        node["uuid"].as_str().unwrap()
    );

    let url = files.url("live.iso");
    stack
        .patch(
            "node",
            json!({"spec": {"online": true, "image": {"url": url, "format": "live-iso"}}}),
        )
        .await;
    stack
        .wait("node", "provisioned", |h| state(h) == S::Provisioned)
        .await;
    assert_eq!(ironic.state("default~node").as_deref(), Some("active"));
    let cd = sushy.virtual_cd(peers::SUSHY_SYSTEM_0);
    assert_eq!(cd["Inserted"], true);
    assert_eq!(cd["Image"], url.as_str());
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");

    stack
        .patch("node", json!({"spec": {"image": null, "online": false}}))
        .await;
    stack
        .wait("node", "available again", |h| state(h) == S::Available)
        .await;
    assert_eq!(sushy.virtual_cd(peers::SUSHY_SYSTEM_0)["Inserted"], false);
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "Off");

    stack
        .hosts
        .delete("node", &DeleteParams::default())
        .await
        .unwrap();
    stack.wait_gone("node").await;
    assert!(ironic.node("default~node").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_hosts_leave_ironic_untouched_and_come_back_adopted() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let files = peers::FileServer::start();
    let ironic = Ironic::start();
    let stack = Stack::start(&ironic).await;
    stack.secret("bmc", "password").await;
    let address = sushy
        .address(peers::SUSHY_SYSTEM_0)
        .replace("redfish+http", "redfish-virtualmedia+http");
    let url = files.url("live.iso");
    stack
        .host(
            "node",
            &address,
            "bmc",
            json!({"inspectionMode": "disabled", "automatedCleaningMode": "disabled", "online": true,
                   "image": {"url": url, "format": "live-iso"}}),
        )
        .await;
    stack
        .wait("node", "provisioned", |h| state(h) == S::Provisioned)
        .await;
    let before = changes(&sushy);

    stack
        .patch(
            "node",
            json!({"metadata": {"annotations": {ann::DETACHED: ""}}}),
        )
        .await;
    stack
        .wait("node", "detached", |h| {
            h.status
                .as_ref()
                .is_some_and(|s| s.operational_status == OperationalStatus::Detached)
        })
        .await;
    assert!(ironic.node("default~node").is_none());
    assert_eq!(changes(&sushy), before, "detach changed the machine");
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");

    // Removing the annotation re-creates the node and adopts it: nothing is deployed again.
    stack
        .patch(
            "node",
            json!({"metadata": {"annotations": {ann::DETACHED: null}}}),
        )
        .await;
    stack
        .wait("node", "attached again", |h| {
            h.status
                .as_ref()
                .is_some_and(|s| s.operational_status == OperationalStatus::Ok)
        })
        .await;
    let mut rounds = 0;
    while ironic.state("default~node").as_deref() != Some("active") {
        rounds += 1;
        assert!(
            rounds < 600,
            "node never adopted: {:?}",
            ironic.state("default~node")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let host = stack.hosts.get("node").await.unwrap();
    assert_eq!(state(&host), S::Provisioned);
    assert_eq!(changes(&sushy), before, "re-attach deployed again");

    // Deleting a detached host removes it without deprovisioning.
    stack
        .patch(
            "node",
            json!({"metadata": {"annotations": {ann::DETACHED: ""}}}),
        )
        .await;
    stack
        .wait("node", "detached again", |h| {
            h.status
                .as_ref()
                .is_some_and(|s| s.operational_status == OperationalStatus::Detached)
        })
        .await;
    stack
        .hosts
        .delete("node", &DeleteParams::default())
        .await
        .unwrap();
    stack.wait_gone("node").await;
    assert!(ironic.node("default~node").is_none());
    assert_eq!(
        changes(&sushy),
        before,
        "deleting a detached host touched it"
    );
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_recover_when_ironic_loses_its_database() {
    let sushy = peers::Sushy::start(2, "admin:password");
    let files = peers::FileServer::start();
    let ironic = Ironic::start();
    let stack = Stack::start(&ironic).await;
    stack.secret("bmc", "password").await;
    let address = |uuid: &str| {
        sushy
            .address(uuid)
            .replace("redfish+http", "redfish-virtualmedia+http")
    };
    let url = files.url("live.iso");
    let plain = json!({"inspectionMode": "disabled", "automatedCleaningMode": "disabled"});
    stack
        .host(
            "ready",
            &address("00000000-0000-4000-8000-000000000001"),
            "bmc",
            plain.clone(),
        )
        .await;
    let mut deployed = plain;
    deployed["online"] = json!(true);
    deployed["image"] = json!({"url": url, "format": "live-iso"});
    stack
        .host("deployed", &address(peers::SUSHY_SYSTEM_0), "bmc", deployed)
        .await;
    stack
        .wait("ready", "available", |h| state(h) == S::Available)
        .await;
    stack
        .wait("deployed", "provisioned", |h| state(h) == S::Provisioned)
        .await;
    let before = changes(&sushy);

    ironic.restart_with_empty_database();
    assert!(ironic.node("default~deployed").is_none());

    // The controllers' power polls find the nodes gone; the backend registers them again,
    // makes the available one available and adopts the provisioned one.
    let mut rounds = 0;
    while ironic.state("default~ready").as_deref() != Some("available")
        || ironic.state("default~deployed").as_deref() != Some("active")
    {
        rounds += 1;
        assert!(
            rounds < 900,
            "hosts never recovered: {:?} {:?}",
            ironic.state("default~ready"),
            ironic.state("default~deployed")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        state(&stack.hosts.get("deployed").await.unwrap()),
        S::Provisioned
    );
    assert_eq!(
        state(&stack.hosts.get("ready").await.unwrap()),
        S::Available
    );
    let after = changes(&sushy);
    let inserts = |l: &[String]| l.iter().filter(|l| l.contains("InsertMedia")).count();
    assert_eq!(inserts(&after), inserts(&before), "deployed again");
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "On");
}
