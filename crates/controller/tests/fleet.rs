//! Many hosts at once: every host converges, and no step is repeated needlessly.

mod common;

use common::*;
use ferrometal_api::ProvisioningState as S;
use ferrometal_provisioner::fixture::{FixtureProvisioner, Method};
use kube::api::ListParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_registers_and_inspects_each_host_once() {
    const HOSTS: usize = 120;
    let h = Harness::start(FixtureProvisioner::immediate()).await;
    h.secret("bmc", GOOD_PASSWORD).await;
    for i in 0..HOSTS {
        h.create(&format!("h{i:03}"), h.spec("bmc"), &[]).await;
    }
    let mut available = 0;
    // Listing the fleet is costly itself: poll slowly.
    for _ in 0..600 {
        let hosts = h.hosts.list(&ListParams::default()).await.unwrap().items;
        available = hosts
            .iter()
            .filter(|h| {
                h.state() == S::Available && h.status.as_ref().is_some_and(|s| s.powered_on)
            })
            .count();
        if available == HOSTS {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(available, HOSTS, "every host available and on");
    for line in ferrometal_controller::metrics_text().lines() {
        if line.starts_with("ferrometal_host_reconcile") && !line.contains("bucket") {
            eprintln!("{line}");
        }
    }
    for i in 0..HOSTS {
        let k = key(&format!("h{i:03}"));
        assert_eq!(
            h.fixture.count(&k, Method::Register),
            1,
            "{k} registered once"
        );
        assert_eq!(
            h.fixture.count(&k, Method::Inspect),
            1,
            "{k} inspected once"
        );
        assert_eq!(h.fixture.count(&k, Method::Prepare), 1, "{k} prepared once");
        assert_eq!(
            h.fixture.count(&k, Method::PowerOn),
            1,
            "{k} powered on once"
        );
    }
}
