//! The in-process transport: a `kube::Client` whose requests go straight to the router, so
//! controllers in the same process use the server with no socket and no token.

use axum::Router;
use tower::ServiceBuilder;

use crate::authn::InProcess;

pub fn client(router: Router) -> kube::Client {
    let svc = ServiceBuilder::new()
        .map_request(|req: http::Request<kube::client::Body>| {
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(InProcess);
            req
        })
        .service(router);
    kube::Client::new(svc, "default")
}
