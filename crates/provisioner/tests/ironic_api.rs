//! The ironic backend's handling of Ironic itself: busy nodes counted over several pages for
//! capacity, readiness, and API errors that name their cause. Uses Ironic's fake-hardware
//! driver, whose direct deploys wait for an agent that never calls back (a stable busy state).

use std::time::Duration;

use ferrometal_api::{AutomatedCleaningMode, InspectionMode};
use ferrometal_bmc::{BmcAddress, Credentials};
use ferrometal_provisioner::ironic::{IronicEndpoint, IronicOptions, IronicProvisioner};
use ferrometal_provisioner::{ErrorKind, HostInfo, Provisioner};
use ferrometal_test_support::ironic::{Ironic, PASSWORD, USER};
use ferrometal_test_support::peers::FileServer;
use serde_json::{Value, json};

async fn call(ironic: &Ironic, method: reqwest::Method, path: &str, body: Value) -> Value {
    let resp = reqwest::Client::new()
        .request(method, format!("http://127.0.0.1:{}{path}", ironic.port))
        .basic_auth(USER, Some(PASSWORD))
        .header("X-OpenStack-Ironic-API-Version", "1.81")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{path}: {}", resp.status());
    resp.json().await.unwrap_or(Value::Null)
}

async fn wait_state(ironic: &Ironic, name: &str, want: &str) {
    let mut rounds = 0;
    while ironic.state(name).as_deref() != Some(want) {
        rounds += 1;
        assert!(rounds < 600, "{name} never {want}: {:?}", ironic.node(name));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn options(ironic: &Ironic, max_busy: usize) -> IronicOptions {
    let mut o = IronicOptions::new(ironic.endpoint());
    o.max_busy = max_busy;
    o.page_size = 2;
    o.cache_ttl = Duration::ZERO;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_counts_busy_nodes_across_pages() {
    let files = FileServer::start();
    let ironic = Ironic::start();
    let put = reqwest::Method::PUT;
    for i in 0..3 {
        let name = format!("busy-{i}");
        call(
            &ironic,
            reqwest::Method::POST,
            "/v1/nodes",
            json!({
                "name": name, "driver": "fake-hardware", "deploy_interface": "direct",
                "boot_interface": "fake",
                "instance_info": {"image_source": files.url("live.iso"),
                                  "image_checksum": "d41d8cd98f00b204e9800998ecf8427e"},
            }),
        )
        .await;
        let states = format!("/v1/nodes/{name}/states/provision");
        call(&ironic, put.clone(), &states, json!({"target": "manage"})).await;
        wait_state(&ironic, &name, "manageable").await;
        call(&ironic, put.clone(), &states, json!({"target": "provide"})).await;
        wait_state(&ironic, &name, "available").await;
        call(&ironic, put.clone(), &states, json!({"target": "active"})).await;
        wait_state(&ironic, &name, "wait call-back").await;
    }
    // One idle node as well, so a page holds both kinds.
    call(
        &ironic,
        reqwest::Method::POST,
        "/v1/nodes",
        json!({"name": "idle", "driver": "fake-hardware"}),
    )
    .await;

    assert!(
        !IronicProvisioner::new(options(&ironic, 3))
            .has_capacity(0)
            .await
    );
    assert!(
        IronicProvisioner::new(options(&ironic, 4))
            .has_capacity(0)
            .await
    );

    // Within the cache window each grant counts, so a burst cannot overshoot the limit.
    let mut o = options(&ironic, 5);
    o.cache_ttl = Duration::from_secs(3600);
    let p = IronicProvisioner::new(o);
    assert!(p.has_capacity(0).await);
    assert!(p.has_capacity(0).await);
    assert!(!p.has_capacity(0).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ironic_errors_name_their_cause() {
    let ironic = Ironic::start();
    let host = HostInfo {
        key: "ns~h".into(),
        provisioner_id: String::new(),
        bmc: BmcAddress::parse("redfish+http://127.0.0.1:9/redfish/v1/Systems/1").unwrap(),
        credentials: Credentials::new("admin", "bmc-password"),
        disable_certificate_verification: false,
        boot_mac_address: None,
        boot_mode: None,
        inspection_mode: InspectionMode::Disabled,
        root_device_hints: None,
        automated_cleaning_mode: AutomatedCleaningMode::Disabled,
        disable_power_off: false,
        preprovisioning_network_data: None,
    };

    // Wrong API credentials: a failed call that says so.
    let endpoint = IronicEndpoint::new(format!("http://127.0.0.1:{}", ironic.port))
        .with_basic_auth(USER, "wrong");
    let p = IronicProvisioner::new(IronicOptions::new(endpoint));
    let err = p.register(&host, false).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Failed);
    assert!(err.message.contains("HTTP 401"), "{err}");

    // Nothing listening: unreachable, and not ready.
    let mut o = IronicOptions::new(IronicEndpoint::new("http://127.0.0.1:9"));
    o.request_timeout = Duration::from_secs(2);
    let p = IronicProvisioner::new(o);
    assert!(!p.is_ready().await);
    assert!(!p.has_capacity(0).await);
    let err = p.register(&host, false).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unreachable, "{err}");
}
