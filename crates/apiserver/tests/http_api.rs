//! The HTTP surface seen raw, writing: authentication, bad input, delete preconditions and
//! finalizers, fields no update may change, and the bounds on annotations and managedFields.
//! Discovery, tables, watches and resourceVersion waits are in `http_reads.rs`.

mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_rejected_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    install_widgets(&srv.api.client()).await;
    let t = srv.token();
    let tok = Some(t.as_str());
    let a = srv.addr;
    let cms = "/api/v1/namespaces/default/configmaps";
    let good = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok"}}"#;
    let before = srv.api.revision();

    // No token, wrong token.
    let (code, body) = raw(a, "POST", cms, None, "application/json", good).await;
    assert_eq!(code, 401);
    let st = parse(&body);
    assert_eq!(
        (st["kind"].as_str(), st["reason"].as_str()),
        (Some("Status"), Some("Unauthorized"))
    );
    let (code, _) = raw(a, "GET", cms, Some("wrong"), "application/json", b"").await;
    assert_eq!(code, 401);
    let (code, _) = raw(a, "GET", "/version", None, "application/json", b"").await;
    assert_eq!(code, 401);

    // Malformed JSON and YAML.
    let (code, body) = raw(a, "POST", cms, tok, "application/json", b"{\"metadata\": ").await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(parse(&body)["reason"], "BadRequest");
    let (code, body) = raw(
        a,
        "POST",
        cms,
        tok,
        "application/yaml",
        b"metadata: [unclosed\n  name: x",
    )
    .await;
    assert_eq!(code, 400, "{body}");
    let (code, _) = raw(
        a,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/x",
        tok,
        "application/merge-patch+json",
        b"{nope",
    )
    .await;
    assert_eq!(code, 400);

    // Unknown resources and paths.
    for path in [
        "/api/v1/namespaces/default/foos",
        "/apis/nope.io/v1/things",
        "/apis/example.com/v9/widgets",
        "/nothing",
    ] {
        let (code, body) = raw(a, "GET", path, tok, "application/json", b"").await;
        assert_eq!(code, 404, "{path}: {body}");
        assert_eq!(parse(&body)["reason"], "NotFound");
    }

    // Schema and CEL violations: 422 with causes naming the fields.
    let bad = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "bad"},
        "spec": {"size": 500, "color": "green"},
    });
    let (code, body) = raw(
        a,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        tok,
        "application/json",
        bad.to_string().as_bytes(),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let st = parse(&body);
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["details"]["kind"], "Widget");
    assert_eq!(st["details"]["group"], "example.com");
    let fields: Vec<&str> = st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert!(fields.contains(&"spec.color"), "{fields:?}");
    assert!(fields.contains(&"spec"), "{fields:?}");
    let missing = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "m"}, "spec": {}});
    let (code, body) = raw(
        a,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        tok,
        "application/json",
        missing.to_string().as_bytes(),
    )
    .await;
    assert_eq!(code, 422);
    let msg = parse(&body)["message"].as_str().unwrap().to_string();
    assert!(
        msg.starts_with("Widget.example.com \"m\" is invalid: "),
        "{msg}"
    );
    assert!(
        parse(&body)["message"]
            .as_str()
            .unwrap()
            .contains("spec.size: Required value"),
        "{body}"
    );

    // Wrong kind for the URL, name mismatch on update.
    let (code, _) = raw(
        a,
        "POST",
        cms,
        tok,
        "application/json",
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#,
    )
    .await;
    assert_eq!(code, 400);

    // Wrong types in a built-in object, and unknown fields when validation is strict.
    let (code, body) = raw(
        a,
        "POST",
        cms,
        tok,
        "application/json",
        br#"{"metadata":{"name":"t"},"data":{"k":1}}"#,
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("ConfigMap in version"), "{body}");
    let (code, body) = raw(
        a,
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        tok,
        "application/json",
        br#"{"metadata":{"name":"t"},"dta":{"k":"v"}}"#,
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains(r#"unknown field \"dta\""#), "{body}");

    // Bad metadata: 422 naming the field.
    let (code, body) = raw(
        a,
        "POST",
        cms,
        tok,
        "application/json",
        br#"{"metadata":{"name":"l","labels":{"bad key":"x"}}}"#,
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        parse(&body)["details"]["causes"][0]["field"],
        "metadata.labels"
    );
    let (code, body) = raw(
        a,
        "POST",
        cms,
        tok,
        "application/json",
        br#"{"metadata":{"name":"Not_A_Name"}}"#,
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        parse(&body)["details"]["causes"][0]["field"],
        "metadata.name"
    );

    assert_eq!(srv.api.revision(), before, "nothing was written");
    let (code, _) = raw(a, "POST", cms, tok, "application/json", good).await;
    assert_eq!(code, 201);
    assert_eq!(srv.api.revision(), before + 1);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_preconditions_and_finalizers() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    let t = srv.token();
    let tok = Some(t.as_str());
    let path = "/api/v1/namespaces/default/configmaps";
    let body = json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}).to_string();
    let (code, created) = raw(
        srv.addr,
        "POST",
        path,
        tok,
        "application/json",
        body.as_bytes(),
    )
    .await;
    assert_eq!(code, 201);
    let created = parse(&created);
    let one = format!("{path}/f");
    let pre = json!({"preconditions": {"uid": "not-the-uid"}}).to_string();
    let (code, body) = raw(
        srv.addr,
        "DELETE",
        &one,
        tok,
        "application/json",
        pre.as_bytes(),
    )
    .await;
    assert_eq!(code, 409, "{body}");
    assert!(
        body.contains("Precondition failed: UID in precondition"),
        "{body}"
    );
    let pre = json!({"preconditions": {"uid": created["metadata"]["uid"]}}).to_string();
    let (code, body) = raw(
        srv.addr,
        "DELETE",
        &one,
        tok,
        "application/json",
        pre.as_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let pending = parse(&body);
    assert!(
        pending["metadata"]["deletionTimestamp"].is_string(),
        "{body}"
    );
    let (code, body) = raw(srv.addr, "GET", &one, tok, "application/json", b"").await;
    assert_eq!(code, 200);
    assert!(parse(&body)["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = raw(
        srv.addr,
        "PATCH",
        &one,
        tok,
        "application/merge-patch+json",
        br#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = raw(srv.addr, "GET", &one, tok, "application/json", b"").await;
    assert_eq!(code, 404);
    srv.stop().await;
}

/// What kube-apiserver never lets an update change: a binding's roleRef and a Secret's type
/// (defaulted to Opaque when not given). Refused updates write nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_ref_and_secret_type_are_immutable() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let role_ref = |name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name});
    let user = |name: &str| json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}]);
    for (coll, kind) in [
        (format!("{rbac}/clusterrolebindings"), "ClusterRoleBinding"),
        (
            format!("{rbac}/namespaces/default/rolebindings"),
            "RoleBinding",
        ),
    ] {
        let b = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": "b"}, "roleRef": role_ref("view"), "subjects": user("alice"),
        });
        let (code, created) = call(&srv, "POST", &coll, JSON, &b).await;
        assert_eq!(code, 201, "{created}");
        let one = format!("{coll}/b");
        let before = srv.api.revision();
        let mut changed = created.clone();
        changed["roleRef"] = role_ref("edit");
        let (code, st) = call(&srv, "PUT", &one, JSON, &changed).await;
        assert_eq!(code, 422, "{st}");
        assert_eq!(st["reason"], "Invalid");
        assert_eq!(st["details"]["causes"][0]["field"], "roleRef");
        assert_eq!(
            st["message"],
            format!(
                "{kind}.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: \
                 rbac.RoleRef{{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", \
                 Name:\"edit\"}}: cannot change roleRef"
            )
        );
        let patch = json!({"roleRef": {"name": "edit"}});
        let (code, st) = call(&srv, "PATCH", &one, MERGE, &patch).await;
        assert_eq!(code, 422, "{st}");
        assert_eq!(st["details"]["causes"][0]["field"], "roleRef");
        assert_eq!(srv.api.revision(), before, "nothing was written");
        // The rest of the binding still changes.
        let (code, st) = call(
            &srv,
            "PATCH",
            &one,
            MERGE,
            &json!({"subjects": user("bob")}),
        )
        .await;
        assert_eq!(code, 200, "{st}");
        let (_, got) = call(&srv, "GET", &one, JSON, &Value::Null).await;
        assert_eq!(
            (&got["roleRef"], &got["subjects"]),
            (&role_ref("view"), &user("bob"))
        );
    }

    let secrets = "/api/v1/namespaces/default/secrets";
    for (name, ty) in [
        ("absent", None),
        ("null", Some(Value::Null)),
        ("empty", Some(json!(""))),
    ] {
        let mut s = json!({"metadata": {"name": name}, "data": {"k": "dg=="}});
        if let Some(t) = ty {
            s["type"] = t;
        }
        let (code, created) = call(&srv, "POST", secrets, JSON, &s).await;
        assert_eq!(
            (code, &created["type"]),
            (201, &json!("Opaque")),
            "{created}"
        );
        let (_, got) = call(
            &srv,
            "GET",
            &format!("{secrets}/{name}"),
            JSON,
            &Value::Null,
        )
        .await;
        assert_eq!(got["type"], "Opaque", "{got}");
    }
    let custom =
        json!({"metadata": {"name": "c"}, "type": "example.com/custom", "data": {"k": "dg=="}});
    let (code, created) = call(&srv, "POST", secrets, JSON, &custom).await;
    assert_eq!(
        (code, &created["type"]),
        (201, &json!("example.com/custom"))
    );
    let one = format!("{secrets}/c");
    let before = srv.api.revision();
    let mut retyped = created.clone();
    retyped["type"] = json!("Opaque");
    let (code, st) = call(&srv, "PUT", &one, JSON, &retyped).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "type");
    assert_eq!(
        st["message"],
        "Secret \"c\" is invalid: type: Invalid value: \"Opaque\": field is immutable"
    );
    // Leaving the type out defaults it to Opaque, which is a change too.
    retyped.as_object_mut().unwrap().remove("type");
    let (code, st) = call(&srv, "PUT", &one, JSON, &retyped).await;
    assert_eq!(
        (code, &st["details"]["causes"][0]["field"]),
        (422, &json!("type")),
        "{st}"
    );
    let patch = json!({"type": "kubernetes.io/tls"});
    let (code, st) = call(&srv, "PATCH", &one, MERGE, &patch).await;
    assert_eq!(
        (code, &st["details"]["causes"][0]["field"]),
        (422, &json!("type")),
        "{st}"
    );
    assert_eq!(srv.api.revision(), before, "nothing was written");
    let (code, st) = call(&srv, "PATCH", &one, MERGE, &json!({"data": {"k2": "dw=="}})).await;
    assert_eq!(code, 200, "{st}");
    let (_, got) = call(&srv, "GET", &one, JSON, &Value::Null).await;
    assert_eq!(
        (&got["type"], &got["data"]["k"]),
        (&json!("example.com/custom"), &json!("dg=="))
    );

    // The server's own reconciling of autoupdate bindings replaces one whose roleRef moved.
    let manifest = |role: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: auto\n  annotations:\n    rbac.authorization.kubernetes.io/autoupdate: \"true\"\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects: [{{kind: User, apiGroup: rbac.authorization.k8s.io, name: alice}}]\n"
        )
    };
    srv.api
        .install_yaml(&manifest("view"), "test")
        .await
        .unwrap();
    srv.api
        .install_yaml(&manifest("edit"), "test")
        .await
        .unwrap();
    let auto = format!("{rbac}/clusterrolebindings/auto");
    let (_, got) = call(&srv, "GET", &auto, JSON, &Value::Null).await;
    assert_eq!(got["roleRef"], role_ref("edit"), "{got}");
    srv.stop().await;
}

