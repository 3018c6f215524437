//! The limits kube-apiserver puts on the cost of CEL rules, and the request
//! size its estimates assume. Constants only, so that every step (and the
//! crate's public API) can name them without depending on the cost
//! estimator.

/// The largest cost one evaluation of a rule may have (cel-go's runtime
/// cost limit per call in kube-apiserver, `PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The cost all rules together may spend validating one object
/// (kube-apiserver's `RuntimeCELCostBudget`).
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;

/// The largest estimated cost of one rule, times the number of times it may
/// run per object, accepted in a CRD (`StaticEstimatedCostLimit`).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;

/// The largest estimated cost of all the rules of one schema together
/// (`StaticEstimatedCRDCostLimit`).
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

/// The request size the estimates assume values cannot exceed
/// (kube-apiserver's `MaxRequestSizeBytes`, and this server's body limit).
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
