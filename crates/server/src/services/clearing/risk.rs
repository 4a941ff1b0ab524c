//! The risk process: every account's futures equity (`balance` of the account view, at
//! each contract's mark price) against a maintenance level, a share of its positions'
//! margin. An account below it is liquidated: a `liquidate` per contract it holds in
//! that settle asset, sent through the engine like any command (journaled, replayed to
//! the same result). The engine decides nothing here; it obeys.
//!
//! Exactly once: a liquidation that leaves the account still below the level (the book
//! was too thin) is tried again only when the contract's mark price has moved, not on
//! every check.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bourse_core::account_view::account_view;
use bourse_core::ids::{AccountId, AssetId, InstrumentId};
use bourse_core::{AccountRef, Command, Decimal, Event, Price, Venue};

use crate::link::EngineLink;

/// An account below the maintenance level, and one contract of its to liquidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    pub account: AccountId,
    pub account_name: String,
    pub symbol: String,
    /// The contract's mark price when the breach was seen.
    pub mark_price: Option<Price>,
}

/// The maintenance level as a share of position margin (`0.5`: liquidate when equity
/// falls below half the margin), as an exact fraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaintenanceShare {
    numerator: i128,
    denominator: i128,
}

impl MaintenanceShare {
    /// From a decimal string: positive, at most 10.
    pub fn parse(text: &str) -> Option<MaintenanceShare> {
        let share = Decimal::parse(text)?;
        let denominator = 10i128.checked_pow(share.scale())?;
        let numerator = share.mantissa();
        (numerator > 0 && numerator <= 10 * denominator)
            .then_some(MaintenanceShare { numerator, denominator })
    }

    /// Whether `balance` is below this share of `margin`.
    fn is_breached(self, balance: i128, margin: i128) -> bool {
        margin > 0
            && balance.saturating_mul(self.denominator) < margin.saturating_mul(self.numerator)
    }
}

/// Every (account, contract) to liquidate now: accounts whose equity in a settle asset
/// is below `share` of their margin there, with each contract they hold in it.
pub fn breaches(venue: &Venue, share: MaintenanceShare) -> Vec<Breach> {
    let exchange = venue.exchange();
    let mut found = Vec::new();
    for (index, _) in exchange.assets().iter().enumerate() {
        let asset = AssetId(index as u32);
        if !exchange.is_settle_asset(asset) {
            continue;
        }
        // The accounts holding a position in a contract settled in this asset.
        let mut holders: Vec<AccountId> = Vec::new();
        for (instrument_index, instrument) in exchange.instruments().iter().enumerate() {
            if instrument.future().is_none_or(|rules| rules.settle != asset) {
                continue;
            }
            let Some(positions) = exchange.positions(InstrumentId(instrument_index as u32)) else {
                continue;
            };
            holders.extend(positions.all().iter().filter(|p| !p.is_empty()).map(|p| p.account));
        }
        holders.sort_unstable();
        holders.dedup();
        for account in holders {
            let Some((view, positions)) = account_view(exchange, account, asset) else { continue };
            if !share.is_breached(view.balance, view.margin) {
                continue;
            }
            for position in positions {
                found.push(Breach {
                    account,
                    account_name: exchange.account_name(account).to_string(),
                    symbol: exchange.instrument(position.instrument).symbol.to_string(),
                    mark_price: position.mark_price,
                });
            }
        }
    }
    found
}

/// The risk process's memory between checks: what it tried, at which mark price.
pub struct RiskProcess {
    link: Arc<EngineLink>,
    share: MaintenanceShare,
    tried: HashMap<(AccountId, String), Option<Price>>,
}

impl RiskProcess {
    pub fn new(link: Arc<EngineLink>, share: MaintenanceShare) -> RiskProcess {
        RiskProcess { link, share, tried: HashMap::new() }
    }

    /// One check: liquidates what breaches the level and was not tried at this mark
    /// price; returns the (account, symbol) it sent `liquidate` for and the engine
    /// accepted.
    pub async fn check(&mut self) -> Vec<(String, String)> {
        let share = self.share;
        let Ok(breaches) = self.link.read(move |venue| breaches(venue, share)).await else {
            return Vec::new();
        };
        let mut liquidated = Vec::new();
        let mut still: HashMap<(AccountId, String), Option<Price>> = HashMap::new();
        for breach in breaches {
            let key = (breach.account, breach.symbol.clone());
            if let Some(tried_at) = self.tried.get(&key) {
                if *tried_at == breach.mark_price {
                    still.insert(key, *tried_at);
                    continue;
                }
            }
            let command = Command::Liquidate {
                account: AccountRef::Name(Cow::Borrowed(&breach.account_name)),
                symbol: Cow::Borrowed(&breach.symbol),
            };
            match self.link.submit(&command).await {
                Ok(reply) if matches!(reply.events().first(), Some(Event::Accepted { .. })) => {
                    tracing::warn!(account = %breach.account_name, symbol = %breach.symbol, "liquidated: equity below the maintenance level");
                    liquidated.push((breach.account_name.clone(), breach.symbol.clone()));
                }
                Ok(reply) => {
                    tracing::warn!(account = %breach.account_name, symbol = %breach.symbol, events = ?reply.events(), "liquidation refused");
                }
                Err(error) => {
                    tracing::warn!(account = %breach.account_name, symbol = %breach.symbol, %error, "liquidation not sent");
                    continue;
                }
            }
            still.insert(key, breach.mark_price);
        }
        // Accounts back above the level are forgotten: a new breach liquidates again.
        self.tried = still;
        liquidated
    }

    /// Checks every `interval` until `stopped` says so.
    pub async fn run(
        mut self,
        interval: Duration,
        mut stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = stopped.changed() => {}
            }
            if *stopped.borrow() {
                return;
            }
            // In a cluster only the leader liquidates (the others' commands would be
            // refused); whichever node leads next takes over.
            if self.link.leads().is_err() {
                continue;
            }
            self.check().await;
        }
    }
}
