//! The REST/JSON gateway: the signing check in front of private routes, and the
//! handlers (the routes of every HTTP surface are `gateways::router`'s). Handlers translate: a request becomes an engine command or a read, the
//! outcome becomes JSON. They hold nothing between requests but caches of values that
//! never change (instruments, assets, account ids). Besides the API itself it serves
//! tqsdk's login routes under `/auth/realms/shinnytech/` (`openid`), which are the
//! login and so are not signed.

pub mod admin;
pub mod extract;
pub mod futures;
pub mod history;
pub mod openapi;
pub mod openid;
pub mod pipelined;
pub mod public;
pub mod trading;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::port::error::ApiError;
use crate::port::state::Shared;

pub async fn authenticate(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    // `limit_body` has buffered the body already: this only takes it out again.
    let bytes = match axum::body::to_bytes(body, state.limits.body_bytes_max).await {
        Ok(bytes) => bytes,
        Err(_) => return ApiError::malformed("the body could not be read").into_response(),
    };
    let path_and_query = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    let session = state.authenticate_request(
        &parts.headers,
        parts.method.as_str(),
        path_and_query,
        &bytes,
        bourse_protocol::signing::now_ms(),
    );
    match session {
        Ok(session) => {
            parts.extensions.insert(session);
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Err(error) => error.into_response(),
    }
}
