//! Documents for CRDs and built-ins: shapes, references, hashes, odd schemas.

use serde_json::{Value, json};

use super::builtin::{DELETE_OPTIONS, LIST_META, OBJECT_META, PATCH, STATUS};
use super::definitions::{KIND_DESC, V2_REF, V3_REF};
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
        crd["paths"]["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"].is_object()
    );

    let leases = v3_document_with_plurals("coordination.k8s.io", "v1", &builtin_schemas(), &|_| {
        "leases".into()
    });
    assert!(
        leases["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"].is_object()
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
    let props = &defs["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]["properties"];
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
