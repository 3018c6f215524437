//! Redfish behaviour of the emulator, driven through a real HTTP client.

mod common;

use std::time::Duration;

use common::{start, start_default};
use ferrometal_emulator::{EmulatorConfig, PowerState};
use ferrometal_test_support::images::ImageServer;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn service_root_is_open_and_links_collections() {
    let h = start_default().await;
    let resp = h.http.get(h.url("/redfish/v1")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let root: Value = resp.json().await.unwrap();
    assert_eq!(root["Systems"]["@odata.id"], "/redfish/v1/Systems");
    assert_eq!(root["Managers"]["@odata.id"], "/redfish/v1/Managers");
    assert_eq!(
        root["SessionService"]["@odata.id"],
        "/redfish/v1/SessionService"
    );
    assert!(
        root["@odata.type"]
            .as_str()
            .unwrap()
            .contains("ServiceRoot")
    );
}

#[tokio::test]
async fn basic_auth_is_required_beyond_the_root() {
    let h = start_default().await;
    let resp = h
        .http
        .get(h.url("/redfish/v1/Systems"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert!(
        resp.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    let resp = h
        .http
        .get(h.url("/redfish/v1/Systems/sys-0"))
        .basic_auth("admin", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    let systems = h.get_json("/redfish/v1/Systems").await;
    assert_eq!(systems["Members@odata.count"], 20);
    assert_eq!(
        systems["Members"][19]["@odata.id"],
        "/redfish/v1/Systems/sys-19"
    );
}

#[tokio::test]
async fn session_login_use_and_logout() {
    let h = start_default().await;
    let sessions = h.url("/redfish/v1/SessionService/Sessions");
    let resp = h
        .http
        .post(&sessions)
        .json(&json!({"UserName": "admin", "Password": "nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    let resp = h
        .http
        .post(&sessions)
        .json(&json!({"UserName": "admin", "Password": "password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let token = resp.headers()["x-auth-token"].to_str().unwrap().to_owned();
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with("/redfish/v1/SessionService/Sessions/"));
    assert_eq!(h.emu.counters().open_sessions, 1);

    let with_token = |method: Method, path: &str| {
        h.http
            .request(method, h.url(path))
            .header("X-Auth-Token", &token)
    };
    let resp = with_token(Method::GET, "/redfish/v1/Systems/sys-3")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let session: Value = with_token(Method::GET, &location)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(session["UserName"], "admin");

    let resp = with_token(Method::DELETE, &location).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(h.emu.counters().open_sessions, 0);
    let resp = with_token(Method::GET, "/redfish/v1/Systems/sys-3")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
}

#[tokio::test]
async fn system_document_has_the_expected_shape() {
    let h = start_default().await;
    let sys = h.get_json("/redfish/v1/Systems/sys-7").await;
    assert_eq!(sys["Id"], "sys-7");
    assert_eq!(sys["@odata.id"], "/redfish/v1/Systems/sys-7");
    assert_eq!(sys["PowerState"], "Off");
    assert_eq!(
        sys["UUID"],
        h.get_json("/redfish/v1/Systems/sys-7").await["UUID"]
    );
    assert_ne!(
        sys["UUID"],
        h.get_json("/redfish/v1/Systems/sys-8").await["UUID"]
    );
    assert_eq!(
        sys["Links"]["ManagedBy"][0]["@odata.id"],
        "/redfish/v1/Managers/bmc-sys-7"
    );
    assert_eq!(
        sys["Actions"]["#ComputerSystem.Reset"]["target"],
        "/redfish/v1/Systems/sys-7/Actions/ComputerSystem.Reset"
    );
    let allowed = &sys["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"];
    for t in [
        "On",
        "ForceOff",
        "GracefulShutdown",
        "GracefulRestart",
        "ForceRestart",
        "ForceOn",
        "PowerCycle",
        "Nmi",
    ] {
        assert!(allowed.as_array().unwrap().contains(&json!(t)), "{t}");
    }
    assert!(
        sys["Boot"]["BootSourceOverrideTarget@Redfish.AllowableValues"]
            .as_array()
            .unwrap()
            .contains(&json!("Pxe"))
    );
    for t in ["Manufacturer", "Model", "SerialNumber"] {
        assert!(sys[t].is_string(), "{t}");
    }
    assert!(sys["ProcessorSummary"]["Count"].as_u64().unwrap() >= 1);
    assert!(
        sys["MemorySummary"]["TotalSystemMemoryGiB"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn unknown_resources_answer_404_with_a_redfish_error() {
    let h = start_default().await;
    for path in [
        "/redfish/v1/Systems/sys-20",
        "/redfish/v1/Systems/nope",
        "/redfish/v1/Managers/bmc-sys-99",
        "/redfish/v1/Systems/sys-0/Processors/CPU9",
    ] {
        let resp = h.req(Method::GET, path).send().await.unwrap();
        assert_eq!(resp.status(), 404, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"]["code"].as_str().unwrap().starts_with("Base."));
    }
}

/// Each reset type, with the power state it must leave behind.
const SEQUENCE: [(&str, &str); 9] = [
    ("On", "On"),
    ("ForceOff", "Off"),
    ("ForceOn", "On"),
    ("GracefulShutdown", "Off"),
    ("GracefulRestart", "On"),
    ("ForceOff", "Off"),
    ("PowerCycle", "On"),
    ("ForceRestart", "On"),
    ("Nmi", "On"),
];

#[tokio::test]
async fn every_reset_type_changes_state_immediately() {
    let h = start_default().await;
    for (reset_type, want) in SEQUENCE {
        let resp = h.reset(2, reset_type).await;
        assert!(resp.status().is_success(), "{reset_type}");
        assert_eq!(h.power_state(2).await, want, "after {reset_type}");
        let expected = if want == "On" {
            PowerState::On
        } else {
            PowerState::Off
        };
        assert_eq!(h.emu.state(2).power_state, expected);
    }
    let state = h.emu.state(2);
    let expected: Vec<String> = SEQUENCE.iter().map(|(t, _)| format!("Reset:{t}")).collect();
    assert_eq!(state.actions, expected);
    // On, ForceOn, GracefulRestart, PowerCycle and ForceRestart each booted.
    assert_eq!(state.boots, 5);
    // Other systems are untouched.
    assert_eq!(h.emu.state(3).power_state, PowerState::Off);
    assert!(h.emu.state(3).actions.is_empty());
}

#[tokio::test]
async fn every_reset_type_lands_after_the_power_delay() {
    let h = start(EmulatorConfig {
        power_delay: Duration::from_millis(100),
        ..EmulatorConfig::default()
    })
    .await;
    for (reset_type, want) in SEQUENCE {
        let resp = h.reset(4, reset_type).await;
        assert!(resp.status().is_success(), "{reset_type}");
        h.wait_power(4, want).await;
        // Restarts and Nmi don't change the reported state: wait until nothing
        // is pending so the next step starts from a settled system.
        for _ in 0..1000 {
            if h.emu.state(4).pending_power_state.is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(h.emu.state(4).pending_power_state, None, "{reset_type}");
    }
    assert_eq!(h.emu.state(4).boots, 5);
}

#[tokio::test]
async fn power_cycle_is_rejected_when_omitted() {
    let h = start(EmulatorConfig {
        omit_power_cycle: true,
        ..EmulatorConfig::default()
    })
    .await;
    let sys = h.get_json("/redfish/v1/Systems/sys-0").await;
    let allowed = sys["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!allowed.contains(&json!("PowerCycle")));
    assert!(allowed.contains(&json!("ForceRestart")));

    let resp = h.reset(0, "PowerCycle").await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["error"]["code"],
        "Base.1.8.ActionParameterValueNotInList"
    );
    assert_eq!(h.emu.state(0).power_state, PowerState::Off);
    assert!(h.emu.state(0).actions.is_empty());

    let resp = h.reset(0, "Bogus").await;
    assert_eq!(resp.status(), 400);
}

async fn patch_boot(h: &common::Harness, index: usize, boot: Value) -> reqwest::Response {
    h.req(Method::PATCH, &format!("/redfish/v1/Systems/sys-{index}"))
        .json(&json!({ "Boot": boot }))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn once_override_is_consumed_by_the_next_boot() {
    let h = start_default().await;
    let resp = patch_boot(
        &h,
        1,
        json!({"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI"}),
    )
    .await;
    assert!(resp.status().is_success());
    let boot = &h.get_json("/redfish/v1/Systems/sys-1").await["Boot"];
    assert_eq!(boot["BootSourceOverrideTarget"], "Pxe");
    assert_eq!(boot["BootSourceOverrideEnabled"], "Once");

    h.reset(1, "On").await;
    let state = h.emu.state(1);
    assert_eq!(state.last_boot_source.as_deref(), Some("Pxe"));
    assert_eq!(state.boot.enabled, "Disabled");
    assert_eq!(state.boot.target, "None");
    let boot = &h.get_json("/redfish/v1/Systems/sys-1").await["Boot"];
    assert_eq!(boot["BootSourceOverrideEnabled"], "Disabled");
    assert_eq!(boot["BootSourceOverrideTarget"], "None");

    // A Once override set while On is consumed by a restart.
    patch_boot(
        &h,
        1,
        json!({"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}),
    )
    .await;
    h.reset(1, "ForceRestart").await;
    let state = h.emu.state(1);
    assert_eq!(state.last_boot_source.as_deref(), Some("Cd"));
    assert_eq!(state.boot.enabled, "Disabled");
    h.reset(1, "ForceRestart").await;
    assert_eq!(h.emu.state(1).last_boot_source.as_deref(), Some("Default"));

    // Continuous survives restarts.
    patch_boot(
        &h,
        1,
        json!({"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous"}),
    )
    .await;
    h.reset(1, "PowerCycle").await;
    h.reset(1, "PowerCycle").await;
    let state = h.emu.state(1);
    assert_eq!(state.last_boot_source.as_deref(), Some("Hdd"));
    assert_eq!(state.boot.enabled, "Continuous");
    assert_eq!(
        state.actions,
        [
            "PatchBoot",
            "Reset:On",
            "PatchBoot",
            "Reset:ForceRestart",
            "Reset:ForceRestart",
            "PatchBoot",
            "Reset:PowerCycle",
            "Reset:PowerCycle"
        ]
    );
}

#[tokio::test]
async fn invalid_boot_patches_are_rejected() {
    let h = start_default().await;
    for boot in [
        json!({"BootSourceOverrideTarget": "Floppy"}),
        json!({"BootSourceOverrideEnabled": "Sometimes"}),
        json!({"BootSourceOverrideMode": 1}),
        json!({"Unknown": "x"}),
    ] {
        let resp = patch_boot(&h, 0, boot.clone()).await;
        assert_eq!(resp.status(), 400, "{boot}");
    }
    assert!(h.emu.state(0).actions.is_empty());
}

#[tokio::test]
async fn if_match_guards_patch() {
    let h = start_default().await;
    let path = "/redfish/v1/Systems/sys-5";
    let resp = h.req(Method::GET, path).send().await.unwrap();
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    let body = json!({"Boot": {"BootSourceOverrideTarget": "Pxe"}});

    let resp = h
        .req(Method::PATCH, path)
        .header("If-Match", "\"not-the-etag\"")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 412);
    assert_eq!(h.emu.state(5).boot.target, "None");

    let resp = h
        .req(Method::PATCH, path)
        .header("If-Match", &etag)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let new_etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    assert_ne!(new_etag, etag);
    assert_eq!(h.emu.state(5).boot.target, "Pxe");
    assert_eq!(h.emu.state(5).etag, new_etag);

    // The old ETag is stale now.
    let resp = h
        .req(Method::PATCH, path)
        .header("If-Match", &etag)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 412);

    // Power changes move the ETag too.
    h.reset(5, "On").await;
    let resp = h.req(Method::GET, path).send().await.unwrap();
    assert_ne!(resp.headers()["etag"].to_str().unwrap(), new_etag);

    // No If-Match: accepted.
    let resp = h.req(Method::PATCH, path).json(&body).send().await.unwrap();
    assert!(resp.status().is_success());
}

#[tokio::test]
async fn virtual_media_insert_and_eject_through_manager_links() {
    let h = start_default().await;
    let sys = h.get_json("/redfish/v1/Systems/sys-6").await;
    let manager_path = sys["Links"]["ManagedBy"][0]["@odata.id"]
        .as_str()
        .unwrap()
        .to_owned();
    let manager = h.get_json(&manager_path).await;
    assert_eq!(manager["Id"], "bmc-sys-6");
    let vm = h
        .get_json(manager["VirtualMedia"]["@odata.id"].as_str().unwrap())
        .await;
    let cd_path = vm["Members"][0]["@odata.id"].as_str().unwrap().to_owned();
    assert!(cd_path.ends_with("/VirtualMedia/Cd"));
    let cd = h.get_json(&cd_path).await;
    assert_eq!(cd["Inserted"], false);
    assert_eq!(cd["MediaTypes"], json!(["CD", "DVD"]));
    let insert = cd["Actions"]["#VirtualMedia.InsertMedia"]["target"]
        .as_str()
        .unwrap()
        .to_owned();
    let eject = cd["Actions"]["#VirtualMedia.EjectMedia"]["target"]
        .as_str()
        .unwrap()
        .to_owned();

    // Missing Image is rejected.
    let resp = h
        .req(Method::POST, &insert)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);

    // Like real BMCs (and sushy-tools), the image is fetched first: nothing served, nothing
    // inserted, and the answer says why with sushy-tools' status codes.
    let images = ImageServer::start();
    let unserved = [
        (images.url("missing/deploy.iso"), 400, "got error 404"),
        (images.url("private/deploy.iso"), 400, "got error 401"),
        (
            "http://127.0.0.1:1/deploy.iso".to_string(),
            500,
            "Failed fetching image",
        ),
    ];
    for (url, status, says) in &unserved {
        let resp = h
            .req(Method::POST, &insert)
            .json(&json!({"Image": url, "Inserted": true, "WriteProtected": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), *status, "{url}");
        let body: Value = resp.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(url) && message.contains(says), "{message}");
        assert_eq!(h.get_json(&cd_path).await["Inserted"], false);
    }
    let fetched = images.requests();
    let image = &*images.url("deploy.iso");
    let resp = h
        .req(Method::POST, &insert)
        .json(&json!({"Image": image, "Inserted": true, "WriteProtected": true}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    assert_eq!(images.requests(), fetched + 1, "the image was fetched");
    let cd = h.get_json(&cd_path).await;
    assert_eq!(cd["Inserted"], true);
    assert_eq!(cd["Image"], image);
    let state = h.emu.state(6);
    assert!(state.virtual_media.inserted);
    assert_eq!(state.virtual_media.image.as_deref(), Some(image));

    let resp = h
        .req(Method::POST, &eject)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let cd = h.get_json(&cd_path).await;
    assert_eq!(cd["Inserted"], false);
    assert!(cd["Image"].is_null());
    let state = h.emu.state(6);
    assert!(!state.virtual_media.inserted);
    assert_eq!(
        state.actions,
        [
            "InsertMediaFailed",
            "InsertMediaFailed",
            "InsertMediaFailed",
            "InsertMedia",
            "EjectMedia"
        ]
    );
}

#[tokio::test]
async fn without_media_fetching_any_image_url_is_recorded() {
    let h = start(EmulatorConfig {
        systems: 1,
        fetch_media: false,
        ..EmulatorConfig::default()
    })
    .await;
    // TEST-NET: nothing answers there, and nothing tries.
    let image = "http://192.0.2.1/images/deploy.iso";
    let resp = h
        .req(
            Method::POST,
            "/redfish/v1/Managers/bmc-sys-0/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
        )
        .json(&json!({"Image": image}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let state = h.emu.state(0);
    assert!(state.virtual_media.inserted);
    assert_eq!(state.virtual_media.image.as_deref(), Some(image));
}

async fn members(h: &common::Harness, path: &str) -> Vec<Value> {
    let coll = h.get_json(path).await;
    let links = coll["Members"].as_array().unwrap().clone();
    assert_eq!(coll["Members@odata.count"], links.len());
    let mut out = Vec::new();
    for link in links {
        out.push(h.get_json(link["@odata.id"].as_str().unwrap()).await);
    }
    out
}

#[tokio::test]
async fn inventory_members_are_present_and_deterministic() {
    let h = start_default().await;
    let sys = h.get_json("/redfish/v1/Systems/sys-5").await;
    let link = |k: &str| sys[k]["@odata.id"].as_str().unwrap().to_owned();

    let cpus = members(&h, &link("Processors")).await;
    assert_eq!(cpus.len() as u64, sys["ProcessorSummary"]["Count"]);
    for cpu in &cpus {
        for k in ["TotalCores", "TotalThreads", "MaxSpeedMHz"] {
            assert!(cpu[k].as_u64().unwrap() > 0, "{k}");
        }
        for k in ["Model", "ProcessorArchitecture", "InstructionSet"] {
            assert!(cpu[k].is_string(), "{k}");
        }
    }

    let dimms = members(&h, &link("Memory")).await;
    let total_mib: u64 = dimms
        .iter()
        .map(|d| d["CapacityMiB"].as_u64().unwrap())
        .sum();
    assert_eq!(
        total_mib / 1024,
        sys["MemorySummary"]["TotalSystemMemoryGiB"]
    );
    for d in &dimms {
        assert!(d["MemoryDeviceType"].is_string());
        assert!(d["OperatingSpeedMhz"].as_u64().unwrap() > 0);
    }

    let nics = members(&h, &link("EthernetInterfaces")).await;
    assert!(!nics.is_empty());
    assert_eq!(nics[0]["MACAddress"], "52:54:00:00:00:05");
    for n in &nics {
        assert!(n["SpeedMbps"].as_u64().unwrap() > 0);
        assert!(n["LinkStatus"].is_string());
    }

    let storages = members(&h, &link("Storage")).await;
    assert_eq!(storages.len(), 1);
    assert_eq!(
        storages[0]["@odata.id"],
        "/redfish/v1/Systems/sys-5/Storage/1"
    );
    let drive_links = storages[0]["Drives"].as_array().unwrap();
    assert!(!drive_links.is_empty());
    for l in drive_links {
        let d = h.get_json(l["@odata.id"].as_str().unwrap()).await;
        assert!(d["CapacityBytes"].as_u64().unwrap() > 0);
        assert!(["SSD", "HDD"].contains(&d["MediaType"].as_str().unwrap()));
        for k in ["Model", "SerialNumber", "Protocol"] {
            assert!(d[k].is_string(), "{k}");
        }
    }

    // Inventory varies across systems but never for the same system.
    let other = h.get_json("/redfish/v1/Systems/sys-6").await;
    assert_ne!(sys["SerialNumber"], other["SerialNumber"]);
    assert_ne!(
        sys["ProcessorSummary"]["Model"],
        other["ProcessorSummary"]["Model"]
    );
    let nics6 = members(&h, "/redfish/v1/Systems/sys-6/EthernetInterfaces").await;
    assert_ne!(nics[0]["MACAddress"], nics6[0]["MACAddress"]);
    assert_eq!(sys, h.get_json("/redfish/v1/Systems/sys-5").await);
}

#[tokio::test]
async fn managers_collection_lists_one_bmc_per_system() {
    let h = start(EmulatorConfig {
        systems: 3,
        ..EmulatorConfig::default()
    })
    .await;
    let managers = h.get_json("/redfish/v1/Managers").await;
    assert_eq!(managers["Members@odata.count"], 3);
    let m = h.get_json("/redfish/v1/Managers/bmc-sys-2").await;
    assert_eq!(
        m["Links"]["ManagerForServers"][0]["@odata.id"],
        "/redfish/v1/Systems/sys-2"
    );
    assert_eq!(h.emu.system_id(2), "sys-2");
    assert_eq!(h.emu.system_url(2), h.url("/redfish/v1/Systems/sys-2"));
}
