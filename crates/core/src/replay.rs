//! Batch mode: feed replay-format lines, get event lines, the final state and its
//! digest. This is the engine's reference behaviour, shared by `bourse replay`, the
//! tests and (later) journal export. Line numbers are sequence numbers: every line
//! counts, blank ones included, though blank lines produce nothing.

use crate::command::Command;
use crate::event::{Event, RejectReason};
use crate::exchange::{Exchange, ExchangeConfig};
use crate::format::{parse_line, state_digest, state_document, write_event};
use crate::ids::Seq;

pub struct Replay {
    exchange: Exchange,
    /// Lines fed so far; the number of the next line is `lines_fed + 1`.
    lines_fed: u64,
    events: Vec<Event>,
}

impl Default for Replay {
    fn default() -> Self {
        Replay::new()
    }
}

impl Replay {
    pub fn new() -> Replay {
        Replay::with_config(ExchangeConfig::default())
    }

    pub fn with_config(config: ExchangeConfig) -> Replay {
        Replay { exchange: Exchange::new(config), lines_fed: 0, events: Vec::with_capacity(64) }
    }

    /// Goes on from `exchange` (a restored snapshot) after `lines_fed` lines: the next
    /// line is number `lines_fed + 1`.
    pub fn from_exchange(exchange: Exchange, lines_fed: u64) -> Replay {
        Replay { exchange, lines_fed, events: Vec::with_capacity(64) }
    }

    /// Processes one line (without its `\n`) and appends its events to `out`, one JSON
    /// object per line.
    pub fn feed_line(&mut self, line: &str, out: &mut String) {
        self.lines_fed += 1;
        let seq = Seq(self.lines_fed);
        if line.trim_ascii().is_empty() {
            return;
        }
        match parse_line(line) {
            Ok(parsed) => {
                self.exchange.apply(seq, parsed.ts, &parsed.command, &mut self.events);
                self.print_events(Some(&parsed.command), out);
            }
            Err(_) => {
                self.reject_malformed(seq);
                self.print_events(None, out);
            }
        }
    }

    /// Like `feed_line`, for raw bytes: a line that is not UTF-8 cannot be JSON, so it
    /// is `malformed` (and still a numbered line).
    pub fn feed_bytes(&mut self, line: &[u8], out: &mut String) {
        match std::str::from_utf8(line) {
            Ok(line) => self.feed_line(line, out),
            Err(_) => self.feed_unreadable_line(out),
        }
    }

    /// Counts a line that could not be read as text (not UTF-8, or longer than the
    /// reader accepts) and rejects it `malformed`.
    pub fn feed_unreadable_line(&mut self, out: &mut String) {
        self.lines_fed += 1;
        self.reject_malformed(Seq(self.lines_fed));
        self.print_events(None, out);
    }

    fn reject_malformed(&mut self, seq: Seq) {
        self.events.push(Event::Rejected { seq, reason: RejectReason::Malformed });
    }

    /// Prints the events of `command` (`None`: a line that was not one).
    fn print_events(&mut self, command: Option<&Command<'_>>, out: &mut String) {
        for event in &self.events {
            write_event(out, &self.exchange, command, event);
        }
        self.events.clear();
    }

    pub fn exchange(&self) -> &Exchange {
        &self.exchange
    }

    /// The final state document (pretty-printed JSON).
    pub fn state_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(&state_document(&self.exchange))
            .unwrap_or_else(|error| format!("{{\"error\":\"{error}\"}}"));
        text.push('\n');
        text
    }

    pub fn digest(&self) -> String {
        state_digest(&self.exchange)
    }

    pub fn check_invariants(&self) -> Result<(), String> {
        self.exchange.check_invariants()
    }
}
