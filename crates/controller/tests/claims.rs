//! HostClaims against the in-process API server and the fixture provisioner: binding races,
//! policies, data Secret copies, status back, actions forwarded, release and rebinding.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{GOOD_PASSWORD, Harness, NS};
use ferrometal_api::claim::conditions as c;
use ferrometal_api::{BareMetalHost, HardwareData, HostClaim, HostDeployPolicy, ProvisioningState};
use ferrometal_provisioner::fixture::{FixtureProvisioner, Method};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TENANT: &str = "tenant-a";

async fn namespace(client: &Client, name: &str, labels: Value) {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    }))
    .unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

async fn policy(client: &Client, ns: &str, name: &str, constraints: Value) {
    let p: HostDeployPolicy = serde_json::from_value(json!({
        "apiVersion": "metal3.io/v1alpha1", "kind": "HostDeployPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hostClaimNamespaces": constraints},
    }))
    .unwrap();
    Api::<HostDeployPolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
}

fn claims(client: &Client, ns: &str) -> Api<HostClaim> {
    Api::namespaced(client.clone(), ns)
}

async fn claim(client: &Client, ns: &str, name: &str, spec: Value) -> HostClaim {
    let c: HostClaim = serde_json::from_value(json!({
        "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }))
    .unwrap();
    claims(client, ns)
        .create(&PostParams::default(), &c)
        .await
        .unwrap()
}

fn condition(c: &HostClaim, t: &str) -> Option<(String, String, String)> {
    let s = c.status.as_ref()?.condition(t)?;
    Some((s.status.clone(), s.reason.clone(), s.message.clone()))
}

async fn wait_claim(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    ok: impl Fn(&HostClaim) -> bool,
) -> HostClaim {
    let api = claims(client, ns);
    let mut last = None;
    for _ in 0..1500 {
        if let Some(c) = api.get_opt(name).await.unwrap() {
            if ok(&c) {
                return c;
            }
            last = Some(c);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("claim {ns}/{name} never {what}: {last:#?}");
}

async fn wait_until<F, Fut>(what: &str, f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..1500 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never: {what}");
}

fn associated(c: &HostClaim) -> bool {
    condition(c, c::ASSOCIATED).is_some_and(|(s, _, _)| s == "True")
}

async fn labelled_host(h: &Harness, name: &str, labels: Value) -> BareMetalHost {
    h.available_host(name).await;
    h.hosts
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap()
}

fn consumer(h: &BareMetalHost) -> Option<String> {
    let r = h.spec.consumer_ref.as_ref()?;
    Some(format!(
        "{}/{}",
        r.namespace.clone().unwrap_or_default(),
        r.name.clone().unwrap_or_default()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_claims_race_for_twenty_hosts() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    namespace(&h.client, TENANT, json!({})).await;
    policy(&h.client, NS, "lend", json!({"names": [TENANT]})).await;
    for i in 0..20 {
        labelled_host(&h, &format!("node-{i:02}"), json!({"kind": "medium"})).await;
    }
    // A host the selector excludes stays out of it.
    labelled_host(&h, "large", json!({"kind": "large"})).await;

    let creates = (0..50).map(|i| {
        let client = h.client.clone();
        async move {
            claim(
                &client,
                TENANT,
                &format!("c-{i:02}"),
                json!({"hostSelector": {"matchLabels": {"kind": "medium"}}}),
            )
            .await
        }
    });
    futures::future::join_all(creates).await;

    let api = claims(&h.client, TENANT);
    let settled = |want_bound: usize, total: usize| {
        let api = api.clone();
        let hosts = h.hosts.clone();
        async move {
            let list = api.list(&ListParams::default()).await.unwrap().items;
            let bound: Vec<_> = list.iter().filter(|c| associated(c)).collect();
            let waiting = list
                .iter()
                .filter(|c| {
                    condition(c, c::ASSOCIATED)
                        .is_some_and(|(s, r, _)| s == "False" && r == c::NO_BARE_METAL_HOST)
                })
                .count();
            let consumed: Vec<_> = hosts
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|h| consumer(&h))
                .collect();
            list.len() == total
                && bound.len() == want_bound
                && waiting == total - want_bound
                && consumed.len() == want_bound
        }
    };
    wait_until("20 bound and 30 waiting", || settled(20, 50)).await;

    // Each host once, each bound claim on a distinct host that names it back.
    let check_one_to_one = || async {
        let hosts = h.hosts.list(&ListParams::default()).await.unwrap().items;
        let by_consumer: BTreeMap<String, String> = hosts
            .iter()
            .filter_map(|x| consumer(x).map(|c| (c, x.name_any())))
            .collect();
        let consumed = hosts.iter().filter(|x| consumer(x).is_some()).count();
        assert_eq!(by_consumer.len(), consumed, "a claim holds two hosts");
        assert!(!by_consumer.values().any(|n| n == "large"));
        for c in api.list(&ListParams::default()).await.unwrap().items {
            if !associated(&c) {
                continue;
            }
            let host = c.status.as_ref().unwrap().bare_metal_host.clone().unwrap();
            assert_eq!(host.namespace, NS);
            assert_eq!(
                by_consumer.get(&format!("{TENANT}/{}", c.name_any())),
                Some(&host.name),
                "claim {} and its host disagree",
                c.name_any()
            );
        }
        by_consumer.len()
    };
    assert_eq!(check_one_to_one().await, 20);

    // Delete five bound claims: five waiting ones take their hosts.
    let bound: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(associated)
        .map(|c| c.name_any())
        .take(5)
        .collect();
    for name in &bound {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    wait_until("5 more bound after 5 deletions", || settled(20, 45)).await;
    assert_eq!(check_one_to_one().await, 20);
}

async fn tenant_secret(client: &Client, name: &str, value: &str) {
    let s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": TENANT},
        "stringData": {"userData": value},
    }))
    .unwrap();
    let api: Api<Secret> = Api::namespaced(client.clone(), TENANT);
    if api.get_opt(name).await.unwrap().is_some() {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"userData": value}})),
        )
        .await
        .unwrap();
    } else {
        api.create(&PostParams::default(), &s).await.unwrap();
    }
}

