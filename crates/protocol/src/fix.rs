//! FIX 4.4's tag=value encoding (`docs/fix.md`), both ways, for the server's FIX
//! acceptor and for clients (the load generator): finding a whole message in a byte
//! stream (BeginString, BodyLength, CheckSum), reading its fields without copying them,
//! and writing a message (header, body, length and checksum) into a buffer kept for
//! many messages. What a message means (the session, orders) is the server's.
//!
//! It never trusts its input: every malformed message is an error saying what is wrong
//! (the session answers it with a Reject or a Logout), never a panic, and it reads no
//! byte beyond `MESSAGE_BYTES_MAX` for one message (the decoders are fuzzed:
//! `crates/server/fuzz`, `fix_decode`). Writing allocates nothing once its buffers
//! have grown to a message's size.

/// The version this codec speaks.
pub const BEGIN_STRING: &str = "FIX.4.4";
/// The field separator.
pub const SOH: u8 = 0x01;
/// One message's bytes at most, whole (a longer one is refused before it is read).
pub const MESSAGE_BYTES_MAX: usize = 8 * 1024;
/// Fields in one message at most.
pub const FIELDS_MAX: usize = 256;

/// What every message starts with, up to BodyLength's value.
const PREFIX: &[u8] = b"8=FIX.4.4\x019=";
/// `10=` and three digits and SOH.
const TRAILER_BYTES: usize = 7;

/// The tags Bourse reads or writes.
pub mod tag {
    pub const AVG_PX: u32 = 6;
    pub const BEGIN_SEQ_NO: u32 = 7;
    pub const BEGIN_STRING: u32 = 8;
    pub const BODY_LENGTH: u32 = 9;
    pub const CHECK_SUM: u32 = 10;
    pub const CL_ORD_ID: u32 = 11;
    pub const CUM_QTY: u32 = 14;
    pub const END_SEQ_NO: u32 = 16;
    pub const EXEC_ID: u32 = 17;
    pub const EXEC_INST: u32 = 18;
    pub const LAST_PX: u32 = 31;
    pub const LAST_QTY: u32 = 32;
    pub const MSG_SEQ_NUM: u32 = 34;
    pub const MSG_TYPE: u32 = 35;
    pub const NEW_SEQ_NO: u32 = 36;
    pub const ORDER_ID: u32 = 37;
    pub const ORDER_QTY: u32 = 38;
    pub const ORD_STATUS: u32 = 39;
    pub const ORD_TYPE: u32 = 40;
    pub const ORIG_CL_ORD_ID: u32 = 41;
    pub const POSS_DUP_FLAG: u32 = 43;
    pub const PRICE: u32 = 44;
    pub const REF_SEQ_NUM: u32 = 45;
    pub const SENDER_COMP_ID: u32 = 49;
    pub const SENDING_TIME: u32 = 52;
    pub const SIDE: u32 = 54;
    pub const SYMBOL: u32 = 55;
    pub const TARGET_COMP_ID: u32 = 56;
    pub const TEXT: u32 = 58;
    pub const TIME_IN_FORCE: u32 = 59;
    pub const TRANSACT_TIME: u32 = 60;
    pub const POSITION_EFFECT: u32 = 77;
    pub const SIGNATURE: u32 = 89;
    pub const SECURE_DATA_LEN: u32 = 90;
    pub const SECURE_DATA: u32 = 91;
    pub const SIGNATURE_LENGTH: u32 = 93;
    pub const RAW_DATA_LENGTH: u32 = 95;
    pub const RAW_DATA: u32 = 96;
    pub const POSS_RESEND: u32 = 97;
    pub const ENCRYPT_METHOD: u32 = 98;
    pub const CXL_REJ_REASON: u32 = 102;
    pub const ORD_REJ_REASON: u32 = 103;
    pub const HEART_BT_INT: u32 = 108;
    pub const TEST_REQ_ID: u32 = 112;
    pub const ORIG_SENDING_TIME: u32 = 122;
    pub const GAP_FILL_FLAG: u32 = 123;
    pub const RESET_SEQ_NUM_FLAG: u32 = 141;
    pub const EXEC_TYPE: u32 = 150;
    pub const LEAVES_QTY: u32 = 151;
    pub const REF_TAG_ID: u32 = 371;
    pub const REF_MSG_TYPE: u32 = 372;
    pub const SESSION_REJECT_REASON: u32 = 373;
    pub const BUSINESS_REJECT_REASON: u32 = 380;
    pub const CXL_REJ_RESPONSE_TO: u32 = 434;
    pub const SECONDARY_EXEC_ID: u32 = 527;
    pub const USERNAME: u32 = 553;
    pub const PASSWORD: u32 = 554;
}

