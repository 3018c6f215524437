//! Every other kind baremetal-operator serves, through kubectl against `ferrometal serve`:
//! kubectl's own messages for kinds nobody serves (it reads `/openapi/v2` in protobuf), metal3's
//! day-2 and switch kinds stored field for field, refused with the field named when invalid,
//! and marked as not acted on in their status; DataImages attached and detached and
//! BMCEventSubscriptions made on the BMC.

mod day2_common;
mod serve_common;

use day2_common::*;
use serde_json::{Value, json};

const KINDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/metal3-kinds.yaml"
);

/// The kinds of the fixture ferrometal keeps without acting on them, by plural.
const KEPT: [&str; 3] = [
    "preprovisioningimages",
    "baremetalswitches",
    "hostnetworkattachments",
];

fn not_acted_on(obj: &Value) -> Option<&Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ferrometal.io/NotActedOn")
}

#[test]
fn kubectl_says_no_matches_for_a_kind_nobody_serves() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: example.io/v1\nkind: Nope\nmetadata: {name: x, namespace: default}\n"),
    );
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(r#"no matches for kind "Nope" in version "example.io/v1""#),
        "kubectl's usual message: {text}"
    );
    assert!(!text.contains("proto"), "{text}");
    // A kind that is served, given a field it lacks, gets the server's strict-field answer,
    // as from kube-apiserver.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: metal3.io/v1alpha1\nkind: PreprovisioningImage\n\
             metadata: {name: x, namespace: default}\nspec: {foo: bar}\n",
        ),
    );
    let text = output_text(&out);
    assert!(
        text.contains(r#"strict decoding error: unknown field "spec.foo""#),
        "{text}"
    );
}

