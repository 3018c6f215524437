use super::*;
use ferrometal_api::claim::conditions as c;
use serde_json::json;

fn claim(spec: Value, annotations: Value) -> HostClaim {
    serde_json::from_value(json!({
        "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim",
        "metadata": {"name": "web", "namespace": "tenant", "uid": "u1", "resourceVersion": "7",
                     "generation": 2, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

fn host(spec: Value, state: &str, annotations: Value) -> BareMetalHost {
    serde_json::from_value(json!({
        "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
        "metadata": {"name": "bm-1", "namespace": "infra", "annotations": annotations},
        "spec": spec,
        "status": {"provisioning": {"state": state}, "operationalStatus": "OK", "poweredOn": true},
    }))
    .unwrap()
}

const ISO: &str = "http://images/live.iso";

fn image() -> Value {
    json!({"url": ISO, "format": "live-iso"})
}

fn all_copied() -> DataSync {
    DataSync {
        copied: vec![DataKind::UserData],
        failed: None,
    }
}

#[test]
fn a_forward_this_process_made_is_not_repeated_on_a_stale_host() {
    let cl = claim(json!({"poweredOn": true}), json!({"reboot.metal3.io": ""}));
    let stale = host(json!({"online": true}), "provisioned", json!({}));
    let first = host_sync(&cl, &stale, &DataSync::default(), None);
    assert!(first.patch.is_some());
    let again = host_sync(&cl, &stale, &DataSync::default(), Some("u1/7"));
    assert_eq!(again.patch, None);
    assert_eq!(again.remove_from_claim, ["reboot.metal3.io"]);
}

#[test]
fn registry_credentials_named_by_a_claim_never_reach_the_host() {
    let image = json!({"url": "oci://registry/os:1", "ociAuthSecretName": "node-2-bmc"});
    let cl = claim(json!({"poweredOn": true, "image": image}), json!({}));
    let h = host(json!({"online": true}), "available", json!({}));
    let patch = host_sync(&cl, &h, &DataSync::default(), None)
        .patch
        .unwrap();
    assert_eq!(
        patch["spec"]["image"],
        json!({"url": "oci://registry/os:1"})
    );
}

#[test]
fn host_sync_table() {
    let ud = json!({"name": "web-ud"});
    // (name, claim spec, claim annotations, host spec, host annotations, data, expected patch,
    //  expected removals from the claim)
    type Row<'a> = (
        &'a str,
        Value,
        Value,
        Value,
        Value,
        DataSync,
        Option<Value>,
        Vec<&'a str>,
    );
    let rows: Vec<Row> = vec![
        (
            "in step: nothing to do",
            json!({"poweredOn": true, "image": image(), "userData": ud}),
            json!({}),
            json!({"online": true, "image": image(), "userData": {"namespace": "infra", "name": "bm-1-userdata"}}),
            json!({}),
            all_copied(),
            None,
            vec![],
        ),
        (
            "image, power and the user data copy reach the host",
            json!({"poweredOn": true, "image": image(), "userData": ud}),
            json!({}),
            json!({"online": false}),
            json!({}),
            all_copied(),
            Some(json!({"spec": {"online": true, "image": image(),
                "userData": {"namespace": "infra", "name": "bm-1-userdata"}}})),
            vec![],
        ),
        (
            "a failed copy holds the image back but not power",
            json!({"poweredOn": true, "image": image(), "userData": ud}),
            json!({}),
            json!({"online": false}),
            json!({}),
            DataSync {
                copied: vec![],
                failed: Some((DataKind::UserData, "missing".into())),
            },
            Some(json!({"spec": {"online": true}})),
            vec![],
        ),
        (
            "removing the image deprovisions",
            json!({"poweredOn": true}),
            json!({}),
            json!({"online": true, "image": image()}),
            json!({}),
            DataSync::default(),
            Some(json!({"spec": {"image": null}})),
            vec![],
        ),
        (
            "a bare reboot is forwarded once with the claim's version",
            json!({"poweredOn": true}),
            json!({"reboot.metal3.io": ""}),
            json!({"online": true}),
            json!({}),
            DataSync::default(),
            Some(json!({"metadata": {"annotations": {"reboot.metal3.io": "", FORWARDED: "u1/7"}}})),
            vec!["reboot.metal3.io"],
        ),
        (
            "already forwarded (crash before the claim was cleaned): not again",
            json!({"poweredOn": true}),
            json!({"reboot.metal3.io": "", "ferrometal.io/operation": "force-restart"}),
            json!({"online": true}),
            json!({FORWARDED: "u1/7"}),
            DataSync::default(),
            None,
            vec!["reboot.metal3.io", "ferrometal.io/operation"],
        ),
        (
            "keyed reboots are mirrored and tracked",
            json!({"poweredOn": true}),
            json!({"reboot.metal3.io/maint": "{\"mode\":\"hard\"}"}),
            json!({"online": true}),
            json!({"reboot.metal3.io/infra": ""}),
            DataSync::default(),
            Some(json!({"metadata": {"annotations": {
                "reboot.metal3.io/maint": "{\"mode\":\"hard\"}",
                MIRRORED_REBOOTS: "reboot.metal3.io/maint"}}})),
            vec![],
        ),
        (
            "a keyed reboot the tenant removed goes; the infra team's stays",
            json!({"poweredOn": true}),
            json!({}),
            json!({"online": true}),
            json!({"reboot.metal3.io/maint": "", "reboot.metal3.io/infra": "", MIRRORED_REBOOTS: "reboot.metal3.io/maint"}),
            DataSync::default(),
            Some(json!({"metadata": {"annotations": {
                "reboot.metal3.io/maint": null, MIRRORED_REBOOTS: null}}})),
            vec![],
        ),
        (
            "a paused claim pauses its host and changes nothing else",
            json!({"poweredOn": false, "image": image()}),
            json!({"baremetalhost.metal3.io/paused": ""}),
            json!({"online": true}),
            json!({}),
            DataSync::default(),
            Some(
                json!({"metadata": {"annotations": {"baremetalhost.metal3.io/paused": "metal3.io/hostclaim"}}}),
            ),
            vec![],
        ),
        (
            "an infra pause is left alone when the claim resumes",
            json!({"poweredOn": true}),
            json!({}),
            json!({"online": true}),
            json!({"baremetalhost.metal3.io/paused": "maintenance"}),
            DataSync::default(),
            None,
            vec![],
        ),
        (
            "the claim's pause is lifted when the claim resumes",
            json!({"poweredOn": true}),
            json!({}),
            json!({"online": true}),
            json!({"baremetalhost.metal3.io/paused": "metal3.io/hostclaim"}),
            DataSync::default(),
            Some(json!({"metadata": {"annotations": {"baremetalhost.metal3.io/paused": null}}})),
            vec![],
        ),
    ];
    for (name, cspec, cann, hspec, hann, data, want, removals) in rows {
        let cl = claim(cspec, cann);
        let h = host(hspec, "provisioned", hann);
        let got = host_sync(&cl, &h, &data, None);
        assert_eq!(got.patch, want, "{name}");
        assert_eq!(got.remove_from_claim, removals, "{name}");
    }
}

fn cond<'a>(st: &'a ferrometal_api::HostClaimStatus, t: &str) -> (&'a str, &'a str) {
    let c = st.condition(t).unwrap_or_else(|| panic!("no {t}"));
    (c.status.as_str(), c.reason.as_str())
}

#[test]
fn status_table() {
    let cl = claim(json!({"poweredOn": true, "image": image()}), json!({}));
    let mut provisioned = host(
        json!({"online": true, "image": image()}),
        "provisioned",
        json!({}),
    );
    provisioned.status.as_mut().unwrap().provisioning.image =
        Some(serde_json::from_value(image()).unwrap());
    let provisioning = host(
        json!({"online": true, "image": image()}),
        "provisioning",
        json!({}),
    );
    let mut failed = provisioning.clone();
    failed.status.as_mut().unwrap().error_type = Some(ferrometal_api::ErrorType::Provisioning);
    failed.status.as_mut().unwrap().error_message = "https://10.0.0.9/redfish said no".into();
    let data = DataSync::default();
    let base = |binding| StatusInput {
        claim: &cl,
        binding,
        no_host: "no HostDeployPolicy admits namespace tenant",
        data: &data,
        sync_error: None,
        deleting: None,
        hardware_data: None,
        now: "2026-11-23T00:00:00Z",
    };
    let st = status(base(Binding::None));
    assert_eq!(cond(&st, c::ASSOCIATED), ("False", c::NO_BARE_METAL_HOST));
    assert_eq!(cond(&st, c::READY), ("False", c::NO_BARE_METAL_HOST));
    assert!(st.bare_metal_host.is_none());

    let st = status(base(Binding::Bound(&provisioned)));
    assert_eq!(
        cond(&st, c::ASSOCIATED),
        ("True", c::BARE_METAL_HOST_ASSOCIATED)
    );
    assert_eq!(
        cond(&st, c::SYNCHRONIZED),
        ("True", c::CONFIGURATION_SYNCED)
    );
    assert_eq!(cond(&st, c::PROVISIONED), ("True", "Provisioned"));
    assert_eq!(cond(&st, c::READY), ("True", "Ready"));
    assert!(st.powered_on);
    assert_eq!(st.bare_metal_host.as_ref().unwrap().name, "bm-1");

    let st = status(base(Binding::Bound(&provisioning)));
    assert_eq!(cond(&st, c::PROVISIONED), ("False", "Provisioning"));
    assert_eq!(cond(&st, c::READY), ("False", "Provisioning"));

    // A host error is reported without the host's own message (it can name the BMC).
    let st = status(base(Binding::Bound(&failed)));
    assert_eq!(cond(&st, c::PROVISIONED), ("False", "HostError"));
    assert!(!serde_json::to_string(&st).unwrap().contains("10.0.0.9"));

    let st = status(base(Binding::Missing { detached: true }));
    assert_eq!(
        cond(&st, c::ASSOCIATED),
        ("False", c::MISSING_BARE_METAL_HOST)
    );

    let failed_copy = DataSync {
        copied: vec![],
        failed: Some((DataKind::NetworkData, "Secret tenant/nd not found".into())),
    };
    let st = status(StatusInput {
        data: &failed_copy,
        ..base(Binding::Bound(&provisioning))
    });
    assert_eq!(
        cond(&st, c::SYNCHRONIZED),
        ("False", c::NETWORK_DATA_SYNC_FAILURE)
    );

    let st = status(StatusInput {
        deleting: Some("releasing"),
        ..base(Binding::Bound(&provisioned))
    });
    assert_eq!(cond(&st, c::ASSOCIATED), ("False", c::HOST_CLAIM_DELETING));
}

#[test]
fn transition_times_are_kept_while_unchanged() {
    let mut cl = claim(json!({"poweredOn": true}), json!({}));
    let data = DataSync::default();
    let first = status(StatusInput {
        claim: &cl,
        binding: Binding::None,
        no_host: "none",
        data: &data,
        sync_error: None,
        deleting: None,
        hardware_data: None,
        now: "t1",
    });
    cl.status = Some(first.clone());
    let second = status(StatusInput {
        claim: &cl,
        binding: Binding::None,
        no_host: "none",
        data: &data,
        sync_error: None,
        deleting: None,
        hardware_data: None,
        now: "t2",
    });
    assert_eq!(first, second, "an unchanged status is not rewritten");
    let h = host(json!({"online": true}), "available", json!({}));
    let third = status(StatusInput {
        claim: &cl,
        binding: Binding::Bound(&h),
        no_host: "",
        data: &data,
        sync_error: None,
        deleting: None,
        hardware_data: None,
        now: "t3",
    });
    let assoc = third.condition(c::ASSOCIATED).unwrap();
    assert_eq!(assoc.last_transition_time.as_deref(), Some("t3"));
    assert_eq!(third.last_updated.as_deref(), Some("t3"));
}

#[test]
fn release_steps() {
    let consumer = json!({"apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "namespace": "tenant", "name": "web"});
    let with = |spec: Value, state: &str, ann: Value| {
        let mut s = spec;
        s["consumerRef"] = consumer.clone();
        host(s, state, ann)
    };
    // Provisioned with a workload: take it off (and the claim's pause with it).
    let h = with(
        json!({"online": true, "image": image(), "userData": {"name": "bm-1-userdata"}}),
        "provisioned",
        json!({"baremetalhost.metal3.io/paused": "metal3.io/hostclaim"}),
    );
    match release(&h) {
        Release::Deprovision(p) => {
            assert_eq!(p["spec"]["image"], Value::Null);
            assert_eq!(p["spec"]["online"], false);
            assert_eq!(
                p["metadata"]["annotations"]["baremetalhost.metal3.io/paused"],
                Value::Null
            );
        }
        other => panic!("{other:?}"),
    }
    // Deprovisioning: wait.
    let h = with(json!({"online": false}), "deprovisioning", json!({}));
    assert!(matches!(release(&h), Release::Wait(_)));
    // Available again: free it, with our bookkeeping.
    let h = with(
        json!({"online": false}),
        "available",
        json!({FORWARDED: "u/1", MIRRORED_REBOOTS: "reboot.metal3.io/a", "reboot.metal3.io/a": ""}),
    );
    match release(&h) {
        Release::Free(p) => {
            assert_eq!(p["spec"]["consumerRef"], Value::Null);
            let a = &p["metadata"]["annotations"];
            assert_eq!(a[FORWARDED], Value::Null);
            assert_eq!(a["reboot.metal3.io/a"], Value::Null);
        }
        other => panic!("{other:?}"),
    }
    // A detached host is freed without waiting for a deprovisioning that cannot happen.
    let h = with(
        json!({"online": false}),
        "provisioned",
        json!({"baremetalhost.metal3.io/detached": "{}"}),
    );
    assert!(matches!(release(&h), Release::Free(_)));
    // Nothing of ours left.
    let h = host(json!({"online": false}), "available", json!({}));
    assert_eq!(release(&h), Release::Done);
}
