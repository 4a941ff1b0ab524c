//! The venue's definitions as the gateways print them: the assets and instruments, a
//! copy read from the engine, and the decimal strings of prices, quantities and
//! amounts, printed from integers, never through a float. `directory` keeps the copy up
//! to date. What a definition may change later (a futures contract's margin rate, its
//! expiry) is not copied: whoever shows it reads it from the engine.

use bourse_core::exchange::{Exchange, InstrumentKind};
use bourse_core::ids::{AssetId, InstrumentId};
use bourse_core::{Decimal, Side};

/// What the gateways need to print an instrument's numbers: the parts of its
/// definition that never change once declared, so a copy taken once stays right.
#[derive(Clone, Debug)]
pub struct InstrumentInfo {
    pub symbol: String,
    pub price_decimals: u32,
    pub qty_decimals: u32,
    pub tick: i64,
    pub lot: i64,
    pub min_qty: i128,
    pub max_qty: i128,
    pub market_band_bps: i64,
    pub terms: Terms,
}

/// What differs between the kinds of instrument.
#[derive(Clone, Debug)]
pub enum Terms {
    Spot {
        base: String,
        quote: String,
        base_decimals: u32,
        quote_decimals: u32,
        maker_fee_bps: i64,
        taker_fee_bps: i64,
    },
    /// A futures contract (its margin rate may change: read it from the engine).
    Future {
        settle: String,
        settle_decimals: u32,
        /// Decimal strings, as declared.
        multiplier: String,
        maker_fee: String,
        taker_fee: String,
        close_today: bool,
    },
}

/// The assets (name, decimals) and instruments, in the engine's id order.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    pub assets: Vec<(String, u32)>,
    pub instruments: Vec<InstrumentInfo>,
}

impl Reference {
    pub fn read(exchange: &Exchange) -> Reference {
        let assets: Vec<(String, u32)> =
            exchange.assets().iter().map(|spec| (spec.name.to_string(), spec.decimals)).collect();
        let instruments = exchange
            .instruments()
            .iter()
            .map(|instrument| InstrumentInfo {
                symbol: instrument.symbol.to_string(),
                price_decimals: instrument.price_decimals,
                qty_decimals: instrument.qty_decimals,
                tick: instrument.tick.0,
                lot: instrument.lot.0,
                min_qty: instrument.min_qty,
                max_qty: instrument.max_qty,
                market_band_bps: instrument.market_band_bps,
                terms: match &instrument.kind {
                    InstrumentKind::Spot(rules) => Terms::Spot {
                        base: assets[rules.base.index()].0.clone(),
                        quote: assets[rules.quote.index()].0.clone(),
                        base_decimals: assets[rules.base.index()].1,
                        quote_decimals: assets[rules.quote.index()].1,
                        maker_fee_bps: rules.maker_fee_bps,
                        taker_fee_bps: rules.taker_fee_bps,
                    },
                    InstrumentKind::Future(rules) => {
                        let (settle, settle_decimals) = assets[rules.settle.index()].clone();
                        let amount = |units: i64| decimal(i128::from(units), settle_decimals);
                        Terms::Future {
                            settle,
                            settle_decimals,
                            multiplier: decimal(
                                i128::from(rules.multiplier),
                                rules.multiplier_decimals,
                            ),
                            maker_fee: amount(rules.maker_fee.0),
                            taker_fee: amount(rules.taker_fee.0),
                            close_today: rules.close_today,
                        }
                    }
                },
            })
            .collect();
        Reference { assets, instruments }
    }

    pub fn instrument(&self, instrument: InstrumentId) -> Option<&InstrumentInfo> {
        self.instruments.get(instrument.index())
    }

    pub fn find_instrument(&self, symbol: &str) -> Option<(InstrumentId, &InstrumentInfo)> {
        self.instruments
            .iter()
            .position(|info| info.symbol == symbol)
            .map(|index| (InstrumentId(index as u32), &self.instruments[index]))
    }

    pub fn asset(&self, asset: AssetId) -> Option<&(String, u32)> {
        self.assets.get(asset.index())
    }

    /// The asset named `name`, if declared.
    pub fn find_asset(&self, name: &str) -> Option<AssetId> {
        self.assets.iter().position(|(known, _)| known == name).map(|index| AssetId(index as u32))
    }
}

/// `units` counts of `10^-scale` as a decimal string, exact and normalised.
pub fn decimal(units: i128, scale: u32) -> String {
    Decimal::from_units(units, scale).to_string()
}

impl InstrumentInfo {
    pub fn price(&self, units: i64) -> String {
        decimal(i128::from(units), self.price_decimals)
    }

    pub fn qty(&self, units: i64) -> String {
        decimal(i128::from(units), self.qty_decimals)
    }

    pub fn is_future(&self) -> bool {
        matches!(self.terms, Terms::Future { .. })
    }

    /// `"spot"` or `"future"`, as the instrument directory says.
    pub fn kind(&self) -> &'static str {
        match self.terms {
            Terms::Spot { .. } => "spot",
            Terms::Future { .. } => "future",
        }
    }

    /// A spot instrument's quote asset's decimals (what a spend-amount buy's
    /// `quote_qty` is counted in); `None` for a futures contract.
    pub fn quote_decimals(&self) -> Option<u32> {
        match &self.terms {
            Terms::Spot { quote_decimals, .. } => Some(*quote_decimals),
            Terms::Future { .. } => None,
        }
    }

    /// The asset an order on `side` receives in a fill and pays its fee in, with its
    /// decimals: spot's base for a buy and quote for a sell, a futures contract's
    /// settle asset either way.
    pub fn fee_asset(&self, side: Side) -> (&str, u32) {
        match &self.terms {
            Terms::Spot { base, base_decimals, .. } if side == Side::Buy => (base, *base_decimals),
            Terms::Spot { quote, quote_decimals, .. } => (quote, *quote_decimals),
            Terms::Future { settle, settle_decimals, .. } => (settle, *settle_decimals),
        }
    }
}
