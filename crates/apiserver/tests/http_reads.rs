//! The HTTP surface seen raw, reading: discovery, tables, watch edge cases and waits for a
//! resourceVersion not reached yet. Writes are in `http_api.rs`.

mod common;

use common::*;
use ferrometal_apiserver::ServerConfig;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_documents() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    install_widgets(&srv.api.client()).await;
    let t = srv.token();
    let get = |path: &'static str| {
        let t = t.clone();
        async move {
            let (code, body) = raw(srv.addr, "GET", path, Some(&t), "application/json", b"").await;
            assert_eq!(code, 200, "{path}: {body}");
            parse(&body)
        }
    };
    let v = get("/version").await;
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str()),
        (Some("1"), Some("32"))
    );
    assert_eq!(get("/api").await["versions"], json!(["v1"]));
    let apis = get("/apis").await;
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "example.com",
    ] {
        assert!(groups.contains(&g), "{groups:?}");
    }
    let core = get("/api/v1").await;
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for r in [
        "namespaces",
        "namespaces/status",
        "secrets",
        "configmaps",
        "events",
    ] {
        assert!(names.contains(&r), "{names:?}");
    }
    let ex = get("/apis/example.com/v1").await;
    let w = &ex["resources"][0];
    assert_eq!(w["name"], "widgets");
    assert_eq!(w["singularName"], "widget");
    assert_eq!(w["kind"], "Widget");
    assert_eq!(w["namespaced"], true);
    assert_eq!(w["shortNames"], json!(["wd"]));
    assert!(w["verbs"].as_array().unwrap().contains(&json!("watch")));
    assert_eq!(ex["resources"][1]["name"], "widgets/status");

    // Aggregated discovery, as kubectl asks first.
    let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let req = format!(
        "GET /apis HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {t}\r\nAccept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase().contains(
            "content-type: application/json;g=apidiscovery.k8s.io;v=v2;as=apigroupdiscoverylist"
        ),
        "{head}"
    );
    let agg = parse(body);
    assert_eq!(agg["kind"], "APIGroupDiscoveryList");
    let example = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "example.com")
        .expect("example.com group");
    let r = &example["versions"][0]["resources"][0];
    assert_eq!(r["resource"], "widgets");
    assert_eq!(r["scope"], "Namespaced");
    assert_eq!(r["responseKind"]["kind"], "Widget");
    assert_eq!(r["subresources"][0]["subresource"], "status");

    let index = get("/openapi/v3").await;
    assert!(
        index["paths"]["apis/example.com/v1"]["serverRelativeURL"].is_string(),
        "{index}"
    );
    let doc = get("/openapi/v3/apis/example.com/v1").await;
    let text = doc.to_string();
    assert!(
        text.contains("size must be below 100") || text.contains("\"size\""),
        "{text}"
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_output_uses_printer_columns() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    let client = srv.api.client();
    install_widgets(&client).await;
    let widgets: kube::Api<Widget> = kube::Api::default_namespaced(client);
    widgets
        .create(&Default::default(), &widget("t1", 4))
        .await
        .unwrap();
    let mut s = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let req = format!(
        "GET /apis/example.com/v1/namespaces/default/widgets HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {}\r\nAccept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json\r\n\r\n",
        srv.token()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    let t = parse(body);
    assert_eq!(t["kind"], "Table");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // With additionalPrinterColumns there is no implicit Age column, as on kube-apiserver.
    assert_eq!(cols, ["Name", "Size", "Phase"]);
    assert_eq!(t["rows"][0]["cells"][0], "t1");
    assert_eq!(t["rows"][0]["cells"][1], 4);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_too_old_is_gone_and_timeout_ends_stream() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::new(dir.path());
    cfg.tls = false;
    cfg.history = 16;
    let srv = start_with(cfg, "127.0.0.1:0").await;
    let t = srv.token();
    let tok = Some(t.as_str());
    let cms = "/api/v1/namespaces/default/configmaps";
    for i in 0..40 {
        let body = json!({"metadata": {"name": format!("c{i}")}}).to_string();
        let (code, _) = raw(
            srv.addr,
            "POST",
            cms,
            tok,
            "application/json",
            body.as_bytes(),
        )
        .await;
        assert_eq!(code, 201);
    }
    let (code, body) = raw(
        srv.addr,
        "GET",
        &format!("{cms}?watch=true&resourceVersion=2&timeoutSeconds=5"),
        tok,
        "application/json",
        b"",
    )
    .await;
    assert_eq!(code, 200);
    let ev = parse(body.lines().next().unwrap());
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");

    // A recent version replays what followed it, then the timeout closes the stream.
    let rv = srv.api.revision() - 2;
    let (code, body) = raw(
        srv.addr,
        "GET",
        &format!("{cms}?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
        tok,
        "application/json",
        b"",
    )
    .await;
    assert_eq!(code, 200);
    let names: Vec<String> = body
        .lines()
        .map(|l| {
            let e = parse(l);
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(names, ["ADDED c38", "ADDED c39"]);

    // Label selector on a watch sees an object leave the selection as DELETED.
    srv.stop().await;
}

/// A resourceVersion the store has not reached: get, list and watch wait a moment for it, then
/// answer kube-apiserver's 504 "Too large resource version" instead of hanging; a version
/// reached during the wait is served; a non-number is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_resource_version_is_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), "127.0.0.1:0", false).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, _) = call(&srv, "POST", cms, JSON, &json!({"metadata": {"name": "c"}})).await;
    assert_eq!(code, 201);
    let rev = srv.api.revision();
    let ahead = rev + 1000;
    for (path, want) in [
        (format!("{cms}?resourceVersion={}", u64::MAX), u64::MAX),
        (
            format!("{cms}?resourceVersion={ahead}&resourceVersionMatch=NotOlderThan"),
            ahead,
        ),
        (format!("{cms}/c?resourceVersion={ahead}"), ahead),
        (
            format!("{cms}?watch=true&resourceVersion={}", u64::MAX),
            u64::MAX,
        ),
    ] {
        let started = std::time::Instant::now();
        let (code, st) = call(&srv, "GET", &path, JSON, &Value::Null).await;
        let took = started.elapsed();
        assert_eq!(code, 504, "{path}: {st}");
        assert!(
            took.as_secs_f64() > 2.5 && took.as_secs() < 10,
            "{path}: {took:?}"
        );
        assert_eq!(st["reason"], "Timeout");
        assert_eq!(
            st["message"],
            format!("Timeout: Too large resource version: {want}, current: {rev}")
        );
        assert_eq!(
            st["details"],
            json!({"causes": [{"reason": "ResourceVersionTooLarge",
                               "message": "Too large resource version"}],
                   "retryAfterSeconds": 1})
        );
    }

    for path in [
        format!("{cms}?resourceVersion={rev}"),
        format!("{cms}?resourceVersion=0"),
        format!("{cms}/c?resourceVersion={rev}"),
    ] {
        let (code, got) = call(&srv, "GET", &path, JSON, &Value::Null).await;
        assert_eq!(code, 200, "{path}: {got}");
    }
    for path in [
        format!("{cms}?resourceVersion=abc"),
        format!("{cms}?resourceVersion=99999999999999999999999"),
        format!("{cms}/c?resourceVersion=-1"),
        format!("{cms}?watch=true&resourceVersion=abc"),
    ] {
        let (code, st) = call(&srv, "GET", &path, JSON, &Value::Null).await;
        assert_eq!(
            (code, &st["reason"]),
            (400, &json!("BadRequest")),
            "{path}: {st}"
        );
        assert!(
            st["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid resource version: "),
            "{st}"
        );
    }

    // A write landing during the wait is what the list was waiting for.
    let writer = {
        let (addr, t) = (srv.addr, srv.token());
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let body = json!({"metadata": {"name": "late"}}).to_string();
            raw(addr, "POST", cms, Some(&t), JSON, body.as_bytes())
                .await
                .0
        })
    };
    let started = std::time::Instant::now();
    let path = format!("{cms}?resourceVersion={}", rev + 1);
    let (code, list) = call(&srv, "GET", &path, JSON, &Value::Null).await;
    assert_eq!(code, 200, "{list}");
    assert!(started.elapsed().as_secs() < 3);
    assert_eq!(writer.await.unwrap(), 201);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "late"]);
    assert_eq!(srv.api.revision(), rev + 1, "only the late write");
    srv.stop().await;
}