fn copy_value(s: &Secret) -> String {
    let data = s.data.clone().unwrap_or_default();
    String::from_utf8(
        data.get("userData")
            .cloned()
            .unwrap_or(ByteString(vec![]))
            .0,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_provisions_syncs_reports_and_releases() {
    let h = Harness::start(
        FixtureProvisioner::new()
            .with_call_log(true)
            // One call per power-off, so calls count power-offs.
            .with_waits(Method::PowerOff, 0),
    )
    .await;
    let client = h.client.clone();
    namespace(&client, TENANT, json!({"tier": "gold"})).await;

    // No policy yet: the claim waits and says why; a policy arriving binds it (watch-driven).
    labelled_host(&h, "bm-1", json!({"infra-kind": "medium"})).await;
    tenant_secret(&client, "web-ud", "#cloud-config\nhostname: web\n").await;
    claim(
        &client,
        TENANT,
        "web",
        json!({
            "poweredOn": true,
            "hostSelector": {"matchLabels": {"infra-kind": "medium"}},
            "image": {"url": "http://images/live.iso", "format": "live-iso"},
            "userData": {"name": "web-ud"},
        }),
    )
    .await;
    let c0 = wait_claim(&client, TENANT, "web", "waits for a policy", |c| {
        condition(c, c::ASSOCIATED).is_some_and(|(_, r, m)| {
            r == c::NO_BARE_METAL_HOST && m.contains("no HostDeployPolicy admits")
        })
    })
    .await;
    assert!(c0.finalizers().contains(&"metal3.io/hostclaim".to_string()));
    // A policy for another label value does not admit it; the right one does.
    policy(
        &client,
        NS,
        "silver",
        json!({"hasLabels": [{"name": "tier", "value": "silver"}]}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!associated(
        &claims(&client, TENANT).get("web").await.unwrap()
    ));
    policy(
        &client,
        NS,
        "gold",
        json!({"hasLabels": [{"name": "tier", "value": "gold"}]}),
    )
    .await;

    let done = wait_claim(&client, TENANT, "web", "provisioned and ready", |c| {
        condition(c, c::PROVISIONED).is_some_and(|(s, _, _)| s == "True")
            && condition(c, c::READY).is_some_and(|(s, _, _)| s == "True")
            && c.status
                .as_ref()
                .is_some_and(|s| s.powered_on && s.hardware_data.is_some())
    })
    .await;
    let status = done.status.unwrap();
    assert_eq!(status.bare_metal_host.as_ref().unwrap().name, "bm-1");
    let host = h.get("bm-1").await;
    assert_eq!(host.state(), ProvisioningState::Provisioned);
    assert_eq!(consumer(&host).as_deref(), Some("tenant-a/web"));
    assert_eq!(
        host.spec.user_data.as_ref().unwrap().name.as_deref(),
        Some("bm-1-userdata")
    );
    let infra_secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let copy = infra_secrets.get("bm-1-userdata").await.unwrap();
    assert_eq!(copy_value(&copy), "#cloud-config\nhostname: web\n");
    // The HardwareData copy, readable in the tenant namespace, owned by the claim.
    let hd = Api::<HardwareData>::namespaced(client.clone(), TENANT)
        .get("web")
        .await
        .unwrap();
    let original = Api::<HardwareData>::namespaced(client.clone(), NS)
        .get("bm-1")
        .await
        .unwrap();
    assert_eq!(hd.spec, original.spec);
    assert_eq!(hd.owner_references()[0].kind, "HostClaim");

    // Rotation: the copy follows the tenant's Secret.
    tenant_secret(&client, "web-ud", "#cloud-config\nhostname: web-2\n").await;
    wait_until("the rotated user data reaches the copy", || {
        let api = infra_secrets.clone();
        async move {
            copy_value(&api.get("bm-1-userdata").await.unwrap())
                == "#cloud-config\nhostname: web-2\n"
        }
    })
    .await;

    // Removing the image deprovisions and keeps the association; the image back provisions
    // again, with the rotated user data.
    assert_eq!(
        h.fixture
            .provisioned_user_data(&common::key("bm-1"))
            .as_deref(),
        Some("#cloud-config\nhostname: web\n")
    );
    claims(&client, TENANT)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": null}})),
        )
        .await
        .unwrap();
    h.wait("bm-1", "deprovisioned, still claimed", |x| {
        x.state() == ProvisioningState::Available && consumer(x).as_deref() == Some("tenant-a/web")
    })
    .await;
    wait_claim(&client, TENANT, "web", "associated, not provisioned", |c| {
        associated(c)
            && condition(c, c::PROVISIONED).is_some_and(|(s, r, _)| s == "False" && r == "NoImage")
    })
    .await;
    claims(&client, TENANT)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"image": {"url": "http://images/live.iso", "format": "live-iso"}}}),
            ),
        )
        .await
        .unwrap();
    wait_claim(&client, TENANT, "web", "provisioned again", |c| {
        condition(c, c::PROVISIONED).is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    assert_eq!(
        h.fixture
            .provisioned_user_data(&common::key("bm-1"))
            .as_deref(),
        Some("#cloud-config\nhostname: web-2\n"),
        "the rotated user data reached the host's next provisioning"
    );

    // Power through the claim.
    claims(&client, TENANT)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"poweredOn": false}})),
        )
        .await
        .unwrap();
    h.wait("bm-1", "powered off through the claim", |x| {
        !x.spec.online && x.status.as_ref().is_some_and(|s| !s.powered_on)
    })
    .await;
    wait_claim(&client, TENANT, "web", "reports power off", |c| {
        c.status.as_ref().is_some_and(|s| !s.powered_on)
    })
    .await;
    claims(&client, TENANT)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"poweredOn": true}})),
        )
        .await
        .unwrap();
    h.wait("bm-1", "on again", |x| {
        x.status.as_ref().is_some_and(|s| s.powered_on)
    })
    .await;

    // A reboot asked on the claim reaches the host once and leaves the claim.
    let power_offs = || h.fixture.count(&common::key("bm-1"), Method::PowerOff);
    let offs_before = power_offs();
    assert!(
        offs_before >= 1,
        "the power-off above went through the provisioner"
    );
    claims(&client, TENANT)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"reboot.metal3.io": ""}}})),
        )
        .await
        .unwrap();
    h.until("the reboot powered the host off", || {
        power_offs() == offs_before + 1
    })
    .await;
    h.wait("bm-1", "back on after the reboot", |x| {
        x.status.as_ref().is_some_and(|s| s.powered_on)
            && !x.annotations().contains_key("reboot.metal3.io")
    })
    .await;
    assert_eq!(power_offs(), offs_before + 1, "rebooted exactly once");
    wait_claim(&client, TENANT, "web", "reboot annotation consumed", |c| {
        !c.annotations().contains_key("reboot.metal3.io")
    })
    .await;
    h.wait("bm-1", "reboot done", |x| {
        !x.annotations().contains_key("reboot.metal3.io")
    })
    .await;

    // Release: deprovision, copies deleted, consumer cleared, claim gone; host claimable again.
    claims(&client, TENANT)
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("the claim is gone", || {
        let api = claims(&client, TENANT);
        async move { api.get_opt("web").await.unwrap().is_none() }
    })
    .await;
    let host = h.get("bm-1").await;
    assert_eq!(host.state(), ProvisioningState::Available);
    assert!(host.spec.consumer_ref.is_none() && host.spec.image.is_none());
    assert!(host.spec.user_data.is_none());
    assert!(
        infra_secrets
            .get_opt("bm-1-userdata")
            .await
            .unwrap()
            .is_none()
    );
    assert!(h.has_event("bm-1", "Released").await);
    // Claimed again by a new claim; then the host is deleted under it: MissingBareMetalHost,
    // never a silent rebind to another host.
    labelled_host(&h, "bm-2", json!({"infra-kind": "medium"})).await;
    claim(
        &client,
        TENANT,
        "again",
        json!({"hostSelector": {"matchLabels": {"infra-kind": "medium"}}}),
    )
    .await;
    let again = wait_claim(&client, TENANT, "again", "bound", associated).await;
    let first = again.status.unwrap().bare_metal_host.unwrap().name;
    h.delete(&first).await;
    wait_claim(&client, TENANT, "again", "reports its host missing", |c| {
        condition(c, c::ASSOCIATED).is_some_and(|(_, r, _)| r == c::MISSING_BARE_METAL_HOST)
    })
    .await;
    h.wait_gone(&first).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let hosts = h.hosts.list(&ListParams::default()).await.unwrap().items;
    let consumed: BTreeSet<_> = hosts.iter().filter_map(consumer).collect();
    assert!(consumed.is_empty(), "rebound silently: {consumed:?}");
    let _ = GOOD_PASSWORD;
}

