//! A host as the provisioner sees it ([`HostInfo`]): what the host controller and BMCJobs pass
//! with every call to a host's BMC.

use ferrometal_api::annotations as ann;
use ferrometal_api::{AutomatedCleaningMode, BareMetalHost, InspectionMode};
use ferrometal_bmc::{BmcAddress, Credentials};
use ferrometal_provisioner::{ErrorKind, HostInfo, ProvisionerError};
use kube::ResourceExt;

/// A host's key in the host controller's bookkeeping and in the provisioner (`namespace~name`).
pub fn host_key(host: &BareMetalHost) -> String {
    format!("{}~{}", host.namespace_or_default(), host.name_any())
}

/// The host as the provisioner addresses it: BMC, credentials and what provisioning reads.
pub fn host_info(
    host: &BareMetalHost,
    credentials: Option<&Credentials>,
) -> Result<HostInfo, ProvisionerError> {
    let bmc = host
        .spec
        .bmc
        .as_ref()
        .ok_or_else(|| ProvisionerError::new(ErrorKind::InvalidInput, "spec.bmc is not set"))?;
    let address = BmcAddress::parse(&bmc.address).map_err(|e| {
        ProvisionerError::new(ErrorKind::InvalidInput, format!("spec.bmc.address: {e}"))
    })?;
    let credentials = credentials.cloned().ok_or_else(|| {
        ProvisionerError::new(
            ErrorKind::Credentials,
            format!("BMC credentials Secret {} unreadable", bmc.credentials_name),
        )
    })?;
    let inspection_disabled = host
        .annotations()
        .get(ann::INSPECT)
        .is_some_and(|v| v == "disabled");
    Ok(HostInfo {
        key: host_key(host),
        provisioner_id: host
            .status
            .as_ref()
            .map(|s| s.provisioning.id.clone())
            .unwrap_or_default(),
        bmc: address,
        credentials,
        disable_certificate_verification: bmc.disable_certificate_verification,
        boot_mac_address: host.spec.boot_mac_address.clone(),
        boot_mode: host.spec.boot_mode,
        inspection_mode: if inspection_disabled {
            InspectionMode::Disabled
        } else {
            host.spec.inspection_mode.unwrap_or(InspectionMode::Fast)
        },
        root_device_hints: host.spec.root_device_hints.clone(),
        automated_cleaning_mode: host
            .spec
            .automated_cleaning_mode
            .unwrap_or(AutomatedCleaningMode::Metadata),
        disable_power_off: host.spec.disable_power_off,
        preprovisioning_network_data: None,
    })
}
