//! OpenAPI v2/v3 documents for `kubectl explain`, client-side validation
//! and kubectl's choice of patch type (it sends strategic merge patches
//! only for kinds whose PATCH operation lists that content type).

use std::collections::{BTreeMap, BTreeSet};
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

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceSchema {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespaced: bool,
    pub schema: Value,
}

impl ResourceSchema {
    /// The resource (URL) name kube-apiserver would guess for this kind.
    pub fn guessed_plural(&self) -> String {
        guess_plural(&self.kind)
    }
}

/// Lower-cased plural of a kind, as Kubernetes' UnsafeGuessKindToResource.
pub fn guess_plural(kind: &str) -> String {
    let s = kind.to_lowercase();
    if s.is_empty() {
        return s;
    }
    if s.ends_with('s') {
        format!("{s}es")
    } else if let Some(stem) = s.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{s}s")
    }
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
const V3_REF: &str = "#/components/schemas/";
const V2_REF: &str = "#/definitions/";

const API_VERSION_DESC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DESC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

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

fn builtin_name(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|b| b.0 == group && b.1 == version && b.2 == kind)
        .map(|b| b.4)
}

/// Every definition the built-in kinds and meta types refer to, in OpenAPI
/// 3.0 form with `#/components/schemas/` references.
fn registry() -> &'static Map<String, Value> {
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

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// A resource's definition with its GVK, metadata pointing at ObjectMeta
/// and apiVersion/kind described, as kube-apiserver publishes CRD schemas.
fn kind_definition(r: &ResourceSchema) -> Value {
    let mut s = match &r.schema {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    s.entry("type").or_insert_with(|| "object".into());
    let props = s.entry("properties").or_insert_with(|| json!({}));
    if !props.is_object() {
        *props = json!({});
    }
    if let Value::Object(p) = props {
        if builtin_name(&r.group, &r.version, &r.kind).is_none() {
            p.insert(
                "metadata".into(),
                json!({
                    "description": METADATA_DESC,
                    "allOf": [{"$ref": format!("{V3_REF}{OBJECT_META}")}],
                    "default": {},
                }),
            );
        }
        for (field, desc) in [("apiVersion", API_VERSION_DESC), ("kind", KIND_DESC)] {
            let entry = p.entry(field).or_insert_with(|| json!({"type": "string"}));
            if let Value::Object(e) = entry {
                e.entry("description").or_insert_with(|| desc.into());
            }
        }
    }
    s.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk(&r.group, &r.version, &r.kind)]),
    );
    Value::Object(s)
}

fn list_definition(r: &ResourceSchema, item_name: &str) -> Value {
    json!({
        "description": format!("{}List is a list of {}", r.kind, r.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DESC, "type": "string"},
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", guess_plural(&r.kind)),
                "type": "array",
                "items": {"$ref": format!("{V3_REF}{item_name}")},
            },
            "kind": {"description": KIND_DESC, "type": "string"},
            "metadata": {
                "description": LIST_METADATA_DESC,
                "allOf": [{"$ref": format!("{V3_REF}{LIST_META}")}],
                "default": {},
            },
        },
        "x-kubernetes-group-version-kind": [gvk(&r.group, &r.version, &format!("{}List", r.kind))],
    })
}

