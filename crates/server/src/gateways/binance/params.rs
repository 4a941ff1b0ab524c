//! A Binance request's parameters: the query string and the form body, read as one
//! list (Binance's `totalParams`), and the part of them a signature covers. Parsing is
//! strict the way Binance's is: a parameter given twice, an empty value or one an
//! endpoint does not read is refused with Binance's code and the parameter's name.
//!
//! This is the decoder of the outside bytes of `/api/v3/`: it never panics on any
//! input (a fuzz target, `binance_params`, runs it over arbitrary bytes).

use std::borrow::Cow;

use super::error::BinanceError;

/// The name of the parameter that carries the signature.
pub const SIGNATURE: &str = "signature";

/// Parameters a request may carry, at most (Binance's own requests have under 20).
pub const PARAMS_MAX: usize = 32;

/// A request's parameters, query string first, then the body's.
#[derive(Debug)]
pub struct Params<'a> {
    pairs: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl<'a> Params<'a> {
    /// Reads the query string (without `?`) and the form body. The body must be
    /// `application/x-www-form-urlencoded` text (what every Binance client sends).
    pub fn parse(query: &'a str, body: &'a [u8]) -> Result<Params<'a>, BinanceError> {
        let body = std::str::from_utf8(body).map_err(|_| {
            BinanceError::bad_request(-1100, "Illegal characters found in the request body.")
        })?;
        let mut pairs: Vec<(Cow<'a, str>, Cow<'a, str>)> = Vec::new();
        for part in [query, body] {
            for (name, value) in form_urlencoded::parse(part.as_bytes()) {
                if pairs.len() == PARAMS_MAX {
                    return Err(BinanceError::bad_request(
                        -1101,
                        format!("Too many parameters; at most {PARAMS_MAX} are read."),
                    ));
                }
                if pairs.iter().any(|(known, _)| *known == name) {
                    return Err(BinanceError::bad_request(
                        -1101,
                        format!("Duplicate values for parameter '{name}'."),
                    ));
                }
                if value.is_empty() {
                    return Err(BinanceError::bad_request(
                        -1105,
                        format!("Parameter '{name}' was empty."),
                    ));
                }
                pairs.push((name, value));
            }
        }
        Ok(Params { pairs })
    }

    /// The value of `name`, if sent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(known, _)| known == name).map(|(_, value)| value.as_ref())
    }

    /// The value of `name`, which the endpoint needs.
    pub fn required(&self, name: &str) -> Result<&str, BinanceError> {
        self.get(name).ok_or_else(|| missing(name))
    }

    /// Refuses any parameter not in `read` (nor the signing's own: `timestamp`,
    /// `recvWindow`, `signature`), as Binance does: a client that sends a parameter
    /// the exchange ignores would believe it had effect.
    pub fn only(&self, read: &[&str]) -> Result<(), BinanceError> {
        const SIGNING: [&str; 3] = ["timestamp", "recvWindow", SIGNATURE];
        match self.pairs.iter().find(|(name, _)| {
            !read.contains(&name.as_ref()) && !SIGNING.contains(&name.as_ref())
        }) {
            None => Ok(()),
            Some((name, _)) => Err(BinanceError::bad_request(
                -1104,
                format!("Not all sent parameters were read: '{name}' is not a parameter of this endpoint."),
            )),
        }
    }

    /// A whole number parameter, if sent.
    pub fn number(&self, name: &str) -> Result<Option<u64>, BinanceError> {
        self.get(name)
            .map(|text| {
                text.parse::<u64>().map_err(|_| {
                    BinanceError::bad_request(
                        -1100,
                        format!("Illegal characters found in parameter '{name}'; legal range is '^[0-9]{{1,20}}$'."),
                    )
                })
            })
            .transpose()
    }
}

