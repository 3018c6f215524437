//! A request path bad input cannot break: each limit answers with kube-apiserver's status code,
//! the server keeps serving, a kill -9 and restart on the same data directory succeeds with
//! every earlier object intact, and a store with an unreadable row still starts.

mod serve_common;

use serde_json::{Value, json};
use serve_common::*;

struct Http {
    client: reqwest::Client,
    base: String,
    token: String,
}

struct Reply {
    code: u16,
    warnings: Vec<String>,
    body: Value,
}

impl Http {
    fn new(s: &Serve) -> Http {
        let ca = std::fs::read(s.dir.join("ca.crt")).unwrap();
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .build()
            .unwrap();
        Http {
            client,
            base: s.url.clone(),
            token: std::fs::read_to_string(s.dir.join("token"))
                .unwrap()
                .trim()
                .to_string(),
        }
    }

    async fn send(&self, method: &str, path: &str, ct: &str, body: Vec<u8>) -> Reply {
        let r = self
            .client
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        let code = r.status().as_u16();
        let warnings = r
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        let text = r.text().await.unwrap();
        Reply {
            code,
            warnings,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        }
    }

    async fn json(&self, method: &str, path: &str, v: &Value) -> Reply {
        self.send(method, path, "application/json", v.to_string().into_bytes())
            .await
    }
}

fn nested(depth: usize) -> Value {
    let mut v = json!("leaf");
    for _ in 0..depth {
        v = json!({ "n": v });
    }
    v
}

const BLOBS: &str = "/apis/example.com/v1/namespaces/default/blobs";
const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn setup(h: &Http) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "blobs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Blob", "plural": "blobs", "singular": "blob", "listKind": "BlobList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    let r = h
        .json(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        )
        .await;
    assert_eq!(r.code, 201, "{}", r.body);
    for i in 0..3 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("keep-{i}")}, "data": {"i": i.to_string()}});
        assert_eq!(h.json("POST", CMS, &cm).await.code, 201);
        let b = json!({"apiVersion": "example.com/v1", "kind": "Blob",
                       "metadata": {"name": format!("keep-{i}")}, "spec": {"v": i}});
        let r = h.json("POST", BLOBS, &b).await;
        assert_eq!(r.code, 201, "{}", r.body);
    }
}

async fn earlier_objects_intact(h: &Http) {
    for i in 0..3 {
        let r = h.send("GET", &format!("{CMS}/keep-{i}"), "", vec![]).await;
        assert_eq!(r.code, 200, "{}", r.body);
        assert_eq!(r.body["data"]["i"], i.to_string());
        let r = h
            .send("GET", &format!("{BLOBS}/keep-{i}"), "", vec![])
            .await;
        assert_eq!(r.code, 200, "{}", r.body);
        assert_eq!(r.body["spec"]["v"], i);
    }
    let r = h.send("GET", CMS, "", vec![]).await;
    assert_eq!(r.code, 200, "{}", r.body);
}

