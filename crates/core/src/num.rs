//! Fixed-point numbers: the decimal literals of the replay format and the typed integer
//! units the engine computes in (`Price`, `Qty`, `Amount`).
//!
//! Every value is an integer count of some smallest unit; the unit is set by an asset's
//! decimals or an instrument's tick and lot. Products (`price * qty`) are taken in 128
//! bits and checked. Floats never appear here.

use std::fmt;

/// A decimal literal exactly as the replay format writes it: `-?[0-9]+(\.[0-9]+)?`.
///
/// The value is `mantissa * 10^-scale`, normalised so that the fraction has no trailing
/// zeros (`"1.50"` has scale 1). Magnitudes beyond what `i128` holds saturate; such
/// values are far outside every range the engine accepts, so saturation never changes
/// an outcome that matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    mantissa: i128,
    scale: u32,
}

impl Decimal {
    pub const ZERO: Decimal = Decimal { mantissa: 0, scale: 0 };

    /// Parses the replay format's decimal grammar; `None` for anything else (`"1e3"`,
    /// `".5"`, `" 1"`, `"+1"`, `"1."`).
    pub fn parse(text: &str) -> Option<Decimal> {
        let bytes = text.as_bytes();
        let (negative, digits) = match bytes.first() {
            Some(b'-') => (true, &bytes[1..]),
            _ => (false, bytes),
        };
        let (integer_part, fraction_part) = match digits.iter().position(|&b| b == b'.') {
            Some(dot) => (&digits[..dot], Some(&digits[dot + 1..])),
            None => (digits, None),
        };
        if integer_part.is_empty() || !integer_part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let fraction = match fraction_part {
            Some(fraction) if fraction.is_empty() || !fraction.iter().all(u8::is_ascii_digit) => {
                return None
            }
            Some(fraction) => {
                let significant =
                    fraction.len() - fraction.iter().rev().take_while(|&&b| b == b'0').count();
                &fraction[..significant]
            }
            None => &[][..],
        };
        let mut mantissa: i128 = 0;
        for &digit in integer_part.iter().chain(fraction) {
            mantissa = mantissa.saturating_mul(10).saturating_add(i128::from(digit - b'0'));
        }
        if negative {
            mantissa = -mantissa;
        }
        let scale = u32::try_from(fraction.len()).unwrap_or(u32::MAX);
        Some(Decimal { mantissa, scale })
    }

    /// A decimal from an integer count of `10^-scale` units (used for printing).
    pub fn from_units(units: i128, scale: u32) -> Decimal {
        // Every price, quantity and amount fits in `i64`, where dividing by ten is a
        // multiplication; an `i128` division is a library call (the gateways print three
        // decimals an order report).
        if let Ok(small) = i64::try_from(units) {
            let (mut mantissa, mut scale) = (small, scale);
            while scale > 0 && mantissa % 10 == 0 {
                mantissa /= 10;
                scale -= 1;
            }
            return Decimal { mantissa: i128::from(mantissa), scale };
        }
        let mut decimal = Decimal { mantissa: units, scale };
        while decimal.scale > 0 && decimal.mantissa % 10 == 0 {
            decimal.mantissa /= 10;
            decimal.scale -= 1;
        }
        decimal
    }

    /// The decimal whose parts (`mantissa`, `scale`) these are, as another decimal gave
    /// them: no check (a container that keeps decimals as parts, `OrderSize`).
    pub(crate) const fn from_parts(mantissa: i128, scale: u32) -> Decimal {
        Decimal { mantissa, scale }
    }

    /// `mantissa * 10^-scale` if that is already the normalised form (no trailing zero
    /// in the fraction, scale at most 38), as every decimal this crate produces is;
    /// `None` otherwise. For decoders of stored decimals: one cheap check, no loop.
    pub fn from_normalised(mantissa: i128, scale: u32) -> Option<Decimal> {
        let trailing_zero = match i64::try_from(mantissa) {
            Ok(small) => small % 10 == 0,
            Err(_) => mantissa % 10 == 0,
        };
        (scale <= 38 && (scale == 0 || !trailing_zero)).then_some(Decimal { mantissa, scale })
    }

