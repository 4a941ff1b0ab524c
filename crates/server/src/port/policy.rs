//! The limits every client meets, whatever gateway it comes through, applied here once:
//!
//! - a **rate** per principal (an API key, or an account logged in with its password):
//!   a token bucket of requests per second, with a burst (admin keys have none);
//! - **connections** per principal: at most `connections_per_key` logged in at once,
//!   each counted by a [`ConnectionClaim`] that gives its place back when dropped;
//! - **password logins** per account name ([`LoginLimits`], `[auth]` in the
//!   configuration): after `failures_free` failures in a row (3 by default), each
//!   further failure locks the account's password logins for twice as long as the one
//!   before (1 s, 2 s, 4 s, ...); at `failures_lock` failures in a row (10) it is
//!   locked for `lock` (15 minutes; logged, and counted in `/metrics`). A success ends
//!   the run; a run with no failure for `lock` is forgotten.
//!
//! Gateways never call these: the port does, for every request it takes (`Port`'s
//! operations take a [`super::session::Session`], which says whom to charge). The
//! policy holds no business state and never blocks: each check is a short critical
//! section over a map.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::error::{ApiError, ErrorCode};

/// Account names whose failures are remembered at most (a flood of made-up names
/// cannot grow the map without end: the oldest runs are forgotten first).
pub const LOGIN_RUNS_MAX: usize = 100_000;
/// The most failures beyond the free ones that double the short lock (2^30 s is
/// longer than any lock a venue would set: beyond it the lock stays the same).
const DOUBLINGS_MAX: u32 = 30;

/// How failed password logins are slowed and then locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginLimits {
    /// Failures in a row that cost nothing.
    pub failures_free: u32,
    /// Failures in a row that lock the account's password logins for `lock`.
    pub failures_lock: u32,
    /// How long that lock lasts, and how long a run of failures is remembered.
    pub lock: Duration,
}

impl LoginLimits {
    /// The limits as configured, made consistent: at least one free failure, and the
    /// long lock after the free ones.
    pub fn new(failures_free: u32, failures_lock: u32, lock: Duration) -> LoginLimits {
        let failures_free = failures_free.max(1);
        LoginLimits {
            failures_free,
            failures_lock: failures_lock.max(failures_free + 1),
            lock: lock.max(Duration::from_secs(1)),
        }
    }

    /// How long a run of `in_a_row` failures locks the account's password logins.
    fn lock_after(&self, in_a_row: u32) -> Option<Duration> {
        if in_a_row >= self.failures_lock {
            return Some(self.lock);
        }
        let beyond = in_a_row.checked_sub(self.failures_free + 1)?;
        Some(Duration::from_secs(1u64 << beyond.min(DOUBLINGS_MAX)).min(self.lock))
    }
}

/// Whom a limit counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Principal {
    /// An API key, by its id.
    Key(String),
    /// An account logged in with its password (DIFF), by its name.
    Password(String),
}

impl Principal {
    fn label(&self) -> &str {
        match self {
            Principal::Key(id) => id,
            Principal::Password(account) => account,
        }
    }
}

/// A principal's rate: requests per second, and the burst it may spend at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    pub fn new(per_second: u32, burst: u32) -> Rate {
        Rate { per_second: f64::from(per_second.max(1)), burst: f64::from(burst.max(1)) }
    }

    /// A key made with its own rate: that rate, with a burst of twice it.
    pub fn of_key(per_second: u32) -> Rate {
        Rate::new(per_second, per_second.max(1).saturating_mul(2))
    }
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
}

/// A run of failed password logins of one account name.
#[derive(Clone, Copy, Debug)]
struct FailedLogins {
    in_a_row: u32,
    last: Instant,
    locked_until: Option<Instant>,
}

/// What the policy counts for `/metrics`.
pub trait PolicyEvents: Send + Sync {
    /// An account's password logins were locked for `LoginLimits::lock`.
    fn login_locked(&self);
}