/// A list request's selection: `limit` (1 to a maximum), an id to start from (`fromId`,
/// `orderId`), and a time range (`startTime`, `endTime`, ms).
#[derive(Clone, Copy, Debug)]
pub struct Selection {
    pub limit: usize,
    pub from_id: Option<u64>,
    pub start_ms: Option<u64>,
    pub end_ms: Option<u64>,
}

impl Selection {
    /// Reads `limit` (`default` when absent, at most `max`), the id parameter
    /// `from_id_name` (if the endpoint has one) and the time range.
    pub fn read(
        params: &Params<'_>,
        default: usize,
        max: usize,
        from_id_name: Option<&str>,
    ) -> Result<Selection, BinanceError> {
        let limit = match params.number("limit")? {
            None => default,
            Some(limit) if (1..=max as u64).contains(&limit) => limit as usize,
            Some(limit) => {
                return Err(BinanceError::bad_request(
                    -1100,
                    format!("Illegal value for parameter 'limit': {limit}; it is 1 to {max}."),
                ))
            }
        };
        let from_id = from_id_name.map(|name| params.number(name)).transpose()?.flatten();
        Ok(Selection {
            limit,
            from_id,
            start_ms: params.number("startTime")?,
            end_ms: params.number("endTime")?,
        })
    }

    /// Whether an item with this id and time is selected (before the limit).
    pub fn admits(&self, id: u64, time_ms: u64) -> bool {
        self.from_id.is_none_or(|from| id >= from)
            && self.start_ms.is_none_or(|start| time_ms >= start)
            && self.end_ms.is_none_or(|end| time_ms <= end)
    }

    /// The selected items (oldest first) within the limit: from an id or a start
    /// time, the first ones after it; else the latest ones, as Binance.
    pub fn window<'a, T>(&self, items: &'a [T]) -> &'a [T] {
        if self.from_id.is_some() || self.start_ms.is_some() {
            &items[..items.len().min(self.limit)]
        } else {
            &items[items.len().saturating_sub(self.limit)..]
        }
    }
}

/// A parameter the request needs and did not send.
pub fn missing(name: &str) -> BinanceError {
    BinanceError::bad_request(
        -1102,
        format!("Mandatory parameter '{name}' was not sent, was empty/null, or malformed."),
    )
}

/// The bytes a Binance signature covers: the query string followed by the body, with
/// the `signature` parameter itself taken out of whichever carries it (Binance's
/// clients put it last), and the signature's text. `None` when no part has exactly
/// one `signature`.
pub fn signed_payload<'a>(query: &'a str, body: &'a [u8]) -> Option<(Vec<u8>, &'a str)> {
    let (query_rest, query_signature) = without_signature(query.as_bytes())?;
    let (body_rest, body_signature) = without_signature(body)?;
    let signature = match (query_signature, body_signature) {
        (Some(signature), None) | (None, Some(signature)) => signature,
        _ => return None,
    };
    let signature = std::str::from_utf8(signature).ok()?;
    let mut payload = Vec::with_capacity(query.len() + body.len());
    payload.extend_from_slice(&query_rest);
    payload.extend_from_slice(&body_rest);
    Some((payload, signature))
}

