//! Requests for the EventService and its subscriptions (the state is in `subscriptions`).

use http::header::{HeaderValue, LOCATION};
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;

use crate::app::App;
use crate::resp::{Resp, bad_request, empty, json, method_not_allowed, not_found, read_json};
use crate::subscriptions::{self, subscription_doc};

/// `EventService/Subscriptions` (`id: None`: GET lists, POST creates) or one (GET, DELETE).
pub async fn subscriptions(app: &App, id: Option<u64>, req: Request<Incoming>) -> Resp {
    let path = req.uri().path().to_string();
    match (id, req.method().clone()) {
        (None, Method::GET) => json(StatusCode::OK, &app.subscriptions().collection_doc()),
        (None, Method::POST) => {
            let body = match read_json(req).await {
                Ok(body) => body,
                Err(resp) => return resp,
            };
            let mut subs = app.subscriptions();
            match subs.create(&body) {
                Ok(created) => {
                    let doc = subscription_doc(created);
                    let location = subscriptions::path(created.id);
                    let mut resp = json(StatusCode::CREATED, &doc);
                    if let Ok(location) = HeaderValue::from_str(&location) {
                        resp.headers_mut().insert(LOCATION, location);
                    }
                    resp
                }
                Err((code, message)) => bad_request(code, &message),
            }
        }
        (None, _) => method_not_allowed("GET, POST"),
        (Some(id), Method::GET) => match app.subscriptions().get(id) {
            Some(s) => json(StatusCode::OK, &subscription_doc(s)),
            None => not_found(&path),
        },
        (Some(id), Method::DELETE) => {
            if app.subscriptions().delete(id) {
                empty(StatusCode::NO_CONTENT)
            } else {
                not_found(&path)
            }
        }
        (Some(_), _) => method_not_allowed("GET, DELETE"),
    }
}
