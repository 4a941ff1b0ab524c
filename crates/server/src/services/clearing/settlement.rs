//! Settling a futures contract: at the price given, or the one the operator posted,
//! or else the contract's mark price (the last trade's, or the last settlement's); then,
//! for a contract whose margin is a ratio of the settlement price, the `margin` command
//! that restates it, so the core (which knows only amounts per lot) stays exact. Used
//! by the admin REST and the daily schedule alike.

use std::borrow::Cow;
use std::sync::Arc;

use bourse_core::ids::InstrumentId;
use bourse_core::{Command, Decimal, Event, Venue};
use serde_json::{json, Value};

use super::settings::{ratio_margin, FuturesSettings, SettingsChange};
use crate::link::EngineLink;
use crate::port::error::{ApiError, ApiResult, ErrorCode};
use crate::port::records::SettingsChanges;

/// What settling needs to know of a contract, read from the engine.
#[derive(Clone, Debug)]
pub struct ContractFacts {
    pub instrument: InstrumentId,
    pub symbol: String,
    pub lot: Decimal,
    pub multiplier: Decimal,
    pub settle_decimals: u32,
    pub price_decimals: u32,
    /// Margin per lot now, in settle-asset units.
    pub margin_units: i64,
    pub mark_price: Option<Decimal>,
    pub settlement_price: Option<Decimal>,
}

/// Every live futures contract (not expired), in instrument order.
pub fn live_contracts(venue: &Venue) -> Vec<ContractFacts> {
    let exchange = venue.exchange();
    exchange
        .instruments()
        .iter()
        .enumerate()
        .filter(|(_, instrument)| !instrument.expired)
        .filter_map(|(index, instrument)| {
            let rules = instrument.future()?;
            let id = InstrumentId(index as u32);
            let positions = exchange.positions(id)?;
            let price = |price: bourse_core::Price| {
                Decimal::from_units(i128::from(price.0), instrument.price_decimals)
            };
            Some(ContractFacts {
                instrument: id,
                symbol: instrument.symbol.to_string(),
                lot: Decimal::from_units(i128::from(instrument.lot.0), instrument.qty_decimals),
                multiplier: Decimal::from_units(
                    i128::from(rules.multiplier),
                    rules.multiplier_decimals,
                ),
                settle_decimals: exchange.asset(rules.settle).decimals,
                price_decimals: instrument.price_decimals,
                margin_units: rules.margin.0,
                mark_price: positions.mark_price().map(price),
                settlement_price: positions.settlement_price().map(price),
            })
        })
        .collect()
}

/// The facts of the live contract `symbol`.
pub async fn contract(link: &EngineLink, symbol: &str) -> ApiResult<ContractFacts> {
    let contracts = link.read(live_contracts).await?;
    contracts.into_iter().find(|contract| contract.symbol == symbol).ok_or_else(|| {
        ApiError::new(
            ErrorCode::Rejected(bourse_core::RejectReason::UnknownSymbol),
            format!("no live futures contract {symbol:?}"),
        )
    })
}

/// Submits `command`; its rejection becomes the error. Returns its seq and events.
pub async fn submit(link: &EngineLink, command: &Command<'_>) -> ApiResult<(u64, Vec<Event>)> {
    let reply = link.submit(command).await?;
    let events = reply.events().to_vec();
    match events.first() {
        Some(Event::Rejected { reason, .. }) => Err(ApiError::rejected(*reason)),
        _ => Ok((reply.result().map_or(0, |result| result.seq.0), events)),
    }
}

/// Settles `symbol` at `price` (else the posted price, else the mark price); `final`
/// expires it. Then restates a ratio margin at the settlement price. Returns what was
/// done, as the admin REST shows it.
pub async fn settle(
    link: &EngineLink,
    changes: &SettingsChanges,
    symbol: &str,
    price: Option<Decimal>,
    is_final: bool,
) -> ApiResult<Value> {
    let facts = contract(link, symbol).await?;
    let settings = changes.settings();
    let posted = settings.get(symbol).posted_price.as_deref().and_then(Decimal::parse);
    let uses_posted = price.is_none() && posted.is_some();
    let price = price.or(posted).or(facts.mark_price).ok_or_else(|| {
        ApiError::new(
            ErrorCode::NoSettlementPrice,
            format!("{symbol} has not traded: give a price or post one"),
        )
    })?;
    let command = Command::Settle { symbol: Cow::Borrowed(symbol), price, is_final };
    let (seq, events) = submit(link, &command).await?;
    let settled = events.iter().filter(|event| matches!(event, Event::Settled(_))).count();
    let expired = events.iter().filter(|event| matches!(event, Event::Done { .. })).count();
    if uses_posted {
        // A posted price is for one settlement.
        let used = SettingsChange::PostedPrice { symbol: symbol.to_string(), price: None };
        if let Err(error) = changes.apply(used).await {
            tracing::warn!(%symbol, "posted price used, not cleared: {error:?}");
        }
    }
    let margin = match is_final {
        true => None,
        false => restate_ratio_margin(link, settings, symbol).await?,
    };
    Ok(json!({
        "symbol": symbol,
        "seq": seq,
        "price": price.to_string(),
        "final": is_final,
        "sides_settled": settled,
        "orders_expired": expired,
        "margin": margin,
    }))
}

