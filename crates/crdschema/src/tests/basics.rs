//! The public types: sharing a schema, a valid object, reason strings.

use super::fixtures::{admit, bmh, host, valid_spec};
use crate::error::{FieldError, Reason};
use crate::schema::Schema;

#[test]
fn schema_is_shareable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Schema>();
}

#[test]
fn valid_host_passes() {
    let (obj, errs) = admit(&bmh(), host(valid_spec()), None);
    assert_eq!(errs, vec![], "{obj}");
}

#[test]
fn reason_strings() {
    assert_eq!(Reason::FieldValueRequired.as_str(), "FieldValueRequired");
    assert_eq!(
        Reason::FieldValueNotSupported.as_str(),
        "FieldValueNotSupported"
    );
    assert_eq!(Reason::FieldValueTooMany.to_string(), "FieldValueTooMany");
    let e = FieldError::new("spec.online", Reason::FieldValueRequired, "Required value");
    assert_eq!(e.to_string(), "spec.online: Required value");
}