/// Adds every definition `v` refers to (transitively) from the registry.
fn add_referenced(v: &Value, out: &mut Map<String, Value>) {
    let mut stack = vec![v.clone()];
    let mut seen: BTreeSet<String> = out.keys().cloned().collect();
    while let Some(cur) = stack.pop() {
        let mut refs = Vec::new();
        collect_refs(&cur, &mut refs);
        for name in refs {
            if seen.insert(name.clone())
                && let Some(def) = registry().get(&name)
            {
                out.insert(name, def.clone());
                stack.push(def.clone());
            }
        }
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                if k == "$ref"
                    && let Some(name) = c.as_str().and_then(|s| s.strip_prefix(V3_REF))
                {
                    out.push(name.to_string());
                } else {
                    collect_refs(c, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_refs(c, out)),
        _ => {}
    }
}

fn api_prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

fn supports_strategic_merge(r: &ResourceSchema) -> bool {
    builtin_name(&r.group, &r.version, &r.kind).is_some()
}

#[derive(Clone, Copy, PartialEq)]
enum Flavor {
    V2,
    V3,
}

fn reference(flavor: Flavor, name: &str) -> Value {
    let base = if flavor == Flavor::V3 { V3_REF } else { V2_REF };
    json!({"$ref": format!("{base}{name}")})
}

/// One operation object; v3 uses requestBody/content, v2 consumes/produces.
fn operation(
    flavor: Flavor,
    r: &ResourceSchema,
    action: &str,
    verb_desc: String,
    op_id: String,
    body: Option<(&str, Vec<&str>)>,
    response: &str,
) -> Value {
    let mut op = Map::new();
    op.insert("description".into(), verb_desc.into());
    op.insert("operationId".into(), op_id.into());
    let tag = if r.group.is_empty() {
        format!("core_{}", r.version)
    } else {
        format!("{}_{}", r.group.replace('.', "_"), r.version)
    };
    op.insert("tags".into(), json!([tag]));
    let produces = ["application/json", "application/yaml"];
    let mut params = query_params(flavor, action);
    match flavor {
        Flavor::V3 => {
            if let Some((schema, types)) = body {
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| (t.to_string(), json!({"schema": reference(flavor, schema)})))
                    .collect();
                op.insert(
                    "requestBody".into(),
                    json!({"content": content, "required": true}),
                );
            }
            let content: Map<String, Value> = produces
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        json!({"schema": reference(flavor, response)}),
                    )
                })
                .collect();
            op.insert(
                "responses".into(),
                json!({"200": {"description": "OK", "content": content}, "401": {"description": "Unauthorized"}}),
            );
        }
        Flavor::V2 => {
            if let Some((schema, types)) = body {
                op.insert("consumes".into(), json!(types));
                params.push(
                    json!({"in": "body", "name": "body", "required": true, "schema": reference(flavor, schema)}),
                );
            } else {
                op.insert("consumes".into(), json!(["*/*"]));
            }
            op.insert("produces".into(), json!(produces));
            op.insert("schemes".into(), json!(["https"]));
            op.insert(
                "responses".into(),
                json!({"200": {"description": "OK", "schema": reference(flavor, response)}, "401": {"description": "Unauthorized"}}),
            );
        }
    }
    if !params.is_empty() {
        op.insert("parameters".into(), Value::Array(params));
    }
    op.insert("x-kubernetes-action".into(), action.into());
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk(&r.group, &r.version, &r.kind),
    );
    Value::Object(op)
}

/// The query parameters kube-apiserver documents per action. kubectl
/// looks for `fieldValidation` on PATCH to decide that the server validates
/// fields itself (otherwise it falls back to client-side validation).
fn query_params(flavor: Flavor, action: &str) -> Vec<Value> {
    const LIST: &[(&str, &str, &str)] = &[
        (
            "allowWatchBookmarks",
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
        ),
        (
            "continue",
            "string",
            "The continue option should be set when retrieving more results from the server.",
        ),
        (
            "fieldSelector",
            "string",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
        ),
        (
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
        ),
        (
            "limit",
            "integer",
            "limit is a maximum number of responses to return for a list call.",
        ),
        (
            "resourceVersion",
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
        ),
        (
            "resourceVersionMatch",
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
        ),
        (
            "sendInitialEvents",
            "boolean",
            "`sendInitialEvents=true` may be set together with `watch=true`.",
        ),
        (
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call.",
        ),
        (
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
        ),
    ];
    const DRY_RUN: (&str, &str, &str) = (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
    );
    const FIELD_MANAGER: (&str, &str, &str) = (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    );
    const FIELD_VALIDATION: (&str, &str, &str) = (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
    );
    const FORCE: (&str, &str, &str) = (
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
    );
    const GRACE: (&str, &str, &str) = (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted.",
    );
    const PROPAGATION: (&str, &str, &str) = (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed. Acceptable values are: 'Orphan', 'Background', 'Foreground'.",
    );
    let list: Vec<(&str, &str, &str)> = match action {
        "list" => LIST.to_vec(),
        "post" | "put" => vec![DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION],
        "patch" => vec![DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE],
        "delete" => vec![DRY_RUN, GRACE, PROPAGATION],
        "deletecollection" => {
            let mut v = LIST.to_vec();
            v.extend([DRY_RUN, GRACE, PROPAGATION]);
            v
        }
        _ => Vec::new(),
    };
    list.into_iter()
        .map(|(name, ty, desc)| {
            let mut p = json!({"name": name, "in": "query", "description": desc});
            match flavor {
                Flavor::V3 => p["schema"] = json!({"type": ty, "uniqueItems": true}),
                Flavor::V2 => {
                    p["type"] = ty.into();
                    p["uniqueItems"] = true.into();
                }
            }
            p
        })
        .collect()
}

