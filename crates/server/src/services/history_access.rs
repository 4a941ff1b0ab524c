//! The history inside the server: the follower's thread (`bourse-history`), and what
//! the admin API and `/metrics` read of it: the lookups, the follower's figures, and
//! SQL when the binary brings a query engine (`SqlService`; `bourse` does, with
//! `bourse-query`, so that this crate builds without one). It holds no business state:
//! everything it serves was derived from the journal.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bourse_engine::DurableWatermark;
use bourse_history::{Follower, HistoryStats, Index, Stop};

/// SQL over the history's files, provided by the binary.
pub trait SqlService: Send + Sync {
    /// Runs `query` and renders its answer as `format` (`table`, `csv` or `json`).
    fn query(&self, query: &str, format: &str) -> Result<SqlAnswer, SqlError>;
}

pub struct SqlAnswer {
    pub content_type: &'static str,
    pub body: String,
}

/// Why a query has no answer: a stable `code` and what went wrong.
pub struct SqlError {
    pub code: &'static str,
    pub message: String,
}

/// Makes the SQL service over a history directory.
pub type SqlFactory = Box<dyn FnOnce(&Path) -> Result<Arc<dyn SqlService>, String> + Send>;

/// What the API reads of the history.
pub struct HistoryAccess {
    pub index: Index,
    pub stats: Arc<HistoryStats>,
    pub sql: Option<Arc<dyn SqlService>>,
}

/// The follower's thread.
pub struct HistoryThread {
    stop: Arc<Stop>,
    thread: JoinHandle<()>,
}

impl HistoryThread {
    /// Commits what the follower has applied and stops (the rest of the journal is
    /// followed at the next start: a long lag does not hold up a shutdown).
    pub fn stop(self) {
        self.stop.stop();
        let _ = self.thread.join();
    }
}

/// Opens the history under `data_dir` and starts following the journal.
pub fn start(
    config: &crate::config::HistoryConfig,
    data_dir: &Path,
    stats: Arc<HistoryStats>,
    durable: DurableWatermark,
    sql: Option<SqlFactory>,
) -> Result<(HistoryThread, HistoryAccess), String> {
    let mut history_config = bourse_history::HistoryConfig::under(data_dir);
    history_config.commit_every = Duration::from_millis(config.commit_every_ms);
    history_config.commit_rows = config.commit_rows.max(1);
    history_config.busy_share = config.busy_share;
    let sql = match sql {
        Some(factory) => Some(factory(&history_config.history_dir)?),
        None => None,
    };
    let stop = Arc::new(Stop::default());
    // The index and the follower are opened on the history's own thread, after it
    // lowered its priority: the index's background threads (flushes, compactions)
    // inherit it, so none of the history's work competes with the engine's threads.
    let (opened_sender, opened) = std::sync::mpsc::sync_channel::<Result<Index, String>>(1);
    let thread = std::thread::Builder::new()
        .name("bourse-history".to_string())
        .spawn({
            let stop = Arc::clone(&stop);
            let stats = Arc::clone(&stats);
            move || {
                bourse_engine::run_when_idle();
                let follower = match open(&history_config, stats) {
                    Ok((follower, index)) => {
                        let _ = opened_sender.send(Ok(index));
                        follower
                    }
                    Err(error) => {
                        let _ = opened_sender.send(Err(error));
                        return;
                    }
                };
                follower.run(
                    || durable.last_durable_seq(),
                    &stop,
                    |error| tracing::error!(code = error.code(), %error, "history"),
                );
            }
        })
        .map_err(|error| format!("cannot start the history thread: {error}"))?;
    let index = match opened.recv() {
        Ok(Ok(index)) => index,
        Ok(Err(error)) => {
            let _ = thread.join();
            return Err(error);
        }
        Err(_) => return Err("the history thread ended while opening".to_string()),
    };
    Ok((HistoryThread { stop, thread }, HistoryAccess { index, stats, sql }))
}

fn open(
    config: &bourse_history::HistoryConfig,
    stats: Arc<HistoryStats>,
) -> Result<(Follower, Index), String> {
    let index_dir = config.history_dir.join("index");
    std::fs::create_dir_all(&index_dir)
        .map_err(|error| format!("{}: {error}", index_dir.display()))?;
    let index = Index::open(&index_dir).map_err(|error| error.to_string())?;
    let follower = Follower::open_with_index(config.clone(), stats, index.clone())
        .map_err(|error| format!("the history does not open ({}): {error}", error.code()))?;
    Ok((follower, index))
}