/// Annotations are bounded to 256 KiB in total (keys and values), on create and update and
/// for every kind, with kube-apiserver's 422; a refused write leaves the object as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_total_size_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    install_widgets(&srv.api.client()).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let limit = 262_144;
    // Exactly at the limit: key "a" and a value one byte shorter.
    let at_limit =
        json!({"metadata": {"name": "fits", "annotations": {"a": "x".repeat(limit - 1)}}});
    let (code, st) = call(&srv, "POST", cms, JSON, &at_limit).await;
    assert_eq!(code, 201, "{}", st["message"]);

    let before = srv.api.revision();
    let big = "x".repeat(300_000);
    let too_big = json!({"metadata": {"name": "big", "annotations": {"a": big}}});
    let (code, st) = call(&srv, "POST", cms, JSON, &too_big).await;
    assert_eq!(code, 422, "{}", st["message"]);
    assert_eq!(
        st["message"],
        "ConfigMap \"big\" is invalid: metadata.annotations: Too long: must have at most 262144 bytes"
    );
    assert_eq!(
        st["details"]["causes"][0],
        json!({"reason": "FieldValueTooLong", "field": "metadata.annotations",
               "message": "Too long: must have at most 262144 bytes"})
    );
    // Many small ones add up the same way.
    let many: serde_json::Map<String, Value> = (0..300)
        .map(|i| (format!("k{i}"), json!("y".repeat(1000))))
        .collect();
    let too_many = json!({"metadata": {"name": "many", "annotations": many}});
    let (code, st) = call(&srv, "POST", cms, JSON, &too_many).await;
    assert_eq!(code, 422, "{}", st["message"]);
    // One byte more on the object at the limit.
    let one_more = json!({"metadata": {"annotations": {"b": ""}}});
    let (code, st) = call(&srv, "PATCH", &format!("{cms}/fits"), MERGE, &one_more).await;
    assert_eq!(code, 422, "{}", st["message"]);
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w", "annotations": {"a": "x".repeat(300_000)}},
                   "spec": {"size": 1}});
    let (code, st) = call(&srv, "POST", widgets, JSON, &w).await;
    assert_eq!(code, 422, "{}", st["message"]);
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.annotations");
    assert_eq!(srv.api.revision(), before, "nothing was written");

    let (code, got) = call(&srv, "GET", &format!("{cms}/fits"), JSON, &Value::Null).await;
    assert_eq!(code, 200);
    let annotations = got["metadata"]["annotations"].as_object().unwrap();
    assert_eq!(annotations.len(), 1);
    assert_eq!(annotations["a"].as_str().unwrap().len(), limit - 1);
    srv.stop().await;
}