fn path_params(flavor: Flavor, names: &[&str]) -> Value {
    names
        .iter()
        .map(|n| {
            let mut p = json!({"name": n, "in": "path", "required": true, "description": format!("{n} of the resource")});
            match flavor {
                Flavor::V3 => p["schema"] = json!({"type": "string", "uniqueItems": true}),
                Flavor::V2 => {
                    p["type"] = "string".into();
                    p["uniqueItems"] = true.into();
                }
            }
            p
        })
        .collect()
}

fn add_paths(
    flavor: Flavor,
    paths: &mut Map<String, Value>,
    r: &ResourceSchema,
    plural: &str,
    name: &str,
) {
    let prefix = api_prefix(&r.group, &r.version);
    let list_name = format!("{name}List");
    let kind = &r.kind;
    let id_kind = format!("{}{kind}", camel(&r.group, &r.version));
    let ns_seg = if r.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let collection = format!("{prefix}{ns_seg}/{plural}");
    let item = format!("{collection}/{{name}}");
    let mut patch_types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if supports_strategic_merge(r) {
        patch_types.push("application/strategic-merge-patch+json");
    }
    if flavor == Flavor::V3 {
        patch_types.push("application/apply-patch+cbor");
    }
    let ns_param: &[&str] = if r.namespaced { &["namespace"] } else { &[] };
    let mut coll = Map::new();
    coll.insert(
        "get".into(),
        operation(
            flavor,
            r,
            "list",
            format!("list or watch objects of kind {kind}"),
            format!("list{scope}{id_kind}"),
            None,
            &list_name,
        ),
    );
    coll.insert(
        "post".into(),
        operation(
            flavor,
            r,
            "post",
            format!("create a {kind}"),
            format!("create{scope}{id_kind}"),
            Some((name, vec!["application/json", "application/yaml"])),
            name,
        ),
    );
    coll.insert(
        "delete".into(),
        operation(
            flavor,
            r,
            "deletecollection",
            format!("delete collection of {kind}"),
            format!("deleteCollection{scope}{id_kind}"),
            None,
            STATUS,
        ),
    );
    coll.insert("parameters".into(), path_params(flavor, ns_param));
    paths.insert(collection, Value::Object(coll));

    let mut one = Map::new();
    one.insert(
        "get".into(),
        operation(
            flavor,
            r,
            "get",
            format!("read the specified {kind}"),
            format!("read{scope}{id_kind}"),
            None,
            name,
        ),
    );
    one.insert(
        "put".into(),
        operation(
            flavor,
            r,
            "put",
            format!("replace the specified {kind}"),
            format!("replace{scope}{id_kind}"),
            Some((name, vec!["application/json", "application/yaml"])),
            name,
        ),
    );
    one.insert(
        "patch".into(),
        operation(
            flavor,
            r,
            "patch",
            format!("partially update the specified {kind}"),
            format!("patch{scope}{id_kind}"),
            Some((PATCH, patch_types)),
            name,
        ),
    );
    one.insert(
        "delete".into(),
        operation(
            flavor,
            r,
            "delete",
            format!("delete a {kind}"),
            format!("delete{scope}{id_kind}"),
            Some((DELETE_OPTIONS, vec!["application/json", "application/yaml"])),
            STATUS,
        ),
    );
    let mut params = ns_param.to_vec();
    params.insert(0, "name");
    one.insert("parameters".into(), path_params(flavor, &params));
    paths.insert(item, Value::Object(one));

    if r.namespaced {
        let mut all = Map::new();
        all.insert(
            "get".into(),
            operation(
                flavor,
                r,
                "list",
                format!("list or watch objects of kind {kind}"),
                format!("list{id_kind}ForAllNamespaces"),
                None,
                &list_name,
            ),
        );
        paths.insert(format!("{prefix}/{plural}"), Value::Object(all));
    }
}

