//! Create-only reviews, answered on the spot and never stored: access reviews
//! (`kubectl auth can-i`), rules reviews (`can-i --list`), SelfSubjectReview (`auth whoami`),
//! TokenReview; and TokenRequest (`kubectl create token`).

use ferrometal_apimachinery::rbac::{Attributes, Policy, UserInfo};
use serde_json::{Value, json};

use crate::authn::{self, Authenticator};
use crate::status::ApiError;
use crate::store::Store;

fn str_of<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn user_info(u: &UserInfo) -> Value {
    json!({"username": u.name, "groups": u.groups})
}

/// The subject an access review asks about: the caller for the Self kinds, else the spec's.
fn subject_of(kind: &str, caller: &UserInfo, review: &Value) -> UserInfo {
    if kind.starts_with("Self") {
        return caller.clone();
    }
    UserInfo {
        name: str_of(review, "/spec/user").into(),
        groups: review
            .pointer("/spec/groups")
            .and_then(Value::as_array)
            .map(|g| {
                g.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Fills `review.status` for the review kind `kind` asked by `caller`. `namespace` is the URL's
/// (LocalSubjectAccessReview).
pub fn answer(
    kind: &str,
    review: &mut Value,
    caller: &UserInfo,
    policy: &Policy,
    authn: &Authenticator,
    store: &Store,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    match kind {
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let subject = subject_of(kind, caller, review);
            if let Some(ns) = namespace {
                let spec_ns = str_of(review, "/spec/resourceAttributes/namespace");
                if spec_ns != ns {
                    return Err(ApiError::bad_request(format!(
                        "spec.resourceAttributes.namespace must match the namespace of the request: {spec_ns:?} is not {ns:?}"
                    )));
                }
            }
            let status = if let Some(r) = review.pointer("/spec/resourceAttributes") {
                let d = policy.authorize(&Attributes::resource(
                    &subject,
                    str_of(r, "/verb"),
                    str_of(r, "/group"),
                    str_of(r, "/resource"),
                    str_of(r, "/subresource"),
                    str_of(r, "/namespace"),
                    str_of(r, "/name"),
                ));
                json!({"allowed": d.allowed, "reason": d.reason})
            } else if let Some(r) = review.pointer("/spec/nonResourceAttributes") {
                let d = policy.authorize(&Attributes::non_resource(
                    &subject,
                    str_of(r, "/verb"),
                    str_of(r, "/path"),
                ));
                json!({"allowed": d.allowed, "reason": d.reason})
            } else {
                return Err(ApiError::bad_request(
                    "exactly one of spec.resourceAttributes and spec.nonResourceAttributes must be set",
                ));
            };
            review["status"] = status;
        }
        "SelfSubjectRulesReview" => {
            let ns = str_of(review, "/spec/namespace").to_string();
            let rules = policy.rules_for(caller, &ns);
            let (resource, non_resource): (Vec<_>, Vec<_>) = rules
                .into_iter()
                .partition(|r| r.non_resource_urls.is_empty());
            review["status"] = json!({
                "resourceRules": resource,
                "nonResourceRules": non_resource.iter().map(|r| json!({
                    "verbs": r.verbs, "nonResourceURLs": r.non_resource_urls,
                })).collect::<Vec<_>>(),
                "incomplete": false,
            });
        }
        "SelfSubjectReview" => {
            review["status"] = json!({"userInfo": user_info(caller)});
        }
        "TokenReview" => {
            let token = str_of(review, "/spec/token");
            review["status"] = match authn.service_account(store, token) {
                Some(u) => json!({"authenticated": true, "user": user_info(&u),
                                  "audiences": authn::AUDIENCES}),
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            };
        }
        _ => return Err(ApiError::path_not_found()),
    }
    Ok(())
}

/// Bounds of a requested token lifetime, as kube-apiserver: at least 10 minutes; at most a
/// year here (it has no cap unless configured).
const MIN_TOKEN_SECONDS: i64 = 600;
const MAX_TOKEN_SECONDS: i64 = 365 * 24 * 3600;

/// Answers a TokenRequest for ServiceAccount `ns/name`: a signed token bound to the
/// ServiceAccount's uid, so deleting the account revokes it.
pub fn token_request(
    authn: &Authenticator,
    store: &Store,
    ns: &str,
    name: &str,
    mut req: Value,
) -> Result<Value, ApiError> {
    let Some(sa) = store.get(authn::SA_KEY, ns, name) else {
        return Err(ApiError::new(
            404,
            "NotFound",
            format!("serviceaccounts \"{name}\" not found"),
        )
        .with_name_kind(name, "", "serviceaccounts"));
    };
    for k in ["metadata", "spec"] {
        if !req[k].is_object() {
            req[k] = json!({});
        }
    }
    let seconds = req
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    if seconds < MIN_TOKEN_SECONDS {
        return Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
            ),
        ));
    }
    let seconds = seconds.min(MAX_TOKEN_SECONDS);
    let mut audiences: Vec<String> = req
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences.push(authn::AUDIENCES[0].into());
    }
    let now = jiff::Timestamp::now();
    let token = authn
        .signer()
        .mint(ns, name, &sa.uid, &audiences, seconds, now.as_second());
    let exp = jiff::Timestamp::from_second(now.as_second() + seconds)
        .map(|t| t.to_string())
        .unwrap_or_default();
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    req["metadata"]["name"] = json!(name);
    req["metadata"]["namespace"] = json!(ns);
    req["metadata"]["creationTimestamp"] = json!(crate::meta::now());
    req["spec"]["audiences"] = json!(audiences);
    req["spec"]["expirationSeconds"] = json!(seconds);
    req["status"] = json!({"token": token, "expirationTimestamp": exp});
    Ok(req)
}
