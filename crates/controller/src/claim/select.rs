//! Which hosts may serve a claim: deploy policies, the host selector, availability, and the
//! failure-domain preference. Pure: table-tested below, no API calls.

use std::collections::{BTreeMap, BTreeSet};

use ferrometal_api::annotations as ann;
use ferrometal_api::claim::{FAILURE_DOMAIN_LABEL, HOSTCLAIM_API_VERSION, HOSTCLAIM_KIND};
use ferrometal_api::{
    BareMetalHost, HostClaim, HostClaimNamespaces, HostSelector, OperationalStatus,
    ProvisioningState,
};
use ferrometal_apimachinery::selector::LabelSelector;
use kube::ResourceExt;

/// A policy's `nameMatches` larger than this (compiled) is refused, so a policy cannot make the
/// controller spend unbounded memory or time.
const REGEX_SIZE_LIMIT: usize = 1 << 16;

/// Whether one policy's constraints admit a claim from `namespace` carrying `labels`; an
/// invalid `nameMatches` is an error naming it.
pub fn policy_admits(
    constraints: Option<&HostClaimNamespaces>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    // metal3: a policy without constraints is ignored (admits nothing).
    let Some(c) = constraints else {
        return Ok(false);
    };
    if let Some(names) = &c.names
        && !names.iter().any(|n| n == namespace)
    {
        return Ok(false);
    }
    if !c.name_matches.is_empty() {
        let re = regex::RegexBuilder::new(&c.name_matches)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| {
                format!(
                    "spec.hostClaimNamespaces.nameMatches {:?} is not a valid regular expression: {e}",
                    c.name_matches
                )
            })?;
        if !re.is_match(namespace) {
            return Ok(false);
        }
    }
    for pair in &c.has_labels {
        match labels.get(&pair.name) {
            Some(v) if pair.value.is_empty() || *v == pair.value => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// The label selector of a claim, with metal3's lowercase operators accepted.
pub fn host_selector(selector: &HostSelector) -> Result<LabelSelector, String> {
    let expressions: Vec<_> = selector
        .match_expressions
        .iter()
        .map(|e| {
            let op = match e.operator.to_ascii_lowercase().as_str() {
                "in" | "=" | "==" => "In",
                "notin" | "!=" => "NotIn",
                "exists" => "Exists",
                "doesnotexist" | "!" => "DoesNotExist",
                "gt" => "Gt",
                "lt" => "Lt",
                _ => e.operator.as_str(),
            };
            serde_json::json!({"key": e.key, "operator": op, "values": e.values})
        })
        .collect();
    let json = serde_json::json!({
        "matchLabels": selector.match_labels,
        "matchExpressions": expressions,
    });
    LabelSelector::from_label_selector_json(&json).map_err(|e| format!("spec.hostSelector: {e}"))
}

/// True when `host.spec.consumerRef` names this claim (metal3 compares kind, group, namespace
/// and name).
pub fn consumed_by(host: &BareMetalHost, namespace: &str, name: &str) -> bool {
    claim_of(host).is_some_and(|(ns, n)| ns == namespace && n == name)
}

/// The claim (namespace, name) a host is bound to, if its consumer is a HostClaim. Borrowed:
/// an unbound claim looks for its host through every host in the cache.
pub fn claim_of(host: &BareMetalHost) -> Option<(&str, &str)> {
    let c = host.spec.consumer_ref.as_ref()?;
    if c.kind.as_deref() != Some(HOSTCLAIM_KIND)
        || !c
            .api_version
            .as_deref()
            .is_some_and(|v| v.starts_with("metal3.io/"))
    {
        return None;
    }
    Some((c.namespace.as_deref()?, c.name.as_deref()?))
}

/// The consumerRef that binds a host to `claim`.
pub fn consumer_ref(claim: &HostClaim) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": HOSTCLAIM_API_VERSION,
        "kind": HOSTCLAIM_KIND,
        "namespace": claim.namespace().unwrap_or_default(),
        "name": claim.name_any(),
    })
}

/// Detached by annotation, or already reported detached.
pub fn is_detached(host: &BareMetalHost) -> bool {
    host.annotations().contains_key(ann::DETACHED)
        || host
            .status
            .as_ref()
            .is_some_and(|s| s.operational_status == OperationalStatus::Detached)
}

/// Why a host cannot serve a new claim, or `None` when it can.
pub fn unavailable(host: &BareMetalHost) -> Option<&'static str> {
    if host.spec.consumer_ref.is_some() {
        return Some("consumed");
    }
    if host.metadata.deletion_timestamp.is_some() {
        return Some("being deleted");
    }
    let annotations = host.annotations();
    if annotations.contains_key(ann::PAUSED) {
        return Some("paused");
    }
    if is_detached(host) {
        return Some("detached");
    }
    if !matches!(
        host.state(),
        ProvisioningState::Available | ProvisioningState::Ready
    ) {
        return Some("not available");
    }
    let status = host.status.as_ref()?;
    if status.operational_status == OperationalStatus::Error
        || !status.error_message.is_empty()
        || status.error_type.is_some()
    {
        return Some("in error");
    }
    None
}

