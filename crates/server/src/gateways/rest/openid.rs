//! The login routes of tqsdk (TianQin's Python library), at the paths of the Keycloak
//! server it logs in to, so that tqsdk can log in to a self-hosted Bourse with an
//! account's name and password (`TQ_AUTH_URL=http://HOST:PORT`):
//!
//! - `POST /auth/realms/shinnytech/protocol/openid-connect/token`: a form
//!   (`grant_type=password` with `username` and `password`, or
//!   `grant_type=refresh_token` with `refresh_token`; `client_id` and `client_secret`
//!   are taken whatever they are) answered with an access and a refresh token;
//! - `PUT /auth/realms/shinnytech/rest/update-grant-accounts/{account}` (bearer access
//!   token): the next tokens of the caller also grant that account;
//! - `GET /auth/realms/shinnytech/rest/get-grant/tq` (bearer access token): when the
//!   token expires and what it grants.
//!
//! These are the login itself, so they are not signed with API keys. Errors are
//! OAuth's (and Keycloak's) shape, `{"error": ..., "error_description": ...}`, which
//! tqsdk prints. The handlers only translate: passwords are checked by `passwords`,
//! tokens made and checked by `tokens`; nothing here may panic on any input.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::port::error::{ApiError, ErrorCode};
use crate::port::state::Shared;
use crate::port::tokens::{Claims, Issued, TokenError};

/// The token endpoint's form is at most this long (a name, a password, a token).
pub const FORM_BYTES_MAX: usize = 8 * 1024;
/// `get-grant`'s `daysleft`: a self-hosted venue's login does not lapse (tqsdk warns
/// below 30).
pub const DAYS_LEFT: u64 = 3_650;
/// `get-grant`'s `account_type`.
pub const ACCOUNT_TYPE: &str = "bourse";

/// An error as OAuth 2.0 (RFC 6749, 6750) and Keycloak show it.
#[derive(Debug)]
pub struct OAuthError {
    status: StatusCode,
    error: &'static str,
    description: String,
    retry_after_s: Option<u64>,
}

impl OAuthError {
    fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> OAuthError {
        OAuthError { status, error, description: description.into(), retry_after_s: None }
    }

    fn invalid_request(description: impl Into<String>) -> OAuthError {
        OAuthError::new(StatusCode::BAD_REQUEST, "invalid_request", description)
    }

    /// A bearer token that is missing or not valid: 401 with the challenge.
    fn invalid_token(description: impl Into<String>) -> OAuthError {
        OAuthError::new(StatusCode::UNAUTHORIZED, "invalid_token", description)
    }

    /// The password check's errors: wrong credentials as Keycloak says it, the others
    /// as they are.
    fn from_login(error: ApiError) -> OAuthError {
        let mut oauth = match error.code {
            ErrorCode::InvalidCredentials => OAuthError::new(
                StatusCode::UNAUTHORIZED,
                "invalid_grant",
                "Invalid user credentials",
            ),
            ErrorCode::Busy => OAuthError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                error.message,
            ),
            // Too many failures in a row: the grant is refused until the lock ends
            // (`Retry-After`), whatever the password.
            ErrorCode::LoginLocked => {
                OAuthError::new(StatusCode::TOO_MANY_REQUESTS, "invalid_grant", error.message)
            }
            // (The password check answers nothing else; were it to, it is the
            // server's failure.)
            _ => OAuthError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", error.message),
        };
        oauth.retry_after_s = error.retry_after_s;
        oauth
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.error, "error_description": self.description });
        let mut response = (self.status, Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.status == StatusCode::UNAUTHORIZED && self.error == "invalid_token" {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(r#"Bearer realm="shinnytech", error="invalid_token""#),
            );
        }
        if let Some(seconds) = self.retry_after_s {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

type OAuthResult = Result<Response, OAuthError>;

fn now_s() -> u64 {
    bourse_protocol::signing::now_ms() / 1_000
}

/// The token endpoint's form: each field at most once.
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &[u8]) -> Result<Form, OAuthError> {
        if body.len() > FORM_BYTES_MAX {
            return Err(OAuthError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request",
                format!("the form is over {FORM_BYTES_MAX} bytes"),
            ));
        }
        let fields: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|error| {
                OAuthError::invalid_request(format!(
                    "the body must be a form (application/x-www-form-urlencoded): {error}"
                ))
            })?;
        let mut names = std::collections::HashSet::with_capacity(fields.len());
        for (name, _) in &fields {
            if !names.insert(name.as_str()) {
                return Err(OAuthError::invalid_request(format!("{name} is given twice")));
            }
        }
        Ok(Form(fields))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(field, _)| field == name).map(|(_, value)| value.as_str())
    }

    fn required(&self, name: &str) -> Result<&str, OAuthError> {
        self.get(name).ok_or_else(|| OAuthError::invalid_request(format!("{name} is missing")))
    }
}

