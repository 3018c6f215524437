//! Conditions, for every status here: setting one (hosts, BMCJobs), building one (claims,
//! remote claims), finding one; and a host's conditions, computed from the rest of its status
//! exactly as metal3's baremetal-operator computes them: Manageable, AvailableForProvisioning,
//! Provisioned, Ready, Progressing and Healthy, with metal3's reasons. Pure, so the whole
//! table is tested below.

use ferrometal_api::spec_fault::SpecFault;
use ferrometal_api::{
    BareMetalHostSpec, BareMetalHostStatus, Condition, HardwareDetails, OperationalStatus,
    ProvisioningState,
};

/// Sets condition `type_`; `lastTransitionTime` moves only when the status flips.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
    generation: Option<i64>,
) {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.status = status.into();
                c.last_transition_time = Some(now.into());
            }
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Some(now.into()),
            observed_generation: generation,
        }),
    }
}

/// The condition of type `type_`, if set.
pub fn condition<'c>(conditions: &'c [Condition], type_: &str) -> Option<&'c Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// A True or False condition without transition time or generation: a claim's status fills
/// those in against its previous status.
pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: None,
        observed_generation: None,
    }
}

/// The time a claim's status is written at (transition times, `lastUpdated`): RFC 3339, to the
/// second.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

// ---- a host's conditions, as metal3 computes them ----

pub const MANAGEABLE: &str = "Manageable";
pub const AVAILABLE_FOR_PROVISIONING: &str = "AvailableForProvisioning";
pub const PROVISIONED: &str = "Provisioned";
pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const HEALTHY: &str = "Healthy";

/// ferrometal's own condition: present (True) while the spec holds metal3 fields no
/// provisioner here acts on; they are kept in the object, never pruned, and named here.
pub const FIELDS_NOT_ACTED_ON: &str = "ferrometal.io/FieldsNotActedOn";

/// ferrometal's own condition: True while the host waits on something retrying cannot fix:
/// the provisioner cannot do what the spec asks, or is not configured for it. The message
/// names what to change (a flag, a field); no backoff loop runs meanwhile.
pub const BLOCKED: &str = "ferrometal.io/Blocked";

/// ferrometal's own condition: True when the last inspection learned less than a full
/// inventory; what the BMC did report is recorded and the host goes on (as Ironic does).
pub const INSPECTION_INCOMPLETE: &str = "ferrometal.io/InspectionIncomplete";

/// The parts of an inventory a scheduler would look for that inspection did not find, as one
/// message; `None` when nothing is missing.
pub fn inspection_gaps(hw: &HardwareDetails) -> Option<String> {
    let mut missing = Vec::new();
    if hw.cpu.as_ref().is_none_or(|c| c.count <= 0) {
        missing.push("processors");
    }
    if hw.ram_mebibytes <= 0 {
        missing.push("memory");
    }
    if hw.nics.is_empty() {
        missing.push("network interfaces");
    }
    if hw.storage.is_empty() {
        missing.push("disks");
    }
    (!missing.is_empty()).then(|| {
        format!(
            "inspection found no {}; recorded what the BMC reports (counts 0) and went on",
            missing.join(", no ")
        )
    })
}

/// Sets or removes [`INSPECTION_INCOMPLETE`] after an inspection; returns the message when it
/// is set (for an Event).
pub fn update_inspection(
    st: &mut BareMetalHostStatus,
    hw: Option<&HardwareDetails>,
    generation: Option<i64>,
    now: &str,
) -> Option<String> {
    match hw.and_then(inspection_gaps) {
        Some(m) => {
            set_condition(
                &mut st.conditions,
                INSPECTION_INCOMPLETE,
                T,
                "PartsNotReported",
                &m,
                now,
                generation,
            );
            Some(m)
        }
        None => {
            st.conditions.retain(|c| c.type_ != INSPECTION_INCOMPLETE);
            None
        }
    }
}

/// Sets [`BLOCKED`] with what is needed.
pub fn set_blocked(
    st: &mut BareMetalHostStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
) {
    set_condition(
        &mut st.conditions,
        BLOCKED,
        T,
        reason,
        message,
        now,
        generation,
    );
}

pub fn clear_blocked(st: &mut BareMetalHostStatus) {
    st.conditions.retain(|c| c.type_ != BLOCKED);
}

/// ferrometal's own condition: True while the host's error is caused by its spec as written
/// (reason: which field and how, see [`SpecFault`]; message: the `errorMessage` it classifies).
pub use ferrometal_api::spec_fault::CONDITION as SPEC_ERROR;

