//! Logging in with an account's name and password, as tqsdk does, over real sockets:
//! the operator's password routes, the token endpoint at Keycloak's path (the form
//! tqsdk sends, the errors it prints), adding an account to a login's grants and
//! refreshing, `get-grant`, and the demo's passwords.

mod support;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use support::TestServer;

const TOKEN_PATH: &str = "/auth/realms/shinnytech/protocol/openid-connect/token";
const GRANT_PATH: &str = "/auth/realms/shinnytech/rest/get-grant/tq";
/// What tqsdk 3.10.4 sends with every token request.
const CLIENT: [(&str, &str); 2] =
    [("client_id", "shinny_tq"), ("client_secret", "be30b9f4-6862-488a-99ad-21bde0400081")];

/// A form's fields, in order.
type Fields<'a> = &'a [(&'a str, &'a str)];

fn update_grant_path(account: &str) -> String {
    format!("/auth/realms/shinnytech/rest/update-grant-accounts/{account}")
}

/// A token request with `fields` (and tqsdk's client fields), form-encoded.
fn token_request(server: &TestServer, fields: &[(&str, &str)]) -> (u16, Value) {
    let all: Vec<(&str, &str)> = CLIENT.iter().chain(fields).copied().collect();
    let body = serde_urlencoded::to_string(all).unwrap();
    form_post(server, body.as_bytes())
}

fn form_post(server: &TestServer, body: &[u8]) -> (u16, Value) {
    let headers = [("Content-Type".to_string(), "application/x-www-form-urlencoded".to_string())];
    support::request(server.address, "POST", TOKEN_PATH, &headers, body)
}

fn login(server: &TestServer, account: &str, password: &str) -> (u16, Value) {
    token_request(
        server,
        &[("grant_type", "password"), ("username", account), ("password", password)],
    )
}

fn with_bearer(server: &TestServer, method: &str, path: &str, token: &str) -> (u16, Value) {
    let headers = [("Authorization".to_string(), format!("Bearer {token}"))];
    support::request(server.address, method, path, &headers, b"")
}

/// A JWT's claims, read without checking its signature (as tqsdk reads them).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT has three parts");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

fn set_password(server: &TestServer, account: &str, password: &str) -> (u16, Value) {
    let body = json!({ "password": password }).to_string();
    server.admin.put(&format!("/v1/admin/accounts/{account}/password"), &body)
}

/// A server with the accounts alice (password `alice-password`), bob and carol.
fn server_with_alice(directory: &std::path::Path) -> TestServer {
    let server = TestServer::start(directory, false);
    for account in ["alice", "bob", "carol"] {
        let (status, body) =
            server.admin.post("/v1/admin/accounts", &json!({ "name": account }).to_string());
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = set_password(&server, "alice", "alice-password");
    assert_eq!((status, &body), (200, &json!({ "account": "alice", "has_password": true })));
    server
}

#[test]
fn an_account_with_a_password_gets_tokens_that_name_it_and_grant_futures() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let (status, tokens) = login(&server, "alice", "alice-password");
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "openid");
    assert_eq!(
        (tokens["expires_in"].as_u64(), tokens["refresh_expires_in"].as_u64()),
        (Some(43_200), Some(2_592_000))
    );
    let access = claims(tokens["access_token"].as_str().unwrap());
    assert_eq!(access["sub"], "alice");
    assert_eq!(access["preferred_username"], "alice");
    assert_eq!(access["iss"], "bourse");
    assert_eq!(access["typ"], "Bearer");
    assert_eq!(access["grants"], json!({ "features": ["futr"], "accounts": ["alice"] }));
    assert_eq!(access["exp"].as_u64().unwrap() - access["iat"].as_u64().unwrap(), 43_200);
    let now_s = support::now_ms() / 1_000;
    assert!(access["iat"].as_u64().unwrap().abs_diff(now_s) <= 5);
    let refresh = claims(tokens["refresh_token"].as_str().unwrap());
    assert_eq!(
        (refresh["sub"].as_str(), refresh["typ"].as_str()),
        (Some("alice"), Some("Refresh"))
    );
    assert_eq!(refresh["exp"].as_u64().unwrap() - refresh["iat"].as_u64().unwrap(), 2_592_000);
    // The operator sees that alice has a password, never the hash.
    let (_, accounts) = server.admin.get("/v1/admin/accounts");
    let shown: Vec<(&str, bool)> = accounts["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|account| {
            (account["account"].as_str().unwrap(), account["has_password"].as_bool().unwrap())
        })
        .collect();
    assert_eq!(shown, [("alice", true), ("bob", false), ("carol", false)]);
    assert!(!accounts.to_string().contains("argon2"));
}