pub struct Policy {
    default_rate: Rate,
    connections_per_principal: usize,
    login_limits: LoginLimits,
    buckets: Mutex<FxHashMap<Principal, Bucket>>,
    connections: Arc<Mutex<HashMap<Principal, usize>>>,
    logins: Mutex<HashMap<String, FailedLogins>>,
    events: Arc<dyn PolicyEvents>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Policy {
    pub fn new(
        default_rate: Rate,
        connections_per_principal: usize,
        login_limits: LoginLimits,
        events: Arc<dyn PolicyEvents>,
    ) -> Policy {
        Policy {
            default_rate,
            connections_per_principal,
            login_limits,
            buckets: Mutex::new(FxHashMap::default()),
            connections: Arc::new(Mutex::new(HashMap::new())),
            logins: Mutex::new(HashMap::new()),
            events,
        }
    }

    /// The rate of a principal that has none of its own.
    pub fn default_rate(&self) -> Rate {
        self.default_rate
    }

    /// Takes one request from `principal`'s bucket (at `rate`); `rate_limited` when it
    /// is empty.
    pub fn charge(&self, principal: &Principal, rate: Rate) -> Result<(), ApiError> {
        self.charge_at(principal, rate, Instant::now())
    }

    fn charge_at(&self, principal: &Principal, rate: Rate, now: Instant) -> Result<(), ApiError> {
        let mut buckets = locked(&self.buckets);
        // Looked up before inserting, so that a known principal costs no allocation.
        if !buckets.contains_key(principal) {
            buckets.insert(principal.clone(), Bucket { tokens: rate.burst, refilled: now });
        }
        let Some(bucket) = buckets.get_mut(principal) else { return Ok(()) };
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate.per_second).min(rate.burst);
        bucket.refilled = now;
        if bucket.tokens < 1.0 {
            let mut error = ApiError::new(
                ErrorCode::RateLimited,
                format!("more than {} requests per second for this key", rate.per_second),
            );
            error.retry_after_s = Some(1);
            return Err(error);
        }
        bucket.tokens -= 1.0;
        debug_assert!(bucket.tokens >= 0.0 && bucket.tokens <= rate.burst);
        Ok(())
    }

    /// Counts a logged-in connection of `principal`; `too_many_connections` beyond the
    /// limit. The claim gives its place back when dropped.
    pub fn claim_connection(&self, principal: &Principal) -> Result<ConnectionClaim, ApiError> {
        let mut connections = locked(&self.connections);
        let count = connections.entry(principal.clone()).or_insert(0);
        if *count >= self.connections_per_principal {
            let count = *count;
            return Err(ApiError::new(
                ErrorCode::TooManyConnections,
                format!(
                    "{} has {count} connections; at most {} are allowed",
                    principal.label(),
                    self.connections_per_principal
                ),
            ));
        }
        *count += 1;
        Ok(ConnectionClaim {
            principal: principal.clone(),
            connections: Arc::clone(&self.connections),
        })
    }

    /// Whether `account` may try a password now: `login_locked` (with when to try
    /// again) while a run of failures locks it.
    pub fn may_try_password(&self, account: &str) -> Result<(), ApiError> {
        self.may_try_password_at(account, Instant::now())
    }

    fn may_try_password_at(&self, account: &str, now: Instant) -> Result<(), ApiError> {
        let logins = locked(&self.logins);
        let Some(run) = logins.get(account) else { return Ok(()) };
        match run.locked_until {
            Some(until) if until > now => {
                let seconds = (until - now).as_secs_f64().ceil() as u64;
                let mut error = ApiError::new(
                    ErrorCode::LoginLocked,
                    format!(
                        "{} failed logins in a row: password logins of this account are locked for {seconds} s",
                        run.in_a_row
                    ),
                );
                error.retry_after_s = Some(seconds.max(1));
                Err(error)
            }
            _ => Ok(()),
        }
    }

    /// Notes how a password login of `account` went.
    pub fn password_tried(&self, account: &str, succeeded: bool) {
        self.password_tried_at(account, succeeded, Instant::now())
    }