    /// The integer `m` of `m * 10^-scale` (normalised: no trailing zeros in the fraction).
    pub fn mantissa(self) -> i128 {
        self.mantissa
    }

    /// Number of significant decimal places (`"0.050"` has 2).
    pub fn scale(self) -> u32 {
        self.scale
    }

    pub fn is_positive(self) -> bool {
        self.mantissa > 0
    }

    /// The value as a count of `10^-target_scale` units, or `None` when the value has
    /// more decimal places than that unit allows. Saturates at the `i128` range.
    pub fn to_units(self, target_scale: u32) -> Option<i128> {
        if self.scale > target_scale {
            return None;
        }
        if self.scale == target_scale {
            return Some(self.mantissa);
        }
        Some(self.mantissa.saturating_mul(pow10_saturating(target_scale - self.scale)))
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.mantissa < 0 { "-" } else { "" };
        // Within `i64` (every price, quantity and amount) in 64-bit arithmetic: printing
        // an `i128` divides through a library call.
        if let (Ok(mantissa), true) = (i64::try_from(self.mantissa), self.scale <= 18) {
            if self.scale == 0 {
                return write!(formatter, "{mantissa}");
            }
            let magnitude = mantissa.unsigned_abs();
            let divisor = 10u64.pow(self.scale);
            return write!(
                formatter,
                "{sign}{}.{:0width$}",
                magnitude / divisor,
                magnitude % divisor,
                width = self.scale as usize
            );
        }
        if self.scale == 0 {
            return write!(formatter, "{}", self.mantissa);
        }
        let magnitude = self.mantissa.unsigned_abs();
        let divisor = 10u128.pow(self.scale);
        write!(
            formatter,
            "{sign}{}.{:0width$}",
            magnitude / divisor,
            magnitude % divisor,
            width = self.scale as usize
        )
    }
}

/// `10^exponent`, saturating at `i128::MAX`.
pub fn pow10_saturating(exponent: u32) -> i128 {
    const POWERS: [i128; 39] = {
        let mut powers = [1i128; 39];
        let mut index = 1;
        while index < powers.len() {
            powers[index] = powers[index - 1] * 10;
            index += 1;
        }
        powers
    };
    POWERS.get(exponent as usize).copied().unwrap_or(i128::MAX)
}

macro_rules! unit_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub i64);

        impl $name {
            pub const ZERO: $name = $name(0);

            pub fn units(self) -> i64 {
                self.0
            }

            pub fn checked_add(self, other: $name) -> Option<$name> {
                self.0.checked_add(other.0).map($name)
            }

            pub fn checked_sub(self, other: $name) -> Option<$name> {
                self.0.checked_sub(other.0).map($name)
            }

            pub fn is_zero(self) -> bool {
                self.0 == 0
            }
        }

        impl std::ops::Add for $name {
            type Output = $name;
            fn add(self, other: $name) -> $name {
                $name(self.0 + other.0)
            }
        }

        impl std::ops::Sub for $name {
            type Output = $name;
            fn sub(self, other: $name) -> $name {
                $name(self.0 - other.0)
            }
        }

        impl std::ops::AddAssign for $name {
            fn add_assign(&mut self, other: $name) {
                self.0 += other.0;
            }
        }

        impl std::ops::SubAssign for $name {
            fn sub_assign(&mut self, other: $name) {
                self.0 -= other.0;
            }
        }
    };
}

unit_type!(
    /// A price in the instrument's price units: `10^-decimals(tick)` of the quote asset
    /// per whole base unit. Always a positive multiple of the tick on the book.
    Price
);
unit_type!(
    /// A quantity in the instrument's quantity units: `10^-decimals(lot)` base units.
    Qty
);
unit_type!(
    /// An amount of one asset in its smallest units (`10^-decimals`).
    Amount
);

