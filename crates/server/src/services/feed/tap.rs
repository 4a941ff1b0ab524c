//! The engine's tap (every command's events, once durable) as the server takes it:
//! each release is queued for the hub without waiting (a full queue marks the hub
//! behind, and it resynchronises its connections) and handed to the services that
//! follow every release (the candle service; the multicast publisher when the feed is
//! on).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bourse_engine::{Released, ResultSink};
use tokio::sync::mpsc;

/// Releases waiting for the hub, at most; beyond it the hub is behind (`resync`).
pub const TAP_QUEUE_RELEASES: usize = 4_096;

/// Where the tap's releases go besides the hub: a service's input.
pub type AlsoTo = Box<dyn Fn(Arc<Released>) + Send + Sync>;

/// The engine's side of the tap: queues each release for the hub without waiting, and
/// hands it to each service of `also_to`.
pub struct TapSink {
    sender: mpsc::Sender<Arc<Released>>,
    overflowed: Arc<AtomicBool>,
    also_to: Vec<AlsoTo>,
}

impl ResultSink for TapSink {
    fn deliver(&self, released: Released) {
        let released = Arc::new(released);
        for service in &self.also_to {
            service(Arc::clone(&released));
        }
        if self.sender.try_send(released).is_err() {
            self.overflowed.store(true, Ordering::SeqCst);
        }
    }
}

/// The tap's sink and the hub's end of it; each of `also_to` also gets every release.
pub fn tap_channel(
    also_to: Vec<AlsoTo>,
) -> (TapSink, mpsc::Receiver<Arc<Released>>, Arc<AtomicBool>) {
    let (sender, receiver) = mpsc::channel(TAP_QUEUE_RELEASES);
    let overflowed = Arc::new(AtomicBool::new(false));
    (TapSink { sender, overflowed: Arc::clone(&overflowed), also_to }, receiver, overflowed)
}