/// Records which field of the spec the host's current error is about (`None`: the error is
/// not the spec's, or there is none). Call after `errorMessage` is set.
pub fn set_spec_fault(
    st: &mut BareMetalHostStatus,
    fault: Option<SpecFault>,
    generation: Option<i64>,
    now: &str,
) {
    match fault {
        Some(f) => {
            let message = st.error_message.clone();
            set_condition(
                &mut st.conditions,
                SPEC_ERROR,
                T,
                f.reason(),
                &message,
                now,
                generation,
            );
        }
        None => st.conditions.retain(|c| c.type_ != SPEC_ERROR),
    }
}

/// The field of the spec the host's current error is about; `None` when the host has no
/// error, or one that is not the spec's, or the condition classifies another message (written
/// by an older reconcile, or by hand).
pub fn spec_fault(st: &BareMetalHostStatus) -> Option<SpecFault> {
    st.error_type?;
    let c = condition(&st.conditions, SPEC_ERROR)?;
    if c.status != T || c.message != st.error_message {
        return None;
    }
    SpecFault::from_reason(&c.reason)
}

/// What in `spec` is kept but not acted on, as one message; `None` when everything is.
/// `builds_software_raid`: the provisioner builds `softwareRAIDVolumes` (its deploy agent, or
/// Ironic's, does).
pub fn not_acted_on(spec: &BareMetalHostSpec, builds_software_raid: bool) -> Option<String> {
    let mut out = Vec::new();
    if !builds_software_raid
        && spec
            .raid
            .as_ref()
            .and_then(|r| r.software_raid_volumes.as_ref())
            .is_some_and(|v| !v.is_empty())
    {
        out.push("spec.raid.softwareRAIDVolumes: software RAID is built by a deploy agent, and this provisioner has none configured");
    }
    if spec.firmware.as_ref().is_some_and(|f| f.is_requested()) {
        out.push("spec.firmware: deprecated by metal3 (no driver applies it); not applied");
    }
    if !spec.taints.is_empty() {
        out.push("spec.taints: never implemented by metal3; kept, not applied");
    }
    if !spec.network_interfaces.is_empty() {
        out.push("spec.networkInterfaces: kept for network controllers; no switch is configured");
    }
    if spec
        .image
        .as_ref()
        .is_some_and(|i| i.oci_auth_secret_name.is_some())
    {
        out.push(
            "spec.image.ociAuthSecretName: oci:// images are not deployed by these provisioners",
        );
    }
    (!out.is_empty()).then(|| out.join("; "))
}

/// Sets or removes [`FIELDS_NOT_ACTED_ON`]; returns the message when it changed (for an Event).
pub fn update_not_acted_on(
    st: &mut BareMetalHostStatus,
    spec: &BareMetalHostSpec,
    builds_software_raid: bool,
    generation: Option<i64>,
    now: &str,
) -> Option<String> {
    let before = st
        .conditions
        .iter()
        .find(|c| c.type_ == FIELDS_NOT_ACTED_ON)
        .map(|c| c.message.clone());
    let now_msg = not_acted_on(spec, builds_software_raid);
    match &now_msg {
        Some(m) => set_condition(
            &mut st.conditions,
            FIELDS_NOT_ACTED_ON,
            T,
            "FieldsNotActedOn",
            m,
            now,
            generation,
        ),
        None => st.conditions.retain(|c| c.type_ != FIELDS_NOT_ACTED_ON),
    }
    now_msg.filter(|m| before.as_deref() != Some(m.as_str()))
}

/// One condition's value: (status, reason). metal3 sets no message on these.
type Value = (&'static str, &'static str);

const T: &str = "True";
const F: &str = "False";
const U: &str = "Unknown";