    fn password_tried_at(&self, account: &str, succeeded: bool, now: Instant) {
        let mut logins = locked(&self.logins);
        if succeeded {
            logins.remove(account);
            return;
        }
        let limits = self.login_limits;
        if !logins.contains_key(account) && logins.len() >= LOGIN_RUNS_MAX {
            forget_oldest_runs(&mut logins, now, limits.lock);
        }
        let run = logins.entry(account.to_string()).or_insert(FailedLogins {
            in_a_row: 0,
            last: now,
            locked_until: None,
        });
        if now.saturating_duration_since(run.last) >= limits.lock {
            *run = FailedLogins { in_a_row: 0, last: now, locked_until: None };
        }
        run.in_a_row = run.in_a_row.saturating_add(1);
        run.last = now;
        run.locked_until = limits.lock_after(run.in_a_row).map(|lock| now + lock);
        if run.in_a_row == limits.failures_lock {
            tracing::warn!(
                account,
                failures = run.in_a_row,
                lock_s = limits.lock.as_secs(),
                "password logins locked after failures in a row"
            );
            self.events.login_locked();
        }
    }
}

/// Forgets runs that are over, and if none are, the oldest half.
fn forget_oldest_runs(logins: &mut HashMap<String, FailedLogins>, now: Instant, lock: Duration) {
    logins.retain(|_, run| {
        now.saturating_duration_since(run.last) < lock
            || run.locked_until.is_some_and(|until| until > now)
    });
    if logins.len() >= LOGIN_RUNS_MAX {
        let mut lasts: Vec<Instant> = logins.values().map(|run| run.last).collect();
        lasts.sort_unstable();
        let median = lasts[lasts.len() / 2];
        logins.retain(|_, run| run.last > median);
    }
}

/// A logged-in connection counted against its principal's limit, until dropped.
pub struct ConnectionClaim {
    principal: Principal,
    connections: Arc<Mutex<HashMap<Principal, usize>>>,
}

impl std::fmt::Debug for ConnectionClaim {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("ConnectionClaim").field("principal", &self.principal).finish()
    }
}

