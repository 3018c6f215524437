use super::*;
use ferrometal_api::HostClaimSpec;
use ferrometal_api::claim::conditions as c;

fn claim(annotations: &[(&str, &str)]) -> HostClaim {
    let mut h = HostClaim::new(
        "web",
        HostClaimSpec {
            powered_on: true,
            user_data: Some(SecretReference {
                name: Some("web-ud".into()),
                namespace: None,
            }),
            ..HostClaimSpec::default()
        },
    );
    h.metadata.namespace = Some("tenant-b".into());
    h.metadata.uid = Some("uid-1".into());
    h.metadata.resource_version = Some("7".into());
    let mut a: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    a.insert(REMOTE_ID.into(), "id-1".into());
    a.insert(
        ferrometal_api::claim::REMOTE_KUBECONFIG.into(),
        "a-kubeconfig".into(),
    );
    h.metadata.annotations = Some(a);
    h
}

/// The mirror as the remote cluster holds it after `sync` was applied to `base`.
fn applied(base: &HostClaim, sync: &MirrorSync) -> HostClaim {
    let mut v = match (&sync.create, &sync.patch) {
        (Some(c), _) => c.clone(),
        (None, Some(p)) => {
            let mut v = serde_json::to_value(base).unwrap();
            json_patch::merge(&mut v, p);
            v
        }
        (None, None) => serde_json::to_value(base).unwrap(),
    };
    v["metadata"]["resourceVersion"] = "1".into();
    serde_json::from_value(v).unwrap()
}

#[test]
fn creates_the_mirror_with_renamed_data_and_no_remote_annotation() {
    let b = claim(&[("ferrometal.io/operation", "PowerCycle")]);
    let s = mirror_sync(&b, None, "tenant-a");
    let body = s.create.as_ref().expect("create");
    assert_eq!(body["metadata"]["namespace"], "tenant-a");
    assert_eq!(body["metadata"]["labels"][REMOTE_MIRROR_LABEL], "web");
    assert_eq!(body["spec"]["userData"]["name"], "web-userdata");
    assert_eq!(body["spec"]["poweredOn"], true);
    let a = &body["metadata"]["annotations"];
    assert_eq!(a[REMOTE_ID], "id-1");
    assert_eq!(a["ferrometal.io/operation"], "PowerCycle");
    assert_eq!(a[REMOTE_FORWARDED], "uid-1/7");
    // The mirror must never be remote itself (it would mirror itself back).
    assert!(a.get(ferrometal_api::claim::REMOTE_KUBECONFIG).is_none());
    assert_eq!(s.remove_from_claim, ["ferrometal.io/operation"]);
}

#[test]
fn one_shots_pass_once_per_claim_version() {
    let b = claim(&[
        ("reboot.metal3.io", ""),
        ("ferrometal.io/operation", "PxeOnce"),
    ]);
    let first = mirror_sync(&b, None, "tenant-a");
    let mut mirror = applied(&b, &first);
    // The remote controller acts on and removes them; the claim still has them (a crash
    // before they were removed here): nothing passes again.
    let ann = mirror.metadata.annotations.as_mut().unwrap();
    ann.remove("reboot.metal3.io");
    ann.remove("ferrometal.io/operation");
    let again = mirror_sync(&b, Some(&mirror), "tenant-a");
    assert_eq!(again.patch, None);
    assert_eq!(
        again.remove_from_claim,
        ["reboot.metal3.io", "ferrometal.io/operation"]
    );
    // The tenant asks again: a new version of the claim passes again.
    let mut b2 = b.clone();
    b2.metadata.resource_version = Some("9".into());
    let third = mirror_sync(&b2, Some(&mirror), "tenant-a");
    let p = third.patch.expect("patch");
    assert_eq!(
        p["metadata"]["annotations"]["ferrometal.io/operation"],
        "PxeOnce"
    );
    assert_eq!(p["metadata"]["annotations"][REMOTE_FORWARDED], "uid-1/9");
}

#[test]
fn keyed_reboots_follow_the_claim_and_pause_passes() {
    let b = claim(&[("reboot.metal3.io/a", ""), (ann::PAUSED, "x")]);
    let mirror = applied(&b, &mirror_sync(&b, None, "tenant-a"));
    let ma = mirror.annotations();
    assert!(ma.contains_key("reboot.metal3.io/a"));
    assert_eq!(ma[REMOTE_REBOOT_KEYS], "reboot.metal3.io/a");
    assert_eq!(ma[ann::PAUSED], "x");
    assert_eq!(mirror_sync(&b, Some(&mirror), "tenant-a").patch, None);
    // The tenant removes the key and the pause: both go from the mirror.
    let b2 = claim(&[]);
    let p = mirror_sync(&b2, Some(&mirror), "tenant-a").patch.unwrap();
    let pa = &p["metadata"]["annotations"];
    assert!(pa["reboot.metal3.io/a"].is_null());
    assert!(pa[REMOTE_REBOOT_KEYS].is_null());
    assert!(pa[ann::PAUSED].is_null());
    // A key somebody else put on the mirror is not ours to remove.
    let mut other = mirror.clone();
    other
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("reboot.metal3.io/theirs".into(), "".into());
    let p = mirror_sync(&b2, Some(&other), "tenant-a").patch.unwrap();
    assert!(
        p["metadata"]["annotations"]
            .get("reboot.metal3.io/theirs")
            .is_none()
    );
}

