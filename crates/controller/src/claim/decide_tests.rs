use super::*;
use ferrometal_api::claim::conditions as c;
use ferrometal_api::spec_fault::SpecFault;
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

    // Servicing: still provisioned, not ready until the firmware change is made.
    let mut servicing = provisioned.clone();
    servicing.status.as_mut().unwrap().operational_status =
        ferrometal_api::OperationalStatus::Servicing;
    let st = status(base(Binding::Bound(&servicing)));
    assert_eq!(cond(&st, c::PROVISIONED), ("True", "Provisioned"));
    assert_eq!(cond(&st, c::READY), ("False", c::SERVICING));

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

/// From the bind to the image on the disk the host passes available, preparing and
/// provisioning: the claim's status is one write for all three, not one per step.
#[test]
fn a_bound_claim_is_written_once_on_its_way_to_provisioned() {
    let mut cl = claim(json!({"poweredOn": true, "image": image()}), json!({}));
    let data = DataSync::default();
    let mut next = |state: &str, now: &str| {
        let h = host(json!({"online": true, "image": image()}), state, json!({}));
        let st = status(StatusInput {
            claim: &cl,
            binding: Binding::Bound(&h),
            no_host: "",
            data: &data,
            sync_error: None,
            deleting: None,
            hardware_data: None,
            now,
        });
        cl.status = Some(st.clone());
        st
    };
    let first = next("available", "t1");
    assert_eq!(cond(&first, c::PROVISIONED), ("False", "Provisioning"));
    assert_eq!(next("preparing", "t2"), first);
    assert_eq!(next("provisioning", "t3"), first);
    // Leaving that path is news again.
    assert_ne!(next("deprovisioning", "t4"), first);
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

const DISK: &str = "http://images/disk.qcow2";

fn disk() -> Value {
    json!({"url": DISK, "format": "qcow2", "checksum": "abc", "checksumType": "sha256"})
}

/// A host given `spec` by its claim, in error with `message`, marked as the spec's (`fault`)
/// or not.
fn host_in_error(
    spec: Value,
    error_type: ferrometal_api::ErrorType,
    message: &str,
    fault: Option<SpecFault>,
) -> BareMetalHost {
    let mut h = host(spec, "provisioning", json!({}));
    let st = h.status.as_mut().unwrap();
    st.error_type = Some(error_type);
    st.error_message = message.into();
    st.provisioning_fail_count = 5;
    crate::conditions::set_spec_fault(st, fault, Some(1), "2026-11-23T00:00:00Z");
    h
}

#[test]
fn the_tenant_is_told_errors_of_its_own_spec_and_nothing_of_the_infrastructure() {
    use ferrometal_api::ErrorType::{Provisioning, Registration};
    use ferrometal_api::spec_fault::DataField;
    let ud_copy = json!({"namespace": "infra", "name": "bm-1-userdata"});
    // Text only the infrastructure team may read: in the hosts' messages, never in the claims.
    let infra_only = [
        "10.0.0.9",
        "redfish",
        "ironic",
        "infra/",
        "bm-1",
        "VirtualMedia",
        "s3cret",
        "node-2-bmc",
    ];
    // (name, claim spec, host spec, error type, host message, mark, expected reason, expected
    //  in the message)
    type Row<'a> = (
        &'a str,
        Value,
        Value,
        ferrometal_api::ErrorType,
        &'a str,
        Option<SpecFault>,
        &'a str,
        Vec<&'a str>,
    );
    let rows: Vec<Row> = vec![
        (
            "a disk image on a live-iso-only host: the format is named",
            json!({"image": disk()}),
            json!({"image": disk()}),
            Provisioning,
            "image format qcow2 needs the ironic provisioner; the redfish provisioner boots live-iso images only",
            Some(SpecFault::ImageFormatNotSupported),
            "ImageFormatNotSupported",
            vec!["spec.image.format qcow2", "live-iso"],
        ),
        (
            "registry credentials the claim named are not passed on, and the match still holds",
            json!({"image": {"url": DISK, "format": "qcow2", "checksum": "abc", "ociAuthSecretName": "node-2-bmc"}}),
            json!({"image": {"url": DISK, "format": "qcow2", "checksum": "abc"}}),
            Provisioning,
            "image format qcow2 needs the ironic provisioner",
            Some(SpecFault::ImageFormatNotSupported),
            "ImageFormatNotSupported",
            vec!["spec.image.format qcow2"],
        ),
        (
            "a custom deploy on a live-iso-only host: the method is named",
            json!({"customDeploy": {"method": "install_coreos"}}),
            json!({"customDeploy": {"method": "install_coreos"}}),
            Provisioning,
            "custom deploy method \"install_coreos\" needs the ironic provisioner",
            Some(SpecFault::CustomDeployNotSupported),
            "CustomDeployNotSupported",
            vec!["spec.customDeploy.method \"install_coreos\""],
        ),
        (
            "an image URL the BMC refused: the tenant's URL, not the BMC's answer",
            json!({"image": image()}),
            json!({"image": image()}),
            Provisioning,
            "BMC 10.0.0.9:443 answered HTTP 400 to POST /redfish/v1/Managers/1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia: s3cret",
            Some(SpecFault::ImageUrlRefused),
            "ImageURLRefused",
            vec![ISO, "spec.image.url"],
        ),
        (
            "a disk image without a checksum",
            json!({"image": disk()}),
            json!({"image": disk()}),
            Provisioning,
            "image http://images/disk.qcow2 has no checksum (only live-iso images may omit it)",
            Some(SpecFault::ImageChecksumMissing),
            "ImageChecksumMissing",
            vec!["spec.image.checksum", "qcow2"],
        ),
        (
            "user data without its key: the tenant's Secret, not the host's copy",
            json!({"image": image(), "userData": {"name": "web-ud"}}),
            json!({"image": image(), "userData": ud_copy}),
            Provisioning,
            "spec.userData: Secret infra/bm-1-userdata has no \"userData\" or \"value\" key",
            Some(SpecFault::DataSecretKeyMissing(DataField::UserData)),
            "UserDataSecretKeyMissing",
            vec!["spec.userData: Secret \"web-ud\" has no \"userData\" or \"value\" key"],
        ),
        (
            "the host's copy of the user data gone",
            json!({"image": image(), "userData": {"name": "web-ud"}}),
            json!({"image": image(), "userData": ud_copy}),
            Provisioning,
            "spec.userData: Secret infra/bm-1-userdata not found",
            Some(SpecFault::DataSecretMissing(DataField::UserData)),
            "UserDataSecretMissing",
            vec!["Secret \"web-ud\"", "copied again"],
        ),
        (
            "the retry limit: the image is the tenant's to change",
            json!({"image": image()}),
            json!({"image": image()}),
            Provisioning,
            "provisioning failed 5 times, retry limit (5) reached; change image or reset provisioningFailCount to retry",
            Some(SpecFault::RetryLimitReached),
            "ProvisioningRetryLimitReached",
            vec!["failed 5 times", "change spec.image"],
        ),
        (
            "an error not marked as the spec's: only that there is one",
            json!({"image": image()}),
            json!({"image": image()}),
            Registration,
            "BMC 10.0.0.9:443 rejected the credentials",
            None,
            "HostError",
            vec!["the host reports a registration error (the infrastructure team is told)"],
        ),
        (
            "a mark about a data field the claim never named: not the claim's",
            json!({"image": image()}),
            json!({"image": image(), "userData": ud_copy}),
            Provisioning,
            "spec.userData: Secret infra/bm-1-userdata not found",
            Some(SpecFault::DataSecretMissing(DataField::UserData)),
            "HostError",
            vec!["provisioning error"],
        ),
        (
            "the claim changed its image and the host has not taken it yet: not the claim's",
            json!({"image": image()}),
            json!({"image": disk()}),
            Provisioning,
            "image format qcow2 needs the ironic provisioner",
            Some(SpecFault::ImageFormatNotSupported),
            "HostError",
            vec!["provisioning error"],
        ),
    ];
    let data = DataSync::default();
    for (name, cspec, hspec, error_type, message, fault, reason, said) in rows {
        let cl = claim(cspec, json!({}));
        let h = host_in_error(hspec, error_type, message, fault);
        let st = status(StatusInput {
            claim: &cl,
            binding: Binding::Bound(&h),
            no_host: "",
            data: &data,
            sync_error: None,
            deleting: None,
            hardware_data: None,
            now: "2026-11-23T00:00:00Z",
        });
        let p = st.condition(c::PROVISIONED).unwrap();
        assert_eq!(
            (p.status.as_str(), p.reason.as_str()),
            ("False", reason),
            "{name}"
        );
        for s in said {
            assert!(
                p.message.contains(s),
                "{name}: {s:?} not in {:?}",
                p.message
            );
        }
        assert_eq!(cond(&st, c::READY), ("False", reason), "{name}");
        // (status.bareMetalHost names the host, as metal3's claim does; the words do not.)
        let all = serde_json::to_string(&st.conditions).unwrap();
        for secret in infra_only {
            assert!(!all.contains(secret), "{name}: {secret:?} in {all}");
        }
    }
    // A mark left from an earlier error never classifies a newer one.
    let cl = claim(json!({"image": disk()}), json!({}));
    let mut h = host_in_error(
        json!({"image": disk()}),
        Provisioning,
        "image format qcow2 needs the ironic provisioner",
        Some(SpecFault::ImageFormatNotSupported),
    );
    h.status.as_mut().unwrap().error_message = "BMC 10.0.0.9:443 is unreachable".into();
    let p = provisioned(&cl, &h);
    assert_eq!(p.reason, "HostError");
    assert!(!p.message.contains("10.0.0.9"), "{}", p.message);
}