/// The data fields: a length tag, then the tag whose value is that many bytes (which
/// may hold SOH).
const DATA_FIELDS: [(u32, u32); 3] = [
    (tag::RAW_DATA_LENGTH, tag::RAW_DATA),
    (tag::SECURE_DATA_LEN, tag::SECURE_DATA),
    (tag::SIGNATURE_LENGTH, tag::SIGNATURE),
];

/// Why bytes are not a whole message. `skip` is the message's length when its frame
/// holds together (only its checksum is wrong): the session may drop it and go on;
/// otherwise the stream cannot be followed any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// It does not start with `8=FIX.4.4<SOH>9=`.
    BeginString,
    /// BodyLength is not a number followed by SOH.
    BodyLength,
    /// Longer than `MESSAGE_BYTES_MAX`.
    TooLong,
    /// BodyLength's count of bytes is not followed by `10=nnn<SOH>`.
    LengthMismatch,
    /// The checksum differs from the bytes' sum (the message is `skip` bytes long).
    CheckSum { computed: u8, received: u8, skip: usize },
}

impl FrameError {
    /// Says what is wrong, for a Reject's or a Logout's Text.
    pub fn text(self) -> &'static str {
        match self {
            FrameError::BeginString => "a message must start with 8=FIX.4.4 then 9=",
            FrameError::BodyLength => "BodyLength (9) is not a number",
            FrameError::TooLong => "the message is longer than 8192 bytes",
            FrameError::LengthMismatch => "BodyLength (9) does not end where CheckSum (10) starts",
            FrameError::CheckSum { .. } => "CheckSum (10) does not match the message's bytes",
        }
    }
}

/// The length of the whole message at the start of `bytes`, its checksum checked;
/// `Ok(None)` while more bytes are needed.
pub fn frame(bytes: &[u8]) -> Result<Option<usize>, FrameError> {
    let known = bytes.len().min(PREFIX.len());
    if bytes[..known] != PREFIX[..known] {
        return Err(FrameError::BeginString);
    }
    if bytes.len() <= PREFIX.len() {
        return Ok(None);
    }
    let mut body_length: usize = 0;
    let mut at = PREFIX.len();
    loop {
        let Some(&byte) = bytes.get(at) else { return Ok(None) };
        match byte {
            b'0'..=b'9' if at - PREFIX.len() < 5 => {
                body_length = body_length * 10 + usize::from(byte - b'0');
            }
            SOH if at > PREFIX.len() => break,
            _ => return Err(FrameError::BodyLength),
        }
        at += 1;
    }
    let body_start = at + 1;
    let trailer_start = body_start + body_length;
    let end = trailer_start + TRAILER_BYTES;
    if end > MESSAGE_BYTES_MAX {
        return Err(FrameError::TooLong);
    }
    if bytes.len() < end {
        return Ok(None);
    }
    let trailer = &bytes[trailer_start..end];
    if &trailer[..3] != b"10=" || trailer[6] != SOH || bytes[trailer_start - 1] != SOH {
        return Err(FrameError::LengthMismatch);
    }
    let Some(received) = three_digits(&trailer[3..6]) else {
        return Err(FrameError::LengthMismatch);
    };
    let computed = checksum(&bytes[..trailer_start]);
    if u32::from(computed) != received {
        let received = u8::try_from(received).unwrap_or(u8::MAX);
        return Err(FrameError::CheckSum { computed, received, skip: end });
    }
    Ok(Some(end))
}

fn three_digits(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |value, &digit| {
        digit.is_ascii_digit().then(|| value * 10 + u32::from(digit - b'0'))
    })
}

