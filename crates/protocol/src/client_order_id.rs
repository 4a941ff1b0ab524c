//! The client order id rule every protocol shares: 1 to `CLIENT_ORDER_ID_BYTES_MAX`
//! printable ASCII characters, no spaces. A UUID (36) fits, and so do the ids of the
//! clients traders already run: tqsdk's `PYSDK_insert_` and 32 hex digits (45), and the
//! longer FIX ClOrdIDs. The binary protocol's field is this wide; REST, WebSocket and
//! the binary protocol all check ids with `is_valid`.

/// The longest client order id, in bytes.
pub const CLIENT_ORDER_ID_BYTES_MAX: usize = 64;

/// Whether `id` may name an order.
pub fn is_valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= CLIENT_ORDER_ID_BYTES_MAX
        && id.bytes().all(|byte| byte.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_1_to_64_printable_characters_without_spaces() {
        assert!(is_valid("a"));
        assert!(is_valid("123e4567-e89b-12d3-a456-426614174000"));
        assert!(is_valid("PYSDK_insert_0123456789abcdef0123456789abcdef"), "tqsdk's");
        assert!(is_valid(&"x".repeat(CLIENT_ORDER_ID_BYTES_MAX)));
        assert_eq!(CLIENT_ORDER_ID_BYTES_MAX, 64);
        assert!(!is_valid(""));
        assert!(!is_valid("has space"));
        assert!(!is_valid(&"x".repeat(CLIENT_ORDER_ID_BYTES_MAX + 1)));
        assert!(!is_valid("é"));
        assert!(!is_valid("tab\there"));
    }
}
