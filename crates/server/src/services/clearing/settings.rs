//! What a venue remembers about its futures contracts that the engine does not: a
//! margin set as a ratio of the settlement price (the engine holds margin as an amount
//! per lot, and the last settlement price), and the price the operator posted for the
//! next settlement. Kept in `futures.json` in the server's directory, written whole
//! (`files::write_atomically`) on every change.
//!
//! Every change is a `SettingsChange`, applied in one place (`apply_local` on one node,
//! `apply_replicated` for a record of a cluster's log, `port::records`), so that every
//! node of a cluster holds the same settings and a new leader settles as the old one
//! would have.

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

/// One change to one contract's settings, whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "set", rename_all = "snake_case", deny_unknown_fields)]
pub enum SettingsChange {
    /// The margin follows `ratio` of the settlement price (`None`: a fixed margin).
    MarginRatio { symbol: String, ratio: Option<String> },
    /// `price` is posted for the next settlement (`None`: the posted price is used up).
    PostedPrice { symbol: String, price: Option<String> },
}

impl SettingsChange {
    pub fn symbol(&self) -> &str {
        match self {
            SettingsChange::MarginRatio { symbol, .. }
            | SettingsChange::PostedPrice { symbol, .. } => symbol,
        }
    }

    /// Makes the change in `contracts`; the contract's settings after it.
    fn apply(&self, contracts: &mut BTreeMap<String, ContractSettings>) -> ContractSettings {
        let contract = contracts.entry(self.symbol().to_string()).or_default();
        match self {
            SettingsChange::MarginRatio { ratio, .. } => contract.margin_ratio = ratio.clone(),
            SettingsChange::PostedPrice { price, .. } => contract.posted_price = price.clone(),
        }
        contract.clone()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot write the futures settings {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot read the futures settings {path}: {message}")]
    Read { path: PathBuf, message: String },
}

/// `futures.json`: the contracts' settings and, in a cluster, the log index they are
/// applied to. (A file written before there were clusters holds the contracts alone.)
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredSettings {
    contracts: BTreeMap<String, ContractSettings>,
    #[serde(default)]
    applied_index: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SettingsFile {
    Current(StoredSettings),
    ContractsOnly(BTreeMap<String, ContractSettings>),
}

pub struct FuturesSettings {
    path: PathBuf,
    stored: Mutex<StoredSettings>,
}

impl FuturesSettings {
    /// The settings in `directory/futures.json` (none yet: empty).
    pub fn open(directory: &Path) -> Result<FuturesSettings, SettingsError> {
        let path = directory.join("futures.json");
        let stored = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(SettingsFile::Current(stored)) => stored,
                Ok(SettingsFile::ContractsOnly(contracts)) => {
                    StoredSettings { contracts, applied_index: 0 }
                }
                Err(error) => {
                    return Err(SettingsError::Read {
                        path: path.clone(),
                        message: error.to_string(),
                    })
                }
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => StoredSettings::default(),
            Err(error) => {
                return Err(SettingsError::Read { path, message: error.to_string() });
            }
        };
        Ok(FuturesSettings { path, stored: Mutex::new(stored) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StoredSettings> {
        self.stored.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn get(&self, symbol: &str) -> ContractSettings {
        self.lock().contracts.get(symbol).cloned().unwrap_or_default()
    }

    /// Makes `change` and writes the file (blocking: call it off the async workers).
    /// Nothing changes if the write fails.
    pub fn apply_local(&self, change: &SettingsChange) -> Result<ContractSettings, SettingsError> {
        let mut stored = self.lock();
        let mut next = stored.clone();
        let updated = change.apply(&mut next.contracts);
        self.save(&next)?;
        *stored = next;
        Ok(updated)
    }

    /// Makes `change`, committed at log `index` of the cluster's log, and stores the
    /// index with it. `None`: the settings hold that index already (the log is handed
    /// over again after a restart).
    pub fn apply_replicated(
        &self,
        index: u64,
        change: &SettingsChange,
    ) -> Option<Result<ContractSettings, SettingsError>> {
        let mut stored = self.lock();
        if index <= stored.applied_index {
            return None;
        }
        let mut next = stored.clone();
        let updated = change.apply(&mut next.contracts);
        next.applied_index = index;
        if let Err(error) = self.save(&next) {
            return Some(Err(error));
        }
        *stored = next;
        Some(Ok(updated))
    }

    /// The last log index of the cluster's log these settings are known to hold.
    pub fn applied_index(&self) -> u64 {
        self.lock().applied_index
    }

    /// Stores `index` as the log index these settings hold: every record up to it is
    /// applied (`port::records` decides when; an older index is ignored).
    pub fn store_applied_index(&self, index: u64) -> Result<(), SettingsError> {
        let mut stored = self.lock();
        if index <= stored.applied_index {
            return Ok(());
        }
        let mut next = stored.clone();
        next.applied_index = index;
        self.save(&next)?;
        *stored = next;
        Ok(())
    }

    fn save(&self, stored: &StoredSettings) -> Result<(), SettingsError> {
        let bytes = serde_json::to_vec_pretty(stored).unwrap_or_default();
        crate::files::write_atomically(&self.path, &bytes)
            .map_err(|(path, source)| SettingsError::Write { path, source })
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

    fn margin_ratio(symbol: &str, ratio: &str) -> SettingsChange {
        SettingsChange::MarginRatio { symbol: symbol.into(), ratio: Some(ratio.into()) }
    }

    #[test]
    fn settings_survive_a_reopen_and_a_failed_write_changes_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let settings = FuturesSettings::open(directory.path()).unwrap();
        assert_eq!(settings.get("CU"), ContractSettings::default());
        settings.apply_local(&margin_ratio("CU", "0.08")).unwrap();
        let reopened = FuturesSettings::open(directory.path()).unwrap();
        assert_eq!(reopened.get("CU").margin_ratio.as_deref(), Some("0.08"));
        drop(directory);
        let post = SettingsChange::PostedPrice { symbol: "CU".into(), price: Some("1".into()) };
        assert!(reopened.apply_local(&post).is_err());
        assert_eq!(reopened.get("CU").posted_price, None);
    }

    #[test]
    fn a_replicated_change_is_applied_once_and_its_index_stored() {
        let directory = tempfile::tempdir().unwrap();
        let settings = FuturesSettings::open(directory.path()).unwrap();
        let applied = settings.apply_replicated(7, &margin_ratio("CU", "0.08"));
        assert_eq!(applied.unwrap().unwrap().margin_ratio.as_deref(), Some("0.08"));
        // The log handed over again after a restart: the same index is not applied twice.
        assert!(settings.apply_replicated(7, &margin_ratio("CU", "0.09")).is_none());
        let reopened = FuturesSettings::open(directory.path()).unwrap();
        assert_eq!(reopened.applied_index(), 7);
        assert_eq!(reopened.get("CU").margin_ratio.as_deref(), Some("0.08"));
        // How far the log is applied, stored; never backward.
        reopened.store_applied_index(1_007).unwrap();
        reopened.store_applied_index(100).unwrap();
        assert_eq!(FuturesSettings::open(directory.path()).unwrap().applied_index(), 1_007);
    }

    #[test]
    fn a_file_of_contracts_only_still_opens() {
        let directory = tempfile::tempdir().unwrap();
        std::fs::write(
            directory.path().join("futures.json"),
            r#"{"SHFE.cu2612": {"margin_ratio": "0.08", "posted_price": "70000"}}"#,
        )
        .unwrap();
        let settings = FuturesSettings::open(directory.path()).unwrap();
        assert_eq!(settings.get("SHFE.cu2612").posted_price.as_deref(), Some("70000"));
        assert_eq!(settings.applied_index(), 0);
    }
}