impl Qty {
    pub fn min(self, other: Qty) -> Qty {
        Qty(self.0.min(other.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_grammar_and_nothing_else() {
        for good in ["0", "-0", "1", "007", "1.5", "1.50", "-2.25", "123456789.000001"] {
            assert!(Decimal::parse(good).is_some(), "{good}");
        }
        for bad in ["", "-", ".5", "1.", "1e3", " 1", "1 ", "+1", "1.2.3", "--1", "0x10", "١"] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn trailing_zeros_do_not_count_as_decimal_places() {
        let value = Decimal::parse("1.500").unwrap();
        assert_eq!(value.scale(), 1);
        assert_eq!(value.to_units(1), Some(15));
        assert_eq!(value.to_units(3), Some(1500));
        assert_eq!(Decimal::parse("2.0").unwrap().scale(), 0);
    }

    #[test]
    fn too_many_decimal_places_has_no_units() {
        assert_eq!(Decimal::parse("0.001").unwrap().to_units(2), None);
        assert_eq!(Decimal::parse("-1.25").unwrap().to_units(2), Some(-125));
    }

    #[test]
    fn huge_values_saturate_instead_of_wrapping() {
        let huge = Decimal::parse(&"9".repeat(60)).unwrap();
        assert_eq!(huge.to_units(18), Some(i128::MAX));
        let tiny_negative = Decimal::parse(&format!("-{}", "9".repeat(60))).unwrap();
        assert!(tiny_negative.to_units(0).unwrap() < 0);
    }

    #[test]
    fn displays_exactly() {
        assert_eq!(Decimal::from_units(150, 2).to_string(), "1.5");
        assert_eq!(Decimal::from_units(-5, 3).to_string(), "-0.005");
        assert_eq!(Decimal::from_units(1200, 0).to_string(), "1200");
        assert_eq!(Decimal::from_units(0, 4).to_string(), "0");
    }

    /// The 64-bit fast paths of `from_units` and `Display` against the plain 128-bit
    /// arithmetic they stand in for, around the edges of `i64` and of the scales.
    #[test]
    fn the_64_bit_paths_agree_with_128_bit_arithmetic() {
        fn reference_from_units(units: i128, scale: u32) -> (i128, u32) {
            let (mut mantissa, mut scale) = (units, scale);
            while scale > 0 && mantissa % 10 == 0 {
                mantissa /= 10;
                scale -= 1;
            }
            (mantissa, scale)
        }
        fn reference_display(mantissa: i128, scale: u32) -> String {
            if scale == 0 {
                return mantissa.to_string();
            }
            let sign = if mantissa < 0 { "-" } else { "" };
            let magnitude = mantissa.unsigned_abs();
            let divisor = 10u128.pow(scale);
            format!(
                "{sign}{}.{:0width$}",
                magnitude / divisor,
                magnitude % divisor,
                width = scale as usize
            )
        }
        let edges =
            [i128::from(i64::MAX), i128::from(i64::MIN), 0, 1, 10, 1_000_000_000_000_000_000];
        let mut units: Vec<i128> = Vec::new();
        for edge in edges {
            for delta in [-11i128, -10, -1, 0, 1, 10, 11] {
                units.extend(edge.checked_add(delta));
                units.extend(edge.checked_mul(10).and_then(|big| big.checked_add(delta)));
            }
        }
        units.extend([123_456_700, -98_765_000_000, i128::MAX, i128::MIN + 1]);
        for &value in &units {
            for scale in [0, 1, 2, 3, 8, 17, 18, 19, 20, 38] {
                let decimal = Decimal::from_units(value, scale);
                let (mantissa, normalised_scale) = reference_from_units(value, scale);
                assert_eq!(
                    (decimal.mantissa(), decimal.scale()),
                    (mantissa, normalised_scale),
                    "{value} at {scale}"
                );
                assert_eq!(
                    decimal.to_string(),
                    reference_display(mantissa, normalised_scale),
                    "{value} at {scale}"
                );
            }
        }
    }
}