#[test]
fn wrong_credentials_are_one_keycloak_shaped_401_whichever_part_was_wrong() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let expected =
        json!({ "error": "invalid_grant", "error_description": "Invalid user credentials" });
    for (account, password) in [
        ("alice", "alice-passworD"),
        ("bob", "alice-password"),
        ("nobody", "alice-password"),
        ("alice", ""),
    ] {
        let (status, body) = login(&server, account, password);
        assert_eq!((status, &body), (401, &expected), "{account} {password:?}");
    }
}

#[test]
fn malformed_token_requests_are_oauth_errors_and_never_crash_the_server() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let cases: [(Fields, u16, &str); 5] = [
        (&[], 400, "invalid_request"),
        (&[("grant_type", "password"), ("username", "alice")], 400, "invalid_request"),
        (&[("grant_type", "client_credentials")], 400, "unsupported_grant_type"),
        (&[("grant_type", "refresh_token")], 400, "invalid_request"),
        (&[("grant_type", "refresh_token"), ("refresh_token", "a.b.c")], 400, "invalid_grant"),
    ];
    for (fields, status, error) in cases {
        let (got, body) = token_request(&server, fields);
        assert_eq!((got, body["error"].as_str()), (status, Some(error)), "{fields:?}: {body}");
        assert!(body["error_description"].is_string(), "{body}");
    }
    let (status, body) = form_post(&server, b"grant_type=password&grant_type=password");
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_request")), "{body}");
    let (status, body) = form_post(&server, br#"{"grant_type":"password"}"#);
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_request")), "{body}");
    let (status, body) = form_post(&server, &vec![b'x'; 9 * 1024]);
    assert_eq!((status, body["error"].as_str()), (413, Some("invalid_request")), "{body}");
    let (status, _) = form_post(&server, &[0xff, 0x00, b'=', 0xfe, b'&', b'%', b'%']);
    assert_eq!(status, 400);
    // Still serving.
    let (status, _) = login(&server, "alice", "alice-password");
    assert_eq!(status, 200);
}

#[test]
fn an_added_account_is_granted_after_a_refresh_and_get_grant_answers() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let (_, tokens) = login(&server, "alice", "alice-password");
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();

    let (status, body) = with_bearer(&server, "PUT", &update_grant_path("bob"), access);
    assert_eq!((status, &body), (200, &json!({})));
    let (status, body) = with_bearer(&server, "PUT", &update_grant_path("nobody"), access);
    assert_eq!((status, body["error"].as_str()), (404, Some("unknown_account")), "{body}");

    let (status, refreshed) =
        token_request(&server, &[("grant_type", "refresh_token"), ("refresh_token", refresh)]);
    assert_eq!(status, 200, "{refreshed}");
    let new_access = refreshed["access_token"].as_str().unwrap();
    assert_eq!(claims(new_access)["grants"]["accounts"], json!(["alice", "bob"]));
    assert_eq!(claims(new_access)["sub"], "alice");

    let (status, grant) = with_bearer(&server, "GET", GRANT_PATH, new_access);
    assert_eq!(status, 200, "{grant}");
    assert_eq!(grant["exp"], claims(new_access)["exp"]);
    assert_eq!(grant["daysleft"], 3_650);
    assert_eq!(grant["account_type"], "bourse");
    assert_eq!(grant["grants"]["accounts"], json!(["alice", "bob"]));
    // bob's own login grants bob only: the grant was alice's.
    set_password(&server, "bob", "bob-password");
    let (_, bob) = login(&server, "bob", "bob-password");
    assert_eq!(claims(bob["access_token"].as_str().unwrap())["grants"]["accounts"], json!(["bob"]));
}

