//! The built-in kinds this server serves and the meta types, with schemas generated
//! from k8s-openapi once, and the definition name of any kind.

use std::sync::OnceLock;

use k8s_openapi::api::authentication::v1 as authentication;
use k8s_openapi::api::authorization::v1 as authorization;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::api::rbac::v1 as rbac;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::resource::ResourceSchema;

pub(super) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(super) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(super) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

/// The built-in kinds: (group, version, kind, namespaced, definition name).
const BUILTINS: &[(&str, &str, &str, bool, &str)] = &[
    ("", "v1", "Namespace", false, "io.k8s.api.core.v1.Namespace"),
    ("", "v1", "Secret", true, "io.k8s.api.core.v1.Secret"),
    ("", "v1", "ConfigMap", true, "io.k8s.api.core.v1.ConfigMap"),
    (
        "",
        "v1",
        "ServiceAccount",
        true,
        "io.k8s.api.core.v1.ServiceAccount",
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        false,
        "io.k8s.api.authorization.v1.SubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        false,
        "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        false,
        "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
    ),
    (
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        true,
        "io.k8s.api.authorization.v1.LocalSubjectAccessReview",
    ),
    (
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        false,
        "io.k8s.api.authentication.v1.SelfSubjectReview",
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        false,
        "io.k8s.api.authentication.v1.TokenReview",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        true,
        "io.k8s.api.rbac.v1.Role",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        true,
        "io.k8s.api.rbac.v1.RoleBinding",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        false,
        "io.k8s.api.rbac.v1.ClusterRole",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        false,
        "io.k8s.api.rbac.v1.ClusterRoleBinding",
    ),
    ("", "v1", "Event", true, "io.k8s.api.core.v1.Event"),
    (
        "events.k8s.io",
        "v1",
        "Event",
        true,
        "io.k8s.api.events.v1.Event",
    ),
    (
        "coordination.k8s.io",
        "v1",
        "Lease",
        true,
        "io.k8s.api.coordination.v1.Lease",
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        false,
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    ),
];

pub(super) fn builtin_name(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|b| b.0 == group && b.1 == version && b.2 == kind)
        .map(|b| b.4)
}

/// Every definition the built-in kinds and meta types refer to, in OpenAPI
/// 3.0 form with `#/components/schemas/` references.
pub(super) fn registry() -> &'static Map<String, Value> {
    static REGISTRY: OnceLock<Map<String, Value>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut generator = SchemaSettings::openapi3().into_generator();
        generator.subschema_for::<core::Namespace>();
        generator.subschema_for::<core::Secret>();
        generator.subschema_for::<core::ConfigMap>();
        generator.subschema_for::<core::ServiceAccount>();
        generator.subschema_for::<authorization::SubjectAccessReview>();
        generator.subschema_for::<authorization::SelfSubjectAccessReview>();
        generator.subschema_for::<authorization::SelfSubjectRulesReview>();
        generator.subschema_for::<authorization::LocalSubjectAccessReview>();
        generator.subschema_for::<authentication::SelfSubjectReview>();
        generator.subschema_for::<authentication::TokenReview>();
        generator.subschema_for::<rbac::Role>();
        generator.subschema_for::<rbac::RoleBinding>();
        generator.subschema_for::<rbac::ClusterRole>();
        generator.subschema_for::<rbac::ClusterRoleBinding>();
        generator.subschema_for::<core::Event>();
        generator.subschema_for::<events::Event>();
        generator.subschema_for::<coordination::Lease>();
        generator.subschema_for::<apiext::CustomResourceDefinition>();
        generator.subschema_for::<meta::ObjectMeta>();
        generator.subschema_for::<meta::ListMeta>();
        generator.subschema_for::<meta::Status>();
        generator.subschema_for::<meta::DeleteOptions>();
        generator.subschema_for::<meta::Patch>();
        generator.subschema_for::<meta::WatchEvent<serde_json::Value>>();
        let mut defs = generator.take_definitions(true);
        // kubectl computes strategic merge patches from these extensions,
        // which the generated schemas lack.
        set_patch_strategy(&mut defs, OBJECT_META, "ownerReferences", Some("uid"));
        set_patch_strategy(&mut defs, OBJECT_META, "finalizers", None);
        set_patch_strategy(
            &mut defs,
            "io.k8s.api.core.v1.NamespaceStatus",
            "conditions",
            Some("type"),
        );
        // The WatchEvent generic may be named after its parameter; pin it.
        if !defs.contains_key(WATCH_EVENT) {
            let found = defs.keys().find(|k| k.contains("WatchEvent")).cloned();
            if let Some(k) = found
                && let Some(v) = defs.remove(&k)
            {
                defs.insert(WATCH_EVENT.into(), v);
            }
        }
        defs
    })
}

fn set_patch_strategy(defs: &mut Map<String, Value>, def: &str, field: &str, key: Option<&str>) {
    if let Some(Value::Object(p)) = defs
        .get_mut(def)
        .and_then(|d| d.get_mut("properties"))
        .and_then(|p| p.get_mut(field))
    {
        p.insert("x-kubernetes-patch-strategy".into(), "merge".into());
        if let Some(k) = key {
            p.insert("x-kubernetes-patch-merge-key".into(), k.into());
        }
    }
}

/// The schemas of the built-in kinds this server serves.
pub fn builtin_schemas() -> Vec<ResourceSchema> {
    let reg = registry();
    BUILTINS
        .iter()
        .map(|(g, v, k, ns, name)| ResourceSchema {
            group: (*g).into(),
            version: (*v).into(),
            kind: (*k).into(),
            namespaced: *ns,
            schema: reg
                .get(*name)
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"})),
        })
        .collect()
}

/// The definition name of a kind: the built-in name, or the reversed group
/// domain then version and kind, e.g. "io.metal3.v1alpha1.BareMetalHost".
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    if let Some(n) = builtin_name(group, version, kind) {
        return n.to_string();
    }
    if let Some(list_of) = kind.strip_suffix("List")
        && let Some(n) = builtin_name(group, version, list_of)
    {
        return format!("{n}List");
    }
    let reversed: Vec<&str> = group.split('.').rev().filter(|s| !s.is_empty()).collect();
    if reversed.is_empty() {
        format!("io.k8s.api.core.{version}.{kind}")
    } else {
        format!("{}.{version}.{kind}", reversed.join("."))
    }
}