/// FIX's checksum: the bytes' sum modulo 256.
pub fn checksum(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |sum, &byte| sum.wrapping_add(byte))
}

/// Where one field's value lies in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub tag: u32,
    start: u32,
    end: u32,
}

/// Why a framed message's fields cannot be read; `tag` is the field's when known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldError {
    /// A tag is not a positive number followed by `=`.
    InvalidTag,
    /// A field has no value.
    NoValue { tag: u32 },
    /// A data field's length is not a number, or runs past the message.
    DataLength { tag: u32 },
    /// More than `FIELDS_MAX` fields.
    TooManyFields,
}

/// A framed message's fields, read without copying (`fields` is a buffer kept for many
/// messages: reading allocates nothing once it has grown).
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    bytes: &'a [u8],
    fields: &'a [Field],
}

impl<'a> Message<'a> {
    /// Reads the fields of `bytes`, a whole message (`frame` found it), into `fields`.
    pub fn parse(bytes: &'a [u8], fields: &'a mut Vec<Field>) -> Result<Message<'a>, FieldError> {
        fields.clear();
        let mut at = 0usize;
        let mut data_length: Option<(u32, usize)> = None;
        while at < bytes.len() {
            let mut tag: u32 = 0;
            let tag_start = at;
            while let Some(&byte) = bytes.get(at) {
                if byte == b'=' {
                    break;
                }
                if !byte.is_ascii_digit() || at - tag_start >= 9 {
                    return Err(FieldError::InvalidTag);
                }
                tag = tag * 10 + u32::from(byte - b'0');
                at += 1;
            }
            if at == tag_start || tag == 0 || at >= bytes.len() {
                return Err(FieldError::InvalidTag);
            }
            at += 1;
            let start = at;
            let end = match data_length.take() {
                Some((data_tag, length)) if data_tag == tag => {
                    let end = start.checked_add(length).filter(|&end| end < bytes.len());
                    match end {
                        Some(end) if bytes[end] == SOH => end,
                        _ => return Err(FieldError::DataLength { tag }),
                    }
                }
                _ => match bytes[start..].iter().position(|&byte| byte == SOH) {
                    Some(offset) => start + offset,
                    None => return Err(FieldError::NoValue { tag }),
                },
            };
            if end == start {
                return Err(FieldError::NoValue { tag });
            }
            if let Some(&(_, data_tag)) = DATA_FIELDS.iter().find(|(length, _)| *length == tag) {
                let length = parse_u64(&bytes[start..end])
                    .and_then(|length| usize::try_from(length).ok())
                    .ok_or(FieldError::DataLength { tag })?;
                data_length = Some((data_tag, length));
            }
            if fields.len() >= FIELDS_MAX {
                return Err(FieldError::TooManyFields);
            }
            // (`frame` bounds a message to MESSAGE_BYTES_MAX, far below u32::MAX.)
            fields.push(Field { tag, start: start as u32, end: end as u32 });
            at = end + 1;
        }
        Ok(Message { bytes, fields })
    }

    /// The message's bytes, whole.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn fields(&self) -> impl Iterator<Item = (u32, &'a [u8])> + '_ {
        self.fields.iter().map(|field| (field.tag, self.value(field)))
    }

    fn value(&self, field: &Field) -> &'a [u8] {
        &self.bytes[field.start as usize..field.end as usize]
    }

    /// The first value of `tag`.
    pub fn get(&self, tag: u32) -> Option<&'a [u8]> {
        self.fields.iter().find(|field| field.tag == tag).map(|field| self.value(field))
    }

    /// The first value of `tag` as text (`None` if absent or not UTF-8).
    pub fn text(&self, tag: u32) -> Option<&'a str> {
        self.get(tag).and_then(|value| std::str::from_utf8(value).ok())
    }

    /// MsgType (35).
    pub fn msg_type(&self) -> Option<&'a str> {
        self.text(tag::MSG_TYPE)
    }

    /// The first value of `tag` as a whole number: `Err(())` when present but not one.
    #[allow(clippy::result_unit_err)]
    pub fn number(&self, tag: u32) -> Result<Option<u64>, ()> {
        match self.get(tag) {
            None => Ok(None),
            Some(value) => parse_u64(value).map(Some).ok_or(()),
        }
    }

    /// A Boolean field (`Y`/`N`): `Err(())` when present but neither.
    #[allow(clippy::result_unit_err)]
    pub fn flag(&self, tag: u32) -> Result<bool, ()> {
        match self.get(tag) {
            None | Some(b"N") => Ok(false),
            Some(b"Y") => Ok(true),
            Some(_) => Err(()),
        }
    }
}

