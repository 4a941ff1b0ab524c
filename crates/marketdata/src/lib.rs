//! Market data: what the exchange tells everyone, derived from the engine's released
//! (durable) events. It owns the order-level books as the public sees them (`book`:
//! every resting order by its exchange id, levels, best bid and offer), their making
//! from events (`derive`), candles (`candles`), the feed's binary messages (`message`,
//! ITCH-like) and packets (`mold`, MoldUDP64-style), and the subscriber's side
//! (`rebuild`: books from messages, gaps found, snapshots applied). It never does I/O,
//! spawns threads or reads a clock (times come inside events), and it never publishes
//! who owns an order: accounts and client order ids stay inside `derive`.

pub mod book;
pub mod candles;
pub mod derive;
pub mod message;
pub mod mold;
pub mod rebuild;

pub use book::{Books, Level, OrderEntry};
pub use derive::FeedBuilder;
pub use message::Message;
pub use rebuild::Rebuilder;
