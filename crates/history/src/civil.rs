//! Calendar arithmetic on the engine's clock (ns since the Unix epoch, UTC): the date
//! a row is partitioned under (the dates themselves: `bourse_core::civil`).

pub const NS_PER_DAY: u64 = 86_400_000_000_000;
pub const NS_PER_MINUTE: u64 = 60_000_000_000;
// Candles close on minutes and rows are partitioned by day: a minute never spans two.
const _: () = assert!(NS_PER_DAY.is_multiple_of(NS_PER_MINUTE));

/// The day number (days since 1970-01-01) of `ns`.
pub fn day_of(ns: u64) -> u32 {
    (ns / NS_PER_DAY) as u32
}

/// `YYYY-MM-DD` of day number `day`.
pub fn date_text(day: u32) -> String {
    let (year, month, day) = bourse_core::civil::civil_from_days(i64::from(day));
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_known_days() {
        assert_eq!(date_text(0), "1970-01-01");
        assert_eq!(date_text(day_of(951_782_400 * 1_000_000_000)), "2000-02-29");
        assert_eq!(date_text(day_of(1_795_478_400 * 1_000_000_000)), "2026-11-24");
        assert_eq!(date_text(day_of(1_795_564_799 * 1_000_000_000)), "2026-11-24");
        assert_eq!(date_text(day_of(4_102_444_800 * 1_000_000_000)), "2100-01-01");
    }
}
