//! A VM claim's status, in the same shape as a bare-metal claim's (Associated, Synchronized,
//! Provisioned, Ready), in words that name no infrastructure: no libvirt URI, host, pool or
//! domain. Pure.

use ferrometal_api::claim::conditions as c;
use ferrometal_api::{Condition, HostClaim, HostClaimStatus, NamespacedRef};

use crate::claim::decide::finish_status;
use crate::conditions::new as condition;
use crate::forwarding::DataKind;

/// Where the claim's VM stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    /// The class cannot serve the claim (reason, message for the tenant).
    NotServed(&'static str, String),
    /// The class's libvirt host does not answer.
    Unreachable,
    /// No image asked for: nothing to run.
    NoImage,
    /// The image is being written and the VM made.
    Creating,
    /// Making the VM failed (message for the tenant); it is tried again.
    CreateFailed(String),
    /// The VM exists; its power.
    Running { on: bool },
    /// The image was removed from the claim: the VM is being taken down.
    Removing,
}

pub struct Input<'a> {
    pub claim: &'a HostClaim,
    pub phase: Phase,
    /// The first data Secret that could not be read (kind, message).
    pub data_failed: Option<(DataKind, String)>,
    pub deleting: Option<&'a str>,
    pub hardware_data: Option<NamespacedRef>,
    pub now: &'a str,
}

pub fn status(input: Input<'_>) -> HostClaimStatus {
    let mut conds: Vec<Condition> = Vec::with_capacity(4);
    let mut powered_on = false;
    match &input.phase {
        Phase::NotServed(reason, msg) => {
            for t in [c::ASSOCIATED, c::SYNCHRONIZED, c::PROVISIONED] {
                conds.push(condition(t, false, reason, msg.clone()));
            }
        }
        Phase::Unreachable => {
            let msg = "the virtual machine host of the claim's class does not answer; retrying";
            for t in [c::ASSOCIATED, c::SYNCHRONIZED, c::PROVISIONED] {
                conds.push(condition(t, false, c::HYPERVISOR_UNREACHABLE, msg));
            }
        }
        phase => {
            conds.push(condition(
                c::ASSOCIATED,
                true,
                c::VIRTUAL_MACHINE_ASSOCIATED,
                "",
            ));
            conds.push(match &input.data_failed {
                Some((kind, msg)) => {
                    condition(c::SYNCHRONIZED, false, kind.failure_reason(), msg.clone())
                }
                None => condition(c::SYNCHRONIZED, true, c::CONFIGURATION_SYNCED, ""),
            });
            conds.push(match phase {
                Phase::NoImage => condition(
                    c::PROVISIONED,
                    false,
                    c::NO_IMAGE,
                    "set spec.image to run a virtual machine",
                ),
                Phase::Creating => condition(
                    c::PROVISIONED,
                    false,
                    c::PROVISIONING,
                    "the image is being written to the virtual machine's disk",
                ),
                Phase::CreateFailed(msg) => {
                    condition(c::PROVISIONED, false, c::PROVISIONING_FAILED, msg.clone())
                }
                Phase::Removing => condition(
                    c::PROVISIONED,
                    false,
                    c::DEPROVISIONING,
                    "the virtual machine is being removed",
                ),
                Phase::Running { on } => {
                    powered_on = *on;
                    condition(c::PROVISIONED, true, c::VIRTUAL_MACHINE_PROVISIONED, "")
                }
                Phase::NotServed(..) | Phase::Unreachable => unreachable!("matched above"),
            });
        }
    }
    if let Some(msg) = input.deleting {
        conds[0] = condition(c::ASSOCIATED, false, c::HOST_CLAIM_DELETING, msg);
    }
    finish_status(
        input.claim,
        conds,
        false,
        None,
        input.hardware_data,
        powered_on,
        input.now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrometal_api::HostClaimSpec;

    fn run(phase: Phase, data_failed: Option<(DataKind, String)>) -> HostClaimStatus {
        let claim = HostClaim::new("web-0", HostClaimSpec::default());
        status(Input {
            claim: &claim,
            phase,
            data_failed,
            deleting: None,
            hardware_data: None,
            now: "2026-01-01T00:00:00Z",
        })
    }

    fn reasons(st: &HostClaimStatus) -> Vec<(String, String)> {
        st.conditions
            .iter()
            .map(|c| (c.status.clone(), c.reason.clone()))
            .collect()
    }

    /// A phase, a data failure, the conditions' (status, reason) and the power reported.
    type Case = (
        Phase,
        Option<(DataKind, String)>,
        Vec<(String, String)>,
        bool,
    );

    #[test]
    fn each_phase_reads_as_a_bare_metal_claim_would() {
        let t = |s: &str, r: &str| (s.to_string(), r.to_string());
        let cases: Vec<Case> = vec![
            (
                Phase::Running { on: true },
                None,
                vec![
                    t("True", c::VIRTUAL_MACHINE_ASSOCIATED),
                    t("True", c::CONFIGURATION_SYNCED),
                    t("True", c::VIRTUAL_MACHINE_PROVISIONED),
                    t("True", "Ready"),
                ],
                true,
            ),
            (
                Phase::Running { on: false },
                None,
                vec![
                    t("True", c::VIRTUAL_MACHINE_ASSOCIATED),
                    t("True", c::CONFIGURATION_SYNCED),
                    t("True", c::VIRTUAL_MACHINE_PROVISIONED),
                    t("True", "Ready"),
                ],
                false,
            ),
            (
                Phase::Creating,
                None,
                vec![
                    t("True", c::VIRTUAL_MACHINE_ASSOCIATED),
                    t("True", c::CONFIGURATION_SYNCED),
                    t("False", c::PROVISIONING),
                    t("False", c::PROVISIONING),
                ],
                false,
            ),
            (
                Phase::NoImage,
                Some((DataKind::UserData, "missing".into())),
                vec![
                    t("True", c::VIRTUAL_MACHINE_ASSOCIATED),
                    t("False", c::USER_DATA_SYNC_FAILURE),
                    t("False", c::NO_IMAGE),
                    t("False", c::USER_DATA_SYNC_FAILURE),
                ],
                false,
            ),
            (
                Phase::Unreachable,
                None,
                vec![
                    t("False", c::HYPERVISOR_UNREACHABLE),
                    t("False", c::HYPERVISOR_UNREACHABLE),
                    t("False", c::HYPERVISOR_UNREACHABLE),
                    t("False", c::HYPERVISOR_UNREACHABLE),
                ],
                false,
            ),
            (
                Phase::NotServed(c::HOST_CLASS_NOT_FOUND, "no class".into()),
                None,
                vec![
                    t("False", c::HOST_CLASS_NOT_FOUND),
                    t("False", c::HOST_CLASS_NOT_FOUND),
                    t("False", c::HOST_CLASS_NOT_FOUND),
                    t("False", c::HOST_CLASS_NOT_FOUND),
                ],
                false,
            ),
            (
                Phase::CreateFailed("image 404".into()),
                None,
                vec![
                    t("True", c::VIRTUAL_MACHINE_ASSOCIATED),
                    t("True", c::CONFIGURATION_SYNCED),
                    t("False", c::PROVISIONING_FAILED),
                    t("False", c::PROVISIONING_FAILED),
                ],
                false,
            ),
        ];
        for (phase, data, want, on) in cases {
            let st = run(phase.clone(), data);
            assert_eq!(reasons(&st), want, "{phase:?}");
            assert_eq!(st.powered_on, on, "{phase:?}");
            assert!(st.bare_metal_host.is_none());
        }
    }
}