#[test]
fn the_bearer_routes_need_a_valid_access_token() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let (_, tokens) = login(&server, "alice", "alice-password");
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let access = tokens["access_token"].as_str().unwrap();
    let (status, body) =
        support::request(server.address, "PUT", &update_grant_path("bob"), &[], b"");
    assert_eq!((status, body["error"].as_str()), (401, Some("invalid_token")), "{body}");
    let (status, body) = support::request(server.address, "GET", GRANT_PATH, &[], b"");
    assert_eq!((status, body["error"].as_str()), (401, Some("invalid_token")), "{body}");
    // A refresh token is not an access token; a changed one is nobody's.
    let (status, _) = with_bearer(&server, "PUT", &update_grant_path("bob"), refresh);
    assert_eq!(status, 401);
    let mut forged = claims(access);
    forged["sub"] = json!("bob");
    let parts: Vec<&str> = access.split('.').collect();
    let forged =
        format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(forged.to_string()), parts[2]);
    let (status, body) = with_bearer(&server, "GET", GRANT_PATH, &forged);
    assert_eq!((status, body["error"].as_str()), (401, Some("invalid_token")), "{body}");
    let (status, body) = with_bearer(&server, "GET", GRANT_PATH, "not-a-token");
    assert_eq!((status, body["error"].as_str()), (401, Some("invalid_token")), "{body}");
    let basic = [("Authorization".to_string(), format!("Basic {access}"))];
    let (status, _) = support::request(server.address, "GET", GRANT_PATH, &basic, b"");
    assert_eq!(status, 401);
    // And the API's own keys are not tokens.
    let (status, _) = with_bearer(&server, "GET", GRANT_PATH, &server.admin.secret);
    assert_eq!(status, 401);
    assert_eq!(with_bearer(&server, "GET", GRANT_PATH, access).0, 200);
}

#[test]
fn the_operators_password_routes_check_the_rule_the_account_and_the_key() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let (status, body) = set_password(&server, "bob", "short");
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_password")), "{body}");
    let (status, body) = set_password(&server, "bob", &"x".repeat(129));
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_password")), "{body}");
    let (status, body) = set_password(&server, "nobody", "long enough");
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_account")), "{body}");
    let (status, body) = server.admin.put("/v1/admin/accounts/bob/password", r#"{"pass":"x"}"#);
    assert_eq!((status, body["code"].as_str()), (400, Some("malformed")), "{body}");
    let (status, body) = server.admin.delete("/v1/admin/accounts/nobody/password");
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_account")), "{body}");
    // A trader key may not set passwords, and an unsigned request is refused.
    let trader = server.trader("dave", &[]);
    let (status, _) = trader
        .put("/v1/admin/accounts/dave/password", &json!({ "password": "mine mine" }).to_string());
    assert_eq!(status, 403);
    let (status, _) = support::request(
        server.address,
        "PUT",
        "/v1/admin/accounts/dave/password",
        &[],
        br#"{"password":"mine mine"}"#,
    );
    assert_eq!(status, 401);
    // Never stored as given.
    let keys = std::fs::read_to_string(directory.path().join("server/keys.json")).unwrap();
    assert!(!keys.contains("alice-password"));
    assert!(keys.contains("$argon2id$"));
}

