//! Shared helpers for the emulator's integration tests.

#![allow(dead_code)]

use std::time::Duration;

use ferrometal_emulator::{Emulator, EmulatorConfig};
use reqwest::{Client, Method, RequestBuilder};
use serde_json::Value;

pub struct Harness {
    pub emu: Emulator,
    pub http: Client,
}

pub async fn start(config: EmulatorConfig) -> Harness {
    let emu = Emulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("emulator starts");
    let http = Client::builder()
        // Only a safety net so a broken test fails instead of hanging.
        .timeout(Duration::from_secs(30))
        // The redirect fault's 307s are what the tests look at.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Harness { emu, http }
}

pub async fn start_default() -> Harness {
    start(EmulatorConfig::default()).await
}

impl Harness {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.emu.base_url(), path)
    }

    /// A request with the default Basic credentials.
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, self.url(path))
            .basic_auth("admin", Some("password"))
    }

    pub async fn get_json(&self, path: &str) -> Value {
        let resp = self.req(Method::GET, path).send().await.unwrap();
        assert_eq!(resp.status(), 200, "GET {path}");
        resp.json().await.unwrap()
    }

    pub async fn reset(&self, index: usize, reset_type: &str) -> reqwest::Response {
        self.req(
            Method::POST,
            &format!("/redfish/v1/Systems/sys-{index}/Actions/ComputerSystem.Reset"),
        )
        .json(&serde_json::json!({ "ResetType": reset_type }))
        .send()
        .await
        .unwrap()
    }

    pub async fn power_state(&self, index: usize) -> String {
        self.get_json(&format!("/redfish/v1/Systems/sys-{index}"))
            .await["PowerState"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Polls the Redfish PowerState until it equals `want` (bounded: fails
    /// after ~10 s rather than hanging).
    pub async fn wait_power(&self, index: usize, want: &str) {
        for _ in 0..1000 {
            if self.power_state(index).await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("sys-{index} never reached PowerState {want}");
    }
}
