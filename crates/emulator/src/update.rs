//! Firmware updates: `UpdateService.SimpleUpdate` and the Redfish tasks that follow them.
//!
//! `Targets` names the system (its BIOS, as sushy-tools takes it), its manager (the BMC's
//! own firmware) or its network adapter (the NIC's firmware). The update runs as a task that completes `update_delay` after it was
//! accepted, settled when it is read, as power transitions are. The new version is the image
//! file's name without its extension (`http://fw/bios-2.1.0.bin` → `bios-2.1.0`), shown as the
//! system's `BiosVersion`, the manager's `FirmwareVersion` or the adapter's
//! `FirmwarePackageVersion`. An image whose file name contains
//! `corrupt` fails: the task ends in `Exception` with a message naming the image, and the
//! version stays.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::inventory::odata;
use crate::state::{SystemState, parse_system_id};

/// The firmware an update replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Bios,
    Bmc,
    /// The system's network adapter (`chassis::ADAPTER`).
    Nic,
}

impl Component {
    fn as_str(self) -> &'static str {
        match self {
            Component::Bios => "Bios",
            Component::Bmc => "Bmc",
            Component::Nic => "Nic",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskState {
    Running,
    Completed,
    Exception,
}

/// A finished update's effect on a system.
pub struct Flash {
    pub system: usize,
    pub component: Component,
    pub version: String,
}

impl Flash {
    pub fn apply(self, s: &mut SystemState) {
        match self.component {
            Component::Bios => s.bios_version = self.version,
            Component::Bmc => s.bmc_version = self.version,
            Component::Nic => s.nic_version = self.version,
        }
        s.touch();
    }
}

pub struct Task {
    id: u64,
    system: usize,
    component: Component,
    image: String,
    due: Instant,
    state: TaskState,
    message: String,
}

/// Tasks kept for reading; the oldest go past this many.
const KEPT_TASKS: usize = 256;

#[derive(Default)]
pub struct Tasks {
    next: u64,
    list: Vec<Task>,
}

/// The version an image installs: its file name without the extension.
fn version_of(image: &str) -> String {
    let file = image
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    match file.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => file.to_string(),
    }
}

/// The system and component one `Targets` entry names.
pub fn target(path: &str, count: usize) -> Option<(usize, Component)> {
    let path = path.trim_end_matches('/');
    if let Some(id) = path.strip_prefix("/redfish/v1/Systems/") {
        return Some((parse_system_id(id, count)?, Component::Bios));
    }
    if let Some(rest) = path.strip_prefix("/redfish/v1/Chassis/chassis-") {
        let (id, adapter) = rest.split_once("/NetworkAdapters/")?;
        return (adapter == crate::chassis::ADAPTER)
            .then(|| parse_system_id(id, count))
            .flatten()
            .map(|index| (index, Component::Nic));
    }
    let id = path.strip_prefix("/redfish/v1/Managers/bmc-")?;
    Some((parse_system_id(id, count)?, Component::Bmc))
}

impl Tasks {
    /// Accepts an update; the caller records it on the system. Returns the task's location
    /// and its document as just started.
    pub fn start(
        &mut self,
        system: usize,
        component: Component,
        image: &str,
        delay: Duration,
    ) -> (String, Value) {
        self.next += 1;
        if self.list.len() == KEPT_TASKS {
            self.list.remove(0);
        }
        self.list.push(Task {
            id: self.next,
            system,
            component,
            image: image.to_string(),
            due: Instant::now() + delay,
            state: TaskState::Running,
            message: String::new(),
        });
        let task = &self.list[self.list.len() - 1];
        (task_path(task.id), task_doc(task))
    }

    /// Ends the task if it is due. Returns its document, and the version to install on a
    /// system's component when it ended now with success.
    pub fn settle(&mut self, id: u64, now: Instant) -> Option<(Value, Option<Flash>)> {
        let task = self.list.iter_mut().find(|t| t.id == id)?;
        let mut flash = None;
        if task.state == TaskState::Running && now >= task.due {
            let version = version_of(&task.image);
            if version.contains("corrupt") {
                task.state = TaskState::Exception;
                task.message = format!(
                    "The firmware image {} failed verification; nothing was flashed.",
                    task.image
                );
            } else {
                task.state = TaskState::Completed;
                task.message = format!("The firmware image {} was flashed.", task.image);
                flash = Some(Flash {
                    system: task.system,
                    component: task.component,
                    version,
                });
            }
        }
        Some((task_doc(task), flash))
    }

