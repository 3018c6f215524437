//! `covers` and `escalation_message`.

use super::fixtures::*;
use crate::rbac::{PolicyRule, UserInfo, covers, escalation_message};

/// (case, owner, requested, expected missing)
type CoversRow = (
    &'static str,
    Vec<PolicyRule>,
    Vec<PolicyRule>,
    Vec<PolicyRule>,
);

#[test]
fn covers_table() {
    let pods_get = rule(&["get"], &[""], &["pods"]);
    // (case, owner, requested, expected missing)
    let rows: Vec<CoversRow> = vec![
        (
            "equal rules",
            vec![rule(&["get", "list"], &[""], &["pods"])],
            vec![rule(&["get", "list"], &[""], &["pods"])],
            vec![],
        ),
        ("nothing requested", vec![], vec![], vec![]),
        (
            "wildcard owner",
            vec![rule(&["*"], &["*"], &["*"])],
            vec![
                rule(
                    &["get", "delete"],
                    &["", "apps"],
                    &["pods", "deployments/scale"],
                ),
                named(pods_get.clone(), &["p"]),
            ],
            vec![],
        ),
        (
            "wildcard owner does not cover URLs",
            vec![rule(&["*"], &["*"], &["*"])],
            vec![url_rule(&["get"], &["/metrics"])],
            vec![url_rule(&["get"], &["/metrics"])],
        ),
        (
            "narrower owner: missing verb and group broken down",
            vec![rule(&["get"], &[""], &["pods"])],
            vec![rule(&["get", "list"], &["", "apps"], &["pods"])],
            vec![
                rule(&["list"], &[""], &["pods"]),
                rule(&["get"], &["apps"], &["pods"]),
                rule(&["list"], &["apps"], &["pods"]),
            ],
        ),
        (
            "owner */scale covers x/scale",
            vec![rule(&["update"], &["apps"], &["*/scale"])],
            vec![rule(&["update"], &["apps"], &["deployments/scale"])],
            vec![],
        ),
        (
            "owner */scale does not cover x",
            vec![rule(&["update"], &["apps"], &["*/scale"])],
            vec![rule(&["update"], &["apps"], &["deployments"])],
            vec![rule(&["update"], &["apps"], &["deployments"])],
        ),
        (
            "owner pods does not cover pods/log",
            vec![pods_get.clone()],
            vec![rule(&["get"], &[""], &["pods/log"])],
            vec![rule(&["get"], &[""], &["pods/log"])],
        ),
        (
            "owner without names covers named",
            vec![pods_get.clone()],
            vec![named(pods_get.clone(), &["a", "b"])],
            vec![],
        ),
        (
            "owner with names covers only those names",
            vec![named(pods_get.clone(), &["a"])],
            vec![named(pods_get.clone(), &["a", "b"])],
            vec![named(pods_get.clone(), &["b"])],
        ),
        (
            "owner with names does not cover unnamed",
            vec![named(pods_get.clone(), &["a"])],
            vec![pods_get.clone()],
            vec![pods_get.clone()],
        ),
        (
            "URL exact",
            vec![url_rule(&["get"], &["/healthz"])],
            vec![url_rule(&["get"], &["/healthz"])],
            vec![],
        ),
        (
            "URL prefix owner",
            vec![url_rule(&["get"], &["/apis/*"])],
            vec![url_rule(&["get"], &["/apis/metal3.io", "/apis/*"])],
            vec![],
        ),
        (
            "URL star owner",
            vec![url_rule(&["*"], &["*"])],
            vec![url_rule(&["get", "post"], &["/metrics"])],
            vec![],
        ),
        (
            "URL narrower owner",
            vec![url_rule(&["get"], &["/healthz"])],
            vec![url_rule(&["get", "post"], &["/healthz", "/metrics"])],
            vec![
                url_rule(&["post"], &["/healthz"]),
                url_rule(&["get"], &["/metrics"]),
                url_rule(&["post"], &["/metrics"]),
            ],
        ),
        (
            "URL owner does not cover resources",
            vec![url_rule(&["*"], &["*"])],
            vec![pods_get.clone()],
            vec![pods_get.clone()],
        ),
        (
            "union of owner rules",
            vec![
                rule(&["get"], &[""], &["pods"]),
                rule(&["list"], &[""], &["pods"]),
            ],
            vec![rule(&["get", "list"], &[""], &["pods"])],
            vec![],
        ),
    ];
    for (case, owner, requested, missing) in rows {
        let got = covers(&owner, &requested);
        if missing.is_empty() {
            assert_eq!(got, Ok(()), "{case}");
        } else {
            assert_eq!(got, Err(missing), "{case}");
        }
    }
}

#[test]
fn escalation_message_format() {
    let missing = vec![
        rule(&["list"], &[""], &["secrets"]),
        url_rule(&["get"], &["/metrics"]),
        rule(&["get"], &[""], &["secrets"]),
    ];
    let u = UserInfo::new("alice", ["dev", "system:authenticated"]);
    assert_eq!(
        escalation_message(&u, &missing),
        "user \"alice\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
         {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\" \"get\"]}\n\
         {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
    );
}
