//! The replay format (`shared/spec/replay-format.md`): commands as JSON lines in,
//! events as JSON lines out, the final state as one JSON document. Pure functions over
//! text and the engine's types; reading and writing files is the caller's business.

pub mod parse;
pub mod print;
pub mod state;

pub use parse::{parse_line, Malformed, ParsedLine};
pub use print::{write_command, write_event};
pub use state::{state_digest, state_document};
