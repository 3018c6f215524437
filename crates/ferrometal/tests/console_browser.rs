//! The web console in a real browser (headless Chromium over WebDriver): `serve
//! --console-listen` in front of sushy-tools hosts. An operator signs in with a token, sees the
//! fleet grouped by rack, watches a new host register without reloading, reads a host whose
//! error message holds markup as text, and powers a host on from the console (sushy-tools
//! shows it). A tenant signs in with a minted kubeconfig, sees only claims, creates one from
//! the form, and neither the pages nor the API calls the console makes as them show a BMC
//! address, a credentials Secret or a password. Writes without the session's CSRF token, or
//! from another site, are refused; the audit log names the person. Screenshots of each view
//! are written to `target/console-screenshots/`.

mod serve_common;

use std::path::PathBuf;
use std::time::Duration;

use ferrometal_test_support::browser::Browser;
use ferrometal_test_support::peers::Sushy;
use serde_json::Value;
use serve_common::{free_port, serve};

const PASSWORD: &str = "console-bmc-pw-5521";
const CREDENTIALS: &str = "rack3-bmc-credentials";
const WAIT: Duration = Duration::from_secs(60);
/// A BMC's words as a host's error: shown as text, never run.
const MARKUP: &str = "<img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script>";

fn uuid(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

/// The power state sushy-tools holds for system `i`, read past the console and serve.
fn power(sushy: &Sushy, i: usize) -> String {
    let out = std::process::Command::new("curl")
        .args([
            "-sf",
            "-u",
            &format!("admin:{PASSWORD}"),
            &sushy.system_url(&uuid(i)),
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["PowerState"].as_str().unwrap_or_default().to_string()
}

fn shots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots")
}

fn host_yaml(sushy: &Sushy, name: &str, i: usize, rack: &str) -> String {
    format!(
        "apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: {name}, namespace: infra, labels: {{rack: {rack}}}}}\nspec:\n  online: false\n  bmc: {{address: \"{}\", credentialsName: {CREDENTIALS}}}\n",
        sushy.address(&uuid(i))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_and_tenants_use_the_console_in_a_browser() {
    let sushy = Sushy::start(3, &format!("admin:{PASSWORD}"));
    let dir = tempfile::tempdir().unwrap();
    let console_port = free_port();
    let console = format!("http://127.0.0.1:{console_port}/");
    let listen = format!("127.0.0.1:{console_port}");
    let s = serve(
        dir.path(),
        free_port(),
        &["--power-poll-interval", "3", "--console-listen", &listen],
    );
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&["create", "namespace", "tenant-a"]);
    s.ok(&[
        "create",
        "secret",
        "generic",
        CREDENTIALS,
        "-n",
        "infra",
        "--from-literal=username=admin",
        &format!("--from-literal=password={PASSWORD}"),
    ]);
    let yaml = [
        host_yaml(&sushy, "r1-a", 0, "r1"),
        host_yaml(&sushy, "r2-a", 1, "r2"),
    ]
    .join("---\n");
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&yaml));
    // A host the controllers leave alone, with a BMC's error message that holds markup.
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {name: odd, namespace: infra, labels: {rack: r9}, annotations: {baremetalhost.metal3.io/paused: \"\"}}\nspec: {online: false}\n",
        ),
    );
    let status = serde_json::json!({"status": {"errorType": "registration error",
        "errorMessage": MARKUP, "operationalStatus": "error",
        "provisioning": {"state": "registering"}}});
    s.ok(&[
        "patch",
        "bmh",
        "odd",
        "-n",
        "infra",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    s.wait("two hosts available", || {
        s.host_states("infra")
            .iter()
            .filter(|st| *st == "available")
            .count()
            == 2
    });

    // The operator: the admin's token.
    let token = std::fs::read_to_string(dir.path().join("token")).unwrap();
    let b = Browser::start().await;
    b.goto(&console).await;
    b.text("#signin", WAIT).await;
    b.fill("#token", token.trim()).await;
    b.click("#signin-submit").await;
    assert_eq!(b.text("#count-total", WAIT).await, "3");
    let operator = b.text("#user", WAIT).await;
    assert!(!operator.is_empty());
    b.until(
        "the error counted",
        WAIT,
        "return document.querySelector('#count-errors').textContent === '1'",
    )
    .await;
    // Nothing the browser keeps names the token.
    let stored = b
        .eval("return JSON.stringify(sessionStorage) + JSON.stringify(localStorage) + document.cookie + location.href")
        .await;
    assert!(!stored.to_string().contains(token.trim()), "{stored}");
    // Grouped by rack.
    b.eval("const s = document.querySelector('#group-by'); s.value = 'rack'; s.dispatchEvent(new Event('change')); return true")
        .await;
    b.until(
        "three rack groups",
        WAIT,
        "return document.querySelectorAll('#groups section.group').length === 3",
    )
    .await;
    b.screenshot(&shots().join("fleet.png")).await;

    // Live: a host created now appears and goes to available without a reload.
    b.eval("window.notReloaded = true; return true").await;
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&host_yaml(&sushy, "r2-b", 2, "r2")),
    );
    b.until(
        "the new host available on the page",
        WAIT,
        "const t = document.querySelector('[data-host=\"r2-b\"]'); return !!t && t.dataset.state === 'available'",
    )
    .await;
    assert_eq!(b.eval("return window.notReloaded === true").await, true);

    // The host whose error holds markup: shown as text, nothing of it runs.
    b.goto(&format!("{console}#/host/infra/odd")).await;
    let error = b.text("#host-error", WAIT).await;
    assert!(error.contains(MARKUP), "{error}");
    assert_eq!(
        b.eval("return document.querySelectorAll('#host-error img, #host-error script').length + (window.pwned || 0)")
            .await,
        0
    );

    // An action: power r1-a on from its page; the BMC shows it.
    b.goto(&format!("{console}#/host/infra/r1-a")).await;
    assert_eq!(b.text("#host-state", WAIT).await, "available");
    b.text("#hw-cpu", WAIT).await;
    assert_eq!(power(&sushy, 0), "Off");
    b.click_and_confirm("[data-action='Power on']").await;
    let start = std::time::Instant::now();
    while power(&sushy, 0) != "On" {
        assert!(
            start.elapsed() < WAIT,
            "the power-on never reached sushy-tools"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b.until(
        "the page shows the power",
        WAIT,
        "return document.querySelector('#host-power').textContent === 'on'",
    )
    .await;
    b.screenshot(&shots().join("host.png")).await;
    // A BMCJob started from the form: power r2-a on, then back to its desired state (off).
    b.goto(&format!("{console}#/jobs")).await;
    b.text("#job-form", WAIT).await;
    b.fill("#ns", "infra").await;
    b.eval("document.querySelector('#ns').dispatchEvent(new Event('change')); return true")
        .await;
    b.text("#job-form", WAIT).await;
    b.fill("#job-name", "power-check").await;
    b.fill("#job-host", "r2-a").await;
    b.eval("document.querySelector('#task-0').value = 'power:on'; return true")
        .await;
    b.click_and_confirm("#job-form button[type=submit]").await;
    b.until(
        "the job completed, live",
        WAIT,
        "const j = document.querySelector('[data-job=\"power-check\"]'); return !!j && j.closest('tr').querySelector('[data-phase]').dataset.phase === 'Completed'",
    )
    .await;
    let resets = sushy
        .changes()
        .iter()
        .filter(|l| l.contains(&uuid(1)) && l.contains("Reset"))
        .count();
    assert!(
        resets >= 2,
        "power on and the restore's off: {:?}",
        sushy.changes()
    );
    b.screenshot(&shots().join("jobs.png")).await;

    // A write without the session's CSRF token, or from another site, is refused.
    let cookies = b.client.get_all_cookies().await.unwrap();
    let cookie = cookies
        .iter()
        .find(|c| c.name() == "ferrometal_console")
        .expect("the session cookie");
    assert!(cookie.http_only().unwrap_or(false));
    let session = format!("ferrometal_console={}", cookie.value());
    let http = reqwest::Client::new();
    let patch_url =
        format!("{console}k8s/apis/metal3.io/v1alpha1/namespaces/infra/baremetalhosts/r2-a");
    let no_csrf = http
        .patch(&patch_url)
        .header("cookie", &session)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"spec":{"online":true}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(no_csrf.status(), 403);
    let csrf = b.eval("return S.info.csrf").await;
    let cross = http
        .patch(&patch_url)
        .header("cookie", &session)
        .header("origin", "http://evil.example")
        .header("x-console-csrf", csrf.as_str().unwrap())
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"spec":{"online":true}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    let r2a = s.json(&["get", "bmh", "r2-a", "-n", "infra", "-o", "json"]);
    assert_eq!(r2a["spec"]["online"], false);

    // Signing out ends the session on the server.
    b.click("#who button").await;
    b.text("#signin", WAIT).await;
    let after = http
        .get(format!("{console}k8s/api/v1/namespaces"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401);

    // The tenant: a kubeconfig with a client certificate, r2-a lent to their namespace.
    s.ok(&["label", "bmh", "r2-a", "-n", "infra", "pool=lab"]);
    s.lend("infra", "tenant-a");
    let kubeconfig = s.tenant("alice", "tenant-a");
    b.client
        .find(ferrometal_test_support::fantoccini::Locator::Css(
            "#kubeconfig",
        ))
        .await
        .unwrap()
        .send_keys(kubeconfig.to_str().unwrap())
        .await
        .unwrap();
    b.click("#signin-submit").await;
    b.text("#claims", WAIT).await;
    assert_eq!(b.text("#user", WAIT).await, "alice");
    assert_eq!(
        b.eval("return [...document.querySelectorAll('#nav a')].map(a => a.textContent).join(',')")
            .await,
        "Claims,Jobs"
    );
    b.fill("#claim-name", "web").await;
    b.fill("#claim-selector", "pool=lab").await;
    b.click("#claim-form button[type=submit]").await;
    b.until(
        "the claim associated, live",
        WAIT,
        "const c = document.querySelector('[data-claim]'); return !!c && c.closest('tr').textContent.includes('True')",
    )
    .await;
    b.screenshot(&shots().join("claims.png")).await;
    // Deleted with confirmation: the claim goes and its host is released.
    b.click_and_confirm("[data-delete='web']").await;
    b.until(
        "the claim gone from the page",
        WAIT,
        "return document.querySelector('[data-claim]') === null",
    )
    .await;
    s.wait("r2-a released", || {
        let h = s.json(&["get", "bmh", "r2-a", "-n", "infra", "-o", "json"]);
        h["spec"]["consumerRef"].is_null()
    });
    // What the tenant's browser may reach: not the infrastructure.
    for path in [
        "/k8s/apis/metal3.io/v1alpha1/namespaces/infra/baremetalhosts",
        "/k8s/apis/metal3.io/v1alpha1/baremetalhosts",
        "/k8s/api/v1/namespaces/infra/secrets",
        "/k8s/api/v1/namespaces/infra/events",
    ] {
        let code = b
            .eval_async(&format!("return (await fetch('{path}')).status"))
            .await;
        assert_eq!(code, 403, "{path}");
    }
    b.goto(&format!("{console}#/host/infra/r2-a")).await;
    b.text("#host", WAIT).await;
    b.until(
        "the host page refused",
        WAIT,
        "return document.querySelector('#notice').textContent.includes('forbidden') || document.querySelector('#host').textContent.includes('may not')",
    )
    .await;
    // Every page the tenant opens, and every answer the console gives them.
    let mut seen = String::new();
    for view in ["#/claims", "#/jobs", "#/fleet"] {
        b.goto(&format!("{console}{view}")).await;
        b.text("main h1", WAIT).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        seen.push_str(&b.html().await);
    }
    for path in [
        "/k8s/apis/metal3.io/v1alpha1/namespaces/tenant-a/hostclaims",
        "/k8s/apis/metal3.io/v1alpha1/namespaces/tenant-a/hardwaredata",
        "/k8s/api/v1/namespaces/tenant-a/events",
        "/session",
    ] {
        let body = b
            .eval_async(&format!("return await (await fetch('{path}')).text()"))
            .await;
        seen.push_str(body.as_str().unwrap_or_default());
    }
    for secret in [
        format!("127.0.0.1:{}", sushy.port),
        "redfish".to_string(),
        CREDENTIALS.to_string(),
        PASSWORD.to_string(),
    ] {
        assert!(!seen.contains(&secret), "the tenant saw {secret}");
    }
    b.close().await;

    // The audit log names the people, not the console.
    let audit = std::fs::read_to_string(dir.path().join("audit/audit.log")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        lines.iter().any(|e| e["user"] == "alice"
            && e["verb"] == "create"
            && e["resource"] == "hostclaims")
    );
    assert!(lines.iter().any(|e| e["verb"] == "patch"
        && e["resource"] == "baremetalhosts"
        && e["name"] == "r1-a"
        && e["user"] == operator.as_str()));
}

/// `ferrometal console --kubeconfig F` in front of a running API (as in cluster mode), over
/// plain HTTP requests: sign-in refusals say why, the session cookie is HttpOnly and
/// SameSite=Strict, every answer carries the strict Content-Security-Policy, and only the
/// Kubernetes API is reached through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_command_in_front_of_an_api() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    let port = free_port();
    let mut console = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferrometal"))
        .args(["console", "--kubeconfig"])
        .arg(&s.kubeconfig)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..100 {
        if http.get(format!("{base}/")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "ferrometal console did not start");
    let page = http.get(format!("{base}/")).send().await.unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );

    let sign_in = |body: Value| {
        http.post(format!("{base}/session"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let wrong = sign_in(serde_json::json!({"token": "not-a-real-token"}))
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let exec = "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}}}]\n";
    let refused = sign_in(serde_json::json!({"kubeconfig": exec}))
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("exec"));
    let form = http
        .post(format!("{base}/session"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=x")
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);

    let token = std::fs::read_to_string(dir.path().join("token")).unwrap();
    let ok = sign_in(serde_json::json!({"token": token.trim()}))
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let cookie = ok.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let info: Value = ok.json().await.unwrap();
    assert!(!info.to_string().contains(token.trim()));
    let session = cookie.split(';').next().unwrap().to_string();
    let get = |path: &str| {
        http.get(format!("{base}{path}"))
            .header("cookie", &session)
            .send()
    };
    let namespaces = get("/k8s/api/v1/namespaces").await.unwrap();
    assert_eq!(namespaces.status(), 200);
    assert!(namespaces.text().await.unwrap().contains("\"default\""));
    for path in ["/k8s/metrics", "/k8s/api/../metrics", "/k8s/healthz"] {
        assert_eq!(get(path).await.unwrap().status(), 404, "{path}");
    }
    let without = http
        .get(format!("{base}/k8s/api/v1/namespaces"))
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), 401);

    // An operator bound to ferrometal-bmc-operator: starts a BMCJob through the console (with
    // the session's CSRF token) and is refused the Secrets, as with kubectl.
    s.ok(&[
        "create",
        "clusterrolebinding",
        "bob-bmc-operator",
        "--clusterrole=ferrometal-bmc-operator",
        "--user=bob",
    ]);
    let kubeconfig = std::fs::read_to_string(s.user_kubeconfig("bob", &[], "default")).unwrap();
    let bob = sign_in(serde_json::json!({"kubeconfig": kubeconfig}))
        .await
        .unwrap();
    assert_eq!(bob.status(), 200);
    let session = bob.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let info: Value = bob.json().await.unwrap();
    assert_eq!(info["user"], "bob");
    let job = serde_json::json!({"apiVersion": "ferrometal.io/v1alpha1", "kind": "BMCJob",
        "metadata": {"name": "cycle"},
        "spec": {"hostRef": {"name": "somehost"}, "tasks": [{"powerAction": "cycle"}]}});
    let created = http
        .post(format!(
            "{base}/k8s/apis/ferrometal.io/v1alpha1/namespaces/default/bmcjobs"
        ))
        .header("cookie", &session)
        .header("x-console-csrf", info["csrf"].as_str().unwrap())
        .header("content-type", "application/json")
        .body(job.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let secrets = http
        .get(format!("{base}/k8s/api/v1/namespaces/default/secrets"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(secrets.status(), 403);
    console.kill().await.unwrap();
}
