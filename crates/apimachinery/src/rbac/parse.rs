//! Reading RBAC objects in their wire form (JSON), with an error text for whatever
//! has the wrong shape; [`Policy::from_objects`](super::Policy::from_objects) turns
//! those into warnings.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::binding::Subject;
use super::rule::PolicyRule;
use crate::selector::LabelSelector;

pub(super) struct ParsedClusterRole {
    pub(super) name: String,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) rules: Vec<PolicyRule>,
    /// `Some` when the role has a (valid) aggregationRule.
    pub(super) selectors: Option<Vec<LabelSelector>>,
}

pub(super) struct ParsedBinding {
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) role_kind: String,
    pub(super) role_name: String,
    pub(super) subjects: Vec<Subject>,
}

pub(super) fn meta_str<'v>(obj: &'v Value, field: &str) -> Option<&'v str> {
    obj.get("metadata")?
        .get(field)?
        .as_str()
        .filter(|s| !s.is_empty())
}

pub(super) fn parse_rules(obj: &Value) -> Result<Vec<PolicyRule>, String> {
    match obj.get("rules") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, r)| PolicyRule::deserialize(r).map_err(|e| format!("rules[{i}]: {e}")))
            .collect(),
        Some(_) => Err("rules is not an array".into()),
    }
}

/// `Ok(None)` without an aggregationRule.
pub(super) fn parse_aggregation(obj: &Value) -> Result<Option<Vec<LabelSelector>>, String> {
    let rule = match obj.get("aggregationRule") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(_) => return Err("aggregationRule is not an object".into()),
    };
    match rule.get("clusterRoleSelectors") {
        None | Some(Value::Null) => Ok(Some(Vec::new())),
        Some(Value::Array(sels)) => sels
            .iter()
            .enumerate()
            .map(|(i, s)| {
                LabelSelector::from_label_selector_json(s)
                    .map_err(|e| format!("aggregationRule.clusterRoleSelectors[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err("aggregationRule.clusterRoleSelectors is not an array".into()),
    }
}

pub(super) fn parse_binding(obj: &Value, namespaced: bool) -> Result<ParsedBinding, String> {
    let name = meta_str(obj, "name").ok_or("metadata.name is missing")?;
    let namespace = if namespaced {
        meta_str(obj, "namespace").ok_or("metadata.namespace is missing")?
    } else {
        ""
    };
    let role_ref = obj
        .get("roleRef")
        .and_then(Value::as_object)
        .ok_or("roleRef is missing")?;
    let ref_field = |f: &str| {
        role_ref
            .get(f)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("roleRef.{f} is missing"))
    };
    let role_kind = ref_field("kind")?;
    let role_name = ref_field("name")?;
    let subjects = match obj.get("subjects") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let field = |f: &str| s.get(f).and_then(Value::as_str);
                let (Some(kind), Some(name)) = (field("kind"), field("name")) else {
                    return Err(format!("subjects[{i}] needs a string kind and name"));
                };
                let namespace = match s.get("namespace") {
                    None | Some(Value::Null) => "",
                    Some(Value::String(ns)) => ns,
                    Some(_) => return Err(format!("subjects[{i}].namespace is not a string")),
                };
                Ok(Subject {
                    kind: kind.into(),
                    name: name.into(),
                    namespace: namespace.into(),
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("subjects is not an array".into()),
    };
    Ok(ParsedBinding {
        name: name.into(),
        namespace: namespace.into(),
        role_kind: role_kind.into(),
        role_name: role_name.into(),
        subjects,
    })
}