/// "metal3.io", "v1alpha1" -> "Metal3IoV1alpha1", for operation ids.
fn camel(group: &str, version: &str) -> String {
    let mut out = String::new();
    let group = if group.is_empty() { "core" } else { group };
    for part in group.split(['.', '-']).chain(std::iter::once(version)) {
        let mut cs = part.chars();
        if let Some(f) = cs.next() {
            out.extend(f.to_uppercase());
            out.push_str(cs.as_str());
        }
    }
    out
}

fn build_definitions(resources: &[ResourceSchema]) -> Map<String, Value> {
    let mut defs = Map::new();
    for r in resources {
        let name = definition_name(&r.group, &r.version, &r.kind);
        defs.insert(name.clone(), kind_definition(r));
        defs.insert(format!("{name}List"), list_definition(r, &name));
    }
    for name in [OBJECT_META, LIST_META, STATUS, DELETE_OPTIONS, PATCH] {
        if let Some(d) = registry().get(name) {
            defs.insert(name.to_string(), d.clone());
        }
    }
    let snapshot = Value::Object(defs.clone());
    add_referenced(&snapshot, &mut defs);
    defs
}

/// The OpenAPI 3.0 document for one group/version (`/openapi/v3/apis/{group}/{version}`,
/// or `/openapi/v3/api/v1` for the core group), with resource URLs guessed
/// from the kinds. See [`v3_document_with_plurals`].
pub fn v3_document(group: &str, version: &str, resources: &[ResourceSchema]) -> Value {
    v3_document_with_plurals(group, version, resources, &|r| r.guessed_plural())
}

/// [`v3_document`] with the resource (URL) names supplied by the caller.
pub fn v3_document_with_plurals(
    group: &str,
    version: &str,
    resources: &[ResourceSchema],
    plural: &dyn Fn(&ResourceSchema) -> String,
) -> Value {
    let selected: Vec<&ResourceSchema> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    let owned: Vec<ResourceSchema> = selected.iter().map(|r| (*r).clone()).collect();
    let mut paths = Map::new();
    for r in &owned {
        let name = definition_name(&r.group, &r.version, &r.kind);
        add_paths(Flavor::V3, &mut paths, r, &plural(r), &name);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": build_definitions(&owned)},
    })
}

/// The `/openapi/v3` index. Without the documents at hand the hash only
/// reflects the group/version; prefer [`v3_index_with_documents`] so clients
/// that cache by URL notice schema changes.
pub fn v3_index(group_versions: &[(String, String)]) -> Value {
    let entries: Vec<(String, String, String)> = group_versions
        .iter()
        .map(|(g, v)| (g.clone(), v.clone(), content_hash(&format!("{g}/{v}"))))
        .collect();
    index_from(&entries)
}

/// The `/openapi/v3` index with each URL's hash taken from its document.
pub fn v3_index_with_documents(docs: &[(String, String, &Value)]) -> Value {
    let entries: Vec<(String, String, String)> = docs
        .iter()
        .map(|(g, v, d)| (g.clone(), v.clone(), document_hash(d)))
        .collect();
    index_from(&entries)
}

