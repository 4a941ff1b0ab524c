//! Arbitrary bytes as a peer's frame body: what a node reads from another node of its
//! cluster (or from anything that reached its peer port). Decoding must never panic or
//! allocate more than the bytes hold; what decodes encodes again to the same bytes, and
//! a hello likewise.

#![no_main]

use bourse_cluster::wire::{decode_message, encode_message, Hello};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(hello) = Hello::decode(body) {
        let mut frame = Vec::new();
        hello.encode(&mut frame);
        assert_eq!(&frame[4..], body);
    }
    let Ok(message) = decode_message(body) else { return };
    let mut frame = Vec::new();
    encode_message(&message, &mut frame);
    assert_eq!(&frame[4..], body, "a decoded message encodes to the same bytes");
});
