//! Reconcilers for BareMetalHost and HardwareData.