impl Drop for ConnectionClaim {
    fn drop(&mut self) {
        let mut connections = locked(&self.connections);
        if let Some(count) = connections.get_mut(&self.principal) {
            debug_assert!(*count > 0, "a principal's count is removed when it reaches zero");
            *count = count.saturating_sub(1);
            if *count == 0 {
                connections.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Default)]
    struct Counted(AtomicUsize);

    impl PolicyEvents for Counted {
        fn login_locked(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    const LIMITS: LoginLimits =
        LoginLimits { failures_free: 3, failures_lock: 10, lock: Duration::from_secs(15 * 60) };
    const LOGIN_FAILURES_FREE: u32 = LIMITS.failures_free;
    const LOGIN_FAILURES_LOCK: u32 = LIMITS.failures_lock;
    const LOGIN_LOCK: Duration = LIMITS.lock;

    fn policy(connections: usize) -> (Policy, Arc<Counted>) {
        let events = Arc::new(Counted::default());
        (Policy::new(Rate::new(10, 3), connections, LIMITS, events.clone()), events)
    }

    #[test]
    fn login_limits_are_made_consistent() {
        let limits = LoginLimits::new(0, 0, Duration::ZERO);
        assert_eq!((limits.failures_free, limits.failures_lock), (1, 2));
        assert_eq!(limits.lock, Duration::from_secs(1));
        assert_eq!(LIMITS.lock_after(LOGIN_FAILURES_FREE), None);
        assert_eq!(LIMITS.lock_after(LOGIN_FAILURES_FREE + 1), Some(Duration::from_secs(1)));
        assert_eq!(LIMITS.lock_after(LOGIN_FAILURES_FREE + 2), Some(Duration::from_secs(2)));
        assert_eq!(LIMITS.lock_after(LOGIN_FAILURES_LOCK), Some(LOGIN_LOCK));
        let short_lock = LoginLimits::new(1, 100, Duration::from_secs(60));
        assert_eq!(short_lock.lock_after(50), Some(Duration::from_secs(60)), "never past it");
    }

    #[test]
    fn a_bucket_spends_its_burst_then_refills_at_its_rate() {
        let (policy, _) = policy(1);
        let key = Principal::Key("k".into());
        let rate = policy.default_rate();
        let start = Instant::now();
        for _ in 0..3 {
            policy.charge_at(&key, rate, start).expect("within the burst");
        }
        let refused = policy.charge_at(&key, rate, start).expect_err("the burst is spent");
        assert_eq!(refused.code, ErrorCode::RateLimited);
        assert_eq!(refused.retry_after_s, Some(1));
        // A tenth of a second later (10 a second): one more.
        policy.charge_at(&key, rate, start + Duration::from_millis(100)).expect("refilled");
        assert!(policy.charge_at(&key, rate, start + Duration::from_millis(100)).is_err());
        // Another principal has its own bucket.
        policy.charge_at(&Principal::Password("k".into()), rate, start).expect("its own");
    }

    #[test]
    fn a_connection_claim_counts_until_it_is_dropped() {
        let (policy, _) = policy(2);
        let key = Principal::Key("k".into());
        let first = policy.claim_connection(&key).expect("one");
        let second = policy.claim_connection(&key).expect("two");
        let refused = policy.claim_connection(&key).expect_err("three is over the limit");
        assert_eq!(refused.code, ErrorCode::TooManyConnections);
        drop(first);
        let third = policy.claim_connection(&key).expect("a place was given back");
        drop((second, third));
        assert!(locked(&policy.connections).is_empty(), "no count is left behind");
    }

    #[test]
    fn failed_logins_slow_then_lock_and_a_success_ends_the_run() {
        let (policy, events) = policy(1);
        let start = Instant::now();
        let mut now = start;
        for _ in 0..LOGIN_FAILURES_FREE {
            policy.may_try_password_at("alice", now).expect("free failures");
            policy.password_tried_at("alice", false, now);
        }
        policy.may_try_password_at("alice", now).expect("still free");
        // Each failure beyond the free ones locks for twice as long as the one before.
        for beyond in 0..(LOGIN_FAILURES_LOCK - LOGIN_FAILURES_FREE - 1) {
            policy.password_tried_at("alice", false, now);
            let lock = Duration::from_secs(1 << beyond);
            let refused = policy.may_try_password_at("alice", now).expect_err("locked");
            assert_eq!(refused.code, ErrorCode::LoginLocked);
            assert_eq!(refused.retry_after_s, Some(lock.as_secs()));
            assert!(policy
                .may_try_password_at("alice", now + lock - Duration::from_millis(1))
                .is_err());
            now += lock;
            policy.may_try_password_at("alice", now).expect("the lock is over");
        }
        assert_eq!(events.0.load(Ordering::Relaxed), 0);
        policy.password_tried_at("alice", false, now);
        let refused = policy.may_try_password_at("alice", now).expect_err("the long lock");
        assert_eq!(refused.retry_after_s, Some(LOGIN_LOCK.as_secs()));
        assert_eq!(events.0.load(Ordering::Relaxed), 1, "the lock is counted once");
        policy.may_try_password_at("bob", now).expect("another account is not locked");
        now += LOGIN_LOCK;
        policy.may_try_password_at("alice", now).expect("the long lock is over");
        policy.password_tried_at("alice", true, now);
        policy.password_tried_at("alice", false, now);
        policy.may_try_password_at("alice", now).expect("a success ended the run");
    }

    #[test]
    fn a_run_with_no_failure_for_the_lock_is_forgotten() {
        let (policy, _) = policy(1);
        let start = Instant::now();
        for _ in 0..LOGIN_FAILURES_FREE {
            policy.password_tried_at("alice", false, start);
        }
        let later = start + LOGIN_LOCK;
        policy.password_tried_at("alice", false, later);
        policy.may_try_password_at("alice", later).expect("a new run: its first failure is free");
    }
}
