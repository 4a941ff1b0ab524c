//! The running server's services, put together once at start (`server`) and handed to
//! the gateways, which are the only ones to take all of them: each service below takes
//! just the few it needs. It holds no business state: balances, orders and their
//! history are the engine's.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::config::LimitsConfig;
use crate::directory::Directory;
use crate::keys::KeyStore;
use crate::link::EngineLink;
use crate::metrics::Metrics;
use crate::port::auth::Authenticator;
use crate::port::operator::Operator;
use crate::port::orders::OrderEntry;
use crate::port::passwords::Passwords;
use crate::port::policy::Policy;
use crate::port::queries::Queries;
use crate::port::tokens::Tokens;
use crate::services::candles::CandleService;
use crate::services::feed::channel::HubCommand;
use crate::services::feed::market::Market;
use crate::services::history_access::HistoryAccess;
use crate::services::multicast;

pub struct AppState {
    pub link: Arc<EngineLink>,
    pub directory: Arc<Directory>,
    pub entry: Arc<OrderEntry>,
    /// Every read of the venue a gateway makes.
    pub queries: Arc<Queries>,
    /// What only an operator does.
    pub operator: Arc<Operator>,
    /// Recent trades and tickers, kept by the hub.
    pub market: Arc<Mutex<Market>>,
    pub metrics: Arc<Metrics>,
    /// Subscriptions and disconnections of connections go to the hub.
    pub hub: mpsc::Sender<HubCommand>,
    pub keys: Arc<KeyStore>,
    /// Every change to `keys` goes through here (the cluster's log, in a cluster).
    pub key_changes: Arc<crate::port::records::KeyChanges>,
    pub auth: Authenticator,
    /// Accounts' passwords: `passwords.verify(account, password).await` for every login
    /// by name and password.
    pub passwords: Arc<Passwords>,
    /// The login tokens of the token endpoint (`rest::openid`).
    pub tokens: Arc<Tokens>,
    /// The limits of every key and login, applied by the port (`login`).
    pub policy: Arc<Policy>,
    pub limits: LimitsConfig,
    /// A TCP connection must log in within this long.
    pub login_timeout: Duration,
    pub ready: AtomicBool,
    /// Candles (REST's, Binance's klines, DIFF's charts), whether or not the multicast
    /// feed runs.
    pub candles: CandleService,
    /// The multicast feed's publisher, when the feed is on.
    pub market_data: Option<std::sync::mpsc::Sender<multicast::Input>>,
    /// The history's lookups and SQL, once it is open.
    pub history: OnceLock<Arc<HistoryAccess>>,
    /// What the venue keeps about futures contracts beside the engine, and the way
    /// it changes (through the log, in a cluster).
    pub futures: Arc<crate::port::records::SettingsChanges>,
    /// In a cluster: adding and removing nodes.
    pub membership: Option<Arc<crate::port::membership::Membership>>,
}

pub type Shared = Arc<AppState>;

impl AppState {
    pub fn market(&self) -> MutexGuard<'_, Market> {
        self.market.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