/// `part` without its `signature=…` pair, and that pair's value; `None` when it has
/// the pair twice.
#[allow(clippy::type_complexity)]
fn without_signature(part: &[u8]) -> Option<(Cow<'_, [u8]>, Option<&[u8]>)> {
    let prefix = b"signature=";
    let mut found: Option<(usize, usize)> = None;
    let mut start = 0;
    for (index, piece) in part.split(|byte| *byte == b'&').enumerate() {
        let end = start + piece.len();
        if piece.starts_with(prefix) {
            if found.is_some() {
                return None;
            }
            found = Some((index, start));
        }
        start = end + 1;
    }
    let Some((index, at)) = found else { return Some((Cow::Borrowed(part), None)) };
    let tail = &part[at..];
    let length = tail.iter().position(|byte| *byte == b'&').unwrap_or(tail.len());
    let value = &tail[prefix.len()..length];
    let mut rest = Vec::with_capacity(part.len());
    if index == 0 {
        // The first pair: drop it and the `&` after it.
        rest.extend_from_slice(part.get(at + length + 1..).unwrap_or_default());
    } else {
        // A later pair: drop the `&` before it and the pair.
        rest.extend_from_slice(&part[..at - 1]);
        rest.extend_from_slice(&part[at + length..]);
    }
    Some((Cow::Owned(rest), Some(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_is_the_query_and_the_body_without_the_signature() {
        let (payload, signature) =
            signed_payload("symbol=BTCUSD&timestamp=1&signature=ab", b"").expect("one signature");
        assert_eq!((payload.as_slice(), signature), (&b"symbol=BTCUSD&timestamp=1"[..], "ab"));
        let (payload, signature) =
            signed_payload("", b"symbol=BTCUSD&side=BUY&signature=cd").expect("in the body");
        assert_eq!((payload.as_slice(), signature), (&b"symbol=BTCUSD&side=BUY"[..], "cd"));
        let (payload, signature) =
            signed_payload("signature=ef&a=1", b"b=2").expect("first in the query");
        assert_eq!((payload.as_slice(), signature), (&b"a=1b=2"[..], "ef"));
        let (payload, _) = signed_payload("a=1&signature=ef&b=2", b"").expect("in the middle");
        assert_eq!(payload.as_slice(), b"a=1&b=2");
        assert!(signed_payload("a=1", b"b=2").is_none(), "no signature");
        assert!(signed_payload("signature=1", b"signature=2").is_none(), "two signatures");
        assert!(signed_payload("signature=1&signature=2", b"").is_none(), "twice in one part");
    }

    #[test]
    fn parameters_are_read_strictly() {
        let params = Params::parse("symbol=BTCUSD&limit=5", b"side=BUY").expect("valid");
        assert_eq!(params.get("symbol"), Some("BTCUSD"));
        assert_eq!(params.get("side"), Some("BUY"));
        assert_eq!(params.number("limit").expect("a number"), Some(5));
        assert_eq!(params.required("price").unwrap_err().code, -1102);
        assert_eq!(params.only(&["symbol", "limit"]).unwrap_err().code, -1104);
        assert!(params.only(&["symbol", "limit", "side"]).is_ok());
        assert_eq!(Params::parse("a=1&a=2", b"").unwrap_err().code, -1101);
        assert_eq!(Params::parse("a=1", b"a=2").unwrap_err().code, -1101);
        assert_eq!(Params::parse("a=", b"").unwrap_err().code, -1105);
        assert_eq!(Params::parse("", &[0xff, 0xfe]).unwrap_err().code, -1100);
        assert_eq!(
            Params::parse("limit=x", b"").and_then(|p| p.number("limit")).unwrap_err().code,
            -1100
        );
        let selection = Selection::read(&params, 500, 1000, None).expect("a valid limit");
        assert_eq!(selection.limit, 5);
        assert_eq!(selection.window(&[1, 2, 3, 4, 5, 6, 7]), &[3, 4, 5, 6, 7], "the latest");
        let from = Params::parse("fromId=3&limit=2", b"").expect("valid");
        let selection = Selection::read(&from, 500, 1000, Some("fromId")).expect("valid");
        assert!(selection.admits(3, 0) && !selection.admits(2, 0));
        assert_eq!(selection.window(&[3, 4, 5]), &[3, 4], "the first after the id");
        let wide = Params::parse("limit=1001", b"").expect("valid");
        assert_eq!(Selection::read(&wide, 500, 1000, None).unwrap_err().code, -1100);
        let many: String = (0..=PARAMS_MAX).map(|index| format!("p{index}=1&")).collect();
        assert_eq!(Params::parse(&many, b"").unwrap_err().code, -1101);
        let decoded = Params::parse("newClientOrderId=a%2Fb%3Ac", b"").expect("percent-encoded");
        assert_eq!(decoded.get("newClientOrderId"), Some("a/b:c"));
    }
}