/// managedFields stay bounded however many managers write: past ten `Update` entries the
/// oldest merge into one `ancient-changes` entry, which still owns their fields, so
/// server-side apply conflicts with it and can force past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_managers_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let one = format!("{cms}/many");
    let body = json!({"metadata": {"name": "many"}, "data": {"first": "v"}});
    let (code, _) = call(
        &srv,
        "POST",
        &format!("{cms}?fieldManager=creator"),
        JSON,
        &body,
    )
    .await;
    assert_eq!(code, 201);
    let updates = |obj: &Value| {
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["operation"] == "Update")
            .map(|e| e["manager"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    for i in 0..50 {
        let patch = json!({"data": {format!("k{i:02}"): "v"}});
        let path = format!("{one}?fieldManager=m{i:02}");
        let (code, got) = call(&srv, "PATCH", &path, MERGE, &patch).await;
        assert_eq!(code, 200, "{got}");
        assert!(updates(&got).len() <= 10, "after {i}: {:?}", updates(&got));
    }
    let (_, got) = call(&srv, "GET", &one, JSON, &Value::Null).await;
    let managers = updates(&got);
    assert_eq!(managers.len(), 10, "{managers:?}");
    assert_eq!(
        managers.iter().filter(|m| *m == "ancient-changes").count(),
        1
    );
    assert!(managers.contains(&"m49".to_string()), "{managers:?}");
    assert_eq!(got["data"].as_object().unwrap().len(), 51, "no data lost");

    // Server-side apply over a field only the merged entry owns.
    let applied =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many\ndata:\n  k00: applied\n";
    let t = srv.token();
    let apply = |force: bool| {
        let path = format!("{one}?fieldManager=applier&force={force}");
        let t = t.clone();
        async move {
            let (code, body) = raw(
                srv.addr,
                "PATCH",
                &path,
                Some(&t),
                "application/apply-patch+yaml",
                applied.as_bytes(),
            )
            .await;
            (code, parse(&body))
        }
    };
    let (code, st) = apply(false).await;
    assert_eq!(code, 409, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("ancient-changes"),
        "{st}"
    );
    let (code, got) = apply(true).await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["data"]["k00"], "applied");
    assert_eq!(got["data"].as_object().unwrap().len(), 51);
    let mf = got["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|e| e["manager"] == "applier" && e["operation"] == "Apply"),
        "{mf:?}"
    );
    assert_eq!(updates(&got).len(), 10);
    srv.stop().await;
}
