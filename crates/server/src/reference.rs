//! The venue's definitions as the gateways print them: the assets and instruments, a
//! copy read from the engine (which never changes a definition once made), and the
//! decimal strings of prices, quantities and amounts, printed from integers, never
//! through a float. `directory` keeps the copy up to date.

use bourse_core::exchange::Exchange;
use bourse_core::ids::{AssetId, InstrumentId};
use bourse_core::Decimal;

/// What the gateways need to print an instrument's numbers. Assets and instruments
/// never change once declared, so a copy taken once stays right.
#[derive(Clone, Debug)]
pub struct InstrumentInfo {
    pub symbol: String,
    pub base: String,
    pub quote: String,
    pub base_decimals: u32,
    pub quote_decimals: u32,
    pub price_decimals: u32,
    pub qty_decimals: u32,
    pub tick: i64,
    pub lot: i64,
    pub min_qty: i128,
    pub max_qty: i128,
    pub maker_fee_bps: i64,
    pub taker_fee_bps: i64,
    pub market_band_bps: i64,
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
                base: assets[instrument.spot.base.index()].0.clone(),
                quote: assets[instrument.spot.quote.index()].0.clone(),
                base_decimals: assets[instrument.spot.base.index()].1,
                quote_decimals: assets[instrument.spot.quote.index()].1,
                price_decimals: instrument.price_decimals,
                qty_decimals: instrument.qty_decimals,
                tick: instrument.tick.0,
                lot: instrument.lot.0,
                min_qty: instrument.min_qty,
                max_qty: instrument.max_qty,
                maker_fee_bps: instrument.spot.maker_fee_bps,
                taker_fee_bps: instrument.spot.taker_fee_bps,
                market_band_bps: instrument.market_band_bps,
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
}
