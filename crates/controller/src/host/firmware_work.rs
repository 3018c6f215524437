//! What a host's HostFirmwareSettings and HostUpdatePolicy (both named after the host, in its
//! namespace) ask of it, read from the caches the host controller keeps of them.

use ferrometal_api::BareMetalHost;
use ferrometal_api::firmware::{HostFirmwareSettings, HostUpdatePolicy, VALID, wanted_text};
use ferrometal_provisioner::FirmwareChanges;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::decide::FirmwareWork;

/// The settings to change: only from an object whose wanted settings were validated, for its
/// current generation, against a read of the BMC; only those the BMC does not report already.
pub fn settings_changes(hfs: &HostFirmwareSettings) -> FirmwareChanges {
    let Some(status) = hfs.status.as_ref().filter(|s| !s.settings.is_empty()) else {
        return FirmwareChanges::default();
    };
    let validated = status.conditions.iter().any(|c| {
        c.type_ == VALID && c.status == "True" && c.observed_generation == hfs.metadata.generation
    });
    if !validated {
        return FirmwareChanges::default();
    }
    let settings = hfs
        .spec
        .settings
        .iter()
        .map(|(name, value)| (name.clone(), wanted_text(value)))
        .filter(|(name, value)| status.settings.get(name) != Some(value))
        .collect();
    FirmwareChanges { settings }
}

pub fn firmware_work(
    host: &BareMetalHost,
    settings: &Store<HostFirmwareSettings>,
    policies: &Store<HostUpdatePolicy>,
) -> FirmwareWork {
    let ns = host.namespace().unwrap_or_default();
    let name = host.name_any();
    let hfs = settings.get(&ObjectRef::new(&name).within(&ns));
    let policy = policies.get(&ObjectRef::new(&name).within(&ns));
    FirmwareWork {
        changes: hfs.as_deref().map(settings_changes).unwrap_or_default(),
        read: hfs
            .as_deref()
            .and_then(|h| h.status.as_ref())
            .and_then(|s| s.last_updated.clone()),
        on_reboot: policy.is_some_and(|p| p.spec.firmware_settings == "onReboot"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::Condition;
    use ferrometal_api::firmware::{HostFirmwareSettingsSpec, HostFirmwareSettingsStatus};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn hfs(valid: &str, observed: i64) -> HostFirmwareSettings {
        let mut h = HostFirmwareSettings::new(
            "h",
            HostFirmwareSettingsSpec {
                settings: [
                    ("Cores".to_string(), IntOrString::Int(16)),
                    ("Mode".to_string(), IntOrString::String("Uefi".into())),
                ]
                .into(),
            },
        );
        h.metadata.generation = Some(2);
        h.status = Some(HostFirmwareSettingsStatus {
            settings: [
                ("Cores".to_string(), "8".to_string()),
                ("Mode".to_string(), "Uefi".to_string()),
            ]
            .into(),
            conditions: vec![Condition {
                type_: VALID.into(),
                status: valid.into(),
                reason: "Success".into(),
                message: String::new(),
                last_transition_time: None,
                observed_generation: Some(observed),
            }],
            ..Default::default()
        });
        h
    }

    #[test]
    fn only_validated_differing_settings_are_changed() {
        let changes = settings_changes(&hfs("True", 2));
        assert_eq!(
            changes.settings,
            [("Cores".to_string(), "16".to_string())].into()
        );
        // Not valid, or validated for an older generation: nothing is changed.
        assert!(settings_changes(&hfs("False", 2)).is_empty());
        assert!(settings_changes(&hfs("True", 1)).is_empty());
        // Never read from the BMC: nothing to compare with, nothing is changed.
        let mut unread = hfs("True", 2);
        unread.status.as_mut().unwrap().settings.clear();
        assert!(settings_changes(&unread).is_empty());
    }
}
