//! [`PolicyRule`] in its wire form, and Kubernetes' `RuleAllows` matching of one rule
//! against one request.

use serde::{Deserialize, Deserializer, Serialize};

use super::attributes::Attributes;
use super::quote::go_quote_list;

// Wildcards; the escalation check reads them too.
pub(super) const VERB_ALL: &str = "*";
pub(super) const API_GROUP_ALL: &str = "*";
pub(super) const RESOURCE_ALL: &str = "*";
const NON_RESOURCE_ALL: &str = "*";

/// An `rbac.authorization.k8s.io/v1` PolicyRule in its wire form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub verbs: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub api_groups: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_names: Vec<String>,
    #[serde(
        rename = "nonResourceURLs",
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// `null` reads as an empty list (Go encodes a nil slice without omitempty as null).
fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

impl PolicyRule {
    /// Kubernetes' `RuleAllows`: does this rule allow the request?
    pub fn allows(&self, a: &Attributes) -> bool {
        if !verb_matches(self, a.verb) {
            return false;
        }
        if a.resource_request {
            api_group_matches(self, a.api_group)
                && resource_matches(self, a.resource, a.subresource)
                && resource_name_matches(self, a.name)
        } else {
            non_resource_url_matches(self, a.path)
        }
    }

    /// Kubernetes' `CompactString`, used in escalation errors, e.g.
    /// `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
    pub fn compact_string(&self) -> String {
        let mut parts = Vec::new();
        for (label, list) in [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ] {
            if !list.is_empty() {
                parts.push(format!("{label}:{}", go_quote_list(list)));
            }
        }
        format!("{{{}}}", parts.join(", "))
    }
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == VERB_ALL || v == verb)
}

fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups
        .iter()
        .any(|g| g == API_GROUP_ALL || g == group)
}

/// `*`, exact `resource` or `resource/subresource`, or `*/subresource`.
fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        if r == RESOURCE_ALL {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        // Compare against "resource/subresource" without allocating.
        let combined = r.len() == resource.len() + 1 + subresource.len()
            && r.starts_with(resource)
            && r[resource.len()..].starts_with('/')
            && r.ends_with(subresource);
        combined || r.strip_prefix("*/") == Some(subresource)
    })
}

fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls
        .iter()
        .any(|u| u == NON_RESOURCE_ALL || non_resource_url_covers(u, path))
}

/// Exact, or a trailing-`*` rule whose prefix (all trailing `*` removed) starts `path`.
pub(super) fn non_resource_url_covers(rule_url: &str, path: &str) -> bool {
    rule_url == path
        || (rule_url.ends_with('*') && path.starts_with(rule_url.trim_end_matches('*')))
}
