//! Who asks ([`UserInfo`]) and what they ask ([`Attributes`]), as kube-apiserver's
//! authorizer sees a request.

/// The group whose members are allowed everything.
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn new<G: Into<String>>(
        name: impl Into<String>,
        groups: impl IntoIterator<Item = G>,
    ) -> Self {
        Self {
            name: name.into(),
            groups: groups.into_iter().map(Into::into).collect(),
        }
    }
}

/// What is asked (kube-apiserver's `authorizer.Attributes`).
///
/// For resource requests the fields are the RequestInfo ones: `namespace`
/// is `""` at cluster scope (for `namespaces/NAME` kube-apiserver sets it to
/// NAME), `name` is `""` for list/watch/create/deletecollection. For
/// non-resource requests only `verb` (the lower-case HTTP method: get, post,
/// put, …) and `path` matter.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    pub resource_request: bool,
    pub api_group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub path: &'a str,
}

impl<'a> Attributes<'a> {
    /// A resource request.
    pub fn resource(
        user: &'a UserInfo,
        verb: &'a str,
        api_group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Self {
        Self {
            user,
            verb,
            resource_request: true,
            api_group,
            resource,
            subresource,
            namespace,
            name,
            path: "",
        }
    }

    /// A non-resource request (`/healthz`, `/metrics`, `/apis`, …).
    pub fn non_resource(user: &'a UserInfo, verb: &'a str, path: &'a str) -> Self {
        Self {
            user,
            verb,
            resource_request: false,
            api_group: "",
            resource: "",
            subresource: "",
            namespace: "",
            name: "",
            path,
        }
    }
}
