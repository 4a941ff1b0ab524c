//! The client order id rule every protocol shares: 1 to `CLIENT_ORDER_ID_BYTES_MAX`
//! printable ASCII characters, no spaces. A UUID (36) fits, and so do the ids of the
//! clients traders already run: tqsdk's `PYSDK_insert_` and 32 hex digits (45), and the
//! longer FIX ClOrdIDs. The binary protocol's field is this wide; REST, WebSocket and
//! the binary protocol all check ids with `is_valid`, and order entry's requests carry
//! them as `CheckedClientOrderId`, which only the rule makes.

use std::borrow::Cow;
use std::fmt;

/// The longest client order id, in bytes.
pub const CLIENT_ORDER_ID_BYTES_MAX: usize = 64;

/// Whether `id` may name an order.
pub fn is_valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= CLIENT_ORDER_ID_BYTES_MAX
        && id.bytes().all(|byte| byte.is_ascii_graphic())
}

/// A client order id that keeps the rule: `parse` is the only way to make one, so a
/// request holding it needs no second look.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CheckedClientOrderId<'a>(Cow<'a, str>);

impl<'a> CheckedClientOrderId<'a> {
    /// `id`, if it may name an order (`is_valid`).
    pub fn parse(id: impl Into<Cow<'a, str>>) -> Result<Self, InvalidClientOrderId> {
        let id = id.into();
        match is_valid(&id) {
            true => Ok(CheckedClientOrderId(id)),
            false => Err(InvalidClientOrderId { given: id.into_owned() }),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The same id, owning its text.
    pub fn into_owned(self) -> CheckedClientOrderId<'static> {
        CheckedClientOrderId(Cow::Owned(self.0.into_owned()))
    }

    /// The same id, borrowing its text.
    pub fn borrowed(&self) -> CheckedClientOrderId<'_> {
        CheckedClientOrderId(Cow::Borrowed(&self.0))
    }
}

impl fmt::Display for CheckedClientOrderId<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// An id the rule refuses, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidClientOrderId {
    pub given: String,
}

impl fmt::Display for InvalidClientOrderId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "client_order_id must be 1 to {CLIENT_ORDER_ID_BYTES_MAX} printable ASCII characters without spaces, not {:?}",
            self.given
        )
    }
}

impl std::error::Error for InvalidClientOrderId {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_rule_makes_a_checked_id() {
        let checked = CheckedClientOrderId::parse("abc-1").expect("a valid id");
        assert_eq!(checked.as_str(), "abc-1");
        assert_eq!(checked.to_string(), "abc-1");
        assert_eq!(checked.borrowed(), checked);
        assert_eq!(checked.clone().into_owned(), checked);
        for refused in ["", "has space", "é"] {
            let error = CheckedClientOrderId::parse(refused).expect_err(refused);
            assert_eq!(error.given, refused);
            assert!(error.to_string().contains("1 to 64 printable ASCII"), "{error}");
        }
        let longest = "x".repeat(CLIENT_ORDER_ID_BYTES_MAX);
        assert!(CheckedClientOrderId::parse(longest.clone()).is_ok());
        assert!(CheckedClientOrderId::parse(longest + "x").is_err());
    }

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
