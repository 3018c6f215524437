//! The escalation check: Kubernetes' `Covers` and the `ConfirmNoEscalation` error
//! text, for writes of Roles, ClusterRoles and their bindings.

use std::collections::{BTreeSet, HashMap};

use super::attributes::UserInfo;
use super::quote::{go_quote, go_quote_list};
use super::rule::{API_GROUP_ALL, PolicyRule, RESOURCE_ALL, VERB_ALL, non_resource_url_covers};

/// Kubernetes' `Covers` (the heart of `ConfirmNoEscalation`): `Ok` when the
/// `owner` rules allow everything the `requested` rules allow. Otherwise the
/// uncovered parts of `requested`, broken down as Kubernetes does: one rule
/// per (apiGroup, resource, verb[, resourceName]) and per (nonResourceURL,
/// verb), in order.
///
/// Owner `*` verbs/groups/resources cover anything, owner `*/sub` covers
/// `x/sub`, owner URL `/a/*` covers `/a/b`; an owner rule with
/// resourceNames covers only requested rules naming a subset of them.
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> Result<(), Vec<PolicyRule>> {
    let missing: Vec<PolicyRule> = requested
        .iter()
        .flat_map(breakdown_rule)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

fn breakdown_rule(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    out.push(base);
                } else {
                    for name in &rule.resource_names {
                        out.push(PolicyRule {
                            resource_names: one(name),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

fn resources_cover_all(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, RESOURCE_ALL) {
        return true;
    }
    wanted.iter().all(|w| {
        has(owner, w)
            || w.split_once('/')
                .is_some_and(|(_, sub)| owner.iter().any(|o| o.strip_prefix("*/") == Some(sub)))
    })
}

fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, VERB_ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups =
        has(&owner.api_groups, API_GROUP_ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resources_cover_all(&owner.resources, &sub.resources);
    let urls = sub.non_resource_urls.iter().all(|u| {
        owner
            .non_resource_urls
            .iter()
            .any(|o| non_resource_url_covers(o, u))
    });
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// Kubernetes' `ConfirmNoEscalation` error text for the rules [`covers`]
/// reported missing (compacted and sorted as Kubernetes does):
///
/// ```text
/// user "alice" (groups=["dev" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
/// {APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}
/// ```
///
/// kube-apiserver returns it as a 403 Forbidden Status whose message is
/// `clusterroles.rbac.authorization.k8s.io "NAME" is forbidden: ` followed by
/// this text (`roles…`, `rolebindings…`, `clusterrolebindings…` likewise).
pub fn escalation_message(user: &UserInfo, missing: &[PolicyRule]) -> String {
    let descriptions: BTreeSet<String> = compact_rules(missing)
        .iter()
        .map(PolicyRule::compact_string)
        .collect();
    format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        go_quote_list(&user.groups),
        descriptions.into_iter().collect::<Vec<_>>().join("\n")
    )
}

/// Kubernetes' `CompactRules`: rules with exactly one apiGroup and one
/// resource and nothing but verbs besides are merged per (group, resource).
fn compact_rules(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    let mut slot: HashMap<(&str, &str), usize> = HashMap::new();
    for r in rules {
        let is_simple = r.resource_names.is_empty()
            && r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1;
        if !is_simple {
            out.push(r.clone());
            continue;
        }
        let key = (r.api_groups[0].as_str(), r.resources[0].as_str());
        match slot.get(&key) {
            Some(&i) => simple[i].verbs.extend(r.verbs.iter().cloned()),
            None => {
                slot.insert(key, simple.len());
                simple.push(r.clone());
            }
        }
    }
    out.extend(simple);
    out
}
