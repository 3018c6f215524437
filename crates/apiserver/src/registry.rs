//! The resources the server serves: fixed built-ins plus one entry per served version of every
//! stored CustomResourceDefinition. Rebuilt (cheaply) whenever a CRD changes.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ferrometal_apimachinery::table::PrinterColumn;
use ferrometal_crdschema::{CostLimits, Schema};
use serde_json::Value;

use crate::status::{Cause, Target};

/// One served group/version/resource.
#[derive(Debug)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// Built-ins accept strategic merge patches and have fixed semantics; CRs are validated
    /// against their schema.
    pub builtin: bool,
    /// Storage key shared by all versions: "secrets", "baremetalhosts.metal3.io".
    pub key: String,
    pub schema: Option<Schema>,
    /// The raw openAPIV3Schema, for OpenAPI documents.
    pub openapi: Option<Value>,
    pub columns: Vec<PrinterColumn>,
    /// Create-only reviews answered on the spot, never stored (SelfSubjectAccessReview).
    pub ephemeral: bool,
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn target<'a>(&'a self, name: &'a str) -> Target<'a> {
        Target {
            resource: &self.key,
            group: &self.group,
            kind: &self.kind,
            name,
        }
    }

    pub fn is_crd(&self) -> bool {
        self.builtin && self.key == CRD_KEY
    }

    pub fn is_namespace(&self) -> bool {
        self.builtin && self.key == NAMESPACE_KEY
    }
}

pub const CRD_KEY: &str = "customresourcedefinitions.apiextensions.k8s.io";
/// Storage key of Events, `core/v1` and `events.k8s.io/v1` alike (see convert.rs).
pub const EVENT_KEY: &str = "events";
pub const NAMESPACE_KEY: &str = "namespaces";

