//! Firmware updates over Redfish: `UpdateService.SimpleUpdate` with the image's URL and the
//! resource to flash (the system for its BIOS, its manager for the BMC's own firmware, as
//! Ironic's redfish firmware interface and sushy-tools name them; the network adapter for a
//! NIC's), then the task it starts.

use reqwest::Method;
use reqwest::header::LOCATION;
use serde_json::{Value, json};

use super::client::RedfishBmc;
use super::transport::SERVICE_ROOT;
use crate::error::BmcError;
use crate::types::{FirmwareComponent, UpdateState};

/// Messages of a task are bounded, as everything a BMC sends.
const MAX_MESSAGES: usize = 8;

impl RedfishBmc {
    fn protocol_error(&self, operation: &str, reason: &str) -> BmcError {
        BmcError::Protocol {
            bmc: self.transport.endpoint.clone(),
            operation: operation.into(),
            reason: reason.into(),
        }
    }

    /// Starts the update; returns the task to follow.
    pub(super) async fn simple_update(
        &self,
        component: FirmwareComponent,
        image: &str,
    ) -> Result<String, BmcError> {
        let root = self.transport.get(SERVICE_ROOT).await?;
        let service = root["UpdateService"]["@odata.id"]
            .as_str()
            .ok_or_else(|| self.unsupported("firmware updates (no UpdateService)"))?;
        let doc = self.transport.get(service).await?;
        let action = doc["Actions"]["#UpdateService.SimpleUpdate"]["target"]
            .as_str()
            .ok_or_else(|| self.unsupported("firmware updates (no UpdateService.SimpleUpdate)"))?;
        let system = self.get_system().await?;
        let linked = |what: &str, path: Option<&str>| {
            path.map(String::from).ok_or_else(|| {
                self.unsupported(&format!(
                    "{} firmware updates (the system links no {what})",
                    component.name()
                ))
            })
        };
        let target = match &component {
            FirmwareComponent::Bios => linked("ID", system["@odata.id"].as_str())?,
            FirmwareComponent::Bmc => linked(
                "manager",
                system["Links"]["ManagedBy"]
                    .as_array()
                    .and_then(|m| m.first())
                    .and_then(|m| m["@odata.id"].as_str()),
            )?,
            FirmwareComponent::Nic(id) => self.adapter_path(&system, id).await?,
        };
        let protocol = if image.starts_with("https://") {
            "HTTPS"
        } else {
            "HTTP"
        };
        let body = json!({"ImageURI": image, "Targets": [target], "TransferProtocol": protocol});
        let answer = self
            .transport
            .request(Method::POST, action, Some(&body), None)
            .await?;
        let location = answer
            .headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        location
            .or_else(|| answer.body["@odata.id"].as_str().map(String::from))
            .ok_or_else(|| {
                self.protocol_error(
                    "POST UpdateService.SimpleUpdate",
                    "the update was accepted but no task was named to follow it",
                )
            })
    }

    pub(super) async fn read_task(&self, task: &str) -> Result<UpdateState, BmcError> {
        let doc = self.transport.get(task).await?;
        Ok(task_state(&doc))
    }
}

/// A Redfish task as an update's state; the failure message from its `Messages`.
fn task_state(doc: &Value) -> UpdateState {
    let messages = || {
        doc["Messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .take(MAX_MESSAGES)
                    .filter_map(|m| m["Message"].as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default()
    };
    match doc["TaskState"].as_str().unwrap_or("Running") {
        "Completed" if doc["TaskStatus"].as_str() != Some("Critical") => UpdateState::Completed,
        "Completed" | "Exception" | "Killed" | "Cancelled" => {
            let state = doc["TaskState"].as_str().unwrap_or_default();
            let m = messages();
            UpdateState::Failed(if m.is_empty() {
                format!("the update task ended {state}")
            } else {
                m
            })
        }
        _ => UpdateState::Running {
            percent: doc["PercentComplete"].as_u64().map(|p| p.min(100) as u8),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_read_as_redfish_writes_them() {
        assert_eq!(
            task_state(&json!({"TaskState": "Completed", "TaskStatus": "OK"})),
            UpdateState::Completed
        );
        assert_eq!(
            task_state(&json!({"TaskState": "Running", "PercentComplete": 40})),
            UpdateState::Running { percent: Some(40) }
        );
        assert_eq!(
            task_state(&json!({"TaskState": "Exception",
                "Messages": [{"Message": "image verification failed"}]})),
            UpdateState::Failed("image verification failed".into())
        );
        assert_eq!(
            task_state(&json!({"TaskState": "Killed"})),
            UpdateState::Failed("the update task ended Killed".into())
        );
    }
}