async fn hostile_inputs(h: &Http) {
    // Nesting: refused before it reaches the store, naming where.
    for depth in [110, 124] {
        let b = json!({"apiVersion": "example.com/v1", "kind": "Blob",
                       "metadata": {"name": format!("deep-{depth}")}, "spec": nested(depth)});
        let r = h.json("POST", BLOBS, &b).await;
        assert_eq!(r.code, 422, "depth {depth}: {}", r.body);
        let msg = r.body["message"].as_str().unwrap();
        assert!(
            msg.contains("levels deep") && msg.contains("spec.n.n"),
            "{msg}"
        );
    }
    // Deeper than the JSON decoder goes: a clear 400.
    let mut text = String::new();
    for _ in 0..300 {
        text.push_str("{\"n\":");
    }
    text.push('1');
    text.push_str(&"}".repeat(300));
    let body = format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Blob","metadata":{{"name":"deeper"}},"spec":{text}}}"#
    );
    let r = h
        .send("POST", BLOBS, "application/json", body.into_bytes())
        .await;
    assert_eq!(r.code, 400, "{}", r.body);
    // The same nesting through a merge patch of an existing object.
    let r = h
        .send(
            "PATCH",
            &format!("{BLOBS}/keep-0"),
            "application/merge-patch+json",
            json!({"spec": nested(120)}).to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.code, 422, "{}", r.body);
    // The ConfigMap of the original report: the unknown deep field is dropped with a warning.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep122"},
                    "data": {"a": "b"}, "junk": nested(122)});
    let r = h.json("POST", CMS, &cm).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert!(r.body.get("junk").is_none(), "{}", r.body);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains(r#"unknown field \"junk\""#)),
        "{:?}",
        r.warnings
    );
    // With strict field validation it is an error instead.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "strict"},
                    "data": {"a": "b"}, "junk": 1});
    let r = h
        .json("POST", &format!("{CMS}?fieldValidation=Strict"), &cm)
        .await;
    assert_eq!(r.code, 400, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"junk\"")
    );

    // Size: the body limit, then the stored-object limit.
    let big = "x".repeat(3 * 1024 * 1024 + 10);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
                    "data": {"a": big}});
    let r = h.json("POST", CMS, &cm).await;
    assert_eq!(r.code, 413, "{}", r.body);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "large"},
                    "data": {"a": "x".repeat(2 * 1024 * 1024)}});
    let r = h.json("POST", CMS, &cm).await;
    assert_eq!(r.code, 413, "{}", r.body);
    assert!(r.body["message"].as_str().unwrap().contains("too large"));

    // JSON patch: too many operations; copies that multiply the object.
    let ops: Vec<Value> = (0..10_001)
        .map(|i| json!({"op": "add", "path": format!("/data/k{i}"), "value": "v"}))
        .collect();
    let r = h
        .send(
            "PATCH",
            &format!("{CMS}/keep-0"),
            "application/json-patch+json",
            Value::Array(ops).to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.code, 413, "{}", r.body);
    let mut ops = vec![json!({"op": "add", "path": "/spec/a", "value": "y".repeat(100_000)})];
    for i in 0..40 {
        ops.push(json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")}));
    }
    let r = h
        .send(
            "PATCH",
            &format!("{BLOBS}/keep-1"),
            "application/json-patch+json",
            Value::Array(ops).to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.code, 413, "{}", r.body);

    // Media types the server does not speak.
    let r = h.send("POST", CMS, "text/plain", b"hello".to_vec()).await;
    assert_eq!(r.code, 415, "{}", r.body);
    let r = h
        .send(
            "PATCH",
            &format!("{CMS}/keep-0"),
            "application/xml",
            b"<a/>".to_vec(),
        )
        .await;
    assert_eq!(r.code, 415, "{}", r.body);

    // CEL under a cost budget: a rule whose estimated cost is unbounded is refused when the
    // CRD is written, naming the rule.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "costly.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Costly", "plural": "costly", "singular": "costly", "listKind": "CostlyList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object",
                             "x-kubernetes-validations": [{"rule": "self.names.all(a, self.names.all(b, a == b || a != b))"}],
                             "properties": {"names": {"type": "array", "items": {"type": "string"}}}}}}}}]}
    });
    let r = h
        .json(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        )
        .await;
    assert_eq!(r.code, 422, "{}", r.body);
    let msg = r.body["message"].as_str().unwrap();
    assert!(
        msg.contains("estimated rule cost exceeds budget")
            && msg.contains("x-kubernetes-validations[0].rule"),
        "{msg}"
    );

    // YAML alias bombs are refused, not expanded.
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\na0: &a0 [x,x,x,x,x,x,x,x,x,x]\n",
    );
    for i in 1..12 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    let r = h
        .send("POST", CMS, "application/yaml", bomb.into_bytes())
        .await;
    assert_eq!(r.code, 400, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_survives_kill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut s = serve(dir.path(), port, &["--no-controllers"]);
    let h = Http::new(&s);
    setup(&h).await;
    hostile_inputs(&h).await;
    earlier_objects_intact(&h).await;
    for name in [
        "deep-110", "deep-124", "deeper", "huge", "large", "bomb", "strict",
    ] {
        let r = h.send("GET", &format!("{CMS}/{name}"), "", vec![]).await;
        assert_eq!(r.code, 404, "{name} was stored");
    }

    // kill -9 and restart on the same directory: starts, everything earlier is there.
    s.kill();
    let s = serve(dir.path(), port, &["--no-controllers"]);
    let h = Http::new(&s);
    earlier_objects_intact(&h).await;
    let r = h.send("GET", &format!("{CMS}/deep122"), "", vec![]).await;
    assert_eq!(r.code, 200, "{}", r.body);
    drop(s);

    // `store check` on a healthy store.
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["store", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}");
    assert!(out.contains("0 unreadable, 0 quarantined"), "{out}");
}

