//! What a venue remembers about its futures contracts that the engine does not: a
//! margin set as a ratio of the settlement price (the engine holds margin as an amount
//! per lot, and the last settlement price), and the price the operator posted for the
//! next settlement. Kept in `futures.json` in the server's directory, written whole
//! (`files::write_atomically`) on every change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bourse_core::Decimal;
use serde::{Deserialize, Serialize};

/// One contract's settings. Prices and the ratio are decimal strings, as declared.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractSettings {
    /// Margin per lot as this share of a lot's value at the settlement price; `None`:
    /// the margin is a fixed amount, changed only by the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin_ratio: Option<String>,
    /// The price the operator posted for the next settlement (used once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posted_price: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot write the futures settings {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot read the futures settings {path}: {message}")]
    Read { path: PathBuf, message: String },
}

pub struct FuturesSettings {
    path: PathBuf,
    contracts: Mutex<BTreeMap<String, ContractSettings>>,
}

impl FuturesSettings {
    /// The settings in `directory/futures.json` (none yet: empty).
    pub fn open(directory: &Path) -> Result<FuturesSettings, SettingsError> {
        let path = directory.join("futures.json");
        let contracts = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| SettingsError::Read {
                path: path.clone(),
                message: error.to_string(),
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => {
                return Err(SettingsError::Read { path, message: error.to_string() });
            }
        };
        Ok(FuturesSettings { path, contracts: Mutex::new(contracts) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ContractSettings>> {
        self.contracts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn get(&self, symbol: &str) -> ContractSettings {
        self.lock().get(symbol).cloned().unwrap_or_default()
    }

    /// Changes `symbol`'s settings with `change` and writes the file (blocking: call it
    /// off the async workers). Nothing changes if the write fails.
    pub fn update(
        &self,
        symbol: &str,
        change: impl FnOnce(&mut ContractSettings),
    ) -> Result<ContractSettings, SettingsError> {
        let mut contracts = self.lock();
        let mut changed = contracts.clone();
        let entry = changed.entry(symbol.to_string()).or_default();
        change(entry);
        let updated = entry.clone();
        let bytes = serde_json::to_vec_pretty(&changed).unwrap_or_default();
        crate::files::write_atomically(&self.path, &bytes)
            .map_err(|(path, source)| SettingsError::Write { path, source })?;
        *contracts = changed;
        Ok(updated)
    }
}

/// The margin per lot a ratio gives at `price`: `ratio * price * lot * multiplier`,
/// rounded up to the settle asset's unit (a margin is never less than the ratio says),
/// in those units; `None` when it does not fit or is not positive.
pub fn ratio_margin(
    ratio: Decimal,
    price: Decimal,
    lot: Decimal,
    multiplier: Decimal,
    settle_decimals: u32,
) -> Option<i64> {
    let factors = [ratio, price, lot, multiplier];
    let mut mantissa: i128 = 1;
    let mut scale: u32 = 0;
    for factor in factors {
        mantissa = mantissa.checked_mul(factor.mantissa())?;
        scale += factor.scale();
    }
    if mantissa <= 0 {
        return None;
    }
    let units = if scale >= settle_decimals {
        let divisor = 10i128.checked_pow(scale - settle_decimals)?;
        (mantissa + divisor - 1) / divisor
    } else {
        mantissa.checked_mul(10i128.checked_pow(settle_decimals - scale)?)?
    };
    i64::try_from(units).ok().filter(|&units| units > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decimal(text: &str) -> Decimal {
        Decimal::parse(text).unwrap()
    }

    #[test]
    fn a_ratio_margin_is_rounded_up_to_the_settle_unit() {
        // 8% of 50010 * 1 lot * 5 = 20004 CNY exactly.
        assert_eq!(
            ratio_margin(decimal("0.08"), decimal("50010"), decimal("1"), decimal("5"), 2),
            Some(2_000_400)
        );
        // 7.5% of 3.33 * 0.1 * 1 = 0.0249750 -> 0.03 at 2 decimals (up).
        assert_eq!(
            ratio_margin(decimal("0.075"), decimal("3.33"), decimal("0.1"), decimal("1"), 2),
            Some(3)
        );
        assert_eq!(ratio_margin(decimal("0"), decimal("1"), decimal("1"), decimal("1"), 2), None);
    }

    #[test]
    fn settings_survive_a_reopen_and_a_failed_write_changes_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let settings = FuturesSettings::open(directory.path()).unwrap();
        assert_eq!(settings.get("CU"), ContractSettings::default());
        settings.update("CU", |contract| contract.margin_ratio = Some("0.08".into())).unwrap();
        let reopened = FuturesSettings::open(directory.path()).unwrap();
        assert_eq!(reopened.get("CU").margin_ratio.as_deref(), Some("0.08"));
        drop(directory);
        assert!(reopened
            .update("CU", |contract| contract.posted_price = Some("1".into()))
            .is_err());
        assert_eq!(reopened.get("CU").posted_price, None);
    }
}
