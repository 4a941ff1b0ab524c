//! Arbitrary bytes as a client frame's type and body: what the server's binary gateway
//! decodes from anyone on the network. Decoding must never panic; both forms (owned,
//! borrowed) must agree; and a frame that decodes must encode back to a frame of its
//! size that decodes to the same message.

#![no_main]

use bourse_protocol::binary::{
    decode_client, decode_client_borrowed, frame_length, FRAME_HEADER_BYTES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    let borrowed = decode_client_borrowed(frame);
    let owned = decode_client(frame);
    assert_eq!(borrowed.as_ref().err(), owned.as_ref().err());
    let (Ok(borrowed), Ok(owned)) = (borrowed, owned) else { return };
    let encoded = borrowed.encode();
    assert_eq!(owned.encode(), encoded, "the owned form encodes the same bytes");
    let length = frame_length([encoded[0], encoded[1]]);
    assert_eq!(length, Ok(frame.len()), "layouts are fixed: the same size again");
    assert_eq!(decode_client_borrowed(&encoded[FRAME_HEADER_BYTES..]), Ok(borrowed));
});