/// For a contract whose margin is a ratio: sends `margin` with the amount the ratio
/// gives at the last settlement price, when it differs from the engine's. Returns the
/// new margin per lot (a decimal string), or `None` when nothing was sent.
pub async fn restate_ratio_margin(
    link: &EngineLink,
    settings: &FuturesSettings,
    symbol: &str,
) -> ApiResult<Option<String>> {
    let Some(ratio) = settings.get(symbol).margin_ratio.as_deref().and_then(Decimal::parse) else {
        return Ok(None);
    };
    let facts = contract(link, symbol).await?;
    let Some(price) = facts.settlement_price else { return Ok(None) };
    let units = ratio_margin(ratio, price, facts.lot, facts.multiplier, facts.settle_decimals)
        .ok_or_else(|| ApiError::malformed("the margin ratio gives no valid margin"))?;
    if units == facts.margin_units {
        return Ok(None);
    }
    let margin = Decimal::from_units(i128::from(units), facts.settle_decimals);
    submit(link, &Command::Margin { symbol: Cow::Borrowed(symbol), margin }).await?;
    Ok(Some(margin.to_string()))
}

/// At start: restates every ratio margin the engine does not hold yet (a settlement
/// whose `margin` a crash cut off).
pub async fn reconcile_ratio_margins(link: &EngineLink, settings: &FuturesSettings) {
    let Ok(contracts) = link.read(live_contracts).await else { return };
    for contract in contracts {
        if let Err(error) = restate_ratio_margin(link, settings, &contract.symbol).await {
            tracing::warn!(symbol = %contract.symbol, "cannot restate the ratio margin: {error:?}");
        }
    }
}

/// A time of day for the daily settlement: `HH:MM` at an offset from UTC in minutes
/// (Shanghai's exchanges settle at 15:00 UTC+8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DailyTime {
    /// Seconds after midnight UTC.
    utc_seconds: u64,
}

const DAY_SECONDS: u64 = 86_400;

impl DailyTime {
    /// `HH:MM` (00:00 to 23:59) at `utc_offset_minutes` (-720 to 840).
    pub fn parse(text: &str, utc_offset_minutes: i32) -> Option<DailyTime> {
        let (hours, minutes) = text.split_once(':')?;
        let (hours, minutes): (i64, i64) = (hours.parse().ok()?, minutes.parse().ok()?);
        if !(0..24).contains(&hours)
            || !(0..60).contains(&minutes)
            || !(-720..=840).contains(&utc_offset_minutes)
        {
            return None;
        }
        let local = hours * 3_600 + minutes * 60;
        let utc = (local - i64::from(utc_offset_minutes) * 60).rem_euclid(DAY_SECONDS as i64);
        Some(DailyTime { utc_seconds: utc as u64 })
    }

    /// How long from `now_seconds` (since the Unix epoch) to the next such time (a full
    /// day when it is now).
    pub fn wait_from(self, now_seconds: u64) -> u64 {
        let into_day = now_seconds % DAY_SECONDS;
        match (self.utc_seconds + DAY_SECONDS - into_day) % DAY_SECONDS {
            0 => DAY_SECONDS,
            wait => wait,
        }
    }
}

/// Settles every live contract each day at `time` (at its posted price, else its mark
/// price; a contract that never traded and has no posted price is skipped, with a
/// warning), until `stopped` says so.
pub async fn run_daily(
    link: Arc<EngineLink>,
    changes: Arc<SettingsChanges>,
    time: DailyTime,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let wait = std::time::Duration::from_secs(time.wait_from(now));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stopped.changed() => {}
        }
        if *stopped.borrow() {
            return;
        }
        // In a cluster only the leader settles.
        if link.leads().is_err() {
            continue;
        }
        let Ok(contracts) = link.read(live_contracts).await else { continue };
        for contract in contracts {
            match settle(&link, &changes, &contract.symbol, None, false).await {
                Ok(done) => tracing::info!(symbol = %contract.symbol, %done, "daily settlement"),
                Err(error) => {
                    tracing::warn!(symbol = %contract.symbol, code = error.code.as_str(), message = %error.message, "daily settlement skipped")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daily_time_is_the_next_such_moment_in_utc() {
        // 15:00 at UTC+8 is 07:00 UTC.
        let time = DailyTime::parse("15:00", 480).unwrap();
        assert_eq!(time.wait_from(0), 7 * 3_600);
        assert_eq!(time.wait_from(7 * 3_600), DAY_SECONDS);
        assert_eq!(time.wait_from(8 * 3_600), 23 * 3_600);
        assert_eq!(DailyTime::parse("00:30", -60).unwrap().wait_from(0), 90 * 60);
        for bad in ["24:00", "12:60", "noon", "12", "-1:00"] {
            assert_eq!(DailyTime::parse(bad, 0), None, "{bad}");
        }
        assert_eq!(DailyTime::parse("12:00", 900), None);
    }
}