/// The hosts that may serve the claim: in an admitted namespace (and `inNamespace`, when set),
/// matching the selector, available.
pub fn candidates<'a>(
    hosts: impl IntoIterator<Item = &'a BareMetalHost>,
    admitted: &BTreeSet<String>,
    claim: &HostClaim,
    selector: &LabelSelector,
) -> Vec<&'a BareMetalHost> {
    let only = &claim.spec.host_selector.in_namespace;
    hosts
        .into_iter()
        .filter(|h| {
            let ns = h.namespace_or_default();
            admitted.contains(ns) && (only.is_empty() || only == ns)
        })
        .filter(|h| selector.matches(h.labels()))
        .filter(|h| unavailable(h).is_none())
        .collect()
}

/// Picks one candidate: those in the claim's failure domain first, then any; `pick(n)` chooses
/// an index below `n` (random in the controller, so concurrent claims rarely collide).
pub fn choose<'a>(
    candidates: &[&'a BareMetalHost],
    failure_domain: &str,
    pick: impl FnOnce(usize) -> usize,
) -> Option<&'a BareMetalHost> {
    if candidates.is_empty() {
        return None;
    }
    let in_domain: Vec<_> = if failure_domain.is_empty() {
        Vec::new()
    } else {
        candidates
            .iter()
            .copied()
            .filter(|h| {
                h.labels().get(FAILURE_DOMAIN_LABEL).map(String::as_str) == Some(failure_domain)
            })
            .collect()
    };
    let pool: &[&BareMetalHost] = if in_domain.is_empty() {
        candidates
    } else {
        &in_domain
    };
    Some(pool[pick(pool.len()).min(pool.len() - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::claim::NameValuePair;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn constraints(v: serde_json::Value) -> HostClaimNamespaces {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn policy_matrix() {
        // (constraints, namespace, namespace labels, admitted)
        type Row<'a> = (
            Option<serde_json::Value>,
            &'a str,
            Vec<(&'a str, &'a str)>,
            bool,
        );
        let rows: Vec<Row> = vec![
            (None, "tenant-a", vec![], false),
            (Some(json!({})), "tenant-a", vec![], true),
            (
                Some(json!({"names": ["tenant-a"]})),
                "tenant-a",
                vec![],
                true,
            ),
            (
                Some(json!({"names": ["tenant-a"]})),
                "tenant-b",
                vec![],
                false,
            ),
            (Some(json!({"names": []})), "tenant-a", vec![], false),
            (
                Some(json!({"nameMatches": "^team-"})),
                "team-x",
                vec![],
                true,
            ),
            (
                Some(json!({"nameMatches": "^team-"})),
                "my-team-x",
                vec![],
                false,
            ),
            // Unanchored, as metal3 documents: "prod" matches "reproduce".
            (
                Some(json!({"nameMatches": "prod"})),
                "reproduce",
                vec![],
                true,
            ),
            (
                Some(json!({"hasLabels": [{"name": "tier", "value": "gold"}]})),
                "t",
                vec![("tier", "gold")],
                true,
            ),
            (
                Some(json!({"hasLabels": [{"name": "tier", "value": "gold"}]})),
                "t",
                vec![("tier", "silver")],
                false,
            ),
            (
                Some(json!({"hasLabels": [{"name": "tier"}]})),
                "t",
                vec![("tier", "silver")],
                true,
            ),
            (
                Some(json!({"hasLabels": [{"name": "tier"}]})),
                "t",
                vec![],
                false,
            ),
            (
                Some(
                    json!({"names": ["team-a"], "nameMatches": "^team-", "hasLabels": [{"name": "tier"}]}),
                ),
                "team-a",
                vec![("tier", "x")],
                true,
            ),
            (
                Some(
                    json!({"names": ["team-a"], "nameMatches": "^team-", "hasLabels": [{"name": "tier"}]}),
                ),
                "team-a",
                vec![],
                false,
            ),
        ];
        for (i, (c, ns, l, want)) in rows.into_iter().enumerate() {
            let c = c.map(constraints);
            let got = policy_admits(c.as_ref(), ns, &labels(&l)).unwrap();
            assert_eq!(got, want, "row {i}: {c:?} for {ns}");
        }
        let bad = constraints(json!({"nameMatches": "("}));
        let err = policy_admits(Some(&bad), "x", &BTreeMap::new()).unwrap_err();
        assert!(err.contains("nameMatches \"(\""), "{err}");
        let _ = NameValuePair::default();
    }

    fn host(name: &str, ns: &str, labels: serde_json::Value, state: &str) -> BareMetalHost {
        serde_json::from_value(json!({
            "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"online": false},
            "status": {"provisioning": {"state": state}, "operationalStatus": "OK", "poweredOn": false},
        }))
        .unwrap()
    }

    fn claim(selector: serde_json::Value, failure_domain: &str) -> HostClaim {
        serde_json::from_value(json!({
            "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim",
            "metadata": {"name": "c", "namespace": "tenant"},
            "spec": {"hostSelector": selector, "failureDomain": failure_domain},
        }))
        .unwrap()
    }

    #[test]
    fn eligibility() {
        let mut consumed = host("consumed", "infra", json!({}), "available");
        consumed.spec.consumer_ref = Some(Default::default());
        let mut paused = host("paused", "infra", json!({}), "available");
        paused
            .annotations_mut()
            .insert(ann::PAUSED.into(), "x".into());
        let mut detached = host("detached", "infra", json!({}), "available");
        detached
            .annotations_mut()
            .insert(ann::DETACHED.into(), "{}".into());
        let mut failed = host("failed", "infra", json!({}), "available");
        failed.status.as_mut().unwrap().error_message = "boom".into();
        let mut deleting = host("deleting", "infra", json!({}), "available");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let rows = [
            (host("ok", "infra", json!({}), "available"), None),
            (host("ready", "infra", json!({}), "ready"), None),
            (
                host("prov", "infra", json!({}), "provisioned"),
                Some("not available"),
            ),
            (
                host("insp", "infra", json!({}), "inspecting"),
                Some("not available"),
            ),
            (consumed, Some("consumed")),
            (paused, Some("paused")),
            (detached, Some("detached")),
            (failed, Some("in error")),
            (deleting, Some("being deleted")),
        ];
        for (h, want) in &rows {
            assert_eq!(unavailable(h), *want, "{}", h.name_any());
        }
    }

    #[test]
    fn candidates_follow_policy_selector_and_namespace() {
        let hosts = [
            host("a", "infra", json!({"kind": "medium"}), "available"),
            host("b", "infra", json!({"kind": "large"}), "available"),
            host("c", "other", json!({"kind": "medium"}), "available"),
            host("d", "closed", json!({"kind": "medium"}), "available"),
        ];
        let admitted: BTreeSet<String> = ["infra".into(), "other".into()].into();
        let names = |c: &HostClaim| {
            let sel = host_selector(&c.spec.host_selector).unwrap();
            candidates(&hosts, &admitted, c, &sel)
                .into_iter()
                .map(|h| h.name_any())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&claim(json!({}), "")), ["a", "b", "c"]);
        assert_eq!(
            names(&claim(json!({"matchLabels": {"kind": "medium"}}), "")),
            ["a", "c"]
        );
        assert_eq!(
            names(&claim(
                json!({"matchLabels": {"kind": "medium"}, "inNamespace": "other"}),
                ""
            )),
            ["c"]
        );
        assert_eq!(
            names(&claim(
                json!({"matchExpressions": [{"key": "kind", "operator": "notin", "values": ["medium"]}]}),
                ""
            )),
            ["b"]
        );
        assert_eq!(
            names(&claim(
                json!({"matchExpressions": [{"key": "kind", "operator": "In", "values": ["large", "medium"]}]}),
                ""
            )),
            ["a", "b", "c"]
        );
        // A namespace no policy admits lends nothing, even when named.
        assert!(names(&claim(json!({"inNamespace": "closed"}), "")).is_empty());
        let bad = claim(
            json!({"matchExpressions": [{"key": "kind", "operator": "Sideways", "values": []}]}),
            "",
        );
        assert!(host_selector(&bad.spec.host_selector).is_err());
    }

    #[test]
    fn failure_domain_is_a_preference() {
        let hosts = [
            host(
                "a",
                "infra",
                json!({FAILURE_DOMAIN_LABEL: "rack-1"}),
                "available",
            ),
            host(
                "b",
                "infra",
                json!({FAILURE_DOMAIN_LABEL: "rack-2"}),
                "available",
            ),
            host("c", "infra", json!({}), "available"),
        ];
        let all: Vec<_> = hosts.iter().collect();
        for pick in 0..3 {
            assert_eq!(choose(&all, "rack-2", |_| pick).unwrap().name_any(), "b");
        }
        assert_eq!(choose(&all, "rack-9", |_| 2).unwrap().name_any(), "c");
        assert_eq!(choose(&all, "", |_| 0).unwrap().name_any(), "a");
        assert!(choose(&[], "", |_| 0).is_none());
    }

    #[test]
    fn consumer_refs_name_the_claim() {
        let mut h = host("a", "infra", json!({}), "provisioned");
        let c = claim(json!({}), "");
        h.spec.consumer_ref = Some(serde_json::from_value(consumer_ref(&c)).unwrap());
        assert!(consumed_by(&h, "tenant", "c"));
        assert!(!consumed_by(&h, "tenant", "d"));
        assert_eq!(claim_of(&h), Some(("tenant", "c")));
        h.spec.consumer_ref.as_mut().unwrap().kind = Some("Metal3Machine".into());
        assert!(!consumed_by(&h, "tenant", "c"));
        assert_eq!(claim_of(&h), None);
    }
}