    pub fn ids(&self) -> Vec<u64> {
        self.list.iter().map(|t| t.id).collect()
    }
}

fn task_path(id: u64) -> String {
    format!("/redfish/v1/TaskService/Tasks/{id}")
}

pub fn task_doc(task: &Task) -> Value {
    let (state, status, percent) = match task.state {
        TaskState::Running => ("Running", "OK", 50),
        TaskState::Completed => ("Completed", "OK", 100),
        TaskState::Exception => ("Exception", "Critical", 100),
    };
    let messages: Vec<Value> = if task.message.is_empty() {
        Vec::new()
    } else {
        let id = match task.state {
            TaskState::Exception => "Update.1.0.VerificationFailed",
            _ => "Update.1.0.UpdateSuccessful",
        };
        vec![json!({"MessageId": id, "Message": task.message})]
    };
    json!({
        "@odata.type": "#Task.v1_7_0.Task",
        "@odata.id": task_path(task.id),
        "Id": task.id.to_string(),
        "Name": format!("Firmware update of {} ({})", task.component.as_str(), task.image),
        "TaskState": state,
        "TaskStatus": status,
        "PercentComplete": percent,
        "Messages": messages,
        "Payload": {
            "HttpOperation": "POST",
            "TargetUri": "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
            "JsonBody": json!({"ImageURI": task.image}).to_string(),
        },
    })
}

pub fn update_service_doc() -> Value {
    json!({
        "@odata.type": "#UpdateService.v1_11_0.UpdateService",
        "@odata.id": "/redfish/v1/UpdateService",
        "Id": "UpdateService",
        "Name": "Update Service",
        "ServiceEnabled": true,
        "Actions": {
            "#UpdateService.SimpleUpdate": {
                "target": "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"],
            },
        },
    })
}

pub fn task_service_doc() -> Value {
    json!({
        "@odata.type": "#TaskService.v1_2_0.TaskService",
        "@odata.id": "/redfish/v1/TaskService",
        "Id": "TaskService",
        "Name": "Task Service",
        "ServiceEnabled": true,
        "Tasks": odata("/redfish/v1/TaskService/Tasks"),
    })
}

pub fn tasks_collection(ids: &[u64]) -> Value {
    let members: Vec<Value> = ids.iter().map(|id| odata(&task_path(*id))).collect();
    json!({
        "@odata.type": "#TaskCollection.TaskCollection",
        "@odata.id": "/redfish/v1/TaskService/Tasks",
        "Name": "Task Collection",
        "Members@odata.count": members.len(),
        "Members": members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_versions() {
        assert_eq!(
            target("/redfish/v1/Systems/sys-2", 3),
            Some((2, Component::Bios))
        );
        assert_eq!(
            target("/redfish/v1/Managers/bmc-sys-0/", 3),
            Some((0, Component::Bmc))
        );
        assert_eq!(target("/redfish/v1/Systems/sys-3", 3), None);
        assert_eq!(target("/redfish/v1/Chassis/1", 3), None);
        assert_eq!(
            target(
                "/redfish/v1/Chassis/chassis-sys-1/NetworkAdapters/NIC.Slot.1",
                3
            ),
            Some((1, Component::Nic))
        );
        assert_eq!(
            target(
                "/redfish/v1/Chassis/chassis-sys-1/NetworkAdapters/NIC.Slot.9",
                3
            ),
            None
        );
        assert_eq!(target("/redfish/v1/Chassis/chassis-sys-1", 3), None);
        assert_eq!(version_of("http://fw/x/bios-2.1.0.bin?sig=1"), "bios-2.1.0");
        assert_eq!(version_of("http://fw/bmc"), "bmc");
    }
}
