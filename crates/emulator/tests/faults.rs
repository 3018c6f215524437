//! Fault injection, counters and the control endpoint.

mod common;

use std::time::Duration;

use common::start_default;
use ferrometal_emulator::{Counters, Fault, MethodCounts, SystemSnapshot};
use reqwest::Method;
use serde_json::{Value, json};

const SYS: &str = "/redfish/v1/Systems/sys-3";
const CD: &str = "/redfish/v1/Managers/bmc-sys-3/VirtualMedia/Cd";

async fn status(h: &common::Harness, path: &str) -> u16 {
    h.req(Method::GET, path)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn http500_fault_applies_to_all_of_a_systems_resources() {
    let h = start_default().await;
    h.emu.set_fault(3, Some(Fault::Http500));
    for path in [
        SYS,
        CD,
        "/redfish/v1/Managers/bmc-sys-3",
        &format!("{SYS}/Processors"),
    ] {
        let resp = h.req(Method::GET, path).send().await.unwrap();
        assert_eq!(resp.status(), 500, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"]["code"].is_string());
    }
    let resp = h.reset(3, "On").await;
    assert_eq!(resp.status(), 500);
    assert!(h.emu.state(3).actions.is_empty());
    // Other systems and the fleet collections are unaffected.
    assert_eq!(status(&h, "/redfish/v1/Systems/sys-4").await, 200);
    assert_eq!(status(&h, "/redfish/v1/Systems").await, 200);

    h.emu.set_fault(3, None);
    assert_eq!(status(&h, SYS).await, 200);
}

#[tokio::test]
async fn unauthorized_fault_ignores_good_credentials() {
    let h = start_default().await;
    h.emu.set_fault(3, Some(Fault::Unauthorized));
    let resp = h.req(Method::GET, SYS).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert!(resp.headers().contains_key("www-authenticate"));
    assert_eq!(status(&h, "/redfish/v1/Systems/sys-2").await, 200);
    h.emu.set_fault(3, None);
    assert_eq!(status(&h, SYS).await, 200);
}

#[tokio::test]
async fn hang_fault_holds_the_request_without_blocking_others() {
    let h = start_default().await;
    h.emu.set_fault(3, Some(Fault::Hang));
    let hung = tokio::spawn(
        h.req(Method::GET, SYS)
            .timeout(Duration::from_millis(500))
            .send(),
    );
    // While that request hangs, other systems still answer.
    for i in [0, 1, 2, 4] {
        assert_eq!(
            status(&h, &format!("/redfish/v1/Systems/sys-{i}")).await,
            200
        );
    }
    let err = hung
        .await
        .unwrap()
        .expect_err("a hung request gets no answer");
    assert!(err.is_timeout(), "{err:?}");
    // It was received and counted, just never answered.
    assert_eq!(h.emu.counters().system(3).get, 1);

    h.emu.set_fault(3, None);
    assert_eq!(status(&h, SYS).await, 200);
}

#[tokio::test]
async fn connection_reset_fault_drops_the_connection() {
    let h = start_default().await;
    h.emu.set_fault(3, Some(Fault::ConnectionReset));
    let err = h
        .req(Method::GET, SYS)
        .send()
        .await
        .expect_err("no response on a reset connection");
    assert!(!err.is_timeout(), "{err:?}");
    assert!(err.status().is_none(), "{err:?}");
    let err = h
        .req(Method::POST, &format!("{SYS}/Actions/ComputerSystem.Reset"))
        .json(&json!({"ResetType": "On"}))
        .send()
        .await
        .expect_err("no response on a reset connection");
    assert!(!err.is_timeout(), "{err:?}");
    assert!(h.emu.state(3).actions.is_empty());

    assert_eq!(status(&h, "/redfish/v1/Systems/sys-4").await, 200);
    h.emu.set_fault(3, None);
    assert_eq!(status(&h, SYS).await, 200);
}

#[tokio::test]
async fn latency_fault_delays_but_still_answers() {
    let h = start_default().await;
    h.emu
        .set_fault(3, Some(Fault::Latency(Duration::from_secs(60))));
    let err = h
        .req(Method::GET, SYS)
        .timeout(Duration::from_millis(300))
        .send()
        .await
        .expect_err("the answer comes after the client's timeout");
    assert!(err.is_timeout(), "{err:?}");

    h.emu
        .set_fault(3, Some(Fault::Latency(Duration::from_millis(20))));
    let sys = h.get_json(SYS).await;
    assert_eq!(sys["Id"], "sys-3");

    h.emu.set_fault(3, None);
    assert_eq!(status(&h, SYS).await, 200);
}

#[tokio::test]
async fn counters_count_per_method_and_system() {
    let h = start_default().await;
    h.emu.reset_counters();
    assert_eq!(h.emu.counters().total, 0);

    h.get_json(SYS).await;
    h.get_json(&format!("{SYS}/Memory")).await;
    h.get_json(CD).await;
    h.reset(3, "On").await;
    h.req(Method::PATCH, SYS)
        .json(&json!({"Boot": {"BootSourceOverrideTarget": "Pxe"}}))
        .send()
        .await
        .unwrap();
    h.get_json("/redfish/v1/Systems/sys-9").await;
    h.get_json("/redfish/v1/Systems").await;
    // A session create + delete: counted in totals, not against a system.
    let resp = h
        .http
        .post(h.url("/redfish/v1/SessionService/Sessions"))
        .json(&json!({"UserName": "admin", "Password": "password"}))
        .send()
        .await
        .unwrap();
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    h.req(Method::DELETE, &location).send().await.unwrap();

    // Control requests are not counted.
    let via_http: Counters = h
        .http
        .get(h.url("/emulator/counters"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let c = h.emu.counters();
    assert_eq!(via_http, c);
    assert_eq!(
        c.system(3),
        MethodCounts {
            get: 3,
            post: 1,
            patch: 1,
            delete: 0,
            other: 0
        }
    );
    assert_eq!(c.system(9).get, 1);
    assert_eq!(c.system(0), MethodCounts::default());
    assert_eq!(
        c.by_method,
        MethodCounts {
            get: 5,
            post: 2,
            patch: 1,
            delete: 1,
            other: 0
        }
    );
    assert_eq!(c.total, 9);
    assert_eq!(c.systems.len(), 20);

    let resp = h
        .http
        .post(h.url("/emulator/counters/reset"))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    assert_eq!(h.emu.counters().total, 0);
    assert_eq!(h.emu.counters().system(3), MethodCounts::default());
}

#[tokio::test]
async fn control_endpoint_sets_and_clears_faults_and_reports_state() {
    let h = start_default().await;
    let fault_url = h.url("/emulator/systems/sys-3/fault");

    let resp = h
        .http
        .put(&fault_url)
        .json(&json!({"kind": "http500"}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    assert_eq!(h.emu.state(3).fault, Some(Fault::Http500));
    assert_eq!(status(&h, SYS).await, 500);

    let resp = h
        .http
        .put(&fault_url)
        .json(&json!({"kind": "latency", "latency_ms": 5}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let fault: Option<Fault> = h
        .http
        .get(&fault_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fault, Some(Fault::Latency(Duration::from_millis(5))));

    for kind in ["hang", "unauthorized", "connection_reset"] {
        let resp = h
            .http
            .put(&fault_url)
            .json(&json!({ "kind": kind }))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{kind}");
    }
    assert_eq!(h.emu.state(3).fault, Some(Fault::ConnectionReset));

    for bad in [
        json!({"kind": "latency"}),
        json!({"kind": "explode"}),
        json!("http500"),
    ] {
        let resp = h.http.put(&fault_url).json(&bad).send().await.unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
    }

    let resp = h.http.delete(&fault_url).send().await.unwrap();
    assert!(resp.status().is_success());
    assert_eq!(h.emu.state(3).fault, None);
    assert_eq!(status(&h, SYS).await, 200);

    // Snapshot JSON round-trips into the public type.
    h.reset(3, "On").await;
    let snap: SystemSnapshot = h
        .http
        .get(h.url("/emulator/systems/sys-3"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(snap, h.emu.state(3));
    assert_eq!(snap.id, "sys-3");
    assert_eq!(snap.actions, ["Reset:On"]);
    let raw: Value = h
        .http
        .get(h.url("/emulator/systems/3"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(raw["power_state"], "On");

    let resp = h
        .http
        .get(h.url("/emulator/systems/sys-999"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[test]
fn fault_json_shape() {
    assert_eq!(
        serde_json::to_value(Fault::Latency(Duration::from_millis(250))).unwrap(),
        json!({"kind": "latency", "latency_ms": 250})
    );
    assert_eq!(
        serde_json::to_value(Fault::ConnectionReset).unwrap(),
        json!({"kind": "connection_reset"})
    );
    let f: Fault = serde_json::from_value(json!({"kind": "http500"})).unwrap();
    assert_eq!(f, Fault::Http500);
}

#[tokio::test]
async fn shutdown_releases_hung_requests_and_the_port() {
    let h = start_default().await;
    h.emu.set_fault(0, Some(Fault::Hang));
    let addr = h.emu.addr();
    let hung = tokio::spawn(h.req(Method::GET, "/redfish/v1/Systems/sys-0").send());
    // Wait until the hung request has actually arrived.
    for _ in 0..1000 {
        if h.emu.counters().system(0).get == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(h.emu.counters().system(0).get, 1);
    h.emu.shutdown().await;
    let err = hung.await.unwrap().expect_err("the connection was dropped");
    assert!(!err.is_timeout(), "{err:?}");
    // The port is free again.
    tokio::net::TcpListener::bind(addr).await.unwrap();
}

#[tokio::test]
async fn hostile_faults_are_set_through_the_control_endpoint() {
    let h = start_default().await;
    let fault_url = h.url("/emulator/systems/sys-3/fault");
    for (body, want) in [
        (
            json!({"kind": "foreign_links", "origin": "http://127.0.0.1:9"}),
            Fault::ForeignLinks("http://127.0.0.1:9".into()),
        ),
        (
            json!({"kind": "redirect", "origin": "http://127.0.0.1:9"}),
            Fault::Redirect("http://127.0.0.1:9".into()),
        ),
        (
            json!({"kind": "huge_body", "bytes": 4096}),
            Fault::HugeBody(4096),
        ),
        (
            json!({"kind": "long_error", "bytes": 4096}),
            Fault::LongError(4096),
        ),
        (
            json!({"kind": "many_members", "count": 7}),
            Fault::ManyMembers(7),
        ),
    ] {
        let resp = h.http.put(&fault_url).json(&body).send().await.unwrap();
        assert!(resp.status().is_success(), "{body}");
        assert_eq!(h.emu.state(3).fault, Some(want.clone()));
        let read: Value = h.get_json("/emulator/systems/sys-3/fault").await;
        assert_eq!(read, body, "the fault reads back as it was set");
    }
    // What each does, seen by a plain HTTP client.
    let body = h.get_json(&format!("{SYS}/Processors")).await;
    assert_eq!(body["Members"].as_array().unwrap().len(), 7);
    assert_eq!(body["Members@odata.count"], 7);
    h.emu
        .set_fault(3, Some(Fault::ForeignLinks("http://other:1".into())));
    let system = h.get_json(SYS).await;
    assert_eq!(
        system["@odata.id"],
        "http://other:1/redfish/v1/Systems/sys-3"
    );
    h.emu
        .set_fault(3, Some(Fault::Redirect("http://other:1".into())));
    let resp = h.req(Method::GET, SYS).send().await.unwrap();
    assert_eq!(resp.status(), 307);
    assert_eq!(
        resp.headers()["location"],
        "http://other:1/redfish/v1/Systems/sys-3"
    );
    for bad in [
        json!({"kind": "redirect"}),
        json!({"kind": "huge_body"}),
        json!({"kind": "huge_body", "bytes": 2_000_000_000u64}),
        json!({"kind": "many_members", "count": 2_000_000}),
    ] {
        let resp = h.http.put(&fault_url).json(&bad).send().await.unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
    }
}