/// A whole number of at most 18 digits.
pub fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &digit| {
        digit.is_ascii_digit().then(|| value * 10 + u64::from(digit - b'0'))
    })
}

/// Writes messages: `start` a body, add fields, `finish` it into an output buffer with
/// BeginString, BodyLength and CheckSum.
#[derive(Default)]
pub struct Writer {
    body: Vec<u8>,
}

impl Writer {
    /// Begins a message of `msg_type`: MsgType is its first field.
    pub fn start(&mut self, msg_type: &str) -> &mut Self {
        self.body.clear();
        self.str(tag::MSG_TYPE, msg_type)
    }

    pub fn bytes(&mut self, tag: u32, value: &[u8]) -> &mut Self {
        write_u64(&mut self.body, u64::from(tag));
        self.body.push(b'=');
        self.body.extend_from_slice(value);
        self.body.push(SOH);
        self
    }

    pub fn str(&mut self, tag: u32, value: &str) -> &mut Self {
        self.bytes(tag, value.as_bytes())
    }

    pub fn number(&mut self, tag: u32, value: u64) -> &mut Self {
        write_u64(&mut self.body, u64::from(tag));
        self.body.push(b'=');
        write_u64(&mut self.body, value);
        self.body.push(SOH);
        self
    }

    pub fn char(&mut self, tag: u32, value: u8) -> &mut Self {
        self.bytes(tag, &[value])
    }

    /// A decimal of `units` at `scale` places, in its shortest form (`1.5`, `100`).
    pub fn decimal(&mut self, tag: u32, units: i128, scale: u32) -> &mut Self {
        write_u64(&mut self.body, u64::from(tag));
        self.body.push(b'=');
        write_decimal(&mut self.body, units, scale);
        self.body.push(SOH);
        self
    }

    /// A UTCTimestamp of `ms` milliseconds since the Unix epoch
    /// (`YYYYMMDD-HH:MM:SS.sss`).
    pub fn timestamp(&mut self, tag: u32, ms: u64) -> &mut Self {
        write_u64(&mut self.body, u64::from(tag));
        self.body.push(b'=');
        write_timestamp(&mut self.body, ms);
        self.body.push(SOH);
        self
    }

    /// Fields written by `write` (for a renderer that writes its own).
    pub fn with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> &mut Self {
        write(&mut self.body);
        self
    }

    /// Appends the whole message to `out`; returns where it starts there.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        out.extend_from_slice(PREFIX);
        write_u64(out, self.body.len() as u64);
        out.push(SOH);
        out.extend_from_slice(&self.body);
        let sum = checksum(&out[start..]);
        out.extend_from_slice(b"10=");
        out.extend_from_slice(&[b'0' + sum / 100, b'0' + sum / 10 % 10, b'0' + sum % 10, SOH]);
        start
    }
}

