//! CRD structural schema handling: defaults, pruning, validation, CEL rules.
