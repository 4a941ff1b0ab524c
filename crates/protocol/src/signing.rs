//! The request-signing scheme (`docs/api.md`, Signing) as both sides compute it. A
//! signed request carries the key id, a timestamp (milliseconds since the Unix epoch,
//! `now_ms`) and the signature: hex `HMAC-SHA256(secret, timestamp + "\n" + METHOD +
//! "\n" + path-and-query + "\n" + body)`. A WebSocket or binary TCP login signs
//! `GET` of its login path with an empty body (over TCP the signature is the raw 32
//! bytes, not hex).
//!
//! Checking a request against the keys that exist, the timestamp window and replays is
//! the server's (`bourse_server::port::auth`); it computes the signature with this.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The header carrying the key id. Header names are as the server looks them up: HTTP
/// compares them without case (`docs/api.md` writes `X-Bourse-Key`).
pub const KEY_HEADER: &str = "x-bourse-key";
/// The header carrying the timestamp, milliseconds since the Unix epoch.
pub const TIMESTAMP_HEADER: &str = "x-bourse-timestamp";
/// The header carrying the signature, 64 hex digits.
pub const SIGNATURE_HEADER: &str = "x-bourse-signature";

/// The method a login signs (with its login path and an empty body).
pub const LOGIN_METHOD: &str = "GET";
/// The path a WebSocket login signs.
pub const WS_LOGIN_PATH: &str = "/v1/ws";
/// The path a binary TCP login signs.
pub const TCP_LOGIN_PATH: &str = "/v1/tcp";
/// The path a FIX Logon signs (its timestamp is the Logon's SendingTime, `docs/fix.md`).
pub const FIX_LOGIN_PATH: &str = "/v1/fix";

/// A signature's bytes (HMAC-SHA256); its hex form has twice as many digits.
pub const SIGNATURE_BYTES: usize = 32;

/// The clock of signed timestamps: milliseconds since the Unix epoch (0 if the system
/// clock is before it). The server compares a request's timestamp with its own reading.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// The message a client signs.
pub fn signing_message(
    timestamp: &str,
    method: &str,
    path_and_query: &str,
    body: &[u8],
) -> Vec<u8> {
    let mut message =
        Vec::with_capacity(timestamp.len() + method.len() + path_and_query.len() + body.len() + 3);
    write_signing_message(&mut message, timestamp, method, path_and_query, body);
    message
}

/// `signing_message` appended to `message` (a buffer kept for many requests, so that
/// signing allocates nothing for it).
pub fn write_signing_message(
    message: &mut Vec<u8>,
    timestamp: &str,
    method: &str,
    path_and_query: &str,
    body: &[u8],
) {
    for part in [
        timestamp.as_bytes(),
        b"\n",
        method.as_bytes(),
        b"\n",
        path_and_query.as_bytes(),
        b"\n",
        body,
    ] {
        message.extend_from_slice(part);
    }
}

/// A secret made into its HMAC key once, to sign many messages.
#[derive(Clone)]
pub struct Signer {
    mac: HmacSha256,
}

impl Signer {
    pub fn new(secret: &str) -> Signer {
        let mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
        Signer { mac }
    }

    /// The raw signature of `message`.
    pub fn signature(&self, message: &[u8]) -> [u8; SIGNATURE_BYTES] {
        let mut mac = self.mac.clone();
        mac.update(message);
        mac.finalize().into_bytes().into()
    }

    /// The signature of `message` as a client sends it: hex.
    pub fn sign(&self, message: &[u8]) -> String {
        hex::encode(self.signature(message))
    }

    /// Whether `signature` is `message`'s, compared in constant time.
    pub fn verify(&self, message: &[u8], signature: &[u8; SIGNATURE_BYTES]) -> bool {
        let mut mac = self.mac.clone();
        mac.update(message);
        mac.verify_slice(signature).is_ok()
    }
}

/// The signature a client sends: `HMAC-SHA256(secret, message)` as hex.
pub fn sign(secret: &str, message: &[u8]) -> String {
    Signer::new(secret).sign(message)
}

/// Whether `signature` is `HMAC-SHA256(secret, message)`, compared in constant time.
pub fn verify(secret: &str, message: &[u8], signature: &[u8; SIGNATURE_BYTES]) -> bool {
    Signer::new(secret).verify(message, signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_message_is_timestamp_method_path_and_body_on_lines() {
        let message = signing_message("1700000000000", "POST", "/v1/orders?x=1", b"{}");
        assert_eq!(message, b"1700000000000\nPOST\n/v1/orders?x=1\n{}");
        let mut appended = b"kept".to_vec();
        write_signing_message(&mut appended, "1", "GET", TCP_LOGIN_PATH, b"");
        assert_eq!(appended, b"kept1\nGET\n/v1/tcp\n");
    }

    #[test]
    fn a_signature_is_hex_hmac_sha256_of_the_secret_and_the_message() {
        // printf '1700000000000\nGET\n/v1/ws\n' | openssl dgst -sha256 -hmac secret
        let message = signing_message("1700000000000", LOGIN_METHOD, WS_LOGIN_PATH, b"");
        assert_eq!(
            sign("secret", &message),
            "63073629226a8550bd9500336636042f90bddd9c1ce3de6f4558d52a6257c495"
        );
        let signer = Signer::new("secret");
        assert_eq!(signer.sign(&message), sign("secret", &message));
        assert_eq!(hex::encode(signer.signature(&message)), sign("secret", &message));
    }

    #[test]
    fn verify_takes_the_right_signature_only() {
        let message = signing_message("1", "DELETE", "/v1/orders?client_order_id=a", b"");
        let signature = Signer::new("secret").signature(&message);
        assert!(verify("secret", &message, &signature));
        assert!(!verify("other", &message, &signature));
        assert!(!verify("secret", b"1\nDELETE\n/v1/orders?client_order_id=b\n", &signature));
        let mut bent = signature;
        bent[31] ^= 1;
        assert!(!verify("secret", &message, &bent));
    }

    #[test]
    fn the_clock_reads_milliseconds_since_the_epoch() {
        // 2020-09-13 (1.6e12 ms) is long past; 2100 is far ahead.
        assert!((1_600_000_000_000..4_102_444_800_000).contains(&now_ms()));
    }
}
