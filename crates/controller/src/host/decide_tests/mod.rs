//! Table-driven tests of the pure state machine: one row per transition and annotation rule.
//! The fixtures and the table runner are here; the tables are in the child modules.

mod annotations;
mod deletion;
mod engine;
mod errors;
mod firmware;
mod steady;
mod transitions;

use std::collections::BTreeMap;
use std::time::Duration;

use ferrometal_api::annotations as ann;
use ferrometal_api::annotations::Operation;
use ferrometal_api::{
    BareMetalHostSpec, BareMetalHostStatus, BmcDetails, CredentialsStatus, CustomDeploy, ErrorType,
    HardwareDetails, Image, ImageFormat, InspectionMode, OperationMetric, OperationalStatus,
    ProvisioningState as S,
};
use ferrometal_bmc::PowerState;
use ferrometal_provisioner::{ErrorKind, PowerOffMode, ProvisionerError, Registration};
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::jiff::Timestamp;

use super::decide::*;
use crate::conditions::{BLOCKED, INSPECTION_INCOMPLETE, condition};
use crate::config::Timing;
use crate::secrets::CredentialsObservation;

fn now() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn timing() -> Timing {
    Timing {
        power_poll_interval: Duration::from_secs(60),
        backoff_base: Duration::from_secs(10),
        backoff_cap: Duration::from_secs(600),
        delayed_retry: Duration::from_secs(30),
        detached_recheck: Duration::from_secs(600),
        max_provisioning_retries: 5,
    }
}

#[derive(Clone)]
struct Fx {
    spec: BareMetalHostSpec,
    status: Option<BareMetalHostStatus>,
    annotations: BTreeMap<String, String>,
    deleting: bool,
    has_finalizer: bool,
    credentials: CredentialsObservation,
    memo: Option<Memo>,
    firmware: FirmwareWork,
    data_image: Option<DataImageWork>,
    builds_software_raid: bool,
    timing: Timing,
}

fn image(url: &str) -> Image {
    Image {
        url: url.into(),
        checksum: None,
        checksum_type: None,
        format: Some(ImageFormat::LiveIso),
        oci_auth_secret_name: None,
    }
}

fn fx(state: S) -> Fx {
    let mut status = BareMetalHostStatus::default();
    status.provisioning.state = state;
    status.powered_on = true;
    status.last_updated = Some("2025-12-31T00:00:00Z".into());
    status.good_credentials = Some(CredentialsStatus {
        credentials: Some(SecretReference {
            name: Some("bmc".into()),
            namespace: Some("ns".into()),
        }),
        credentials_version: Some("1".into()),
    });
    status.tried_credentials = status.good_credentials.clone();
    if matches!(state, S::Provisioned) {
        status.provisioning.image = Some(image("http://img/a.iso"));
    }
    update_conditions(
        &mut status,
        Some(1),
        "2025-12-31T00:00:00Z".parse().unwrap(),
    );
    let spec = BareMetalHostSpec {
        bmc: Some(BmcDetails {
            address: "redfish+http://10.0.0.1/redfish/v1/Systems/1".into(),
            credentials_name: "bmc".into(),
            disable_certificate_verification: false,
        }),
        online: true,
        image: matches!(state, S::Provisioned).then(|| image("http://img/a.iso")),
        ..Default::default()
    };
    Fx {
        spec,
        status: (state != S::None).then_some(status),
        annotations: BTreeMap::new(),
        deleting: false,
        has_finalizer: true,
        credentials: CredentialsObservation::Found {
            secret: "bmc".into(),
            version: "1".into(),
        },
        memo: Some(Memo {
            credentials_version: "1".into(),
            adopted: true,
            power_checked: Some(now()),
            power_in_flight: None,
            settings_done: None,
            updates_done: Vec::new(),
            data_image_failed: None,
        }),
        firmware: FirmwareWork::default(),
        data_image: None,
        builds_software_raid: false,
        timing: timing(),
    }
}

impl Fx {
    fn ann(mut self, k: &str, v: &str) -> Fx {
        self.annotations.insert(k.into(), v.into());
        self
    }
    fn status_mut(&mut self) -> &mut BareMetalHostStatus {
        self.status.get_or_insert_with(Default::default)
    }
    fn input(&self, last: Option<(Call, Outcome)>) -> Input<'_> {
        Input {
            namespace: "ns",
            spec: &self.spec,
            status: self.status.as_ref(),
            annotations: &self.annotations,
            generation: Some(1),
            deleting: self.deleting,
            has_finalizer: self.has_finalizer,
            credentials: self.credentials.clone(),
            memo: self.memo.as_ref(),
            firmware: &self.firmware,
            data_image: self.data_image.as_ref(),
            builds_software_raid: self.builds_software_raid,
            last,
            now: now(),
            jitter: 0.5,
            timing: &self.timing,
        }
    }
}

fn failed(kind: ErrorKind, msg: &str) -> Outcome {
    Outcome::Failed(ProvisionerError::new(kind, msg))
}

fn registered(power: PowerState) -> Outcome {
    Outcome::Registered(Registration {
        provisioner_id: "id-1".into(),
        power,
    })
}

fn state(d: &Decision) -> Option<S> {
    d.status.as_ref().map(|s| s.provisioning.state)
}

fn st(d: &Decision) -> &BareMetalHostStatus {
    d.status.as_ref().expect("a status write")
}

fn has_event(d: &Decision, reason: &str) -> bool {
    d.events.iter().any(|e| e.reason == reason)
}

fn removes(d: &Decision, key: &str) -> bool {
    d.remove_annotations.iter().any(|k| k == key)
}

struct Case {
    name: &'static str,
    fx: Fx,
    /// The call the first pass asks for.
    call: Option<Call>,
    /// Its outcome, fed to the second pass.
    outcome: Option<Outcome>,
    check: fn(&Decision),
}

fn case(
    name: &'static str,
    fx: Fx,
    call: Option<Call>,
    outcome: Option<Outcome>,
    check: fn(&Decision),
) -> Case {
    Case {
        name,
        fx,
        call,
        outcome,
        check,
    }
}

fn run(c: &Case) -> Decision {
    let first = decide(&c.fx.input(None));
    assert_eq!(first.call, c.call, "{}: first-pass call", c.name);
    match (&c.call, &c.outcome) {
        (Some(call), Some(outcome)) => {
            let second = decide(&c.fx.input(Some((call.clone(), outcome.clone()))));
            assert_eq!(second.call, None, "{}: second pass makes no call", c.name);
            second
        }
        (None, None) => first,
        _ => panic!("{}: a call needs an outcome", c.name),
    }
}

fn check_all(cases: Vec<Case>) {
    for c in &cases {
        let d = run(c);
        (c.check)(&d);
        // Determinism: the same input gives the same decision.
        let again = match (&c.call, &c.outcome) {
            (Some(call), Some(o)) => decide(&c.fx.input(Some((call.clone(), o.clone())))),
            _ => decide(&c.fx.input(None)),
        };
        assert_eq!(d, again, "{}: deterministic", c.name);
    }
}

fn with<F: FnOnce(&mut Fx)>(mut f: Fx, tweak: F) -> Fx {
    tweak(&mut f);
    // Keep the fixture's conditions consistent so only real changes show as status writes.
    if let Some(s) = f.status.as_mut() {
        update_conditions(s, Some(1), "2025-12-31T00:00:00Z".parse().unwrap());
    }
    f
}