/// Starts a POST whose body never completes: a request that stays in flight.
async fn stalled_post(s: &Serve) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let token = std::fs::read_to_string(s.dir.join("token")).unwrap();
    let mut c = tokio::net::TcpStream::connect(("127.0.0.1", s.port))
        .await
        .unwrap();
    let head = format!(
        "POST {CMS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{",
        token.trim()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c
}

/// Requests in flight and the request timeout, through serve's flags (plain HTTP on loopback so
/// a raw socket can hold a request open): 429, then 504, the server serving throughout, and a
/// kill -9 and restart that keeps everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_limits_answer_429_and_504_and_survive_kill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let flags = [
        "--no-controllers",
        "--no-tls",
        "--max-requests-inflight",
        "1",
        "--request-timeout",
        "2",
    ];
    let mut s = serve(dir.path(), port, &flags);
    let token = std::fs::read_to_string(s.dir.join("token")).unwrap();
    let http = reqwest::Client::new();
    let get = |path: &str| {
        http.get(format!("http://127.0.0.1:{port}{path}"))
            .bearer_auth(token.trim())
            .send()
    };
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}, "data": {"a": "b"}});
    let r = http
        .post(format!("http://127.0.0.1:{port}{CMS}"))
        .bearer_auth(token.trim())
        .json(&cm)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);

    // One request held open takes the only slot: the next one gets 429 with Retry-After.
    let mut saw_429 = false;
    for _ in 0..100 {
        let held = stalled_post(&s).await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let r = get(CMS).await.unwrap();
        if r.status().as_u16() == 429 {
            assert_eq!(r.headers()["retry-after"], "1");
            saw_429 = true;
            // The held request ends with 504 once the request timeout passes.
            let mut held = held;
            let mut reply = Vec::new();
            use tokio::io::AsyncReadExt;
            tokio::time::timeout(
                std::time::Duration::from_secs(30),
                held.read_to_end(&mut reply),
            )
            .await
            .expect("the server ended the slow request")
            .unwrap();
            let reply = String::from_utf8_lossy(&reply).to_string();
            assert!(reply.starts_with("HTTP/1.1 504"), "{reply}");
            break;
        }
    }
    assert!(saw_429, "a held request never filled the only slot");
    let mut ok = false;
    for _ in 0..100 {
        if get(CMS).await.unwrap().status().as_u16() == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(ok, "serving again once the slot is free");

    s.kill();
    let s = serve(dir.path(), port, &flags);
    let token = std::fs::read_to_string(s.dir.join("token")).unwrap();
    let r = http
        .get(format!("http://127.0.0.1:{port}{CMS}/keep"))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_row_is_quarantined_and_the_rest_served() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut s = serve(dir.path(), port, &["--no-controllers"]);
    let h = Http::new(&s);
    setup(&h).await;
    s.kill();

    // Damage the store behind the server's back: a row that is not JSON, one nested deeper
    // than anything can read, one whose key is malformed.
    {
        let db = redb::Database::open(dir.path().join("store.redb")).unwrap();
        let table: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("objects");
        let tx = db.begin_write().unwrap();
        {
            let mut t = tx.open_table(table).unwrap();
            t.insert(
                "configmaps/default/torn",
                &b"{\"apiVersion\":\"v1\",\"ki"[..],
            )
            .unwrap();
            let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
            t.insert("configmaps/default/deep", deep.as_bytes())
                .unwrap();
            t.insert("no-slashes", &b"{}"[..]).unwrap();
        }
        tx.commit().unwrap();
    }
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["store", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{out}");
    assert!(out.contains("3 unreadable"), "{out}");
    assert!(out.contains("configmaps/default/torn"), "{out}");

    // The server starts, serves everything else, and says what it set aside.
    let s = serve(dir.path(), port, &["--no-controllers"]);
    let h = Http::new(&s);
    earlier_objects_intact(&h).await;
    let r = h.send("GET", &format!("{CMS}/torn"), "", vec![]).await;
    assert_eq!(r.code, 404);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "torn"}});
    assert_eq!(
        h.json("POST", CMS, &cm).await.code,
        201,
        "the name is usable again"
    );
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains("quarantined"), "{log}");
    drop(s);

    let check = std::process::Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["store", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(out.contains("0 unreadable, 3 quarantined"), "{out}");
}
