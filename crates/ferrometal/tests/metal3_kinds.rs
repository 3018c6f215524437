//! Every other kind baremetal-operator serves, through kubectl against `ferrometal serve`:
//! kubectl's own messages for kinds nobody serves (it reads `/openapi/v2` in protobuf), metal3's
//! day-2 and switch kinds stored field for field, refused with the field named when invalid,
//! and marked as not acted on in their status.

mod serve_common;

use serde_json::{Value, json};
use serve_common::*;

const KINDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/metal3-kinds.yaml"
);

/// The kinds of the fixture that have a status, by plural.
const KEPT: [&str; 8] = [
    "hostfirmwaresettings",
    "hostfirmwarecomponents",
    "hostupdatepolicies",
    "dataimages",
    "preprovisioningimages",
    "bmceventsubscriptions",
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
    let table = s.ok(&["get", "bes", "-n", "infra"]);
    assert!(
        table.contains("does not subscribe to BMC events"),
        "the Error column says why nothing happens: {table}"
    );
    // A change to the spec is a new generation, marked again; the transition time stays.
    let before = not_acted_on(&s.json(&["get", "hfs", "node-a", "-n", "infra", "-o", "json"]))
        .cloned()
        .unwrap();
    s.ok(&[
        "patch",
        "hfs",
        "node-a",
        "-n",
        "infra",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"settings":{"NumCores":16}}}"#,
    ]);
    s.wait("the new generation marked", || {
        not_acted_on(&s.json(&["get", "hfs", "node-a", "-n", "infra", "-o", "json"]))
            .is_some_and(|c| c["observedGeneration"] == 2)
    });
    let after = s.json(&["get", "hfs", "node-a", "-n", "infra", "-o", "json"]);
    assert_eq!(
        not_acted_on(&after).unwrap()["lastTransitionTime"],
        before["lastTransitionTime"]
    );
    assert_eq!(after["spec"]["settings"]["NumCores"], 16);

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
