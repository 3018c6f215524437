//! `$expand` on a system: one request returns the whole inventory, and what it inlines is
//! exactly what the member resources say.

mod common;

use common::start_default;
use reqwest::Method;
use serde_json::Value;

#[tokio::test]
async fn service_root_advertises_expand() {
    let h = start_default().await;
    let root = h.get_json("/redfish/v1").await;
    let expand = &root["ProtocolFeaturesSupported"]["ExpandQuery"];
    assert_eq!(expand["ExpandAll"], true);
    assert_eq!(expand["Levels"], true);
    assert_eq!(expand["NoLinks"], true);
    assert_eq!(expand["MaxLevels"], 3);
}

#[tokio::test]
async fn two_levels_inline_every_member_in_one_request() {
    let h = start_default().await;
    for index in [0usize, 1, 4] {
        let base = format!("/redfish/v1/Systems/sys-{index}");
        h.emu.reset_counters();
        let system = h.get_json(&format!("{base}?$expand=.($levels=2)")).await;
        assert_eq!(h.emu.counters().total, 1, "one request for everything");
        assert_eq!(system["Id"], format!("sys-{index}"));

        // Each inlined member equals the resource at its own URL.
        for (collection, path) in [
            ("Processors", "Processors"),
            ("Memory", "Memory"),
            ("EthernetInterfaces", "EthernetInterfaces"),
        ] {
            let plain = h.get_json(&format!("{base}/{path}")).await;
            let inline = &system[collection];
            assert_eq!(inline["@odata.id"], plain["@odata.id"]);
            let members = inline["Members"].as_array().unwrap();
            assert_eq!(members.len(), plain["Members"].as_array().unwrap().len());
            assert!(!members.is_empty(), "{collection}");
            for (member, link) in members.iter().zip(plain["Members"].as_array().unwrap()) {
                let own = h.get_json(link["@odata.id"].as_str().unwrap()).await;
                assert_eq!(member, &own, "{collection}");
            }
        }
        let storage = &system["Storage"]["Members"][0];
        assert_eq!(storage["Id"], "1");
        let drives = storage["Drives"].as_array().unwrap();
        assert!(!drives.is_empty());
        for drive in drives {
            let own = h.get_json(drive["@odata.id"].as_str().unwrap()).await;
            assert_eq!(drive, &own);
            assert!(drive["CapacityBytes"].as_u64().unwrap() > 0);
        }
        // `.` leaves Links alone.
        assert_eq!(
            system["Links"]["ManagedBy"][0].as_object().unwrap().len(),
            1
        );
    }
}

#[tokio::test]
async fn one_level_inlines_collections_only_and_star_expands_links() {
    let h = start_default().await;
    let system = h.get_json("/redfish/v1/Systems/sys-2?$expand=.").await;
    let members = system["Processors"]["Members"].as_array().unwrap();
    assert!(!members.is_empty());
    assert!(members.iter().all(|m| m.as_object().unwrap().len() == 1));

    let system = h
        .get_json("/redfish/v1/Systems/sys-2?%24expand=*%28%24levels%3D2%29")
        .await;
    assert_eq!(system["Links"]["ManagedBy"][0]["Id"], "bmc-sys-2");
    assert!(
        system["Processors"]["Members"][0]["TotalCores"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Without $expand the system is unchanged: bare links.
    let plain = h.get_json("/redfish/v1/Systems/sys-2").await;
    assert_eq!(plain["Processors"].as_object().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_expand_values_are_refused_by_name() {
    let h = start_default().await;
    for (query, status) in [
        ("$expand=.($levels=9)", 400),
        ("$expand=banana", 400),
        ("$expand=~", 501),
    ] {
        let resp = h
            .req(Method::GET, &format!("/redfish/v1/Systems/sys-0?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), status, "{query}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"]["message"].as_str().is_some(), "{query}");
    }
}
