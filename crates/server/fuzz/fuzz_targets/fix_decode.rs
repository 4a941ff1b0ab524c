//! Arbitrary bytes as what a FIX client sends: the acceptor frames them
//! (`bourse_protocol::fix::frame`), reads the fields of a whole message and decodes
//! the application messages into order entry's requests (`bourse_server::gateways::fix::orders`).
//! None of it may panic; what it accepts must hold together (a frame is within the
//! limit and ends with its checksum; a decoded order has a valid client order id and
//! a positive quantity; a refusal names a tag and a reason).

#![no_main]

use bourse_protocol::fix::{frame, Message, MESSAGE_BYTES_MAX};
use bourse_server::gateways::fix::orders::{decode, Application};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let mut fields = Vec::new();
    // The bytes as a stream, and as one message's fields (what `frame` lets through).
    if let Ok(Some(length)) = frame(bytes) {
        assert!(length <= MESSAGE_BYTES_MAX && length <= bytes.len());
        assert!(bytes[..length].ends_with(b"\x01"));
    }
    let Ok(message) = Message::parse(bytes, &mut fields) else { return };
    for msg_type in ["D", "F", "G"] {
        match decode(msg_type, &message) {
            Ok(Some(Application::NewOrder(order) | Application::Unsupported { order, .. })) => {
                // (Checked by its type: only the rule makes one.)
                assert!(order.client_order_id.is_some(), "a FIX order names its ClOrdID");
                assert!(order.size.qty().is_some_and(|qty| qty.mantissa() > 0));
            }
            Ok(_) => {}
            Err(refused) => assert!(refused.tag.is_some() && !refused.text.is_empty()),
        }
    }
});