/// Appends `value` in decimal digits.
pub fn write_u64(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `units` at `scale` places in the shortest form (no trailing zeros).
pub fn write_decimal(out: &mut Vec<u8>, units: i128, scale: u32) {
    if units < 0 {
        out.push(b'-');
    }
    let magnitude = units.unsigned_abs();
    let divisor = 10u128.checked_pow(scale).unwrap_or(1);
    let (whole, mut fraction) = (magnitude / divisor, magnitude % divisor);
    let mut digits = [0u8; 40];
    let mut at = digits.len();
    let mut whole_left = whole;
    loop {
        at -= 1;
        digits[at] = b'0' + (whole_left % 10) as u8;
        whole_left /= 10;
        if whole_left == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    if fraction == 0 {
        return;
    }
    let mut places = scale;
    while fraction % 10 == 0 {
        fraction /= 10;
        places -= 1;
    }
    out.push(b'.');
    let mut at = digits.len();
    for _ in 0..places {
        at -= 1;
        digits[at] = b'0' + (fraction % 10) as u8;
        fraction /= 10;
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `ms` (since the Unix epoch) as a UTCTimestamp, `YYYYMMDD-HH:MM:SS.sss`.
pub fn write_timestamp(out: &mut Vec<u8>, ms: u64) {
    let seconds = ms / 1000;
    let (year, month, day) = bourse_core::civil::civil_from_days((seconds / 86_400) as i64);
    let of_day = seconds % 86_400;
    let two = |out: &mut Vec<u8>, value: u64| {
        out.extend_from_slice(&[b'0' + (value / 10 % 10) as u8, b'0' + (value % 10) as u8])
    };
    let year = year.clamp(0, 9999) as u64;
    two(out, year / 100);
    two(out, year % 100);
    two(out, u64::from(month));
    two(out, u64::from(day));
    out.push(b'-');
    two(out, of_day / 3600);
    out.push(b':');
    two(out, of_day / 60 % 60);
    out.push(b':');
    two(out, of_day % 60);
    out.push(b'.');
    let millis = ms % 1000;
    out.extend_from_slice(&[
        b'0' + (millis / 100) as u8,
        b'0' + (millis / 10 % 10) as u8,
        b'0' + (millis % 10) as u8,
    ]);
}

/// A UTCTimestamp (`YYYYMMDD-HH:MM:SS`, then optionally `.` and 3, 6 or 9 digits) as
/// milliseconds since the Unix epoch; `None` if it is not one.
pub fn parse_timestamp(text: &[u8]) -> Option<u64> {
    if text.len() < 17 || text[8] != b'-' || text[11] != b':' || text[14] != b':' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| parse_u64(&text[range]);
    let (year, month, day) = (number(0..4)?, number(4..6)?, number(6..8)?);
    let (hour, minute, second) = (number(9..11)?, number(12..14)?, number(15..17)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 || year < 1970 {
        return None;
    }
    let millis = match &text[17..] {
        [] => 0,
        [b'.', fraction @ ..] if matches!(fraction.len(), 3 | 6 | 9) => {
            parse_u64(fraction)? / 10u64.pow(fraction.len() as u32 - 3)
        }
        _ => return None,
    };
    let days = bourse_core::civil::days_from_civil(year as i64, month as u32, day as u32);
    let seconds = u64::try_from(days).ok()? * 86_400 + hour * 3600 + minute * 60 + second;
    Some(seconds * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> Vec<u8> {
        let mut writer = Writer::default();
        let mut parts = body.split('|');
        let msg_type = parts.next().unwrap();
        writer.start(msg_type);
        for part in parts.filter(|part| !part.is_empty()) {
            let (tag, value) = part.split_once('=').unwrap();
            writer.str(tag.parse().unwrap(), value);
        }
        let mut out = Vec::new();
        writer.finish(&mut out);
        out
    }

    #[test]
    fn a_written_message_frames_and_reads_back() {
        let bytes = message("D|49=CLIENT|56=BOURSE|34=2|11=a1|55=BTC-USD|54=1");
        let text = String::from_utf8(bytes.clone()).unwrap().replace('\x01', "|");
        assert!(text.starts_with("8=FIX.4.4|9="), "{text}");
        assert_eq!(frame(&bytes), Ok(Some(bytes.len())));
        for cut in 0..bytes.len() {
            assert_eq!(frame(&bytes[..cut]), Ok(None), "a prefix of {cut} bytes needs more");
        }
        let mut fields = Vec::new();
        let message = Message::parse(&bytes, &mut fields).unwrap();
        assert_eq!(message.msg_type(), Some("D"));
        assert_eq!(message.text(tag::CL_ORD_ID), Some("a1"));
        assert_eq!(message.number(tag::MSG_SEQ_NUM), Ok(Some(2)));
        assert_eq!(message.number(tag::SYMBOL), Err(()));
        // The checksum QuickFIX computes: the sum of every byte before "10=".
        let trailer = &text[text.len() - 7..];
        assert_eq!(trailer, format!("10={:03}|", checksum(&bytes[..bytes.len() - 7])));
    }

    #[test]
    fn bad_frames_say_what_is_wrong() {
        let good = message("0|34=1");
        let mut bad_sum = good.clone();
        let at = bad_sum.len() - 2;
        bad_sum[at] = if bad_sum[at] == b'9' { b'0' } else { bad_sum[at] + 1 };
        assert!(
            matches!(frame(&bad_sum), Err(FrameError::CheckSum { skip, .. }) if skip == good.len())
        );
        assert_eq!(frame(b"8=FIX.4.2\x019=5\x01"), Err(FrameError::BeginString));
        assert_eq!(frame(b"9=5"), Err(FrameError::BeginString));
        assert_eq!(frame(b"8=FIX.4.4\x019=x"), Err(FrameError::BodyLength));
        assert_eq!(frame(b"8=FIX.4.4\x019=\x01"), Err(FrameError::BodyLength));
        assert_eq!(frame(b"8=FIX.4.4\x019=999999"), Err(FrameError::BodyLength));
        assert_eq!(frame(b"8=FIX.4.4\x019=90000\x01"), Err(FrameError::TooLong));
        let text = String::from_utf8(good).unwrap();
        let longer = text.replacen("9=", "9=1", 1);
        assert!(matches!(frame(longer.as_bytes()), Err(FrameError::LengthMismatch) | Ok(None)));
        let shorter = text.replacen("9=1", "9=", 1);
        assert_eq!(frame(shorter.as_bytes()), Err(FrameError::LengthMismatch));
    }

    #[test]
    fn fields_are_checked_and_data_fields_may_hold_soh() {
        let mut fields = Vec::new();
        let data = b"35=A\x0195=3\x0196=a\x01b\x01553=k\x01";
        let message = Message::parse(data, &mut fields).unwrap();
        assert_eq!(message.get(tag::RAW_DATA), Some(&b"a\x01b"[..]));
        assert_eq!(message.text(tag::USERNAME), Some("k"));
        for (bad, error) in [
            (&b"35=A\x01x=1\x01"[..], FieldError::InvalidTag),
            (b"35=A\x010=1\x01", FieldError::InvalidTag),
            (b"35=A\x0158=\x01", FieldError::NoValue { tag: 58 }),
            (b"35=A\x0158=x", FieldError::NoValue { tag: 58 }),
            (b"35=A\x0195=9\x0196=ab\x01", FieldError::DataLength { tag: 96 }),
            (b"35=A\x0195=z\x01", FieldError::DataLength { tag: 95 }),
        ] {
            assert_eq!(Message::parse(bad, &mut fields).err(), Some(error));
        }
    }

    #[test]
    fn decimals_and_timestamps_round_trip() {
        let mut out = Vec::new();
        for (units, scale, text) in
            [(150, 2, "1.5"), (100, 2, "1"), (-5, 3, "-0.005"), (0, 8, "0"), (12, 0, "12")]
        {
            out.clear();
            write_decimal(&mut out, units, scale);
            assert_eq!(out, text.as_bytes());
        }
        for ms in [0, 1_700_000_000_123, 951_782_400_000, 4_102_444_799_999] {
            out.clear();
            write_timestamp(&mut out, ms);
            assert_eq!(parse_timestamp(&out), Some(ms), "{}", String::from_utf8_lossy(&out));
        }
        out.clear();
        write_timestamp(&mut out, 1_700_000_000_123);
        assert_eq!(out, b"20231114-22:13:20.123");
        assert_eq!(parse_timestamp(b"20231114-22:13:20.123456"), Some(1_700_000_000_123));
        assert_eq!(parse_timestamp(b"20231114-22:13:20"), Some(1_700_000_000_000));
        for bad in [&b"20231314-22:13:20"[..], b"2023111-22:13:20", b"20231114-22:13:20.1", b""] {
            assert_eq!(parse_timestamp(bad), None);
        }
    }
}
