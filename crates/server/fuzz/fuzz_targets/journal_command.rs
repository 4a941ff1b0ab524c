//! Arbitrary bytes as one journal record's command payload: what recovery decodes from
//! a disk that may hold anything (a torn write, a flipped bit, another program's file).
//! Decoding must never panic; what decodes encodes again, and that encoding decodes to
//! the same command (the amend's flags, its whole-quantity bit included, survive).

#![no_main]

use bourse_journal::{decode_command, encode_command};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|payload: &[u8]| {
    let Ok(command) = decode_command(payload) else { return };
    let mut encoded = Vec::new();
    encode_command(&command, &mut encoded).expect("a decoded command encodes");
    let again = decode_command(&encoded).expect("an encoded command decodes");
    assert_eq!(again, command);
});