/// Five of metal3's six conditions for a status, in metal3's order (Healthy is set in `update`).
pub fn compute(st: &BareMetalHostStatus) -> [(&'static str, Value); 5] {
    use ProvisioningState as S;
    let progressing = |reason| -> [Value; 5] {
        [
            (T, "Manageable"),
            (F, "NotAvailable"),
            (F, "NotProvisioned"),
            (F, "NotProvisioned"),
            (T, reason),
        ]
    };
    let mut v: [Value; 5] = match st.provisioning.state {
        S::None | S::Unmanaged => [
            (F, "NotManaged"),
            (F, "NotAvailable"),
            (F, "NotProvisioned"),
            (F, "NotProvisioned"),
            (F, "NotProgressing"),
        ],
        S::Registering => {
            let manageable = if st.operational_status == OperationalStatus::Error {
                "RegistrationFailed"
            } else {
                "Registering"
            };
            [
                (F, manageable),
                (F, "NotAvailable"),
                (F, "NotProvisioned"),
                (F, "NotProvisioned"),
                (T, "Registering"),
            ]
        }
        S::Inspecting | S::MatchProfile => progressing("Inspecting"),
        S::Preparing => progressing("Preparing"),
        S::Ready | S::Available => [
            (T, "Manageable"),
            (T, "Available"),
            (F, "NotProvisioned"),
            (F, "NotProvisioned"),
            (F, "NotProgressing"),
        ],
        S::Provisioning => progressing("Provisioning"),
        S::Provisioned | S::ExternallyProvisioned => [
            (T, "Manageable"),
            (F, "NotAvailable"),
            (T, "Provisioned"),
            (T, "Provisioned"),
            (F, "NotProgressing"),
        ],
        S::Deprovisioning => progressing("Deprovisioning"),
        S::PoweringOffBeforeDelete => progressing("PoweringOffBeforeDelete"),
        S::Deleting => progressing("Deleting"),
    };
    // The operational status overrides Ready (and Progressing when detached), after the table.
    match st.operational_status {
        OperationalStatus::Error => v[3] = (F, "Error"),
        OperationalStatus::Servicing => v[3] = (F, "Servicing"),
        OperationalStatus::Detached => {
            v[3] = (F, "Detached");
            v[4] = (F, "Detached");
        }
        OperationalStatus::Ok
        | OperationalStatus::Unknown
        | OperationalStatus::Discovered
        | OperationalStatus::Delayed => {}
    }
    [
        (MANAGEABLE, v[0]),
        (AVAILABLE_FOR_PROVISIONING, v[1]),
        (PROVISIONED, v[2]),
        (READY, v[3]),
        (PROGRESSING, v[4]),
    ]
}

/// Sets the conditions on `st`; `lastTransitionTime` moves only when a status flips. Healthy
/// comes from the provisioner's health report in metal3 (Ironic's node health); no backend
/// reports one here, so it is Unknown, set once and never overwritten.
pub fn update(st: &mut BareMetalHostStatus, generation: Option<i64>, now: &str) {
    for (type_, (status, reason)) in compute(st) {
        set_condition(
            &mut st.conditions,
            type_,
            status,
            reason,
            "",
            now,
            generation,
        );
    }
    if !st.conditions.iter().any(|c| c.type_ == HEALTHY) {
        set_condition(
            &mut st.conditions,
            HEALTHY,
            U,
            "Unknown",
            "",
            now,
            generation,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProvisioningState as S;

    fn status(state: S, op: OperationalStatus) -> BareMetalHostStatus {
        let mut st = BareMetalHostStatus::default();
        st.provisioning.state = state;
        st.operational_status = op;
        st
    }

    /// metal3's table: state → Manageable, AvailableForProvisioning, Provisioned, Ready,
    /// Progressing (status letter and reason).
    #[test]
    fn every_state_as_metal3() {
        use OperationalStatus::Ok;
        let table: &[(S, [&str; 5])] = &[
            (
                S::None,
                [
                    "F NotManaged",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "F NotProgressing",
                ],
            ),
            (
                S::Unmanaged,
                [
                    "F NotManaged",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "F NotProgressing",
                ],
            ),
            (
                S::Registering,
                [
                    "F Registering",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T Registering",
                ],
            ),
            (
                S::Inspecting,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T Inspecting",
                ],
            ),
            (
                S::MatchProfile,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T Inspecting",
                ],
            ),
            (
                S::Preparing,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T Preparing",
                ],
            ),
            (
                S::Available,
                [
                    "T Manageable",
                    "T Available",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "F NotProgressing",
                ],
            ),
            (
                S::Ready,
                [
                    "T Manageable",
                    "T Available",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "F NotProgressing",
                ],
            ),
            (
                S::Provisioning,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T Provisioning",
                ],
            ),
            (
                S::Provisioned,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "T Provisioned",
                    "T Provisioned",
                    "F NotProgressing",
                ],
            ),
            (
                S::ExternallyProvisioned,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "T Provisioned",
                    "T Provisioned",
                    "F NotProgressing",
                ],
            ),
            (
                S::Deprovisioning,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T Deprovisioning",
                ],
            ),
            (
                S::PoweringOffBeforeDelete,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T PoweringOffBeforeDelete",
                ],
            ),
            (
                S::Deleting,
                [
                    "T Manageable",
                    "F NotAvailable",
                    "F NotProvisioned",
                    "F NotProvisioned",
                    "T Deleting",
                ],
            ),
        ];
        assert_eq!(table.len(), S::ALL.len(), "every state is in the table");
        for (state, want) in table {
            let got: Vec<String> = compute(&status(*state, Ok))
                .iter()
                .map(|(_, (s, r))| format!("{} {r}", &s[..1]))
                .collect();
            assert_eq!(got, want, "{state}");
        }
    }

    #[test]
    fn operational_status_overrides_ready() {
        use OperationalStatus as O;
        let ready = |state, op| compute(&status(state, op))[3].1;
        assert_eq!(ready(S::Provisioned, O::Error), (F, "Error"));
        assert_eq!(ready(S::Provisioned, O::Servicing), (F, "Servicing"));
        assert_eq!(ready(S::Provisioned, O::Detached), (F, "Detached"));
        assert_eq!(ready(S::Provisioned, O::Delayed), (T, "Provisioned"));
        // An available host in error stays available for provisioning (as metal3).
        let c = compute(&status(S::Available, O::Error));
        assert_eq!(c[1].1, (T, "Available"));
        let detached = compute(&status(S::Provisioned, O::Detached));
        assert_eq!(detached[4].1, (F, "Detached"));
        assert_eq!(
            compute(&status(S::Registering, O::Error))[0].1,
            (F, "RegistrationFailed")
        );
    }

    #[test]
    fn fields_not_acted_on_are_named_once_and_cleared() {
        let mut spec = BareMetalHostSpec::default();
        let mut st = status(S::Available, OperationalStatus::Ok);
        assert_eq!(update_not_acted_on(&mut st, &spec, false, None, "t"), None);
        spec.taints.push(Default::default());
        spec.raid = Some(ferrometal_api::RaidConfig {
            hardware_raid_volumes: None,
            software_raid_volumes: Some(vec![ferrometal_api::SoftwareRaidVolume {
                level: "1".into(),
                ..Default::default()
            }]),
        });
        let first = update_not_acted_on(&mut st, &spec, false, None, "t").unwrap();
        assert!(
            first.contains("spec.raid.softwareRAIDVolumes") && first.contains("spec.taints"),
            "{first}"
        );
        assert_eq!(
            update_not_acted_on(&mut st, &spec, false, None, "t"),
            None,
            "no second Event"
        );
        let c = st
            .conditions
            .iter()
            .find(|c| c.type_ == FIELDS_NOT_ACTED_ON)
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.message.as_str()),
            ("True", first.as_str())
        );
        // A provisioner whose deploy agent builds software RAID acts on it.
        let built = update_not_acted_on(&mut st, &spec, true, None, "t").unwrap();
        assert!(!built.contains("spec.raid"), "{built}");
        spec = BareMetalHostSpec::default();
        update_not_acted_on(&mut st, &spec, true, None, "t");
        assert!(st.conditions.is_empty());
    }

    #[test]
    fn update_sets_six_and_keeps_transition_times() {
        let mut st = status(S::Available, OperationalStatus::Ok);
        update(&mut st, Some(1), "t1");
        assert_eq!(st.conditions.len(), 6);
        let ready = |st: &BareMetalHostStatus| {
            st.conditions
                .iter()
                .find(|c| c.type_ == READY)
                .cloned()
                .unwrap()
        };
        assert_eq!(ready(&st).status, "False");
        st.provisioning.state = S::Provisioning;
        update(&mut st, Some(1), "t2");
        assert_eq!(ready(&st).last_transition_time.as_deref(), Some("t1"));
        st.provisioning.state = S::Provisioned;
        update(&mut st, Some(2), "t3");
        assert_eq!(ready(&st).status, "True");
        assert_eq!(ready(&st).last_transition_time.as_deref(), Some("t3"));
        assert_eq!(ready(&st).observed_generation, Some(2));
        let healthy = st.conditions.iter().find(|c| c.type_ == HEALTHY).unwrap();
        assert_eq!(
            (healthy.status.as_str(), healthy.reason.as_str()),
            ("Unknown", "Unknown")
        );
    }

    #[test]
    fn condition_transition_time_moves_only_on_flip() {
        let mut c = Vec::new();
        set_condition(&mut c, "Ready", "False", "Registering", "", "t1", Some(1));
        set_condition(&mut c, "Ready", "False", "Inspecting", "", "t2", Some(1));
        assert_eq!(c[0].last_transition_time.as_deref(), Some("t1"));
        set_condition(&mut c, "Ready", "True", "Available", "", "t3", Some(1));
        assert_eq!(c[0].last_transition_time.as_deref(), Some("t3"));
        assert_eq!(c[0].status, "True");
    }
}