#[test]
fn a_changed_or_removed_password_ends_logins_and_their_tokens() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let (_, tokens) = login(&server, "alice", "alice-password");
    let refresh = tokens["refresh_token"].as_str().unwrap();
    set_password(&server, "alice", "a new password");
    assert_eq!(login(&server, "alice", "alice-password").0, 401);
    let (status, body) =
        token_request(&server, &[("grant_type", "refresh_token"), ("refresh_token", refresh)]);
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_grant")), "{body}");
    let (_, tokens) = login(&server, "alice", "a new password");
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(with_bearer(&server, "GET", GRANT_PATH, access).0, 200);
    let (status, body) = server.admin.delete("/v1/admin/accounts/alice/password");
    assert_eq!(
        (status, &body),
        (200, &json!({ "account": "alice", "has_password": false, "removed": true }))
    );
    assert_eq!(login(&server, "alice", "a new password").0, 401);
    assert_eq!(with_bearer(&server, "GET", GRANT_PATH, access).0, 401);
}

#[test]
fn tokens_survive_a_restart_with_the_same_master_key() {
    let directory = tempfile::tempdir().unwrap();
    let server = server_with_alice(directory.path());
    let (_, tokens) = login(&server, "alice", "alice-password");
    server.stop();
    let server = TestServer::start(directory.path(), false);
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(with_bearer(&server, "GET", GRANT_PATH, access).0, 200);
    assert_eq!(login(&server, "alice", "alice-password").0, 200, "the password is durable");
}

#[test]
fn the_demo_gives_alice_and_bob_a_password_and_keeps_one_the_operator_changed() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::start(directory.path(), true);
    let shown = &server.server.as_ref().unwrap().notes.demo_passwords;
    let expected = [
        ("alice".to_string(), "alice-demo-password".to_string()),
        ("bob".to_string(), "bob-demo-password".to_string()),
    ];
    assert_eq!(shown, &expected);
    let (status, tokens) = login(&server, "alice", "alice-demo-password");
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(claims(tokens["access_token"].as_str().unwrap())["sub"], "alice");
    assert_eq!(login(&server, "bob", "bob-demo-password").0, 200);
    set_password(&server, "alice", "the operator's own");
    server.stop();
    let server = TestServer::start(directory.path(), true);
    let shown = &server.server.as_ref().unwrap().notes.demo_passwords;
    assert_eq!(shown, &expected[1..], "alice's password is no longer the demo's: not shown");
    assert_eq!(login(&server, "alice", "alice-demo-password").0, 401);
    assert_eq!(login(&server, "alice", "the operator's own").0, 200);
}

#[test]
fn the_token_endpoint_slows_then_locks_a_guessed_password() {
    let directory = tempfile::tempdir().unwrap();
    let mut config = support::config(directory.path());
    config.auth.login_failures_free = 2;
    config.auth.login_failures_lock = 4;
    config.auth.login_lock_s = 60;
    let server = TestServer::start_with(config, true);
    for attempt in 0..2 {
        let (status, body) = login(&server, "alice", "not-her-password");
        assert_eq!((status, body["error"].as_str()), (401, Some("invalid_grant")), "{attempt}");
    }
    // The third failure locks for a second; a try within it is refused unchecked.
    assert_eq!(login(&server, "alice", "not-her-password").0, 401);
    let (status, body) = login(&server, "alice", "alice-demo-password");
    assert_eq!((status, body["error"].as_str()), (429, Some("invalid_grant")), "{body}");
    assert!(body["error_description"].as_str().unwrap().contains("locked"), "{body}");
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    // A success ends the run: three more failures are needed for a lock again.
    assert_eq!(login(&server, "alice", "alice-demo-password").0, 200);
    for _ in 0..2 {
        assert_eq!(login(&server, "alice", "not-her-password").0, 401);
    }
    assert_eq!(login(&server, "alice", "alice-demo-password").0, 200);
}