/// Issue 28 (2): a claim's image corrected from a disk image with a checksum to a live ISO
/// (checksum fields set to null) reaches its host without the stale checksum, the host is
/// provisioned again with it, and the claim becomes Ready (it stayed ImageChanged, "remove
/// spec.image to deprovision it first", while the host kept the old checksum).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrected_claim_image_reaches_the_host_and_becomes_ready() {
    let h = Harness::start(FixtureProvisioner::new()).await;
    let client = h.client.clone();
    namespace(&client, TENANT, json!({})).await;
    policy(&client, NS, "lend", json!({"names": [TENANT]})).await;
    labelled_host(&h, "bm-9", json!({"pool": "fix"})).await;
    claim(
        &client,
        TENANT,
        "fix",
        json!({
            "poweredOn": true,
            "hostSelector": {"matchLabels": {"pool": "fix"}},
            "image": {"url": "http://images/os.img", "format": "qcow2",
                      "checksum": "0123456789abcdef0123456789abcdef", "checksumType": "md5"},
        }),
    )
    .await;
    let ready = |c: &HostClaim| condition(c, c::READY).is_some_and(|(s, _, _)| s == "True");
    wait_claim(&client, TENANT, "fix", "ready with the disk image", ready).await;
    claims(&client, TENANT)
        .patch(
            "fix",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": {
                "url": "http://images/live.iso", "format": "live-iso",
                "checksum": null, "checksumType": null}}})),
        )
        .await
        .unwrap();
    // The host is provisioned again with the corrected image...
    h.wait("bm-9", "provisioned with the live ISO", |h| {
        h.state() == ProvisioningState::Provisioned
            && h.status.as_ref().is_some_and(|s| {
                s.provisioning
                    .image
                    .as_ref()
                    .is_some_and(|i| i.url.ends_with("live.iso"))
            })
    })
    .await;
    // ...and the claim says so.
    let done = wait_claim(&client, TENANT, "fix", "ready with the live ISO", ready).await;
    assert_eq!(
        condition(&done, c::PROVISIONED).map(|(s, r, _)| (s, r)),
        Some(("True".into(), "Provisioned".into()))
    );
    let host = h.get("bm-9").await;
    let image = host.spec.image.clone().unwrap();
    assert_eq!(image.url, "http://images/live.iso");
    assert_eq!((image.checksum, image.checksum_type), (None, None));
    let provisioned = host.status.unwrap().provisioning.image.unwrap();
    assert_eq!(provisioned.url, "http://images/live.iso");
    assert_eq!(provisioned.checksum, None);
}
