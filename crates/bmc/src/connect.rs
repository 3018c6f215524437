//! Picking the client for an address. Outside the crate root: the clients use the root's `Bmc`
//! trait, credentials and options, so the root itself uses no client (no import circle).

use std::sync::Arc;

use crate::address::{BmcAddress, Protocol};
use crate::error::BmcError;
use crate::{Bmc, BmcOptions, Credentials, ipmi, redfish};

/// Makes the client for an address. Cheap: no request is sent until the first call.
pub fn connect(
    address: &BmcAddress,
    credentials: Credentials,
    options: BmcOptions,
) -> Result<Arc<dyn Bmc>, BmcError> {
    Ok(match address.protocol() {
        Protocol::Redfish => Arc::new(redfish::RedfishBmc::new(address, credentials, options)?),
        Protocol::Ipmi => Arc::new(ipmi::IpmiBmc::new(address, credentials, options)),
    })
}