#[test]
fn metal3_kinds_are_stored_as_written_refused_when_invalid_and_marked_not_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &["--provisioner", "fixture", "--power-poll-interval", "2"],
    );
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["apply", "-n", "infra", "-f", KINDS]);

    // Stored as written: a setting keeps its type (number or string), lists and maps intact,
    // defaults filled in as metal3's schema has them.
    let hfs = s.json(&["get", "hfs", "node-a", "-n", "infra", "-o", "json"]);
    assert_eq!(
        hfs["spec"]["settings"],
        json!({"NumCores": 8, "ProcTurboMode": "Disabled"})
    );
    let schema = s.json(&[
        "get",
        "firmwareschema",
        "schema-vendor-model",
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(
        schema["spec"]["schema"]["ProcTurboMode"]["allowable_values"],
        json!(["Enabled", "Disabled"])
    );
    assert_eq!(schema["spec"]["schema"]["NumCores"]["upper_bound"], 64);
    let hna = s.json(&[
        "get",
        "hostnetworkattachment",
        "storage-trunk",
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(hna["spec"]["allowedVLANs"], json!(["100", "200-210"]));
    assert_eq!(hna["spec"]["nativeVLAN"], 10);
    let switch = s.json(&["get", "bms", "tor-1", "-n", "infra", "-o", "json"]);
    assert_eq!(switch["spec"]["driver"], "generic-switch", "defaulted");
    let bes = s.json(&["get", "bes", "node-a-events", "-n", "infra", "-o", "json"]);
    assert_eq!(bes["spec"]["httpHeadersRef"]["name"], "event-headers");

    // Each says, in its status, that nothing acts on it.
    s.wait("every kept kind marked not acted on", || {
        KEPT.iter().all(|kind| {
            let items = s.items(kind, "infra");
            !items.is_empty()
                && items.iter().all(|i| {
                    not_acted_on(i)
                        .is_some_and(|c| c["status"] == "True" && c["observedGeneration"] == 1)
                })
        })
    });
    // A subscription for a host that does not exist says so in the Error column.
    s.wait("the subscription's error shown", || {
        s.ok(&["get", "bes", "-n", "infra"])
            .contains(r#"baremetal host "node-a" not found"#)
    });
    // A change to the spec is a new generation, marked again; the transition time stays.
    let get_hna = || {
        s.json(&[
            "get",
            "hostnetworkattachment",
            "storage-trunk",
            "-n",
            "infra",
            "-o",
            "json",
        ])
    };
    let before = not_acted_on(&get_hna()).cloned().unwrap();
    s.ok(&[
        "patch",
        "hostnetworkattachment",
        "storage-trunk",
        "-n",
        "infra",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"mtu":1500}}"#,
    ]);
    s.wait("the new generation marked", || {
        not_acted_on(&get_hna()).is_some_and(|c| c["observedGeneration"] == 2)
    });
    let after = get_hna();
    assert_eq!(
        not_acted_on(&after).unwrap()["lastTransitionTime"],
        before["lastTransitionTime"]
    );
    assert_eq!(after["spec"]["mtu"], 1500);
    // HostFirmwareSettings are acted on (read and validated): no such condition, and none of
    // the host's settings for a HostFirmwareSettings whose host does not exist.
    let hfs = s.json(&["get", "hfs", "node-a", "-n", "infra", "-o", "json"]);
    assert!(not_acted_on(&hfs).is_none(), "{hfs}");

    // Invalid objects are refused naming the field and value; nothing of them is stored.
    for (name, yaml, field) in [
        (
            "vlan",
            "apiVersion: metal3.io/v1alpha1\nkind: HostNetworkAttachment\nmetadata: {name: vlan}\n\
             spec: {mode: access, nativeVLAN: 5000}\n",
            "spec.nativeVLAN",
        ),
        (
            "mac",
            "apiVersion: metal3.io/v1alpha1\nkind: BareMetalSwitch\nmetadata: {name: mac}\n\
             spec: {address: 192.0.2.1, macAddress: not-a-mac, deviceType: netmiko_cisco_ios}\n",
            "spec.macAddress",
        ),
        (
            "format",
            "apiVersion: metal3.io/v1alpha1\nkind: PreprovisioningImage\nmetadata: {name: format}\n\
             spec: {acceptFormats: [vhd]}\n",
            "spec.acceptFormats[0]",
        ),
        (
            "policy",
            "apiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\nmetadata: {name: policy}\n\
             spec: {firmwareSettings: always}\n",
            "spec.firmwareSettings",
        ),
        (
            "type",
            "apiVersion: metal3.io/v1alpha1\nkind: FirmwareSchema\nmetadata: {name: type}\n\
             spec: {schema: {X: {attribute_type: Float}}}\n",
            "spec.schema.X.attribute_type",
        ),
        (
            "updates",
            "apiVersion: metal3.io/v1alpha1\nkind: HostFirmwareComponents\nmetadata: {name: updates}\n\
             spec: {}\n",
            "spec.updates",
        ),
    ] {
        let out = s.kubectl_stdin(&["apply", "-n", "infra", "-f", "-"], Some(yaml));
        let text = output_text(&out);
        assert!(!out.status.success(), "{name} accepted: {text}");
        assert!(text.contains(field), "{name}: names {field}: {text}");
    }
    for (kind, name) in [
        ("hostnetworkattachment", "vlan"),
        ("bms", "mac"),
        ("ppimg", "format"),
        ("hostupdatepolicy", "policy"),
        ("firmwareschema", "type"),
        ("hostfirmwarecomponents", "updates"),
    ] {
        let out = s.kubectl(&["get", kind, name, "-n", "infra"]);
        assert!(!out.status.success(), "{kind}/{name} was stored");
    }

    // An empty spec, as metal3's own samples write it, is accepted where metal3 accepts it
    // and read back as `{}`.
    let out = s.kubectl_stdin(
        &["apply", "-n", "infra", "-f", "-"],
        Some(
            "apiVersion: metal3.io/v1alpha1\nkind: HostDeployPolicy\nmetadata: {name: empty}\nspec:\n---\n\
             apiVersion: metal3.io/v1alpha1\nkind: HostUpdatePolicy\nmetadata: {name: empty}\nspec:\n",
        ),
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let policy = s.json(&[
        "get",
        "hostupdatepolicy",
        "empty",
        "-n",
        "infra",
        "-o",
        "json",
    ]);
    assert_eq!(policy["spec"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_image_is_attached_at_the_next_boot_and_detached_when_deleted() {
    // The emulator records the ISO without fetching it.
    let config = ferrometal_emulator::EmulatorConfig {
        fetch_media: false,
        ..Default::default()
    };
    let (emu, _dir, s) = lab_with(config, ", externallyProvisioned: true, online: true", "").await;
    let bmh = || s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"]);
    s.wait("externally provisioned and on", || {
        let b = bmh();
        b["status"]["provisioning"]["state"] == "externally provisioned"
            && b["status"]["poweredOn"] == true
    });
    let image = "apiVersion: metal3.io/v1alpha1\nkind: DataImage\n\
                 metadata: {name: node-0, namespace: infra}\n\
                 spec: {url: 'http://images.example/config.iso'}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(image));
    assert!(out.status.success(), "{}", output_text(&out));
    let di = || s.json(&["get", "dataimage", "node-0", "-n", "infra", "-o", "json"]);
    s.wait("the DataImage tied to its host", || {
        let d = di();
        d["metadata"]["finalizers"][0] == "dataimage.metal3.io"
            && d["metadata"]["ownerReferences"][0]["name"] == "node-0"
    });
    assert!(
        !emu.state(0).virtual_media.inserted,
        "nothing attached before the next boot"
    );
    reboot_node(&s, &emu);
    s.wait("the attachment recorded", || {
        di()["status"]["attachedImage"]["url"] == "http://images.example/config.iso"
    });
    let media = emu.state(0).virtual_media;
    assert!(media.inserted);
    assert_eq!(
        media.image.as_deref(),
        Some("http://images.example/config.iso")
    );
    assert!(host_events(&s, "node-0").contains(&"DataImageAttached".to_string()));

    // Deleted: held until the next boot detaches it, then gone.
    s.ok(&[
        "delete",
        "dataimage",
        "node-0",
        "-n",
        "infra",
        "--wait=false",
    ]);
    s.wait("marked for deletion", || {
        di()["metadata"]["deletionTimestamp"].is_string()
    });
    assert!(
        emu.state(0).virtual_media.inserted,
        "detached only at the next boot"
    );
    reboot_node(&s, &emu);
    s.wait("the DataImage gone", || {
        !s.kubectl(&["get", "dataimage", "node-0", "-n", "infra"])
            .status
            .success()
    });
    assert!(!emu.state(0).virtual_media.inserted);
    assert_eq!(
        bmh()["status"]["provisioning"]["state"],
        "externally provisioned"
    );

    // A DataImage with no host of its name says so.
    let lonely = "apiVersion: metal3.io/v1alpha1\nkind: DataImage\n\
                  metadata: {name: nobody, namespace: infra}\nspec: {url: 'http://x/y.iso'}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(lonely));
    assert!(out.status.success(), "{}", output_text(&out));
    s.wait("no host, said so", || {
        condition(
            &s.json(&["get", "dataimage", "nobody", "-n", "infra", "-o", "json"]),
            "ferrometal.io/HostFound",
        )
        .is_some_and(|(st, why)| st == "False" && why.contains("no BareMetalHost named nobody"))
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bmc_event_subscription_is_made_on_the_bmc_and_removed_with_the_object() {
    let (emu, _dir, s) = lab("", "").await;
    s.wait("the host registered", || {
        s.json(&["get", "bmh", "node-0", "-n", "infra", "-o", "json"])["status"]["provisioning"]
            ["state"]
            == "available"
    });
    let subscription = "apiVersion: v1\nkind: Secret\nmetadata: {name: hook-headers, namespace: infra}\n\
                        stringData: {Authorization: 'Bearer s3cr3t-hook-token'}\n---\n\
                        apiVersion: metal3.io/v1alpha1\nkind: BMCEventSubscription\n\
                        metadata: {name: node-0-events, namespace: infra}\n\
                        spec: {hostName: node-0, destination: 'https://events.example/hook', \
                        context: rack-7, httpHeadersRef: {name: hook-headers, namespace: infra}}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(subscription));
    assert!(out.status.success(), "{}", output_text(&out));
    let bes = || s.json(&["get", "bes", "node-0-events", "-n", "infra", "-o", "json"]);
    s.wait("the subscription made", || {
        bes()["status"]["subscriptionID"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    });
    let made = emu.subscriptions();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].destination, "https://events.example/hook");
    assert_eq!(made[0].context, "rack-7");
    assert_eq!(
        made[0].headers,
        [(
            "Authorization".to_string(),
            "Bearer s3cr3t-hook-token".to_string()
        )]
    );
    let b = bes();
    assert_eq!(b["status"]["subscriptionID"], made[0].id.to_string());
    assert_eq!(
        b["metadata"]["finalizers"][0],
        "bmceventsubscription.metal3.io"
    );
    // The header's value is nowhere a reader of the object or its Events sees it.
    let shown = s.ok(&["get", "bes", "node-0-events", "-n", "infra", "-o", "yaml"])
        + &s.ok(&["get", "events", "-n", "infra", "-o", "yaml"]);
    assert!(!shown.contains("s3cr3t-hook-token"), "{shown}");

    // Deleted: removed from the BMC first, then gone.
    s.ok(&[
        "delete",
        "bes",
        "node-0-events",
        "-n",
        "infra",
        "--timeout=60s",
    ]);
    assert!(emu.subscriptions().is_empty());
    assert!(
        !s.kubectl(&["get", "bes", "node-0-events", "-n", "infra"])
            .status
            .success()
    );
}
