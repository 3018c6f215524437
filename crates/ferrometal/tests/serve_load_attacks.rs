//! Load a tenant can put on `ferrometal serve` without stalling it for anyone else: request
//! bodies whose YAML costs more than their size (deep flow nesting, alias bombs), and more
//! open watches than its share of the connections. Each attack runs as a tenant (a
//! ServiceAccount bound to `ferrometal-tenant` in its namespace) while other clients are
//! served, and leaves nothing stored lost.

mod serve_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};
use serve_common::*;

/// HTTPS clients trusting serve's CA, with a bearer token.
#[derive(Clone)]
struct Http {
    ca: reqwest::Certificate,
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Http {
    fn new(s: &Serve, token: &str) -> Http {
        let ca = std::fs::read(s.dir.join("ca.crt")).unwrap();
        let ca = reqwest::Certificate::from_pem(&ca).unwrap();
        Http {
            client: Self::fresh_client(&ca),
            ca,
            base: s.url.clone(),
            token: token.trim().to_string(),
        }
    }

    fn fresh_client(ca: &reqwest::Certificate) -> reqwest::Client {
        reqwest::Client::builder()
            .add_root_certificate(ca.clone())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    }

    /// A request on a connection of its own (a new TCP connection and TLS handshake).
    async fn fresh(&self, method: &str, path: &str, ct: &str, body: Vec<u8>) -> (u16, Value) {
        let client = Self::fresh_client(&self.ca);
        Self::send_with(&client, self, method, path, ct, body).await
    }

    async fn send(&self, method: &str, path: &str, ct: &str, body: Vec<u8>) -> (u16, Value) {
        Self::send_with(&self.client, self, method, path, ct, body).await
    }

    async fn send_with(
        client: &reqwest::Client,
        h: &Http,
        method: &str,
        path: &str,
        ct: &str,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let r = client
            .request(method.parse().unwrap(), format!("{}{path}", h.base))
            .bearer_auth(&h.token)
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        let code = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Opens a watch on a connection of its own and returns the response while it streams.
    async fn watch(&self, path: &str) -> reqwest::Response {
        Self::fresh_client(&self.ca)
            .get(format!("{}{path}?watch=true", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
    }
}

fn admin(s: &Serve) -> Http {
    Http::new(s, &std::fs::read_to_string(s.dir.join("token")).unwrap())
}

/// A ServiceAccount `name` in `ns` bound to ferrometal-tenant there, as an HTTPS client.
fn tenant(s: &Serve, ns: &str, name: &str) -> Http {
    let _ = s.kubectl(&["create", "namespace", ns]);
    s.ok(&["create", "serviceaccount", name, "-n", ns]);
    s.ok(&[
        "create",
        "rolebinding",
        &format!("{name}-tenant"),
        "-n",
        ns,
        "--clusterrole=ferrometal-tenant",
        &format!("--serviceaccount={ns}:{name}"),
    ]);
    let token = s.ok(&["create", "token", name, "-n", ns]);
    Http::new(s, &token)
}

/// `x: [[[...1...]]]` nested `depth` deep, the shape of CVE-2019-11254.
fn deep_flow(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

fn refused_for_depth(code: u16, body: &Value) -> bool {
    let msg = body["message"].as_str().unwrap_or_default();
    code == 400 && msg.contains("error decoding YAML") && msg.contains("recursion limit")
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_yaml_bodies_are_refused_at_once_while_other_clients_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    let admin = admin(&s);
    let tenant = tenant(&s, "tenant", "t");
    let secrets = "/api/v1/namespaces/tenant/secrets";
    let claims = "/apis/metal3.io/v1alpha1/namespaces/tenant/hostclaims";
    let (code, body) = tenant
        .send(
            "POST",
            secrets,
            "application/yaml",
            b"apiVersion: v1\nkind: Secret\nmetadata: {name: keep}\nstringData: {userData: x}\n"
                .to_vec(),
        )
        .await;
    assert_eq!(code, 201, "{body}");

    // ~600 KB bodies, each 300,000 levels deep, in every place a tenant can send YAML.
    let deep = deep_flow(300_000);
    let attacks: Vec<(&str, String, &str, String)> = vec![
        (
            "POST",
            secrets.to_string(),
            "application/yaml",
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: deep}}\nstringData: {{x: {deep}}}\n"
            ),
        ),
        (
            "POST",
            claims.to_string(),
            "application/yaml",
            format!(
                "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: deep}}\nspec: {{x: {deep}}}\n"
            ),
        ),
        (
            "PATCH",
            format!("{secrets}/keep"),
            "application/apply-patch+yaml",
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: keep}}\nstringData: {{x: {deep}}}\n"
            ),
        ),
        (
            "PUT",
            format!("{secrets}/keep"),
            "application/yaml",
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: keep}}\nstringData: {{x: {deep}}}\n"
            ),
        ),
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut attackers = Vec::new();
    for (method, path, ct, body) in attacks {
        let (tenant, stop, answered) = (tenant.clone(), stop.clone(), answered.clone());
        attackers.push(tokio::spawn(async move {
            let mut sent = 0;
            while !stop.load(Ordering::Relaxed) {
                let (code, reply) = tenant
                    .send(method, &path, ct, body.clone().into_bytes())
                    .await;
                assert!(
                    refused_for_depth(code, &reply),
                    "{method} {path}: {code} {reply}"
                );
                sent += 1;
                answered.fetch_add(1, Ordering::Relaxed);
            }
            sent
        }));
    }
    // Once the attack is under way, other clients keep being served: new TLS connections,
    // reads and writes, as the admin and as the tenant itself.
    while answered.load(Ordering::Relaxed) < 4 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for i in 0..20 {
        let (code, body) = admin.fresh("GET", CMS, "", vec![]).await;
        assert_eq!(code, 200, "{body}");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("during-{i}")}, "data": {"i": i.to_string()}});
        let (code, body) = admin
            .fresh("POST", CMS, "application/json", cm.to_string().into_bytes())
            .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = tenant
            .fresh("GET", &format!("{secrets}/keep"), "", vec![])
            .await;
        assert_eq!(code, 200, "{body}");
    }
    let during = answered.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        assert!(a.await.unwrap() >= 1);
    }
    assert!(during >= 4);

    // Nothing was stored or changed by the attack.
    let (code, body) = admin
        .send("GET", &format!("{secrets}/keep"), "", vec![])
        .await;
    assert_eq!(code, 200);
    assert_eq!(body["data"].as_object().unwrap().len(), 1, "{body}");
    for path in [format!("{secrets}/deep"), format!("{claims}/deep")] {
        assert_eq!(admin.send("GET", &path, "", vec![]).await.0, 404, "{path}");
    }
    // The nesting a client may legitimately write still goes through as YAML.
    let ok = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: nested}}\ndata: {{a: b}}\nextra: {}\n",
        deep_flow(100)
    );
    let (code, body) = admin
        .send("POST", CMS, "application/yaml", ok.into_bytes())
        .await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_cannot_hold_every_connection_with_watches() {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--no-controllers",
        "--max-connections",
        "160",
        "--max-connections-per-user",
        "40",
    ];
    let s = serve(dir.path(), free_port(), &flags);
    let admin = admin(&s);
    let tenant = tenant(&s, "tenant", "t");
    let other = tenant_b(&s);
    let claims = "/apis/metal3.io/v1alpha1/namespaces/tenant/hostclaims";

    // The tenant opens more watches than its share: 40 stream, the rest are refused with 429
    // naming the share, and their connections are closed.
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..70 {
        let r = tenant.watch(claims).await;
        match r.status().as_u16() {
            200 => open.push(r),
            429 => {
                assert_eq!(r.headers()["connection"], "close");
                let body: Value = r.json().await.unwrap();
                let msg = body["message"].as_str().unwrap();
                assert!(msg.contains("holds 40 connections"), "{msg}");
                refused += 1;
            }
            other => panic!("watch answered {other}"),
        }
    }
    assert_eq!(open.len(), 40);
    assert_eq!(refused, 30);

    // Meanwhile the admin and another tenant are served, watches included.
    for _ in 0..10 {
        let (code, body) = admin.fresh("GET", CMS, "", vec![]).await;
        assert_eq!(code, 200, "{body}");
    }
    let w = other
        .watch("/apis/metal3.io/v1alpha1/namespaces/tenant-b/hostclaims")
        .await;
    assert_eq!(w.status().as_u16(), 200);

    // The open watches still deliver events.
    let claim = json!({"apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim",
                       "metadata": {"name": "c1"}, "spec": {"poweredOn": false}});
    let (code, body) = admin
        .send(
            "POST",
            claims,
            "application/json",
            claim.to_string().into_bytes(),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    for w in open.iter_mut().take(3) {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), w.chunk())
            .await
            .expect("an event on an open watch")
            .unwrap()
            .unwrap();
        assert!(String::from_utf8_lossy(&chunk).contains("\"ADDED\""));
    }

    // Closing watches gives the seats back.
    open.truncate(10);
    let r = loop {
        let r = tenant.watch(claims).await;
        if r.status().as_u16() == 200 {
            break r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    drop(r);
}

/// A second tenant, in its own namespace.
fn tenant_b(s: &Serve) -> Http {
    tenant(s, "tenant-b", "b")
}