fn tokens_json(issued: &Issued) -> Response {
    let body = json!({
        "access_token": issued.access_token,
        "expires_in": issued.expires_in,
        "refresh_expires_in": issued.refresh_expires_in,
        "refresh_token": issued.refresh_token,
        "token_type": "Bearer",
        "scope": "openid",
    });
    let mut response = (StatusCode::OK, Json(body)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `POST /auth/realms/shinnytech/protocol/openid-connect/token`.
pub async fn token(State(state): State<Shared>, body: Bytes) -> OAuthResult {
    let form = Form::parse(&body)?;
    match form.required("grant_type")? {
        "password" => {
            let account = form.required("username")?;
            let password = form.required("password")?;
            state.check_password(account, password).await.map_err(OAuthError::from_login)?;
            // (A password removed since the check: as if it had been wrong.)
            let issued = state.tokens.issue(account, now_s()).map_err(|_| {
                OAuthError::new(
                    StatusCode::UNAUTHORIZED,
                    "invalid_grant",
                    "Invalid user credentials",
                )
            })?;
            Ok(tokens_json(&issued))
        }
        "refresh_token" => {
            let refresh_token = form.required("refresh_token")?;
            let issued = state.tokens.refresh(refresh_token, now_s()).map_err(|error| {
                OAuthError::new(StatusCode::BAD_REQUEST, "invalid_grant", error.to_string())
            })?;
            Ok(tokens_json(&issued))
        }
        other => Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!("grant_type {other:?} is not taken here: password or refresh_token"),
        )),
    }
}

/// The claims of the request's `Authorization: Bearer` access token.
fn bearer(state: &Shared, headers: &HeaderMap) -> Result<Claims, OAuthError> {
    let missing = || OAuthError::invalid_token("an Authorization: Bearer access token is needed");
    let value = headers.get(header::AUTHORIZATION).ok_or_else(missing)?;
    let text = value.to_str().map_err(|_| missing())?;
    let (scheme, token) = text.split_once(' ').ok_or_else(missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(missing());
    }
    state
        .tokens
        .check_access(token.trim(), now_s())
        .map_err(|error| OAuthError::invalid_token(error.to_string()))
}

/// `PUT /auth/realms/shinnytech/rest/update-grant-accounts/{account}`.
pub async fn update_grant_accounts(
    State(state): State<Shared>,
    headers: HeaderMap,
    account: Result<Path<String>, PathRejection>,
) -> OAuthResult {
    let claims = bearer(&state, &headers)?;
    let Path(account) = account.map_err(|rejection| {
        OAuthError::invalid_request(format!("the account in the path: {}", rejection.body_text()))
    })?;
    state.tokens.add_account(&claims.sub, &account).map_err(|error| match error {
        TokenError::UnknownAccount(_) => {
            OAuthError::new(StatusCode::NOT_FOUND, "unknown_account", error.to_string())
        }
        TokenError::TooManyAccounts => {
            OAuthError::new(StatusCode::BAD_REQUEST, "too_many_accounts", error.to_string())
        }
        other => {
            OAuthError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", other.to_string())
        }
    })?;
    Ok((StatusCode::OK, Json(json!({}))).into_response())
}

/// `GET /auth/realms/shinnytech/rest/get-grant/tq`.
pub async fn get_grant(State(state): State<Shared>, headers: HeaderMap) -> OAuthResult {
    let claims = bearer(&state, &headers)?;
    let grants: Value = json!(state.tokens.grants(&claims.sub));
    let body = json!({
        "exp": claims.exp,
        "daysleft": DAYS_LEFT,
        "account_type": ACCOUNT_TYPE,
        "grants": grants,
    });
    Ok((StatusCode::OK, Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_decoded_and_a_repeated_or_oversized_one_refused() {
        let form = Form::parse(b"grant_type=password&username=al%69ce&password=a+b%26c").unwrap();
        assert_eq!(form.get("username"), Some("alice"));
        assert_eq!(form.get("password"), Some("a b&c"));
        assert_eq!(form.required("refresh_token").unwrap_err().error, "invalid_request");
        let twice = Form::parse(b"grant_type=password&grant_type=refresh_token").err().unwrap();
        assert_eq!((twice.status, twice.error), (StatusCode::BAD_REQUEST, "invalid_request"));
        let big = vec![b'a'; FORM_BYTES_MAX + 1];
        let error = Form::parse(&big).err().unwrap();
        assert_eq!(error.status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn errors_are_oauths_shape_and_a_bad_token_carries_the_bearer_challenge() {
        let response = OAuthError::invalid_token("expired").into_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert!(response.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .starts_with("Bearer"));
        let login = OAuthError::from_login(ApiError::new(ErrorCode::InvalidCredentials, "x"));
        assert_eq!(
            (login.status, login.error, login.description.as_str()),
            (StatusCode::UNAUTHORIZED, "invalid_grant", "Invalid user credentials")
        );
        let mut busy = ApiError::new(ErrorCode::Busy, "later");
        busy.retry_after_s = Some(1);
        let response = OAuthError::from_login(busy).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }
}