fn index_from(entries: &[(String, String, String)]) -> Value {
    let mut paths = BTreeMap::new();
    for (g, v, hash) in entries {
        let key = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// A stable hex digest of a document (for `?hash=` and ETags).
pub fn document_hash(doc: &Value) -> String {
    content_hash(&doc.to_string())
}

/// Two FNV-1a passes with different offsets give 128 bits: plenty to tell
/// documents apart, and no hashing dependency.
fn content_hash(s: &str) -> String {
    let fnv = |seed: u64| {
        let mut h = seed;
        for b in s.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    format!(
        "{:016X}{:016X}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

/// Swagger 2.0 (`/openapi/v2`) for all resources: definitions with GVK
/// extensions and the resource paths. Constructs 2.0 lacks (nullable,
/// oneOf/anyOf/not) are dropped, as kube-apiserver does for CRDs.
pub fn v2_document(resources: &[ResourceSchema]) -> Value {
    v2_document_with_plurals(resources, &|r| r.guessed_plural())
}

/// [`v2_document`] with the resource (URL) names supplied by the caller.
pub fn v2_document_with_plurals(
    resources: &[ResourceSchema],
    plural: &dyn Fn(&ResourceSchema) -> String,
) -> Value {
    let mut paths = Map::new();
    for r in resources {
        let name = definition_name(&r.group, &r.version, &r.kind);
        add_paths(Flavor::V2, &mut paths, r, &plural(r), &name);
    }
    let mut defs = Value::Object(build_definitions(resources));
    to_v2_inner(&mut defs, true);
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "definitions": defs,
    })
}

/// `names_map` marks maps keyed by property/definition names, whose keys
/// are names rather than schema keywords.
fn to_v2_inner(v: &mut Value, names_map: bool) {
    match v {
        Value::Object(m) => {
            if !names_map {
                for k in ["nullable", "oneOf", "anyOf", "not"] {
                    m.remove(k);
                }
                if let Some(Value::String(r)) = m.get_mut("$ref")
                    && let Some(name) = r.strip_prefix(V3_REF)
                {
                    *r = format!("{V2_REF}{name}");
                }
            }
            for (k, c) in m.iter_mut() {
                let child_names = !names_map
                    && matches!(
                        k.as_str(),
                        "properties" | "patternProperties" | "definitions"
                    );
                to_v2_inner(c, child_names);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| to_v2_inner(c, false)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bmh() -> ResourceSchema {
        ResourceSchema {
            group: "metal3.io".into(),
            version: "v1alpha1".into(),
            kind: "BareMetalHost".into(),
            namespaced: true,
            schema: json!({
                "type": "object",
                "description": "BareMetalHost is the Schema for the baremetalhosts API",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": {"type": "object", "properties": {"online": {"type": "boolean"}}},
                    "status": {"type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true}
                }
            }),
        }
    }

    /// Every `$ref` in `doc` names a definition under `base` that exists.
    fn assert_refs_resolve(doc: &Value, defs: &Value, base: &str) {
        let mut refs = Vec::new();
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, c) in m {
                        // JSONSchemaProps has a property named "$ref".
                        if k == "$ref"
                            && let Some(r) = c.as_str()
                        {
                            out.push(r.to_string());
                        } else {
                            walk(c, out);
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
                _ => {}
            }
        }
        walk(doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let name = r
                .strip_prefix(base)
                .unwrap_or_else(|| panic!("ref {r} not under {base}"));
            assert!(defs.get(name).is_some(), "dangling ref {r}");
        }
    }

    #[test]
    fn plural_guesses() {
        assert_eq!(guess_plural("BareMetalHost"), "baremetalhosts");
        assert_eq!(guess_plural("Policy"), "policies");
        assert_eq!(guess_plural("Ingress"), "ingresses");
        assert_eq!(guess_plural(""), "");
    }

    #[test]
    fn definition_names() {
        assert_eq!(
            definition_name("metal3.io", "v1alpha1", "BareMetalHost"),
            "io.metal3.v1alpha1.BareMetalHost"
        );
        assert_eq!(
            definition_name("", "v1", "Secret"),
            "io.k8s.api.core.v1.Secret"
        );
        assert_eq!(
            definition_name("", "v1", "SecretList"),
            "io.k8s.api.core.v1.SecretList"
        );
        assert_eq!(
            definition_name("events.k8s.io", "v1", "Event"),
            "io.k8s.api.events.v1.Event"
        );
        assert_eq!(
            definition_name("cluster.x-k8s.io", "v1beta1", "Machine"),
            "io.x-k8s.cluster.v1beta1.Machine"
        );
    }

    #[test]
    fn builtin_schemas_cover_the_builtin_kinds() {
        let b = builtin_schemas();
        let kinds: Vec<String> = b
            .iter()
            .map(|r| format!("{}/{}/{}", r.group, r.version, r.kind))
            .collect();
        for k in [
            "/v1/Namespace",
            "/v1/Secret",
            "/v1/ConfigMap",
            "/v1/Event",
            "events.k8s.io/v1/Event",
            "coordination.k8s.io/v1/Lease",
            "apiextensions.k8s.io/v1/CustomResourceDefinition",
            "/v1/ServiceAccount",
            "rbac.authorization.k8s.io/v1/ClusterRole",
            "rbac.authorization.k8s.io/v1/RoleBinding",
        ] {
            assert!(kinds.contains(&k.to_string()), "{k} missing from {kinds:?}");
        }
        for r in &b {
            assert!(r.schema["properties"]["metadata"].is_object(), "{}", r.kind);
            assert!(r.schema["description"].is_string(), "{}", r.kind);
        }
        assert!(
            b.iter()
                .find(|r| r.kind == "Namespace")
                .map(|r| !r.namespaced)
                .unwrap()
        );
        assert!(
            b.iter()
                .find(|r| r.kind == "Secret")
                .map(|r| r.namespaced)
                .unwrap()
        );
    }

    #[test]
    fn v3_document_for_a_crd() {
        let doc = v3_document("metal3.io", "v1alpha1", &[bmh()]);
        assert_eq!(doc["openapi"], "3.0.0");
        let schemas = &doc["components"]["schemas"];
        let host = &schemas["io.metal3.v1alpha1.BareMetalHost"];
        assert_eq!(
            host["x-kubernetes-group-version-kind"],
            json!([{"group": "metal3.io", "kind": "BareMetalHost", "version": "v1alpha1"}])
        );
        assert_eq!(
            host["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(host["properties"]["kind"]["description"], KIND_DESC);
        assert_eq!(
            host["properties"]["spec"]["properties"]["online"]["type"],
            "boolean"
        );
        assert_eq!(
            schemas["io.metal3.v1alpha1.BareMetalHostList"]["x-kubernetes-group-version-kind"][0]["kind"],
            "BareMetalHostList"
        );
        for meta in [
            OBJECT_META,
            LIST_META,
            STATUS,
            DELETE_OPTIONS,
            PATCH,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
            "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
        ] {
            assert!(schemas.get(meta).is_some(), "{meta} missing");
        }
        assert_eq!(
            schemas[OBJECT_META]["properties"]["ownerReferences"]["x-kubernetes-patch-merge-key"],
            "uid"
        );
        assert_refs_resolve(&doc, schemas, V3_REF);
        let item =
            &doc["paths"]["/apis/metal3.io/v1alpha1/namespaces/{namespace}/baremetalhosts/{name}"];
        assert_eq!(
            item["patch"]["x-kubernetes-group-version-kind"],
            json!({"group": "metal3.io", "kind": "BareMetalHost", "version": "v1alpha1"})
        );
        let content = item["patch"]["requestBody"]["content"].as_object().unwrap();
        assert!(content.contains_key("application/merge-patch+json"));
        assert!(content.contains_key("application/apply-patch+yaml"));
        assert!(
            !content.contains_key("application/strategic-merge-patch+json"),
            "CRs take no strategic merge patch"
        );
        let params: Vec<&str> = item["patch"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["in"] == "query")
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert!(
            params.contains(&"fieldValidation") && params.contains(&"force"),
            "{params:?}"
        );
        assert!(doc["paths"]["/apis/metal3.io/v1alpha1/baremetalhosts"]["get"].is_object());
        assert_eq!(
            doc["paths"]["/apis/metal3.io/v1alpha1/namespaces/{namespace}/baremetalhosts"]["get"]["x-kubernetes-action"],
            "list"
        );
        // Other group/versions are left out.
        let other = v3_document("metal3.io", "v1beta1", &[bmh()]);
        assert!(
            other["components"]["schemas"]
                .get("io.metal3.v1alpha1.BareMetalHost")
                .is_none()
        );
    }

    #[test]
    fn v3_document_for_builtins() {
        let core = v3_document("", "v1", &builtin_schemas());
        let schemas = &core["components"]["schemas"];
        assert_eq!(
            schemas["io.k8s.api.core.v1.Namespace"]["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Namespace", "version": "v1"}])
        );
        assert!(schemas.get("io.k8s.api.core.v1.NamespaceSpec").is_some());
        assert!(schemas.get("io.k8s.api.core.v1.Lease").is_none());
        assert_refs_resolve(&core, schemas, V3_REF);
        let ns = &core["paths"]["/api/v1/namespaces/{name}"]["patch"]["requestBody"]["content"];
        assert!(ns.get("application/strategic-merge-patch+json").is_some());
        assert!(core["paths"]["/api/v1/namespaces/{namespace}/secrets/{name}"].is_object());
        assert!(core["paths"]["/api/v1/namespaces/{namespace}/events"].is_object());

        let crd = v3_document("apiextensions.k8s.io", "v1", &builtin_schemas());
        let schemas = &crd["components"]["schemas"];
        assert!(
            schemas
                .get("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps")
                .is_some()
        );
        assert_refs_resolve(&crd, schemas, V3_REF);
        assert!(
            crd["paths"]["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"]
                .is_object()
        );

        let leases =
            v3_document_with_plurals("coordination.k8s.io", "v1", &builtin_schemas(), &|_| {
                "leases".into()
            });
        assert!(
            leases["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"]
                .is_object()
        );
    }

    #[test]
    fn v3_index_shape() {
        let idx = v3_index(&[
            ("metal3.io".into(), "v1alpha1".into()),
            ("".into(), "v1".into()),
        ]);
        let url = idx["paths"]["apis/metal3.io/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(
            url.starts_with("/openapi/v3/apis/metal3.io/v1alpha1?hash="),
            "{url}"
        );
        assert!(
            idx["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
        let d1 = v3_document("metal3.io", "v1alpha1", &[bmh()]);
        let mut changed = bmh();
        changed.schema["properties"]["spec"]["properties"]["extra"] = json!({"type": "string"});
        let d2 = v3_document("metal3.io", "v1alpha1", &[changed]);
        let i1 = v3_index_with_documents(&[("metal3.io".into(), "v1alpha1".into(), &d1)]);
        let i2 = v3_index_with_documents(&[("metal3.io".into(), "v1alpha1".into(), &d2)]);
        assert_ne!(i1, i2, "schema changes must change the hash");
        assert_eq!(document_hash(&d1), document_hash(&d1.clone()));
    }

    #[test]
    fn v2_document_shape() {
        let mut all = builtin_schemas();
        all.push(bmh());
        let doc = v2_document(&all);
        assert_eq!(doc["swagger"], "2.0");
        let defs = &doc["definitions"];
        assert_eq!(
            defs["io.metal3.v1alpha1.BareMetalHost"]["x-kubernetes-group-version-kind"][0]["kind"],
            "BareMetalHost"
        );
        assert_eq!(
            defs["io.k8s.api.coordination.v1.Lease"]["x-kubernetes-group-version-kind"][0]["group"],
            "coordination.k8s.io"
        );
        assert!(
            defs["io.metal3.v1alpha1.BareMetalHost"]["properties"]["status"]
                .get("nullable")
                .is_none()
        );
        // Property names that match keywords must survive the 2.0 clean-up.
        let props = &defs["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]
            ["properties"];
        assert!(
            props.get("oneOf").is_some()
                && props.get("not").is_some()
                && props.get("nullable").is_some()
        );
        assert_refs_resolve(&doc, defs, V2_REF);
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert!(
            patch["consumes"]
                .as_array()
                .unwrap()
                .contains(&json!("application/strategic-merge-patch+json"))
        );
        let patch = &doc["paths"]["/apis/metal3.io/v1alpha1/namespaces/{namespace}/baremetalhosts/{name}"]
            ["patch"];
        assert!(
            !patch["consumes"]
                .as_array()
                .unwrap()
                .contains(&json!("application/strategic-merge-patch+json"))
        );
    }

    #[test]
    fn odd_schemas_do_not_panic() {
        for schema in [
            Value::Null,
            json!([1]),
            json!({"properties": 5}),
            json!({"properties": {"kind": 1}}),
        ] {
            let r = ResourceSchema { schema, ..bmh() };
            let doc = v3_document("metal3.io", "v1alpha1", std::slice::from_ref(&r));
            assert!(doc["components"]["schemas"]["io.metal3.v1alpha1.BareMetalHost"].is_object());
            let _ = v2_document(&[r]);
        }
    }
}