#[test]
fn spec_changes_become_a_merge_patch() {
    let b = claim(&[]);
    let mirror = applied(&b, &mirror_sync(&b, None, "tenant-a"));
    let mut b2 = b.clone();
    b2.spec.powered_on = false;
    b2.spec.user_data = None;
    b2.spec.image = Some(
        serde_json::from_value(serde_json::json!({"url": "http://x/os.iso", "format": "live-iso"}))
            .unwrap(),
    );
    let p = mirror_sync(&b2, Some(&mirror), "tenant-a").patch.unwrap();
    assert_eq!(p["spec"]["poweredOn"], false);
    assert!(p["spec"]["userData"].is_null());
    assert_eq!(p["spec"]["image"]["url"], "http://x/os.iso");
    let m2 = applied(&mirror, &mirror_sync(&b2, Some(&mirror), "tenant-a"));
    assert_eq!(
        mirror_sync(&b2, Some(&m2), "tenant-a"),
        MirrorSync::default()
    );
}

#[test]
fn merge_diff_table() {
    use serde_json::json;
    let cases = [
        (json!({"a": 1}), json!({"a": 1}), None),
        (json!({"a": 1}), json!({"a": 2}), Some(json!({"a": 2}))),
        (
            json!({"a": 1, "b": 2}),
            json!({"a": 1}),
            Some(json!({"b": null})),
        ),
        (
            json!({"s": {"x": 1, "y": 2}}),
            json!({"s": {"x": 1}}),
            Some(json!({"s": {"y": null}})),
        ),
        (
            json!({"l": [1, 2]}),
            json!({"l": [1]}),
            Some(json!({"l": [1]})),
        ),
    ];
    for (old, new, want) in cases {
        assert_eq!(merge_diff(&old, &new), want, "{old} -> {new}");
    }
}

#[test]
fn status_follows_the_mirror_and_keeps_it_while_unreachable() {
    let b = claim(&[]);
    let mut mirror = applied(&b, &mirror_sync(&b, None, "tenant-a"));
    mirror.status = Some(HostClaimStatus {
        bare_metal_host: Some(NamespacedRef {
            namespace: "infra".into(),
            name: "bm-1".into(),
        }),
        hardware_data: Some(NamespacedRef {
            namespace: "tenant-a".into(),
            name: "web".into(),
        }),
        powered_on: true,
        conditions: vec![
            cond(c::ASSOCIATED, true, c::BARE_METAL_HOST_ASSOCIATED, ""),
            cond(c::SYNCHRONIZED, true, c::CONFIGURATION_SYNCED, ""),
        ],
        last_updated: Some("t0".into()),
    });
    let hd = Some(NamespacedRef {
        namespace: "tenant-b".into(),
        name: "web".into(),
    });
    let s = status(&b, Remote::Reached(Some(&mirror)), None, hd.clone(), "t1");
    assert!(s.is_true(c::ASSOCIATED) && s.is_true(c::SYNCHRONIZED));
    assert!(s.powered_on);
    assert_eq!(s.hardware_data, hd);
    assert_eq!(s.last_updated.as_deref(), Some("t1"));
    let mut b2 = b.clone();
    b2.status = Some(s.clone());
    // Unchanged: nothing to write (lastUpdated kept).
    assert_eq!(
        status(&b2, Remote::Reached(Some(&mirror)), None, hd.clone(), "t2"),
        s
    );
    let down = status(
        &b2,
        Remote::Failed(c::REMOTE_UNREACHABLE, "cannot reach".into()),
        None,
        hd.clone(),
        "t3",
    );
    assert!(down.is_true(c::ASSOCIATED), "last known kept");
    assert!(down.powered_on);
    let sync = down.condition(c::SYNCHRONIZED).unwrap();
    assert_eq!(
        (sync.status.as_str(), sync.reason.as_str()),
        ("False", c::REMOTE_UNREACHABLE)
    );
    assert_eq!(sync.last_transition_time.as_deref(), Some("t3"));
    let data = status(
        &b2,
        Remote::Reached(Some(&mirror)),
        Some((
            DataKind::UserData,
            "spec.userData: Secret \"web-ud\" not found".into(),
        )),
        hd,
        "t4",
    );
    let sync = data.condition(c::SYNCHRONIZED).unwrap();
    assert_eq!(sync.reason, c::USER_DATA_SYNC_FAILURE);
}

#[test]
fn a_mirror_gone_after_binding_is_reported_not_replaced() {
    let b = claim(&[]);
    assert!(!mirror_gone(&b, None), "never bound: the mirror is created");
    let mut bound = b.clone();
    bound.status = Some(HostClaimStatus {
        bare_metal_host: Some(NamespacedRef {
            namespace: "infra".into(),
            name: "bm-1".into(),
        }),
        conditions: vec![cond(c::ASSOCIATED, true, c::BARE_METAL_HOST_ASSOCIATED, "")],
        ..HostClaimStatus::default()
    });
    assert!(mirror_gone(&bound, None));
    let mirror = applied(&b, &mirror_sync(&b, None, "tenant-a"));
    assert!(!mirror_gone(&bound, Some(&mirror)));
    let s = status(&bound, Remote::MirrorGone("gone".into()), None, None, "t1");
    let a = s.condition(c::ASSOCIATED).unwrap();
    assert_eq!(
        (a.status.as_str(), a.reason.as_str()),
        ("False", c::MISSING_BARE_METAL_HOST)
    );
    assert!(!s.is_true(c::READY));
    let mut again = bound.clone();
    again.status = Some(s);
    assert!(
        mirror_gone(&again, None),
        "stays reported, never re-created"
    );
}
