//! What the REST handlers share: axum's extractors with this API's error shape, and
//! the JSON responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;

use crate::port::error::ApiError;

/// `axum::extract::Query` with this API's error shape: a query string that does not
/// parse (a wrong type, an unknown parameter) is `400 malformed` with the reason.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::malformed(rejection.body_text())),
        }
    }
}

/// `axum::extract::Path` with this API's error shape.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> axum::extract::FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::malformed(rejection.body_text())),
        }
    }
}

pub fn ok(value: serde_json::Value) -> Response {
    (StatusCode::OK, Json(value)).into_response()
}

pub fn created(value: serde_json::Value) -> Response {
    (StatusCode::CREATED, Json(value)).into_response()
}