struct Builtin {
    ephemeral: bool,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        ephemeral: false,
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short: &["ns"],
        categories: &[],
        status: true,
    },
    Builtin {
        ephemeral: false,
        group: "",
        version: "v1",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "",
        version: "v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        short: &["cm"],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short: &["crd", "crds"],
        categories: &["api-extensions"],
        status: true,
    },
    Builtin {
        ephemeral: false,
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        namespaced: true,
        short: &["sa"],
        categories: &[],
        status: false,
    },
    // RBAC objects: what the authorizer reads (see authz.rs).
    Builtin {
        ephemeral: false,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "roles",
        kind: "Role",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "rolebindings",
        kind: "RoleBinding",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterroles",
        kind: "ClusterRole",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: false,
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterrolebindings",
        kind: "ClusterRoleBinding",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    // Reviews: create-only, answered on the spot from the caller's identity and RBAC.
    Builtin {
        ephemeral: true,
        group: "authorization.k8s.io",
        version: "v1",
        plural: "selfsubjectaccessreviews",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: true,
        group: "authorization.k8s.io",
        version: "v1",
        plural: "selfsubjectrulesreviews",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: true,
        group: "authorization.k8s.io",
        version: "v1",
        plural: "subjectaccessreviews",
        kind: "SubjectAccessReview",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: true,
        group: "authorization.k8s.io",
        version: "v1",
        plural: "localsubjectaccessreviews",
        kind: "LocalSubjectAccessReview",
        namespaced: true,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: true,
        group: "authentication.k8s.io",
        version: "v1",
        plural: "selfsubjectreviews",
        kind: "SelfSubjectReview",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
    Builtin {
        ephemeral: true,
        group: "authentication.k8s.io",
        version: "v1",
        plural: "tokenreviews",
        kind: "TokenReview",
        namespaced: false,
        short: &[],
        categories: &[],
        status: false,
    },
];

fn builtin_resources() -> Vec<Arc<Resource>> {
    BUILTINS
        .iter()
        .map(|b| {
            // events.k8s.io Events share storage with core Events (see convert.rs).
            let key = if b.group.is_empty() || b.group == "events.k8s.io" {
                b.plural.to_string()
            } else {
                format!("{}.{}", b.plural, b.group)
            };
            Arc::new(Resource {
                group: b.group.into(),
                version: b.version.into(),
                plural: b.plural.into(),
                singular: b.kind.to_lowercase(),
                kind: b.kind.into(),
                list_kind: format!("{}List", b.kind),
                namespaced: b.namespaced,
                short_names: b.short.iter().map(|s| s.to_string()).collect(),
                categories: b.categories.iter().map(|s| s.to_string()).collect(),
                status_subresource: b.status,
                builtin: true,
                key,
                schema: None,
                openapi: None,
                columns: ferrometal_apimachinery::table::columns_for_builtin(b.kind),
                ephemeral: b.ephemeral,
            })
        })
        .collect()
}

/// An immutable view of everything served; swapped as a whole on CRD changes.
#[derive(Default)]
pub struct Snapshot {
    pub resources: Vec<Arc<Resource>>,
    by_gvr: HashMap<(String, String, String), Arc<Resource>>,
}

impl Snapshot {
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Resource>> {
        self.by_gvr
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    /// Group versions in discovery order: core first, then groups by name, each group's
    /// versions with the preferred (storage) one first.
    pub fn group_versions(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in &self.resources {
            match out.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, vs)) => {
                    if !vs.contains(&r.version) {
                        vs.push(r.version.clone());
                    }
                }
                None => out.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        out
    }

    /// The resource for a storage key and an object's apiVersion (used by GC and CRD deletion).
    pub fn by_key(&self, key: &str) -> Option<&Arc<Resource>> {
        self.resources.iter().find(|r| r.key == key)
    }
}

#[derive(Default)]
pub struct Registry {
    snap: RwLock<Arc<Snapshot>>,
}

impl Registry {
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snap.read().expect("registry lock").clone()
    }

    /// Rebuilds from the stored CRDs. A CRD whose schema no longer compiles is skipped (it was
    /// validated when written, so that only happens across incompatible upgrades).
    pub fn rebuild<'a>(&self, crds: impl IntoIterator<Item = &'a Value>) {
        let mut resources = builtin_resources();
        for crd in crds {
            match crd_resources(crd, CostLimits::Ignore) {
                Ok(rs) => resources.extend(rs.into_iter().map(Arc::new)),
                Err(causes) => tracing::warn!(
                    crd = crd.pointer("/metadata/name").and_then(|v| v.as_str()),
                    ?causes,
                    "skipping invalid CustomResourceDefinition"
                ),
            }
        }
        // Group order for discovery: core, built-in groups, then CRD groups alphabetically.
        let by_gvr = resources
            .iter()
            .map(|r| {
                (
                    (r.group.clone(), r.version.clone(), r.plural.clone()),
                    r.clone(),
                )
            })
            .collect();
        *self.snap.write().expect("registry lock") = Arc::new(Snapshot { resources, by_gvr });
    }
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn strings_at(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn cause(field: &str, reason: &str, message: impl Into<String>) -> Cause {
    Cause {
        field: field.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

/// Checks a CRD and derives the resources it serves (one per served version). Errors are
/// field causes for a 422.
/// The resources a CRD serves. `limits` says whether CEL cost limits apply: they do when a CRD
/// is written, not when stored ones are loaded (a CRD accepted before must keep serving;
/// evaluation stays bounded either way).
pub fn crd_resources(crd: &Value, limits: CostLimits) -> Result<Vec<Resource>, Vec<Cause>> {
    let mut causes = Vec::new();
    let group = str_at(crd, "/spec/group").unwrap_or_default().to_string();
    let plural = str_at(crd, "/spec/names/plural")
        .unwrap_or_default()
        .to_string();
    let kind = str_at(crd, "/spec/names/kind")
        .unwrap_or_default()
        .to_string();
    let scope = str_at(crd, "/spec/scope").unwrap_or_default();
    if group.is_empty() {
        causes.push(cause("spec.group", "FieldValueRequired", "Required value"));
    } else if !group.contains('.') {
        causes.push(cause(
            "spec.group",
            "FieldValueInvalid",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        causes.push(cause(
            "spec.names.plural",
            "FieldValueRequired",
            "Required value",
        ));
    }
    if kind.is_empty() {
        causes.push(cause(
            "spec.names.kind",
            "FieldValueRequired",
            "Required value",
        ));
    }
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push(cause(
            "spec.scope",
            "FieldValueNotSupported",
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        ));
    }
    let name = str_at(crd, "/metadata/name").unwrap_or_default();
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(cause(
            "metadata.name",
            "FieldValueInvalid",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count()
        != 1
    {
        causes.push(cause(
            "spec.versions",
            "FieldValueInvalid",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    let singular = str_at(crd, "/spec/names/singular")
        .map(String::from)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = str_at(crd, "/spec/names/listKind")
        .map(String::from)
        .unwrap_or_else(|| format!("{kind}List"));
    let mut out = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let vname = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if vname.is_empty() {
            causes.push(cause(
                &format!("spec.versions[{i}].name"),
                "FieldValueRequired",
                "Required value",
            ));
            continue;
        }
        let openapi = v.pointer("/schema/openAPIV3Schema").cloned();
        let schema = match &openapi {
            Some(s) => match Schema::compile_with(s, limits) {
                Ok(s) => Some(s),
                Err(errs) => {
                    for e in errs {
                        // The compiler names fields from the schema root as
                        // "spec.validation.openAPIV3Schema…"; re-root them at this version.
                        let field = e
                            .field
                            .strip_prefix(ferrometal_crdschema::SCHEMA_FIELD_PREFIX)
                            .unwrap_or(&e.field)
                            .trim_start_matches('.');
                        let sub = if field.is_empty() {
                            String::new()
                        } else {
                            format!(".{field}")
                        };
                        causes.push(cause(
                            &format!("spec.versions[{i}].schema.openAPIV3Schema{sub}"),
                            e.reason.as_str(),
                            e.message,
                        ));
                    }
                    None
                }
            },
            None => None,
        };
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        // Like kube-apiserver, every custom resource table starts with the name.
        let mut columns = vec![PrinterColumn {
            name: "Name".into(),
            type_: "string".into(),
            format: Some("name".into()),
            description: Some("Name must be unique within a namespace.".into()),
            json_path: ".metadata.name".into(),
            priority: 0,
        }];
        let extra: Vec<PrinterColumn> = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: str_at(c, "/name").unwrap_or_default().into(),
                        type_: str_at(c, "/type").unwrap_or("string").into(),
                        format: str_at(c, "/format").map(String::from),
                        description: str_at(c, "/description").map(String::from),
                        json_path: str_at(c, "/jsonPath").unwrap_or_default().into(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
                    })
                    .collect()
            })
            .unwrap_or_else(|| {
                vec![PrinterColumn {
                    name: "Age".into(),
                    type_: "date".into(),
                    format: None,
                    description: None,
                    json_path: ".metadata.creationTimestamp".into(),
                    priority: 0,
                }]
            });
        columns.extend(extra);
        out.push(Resource {
            group: group.clone(),
            version: vname.into(),
            plural: plural.clone(),
            singular: singular.clone(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            namespaced: scope == "Namespaced",
            short_names: strings_at(crd, "/spec/names/shortNames"),
            categories: strings_at(crd, "/spec/names/categories"),
            status_subresource: v.pointer("/subresources/status").is_some(),
            builtin: false,
            key: format!("{plural}.{group}"),
            schema,
            openapi,
            columns,
            ephemeral: false,
        });
    }
    if causes.is_empty() {
        Ok(out)
    } else {
        Err(causes)
    }
}
