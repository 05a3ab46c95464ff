//! Kubernetes resource quantities (`500m`, `1.5Gi`, `1e3`) parsed exactly, as apimachinery's `resource.Quantity`.

// Values are kept in nano-units (10⁻⁹) in an `i128`: apimachinery rounds anything finer than a nano-unit up to one
// nano-unit, so this representation is exact for every quantity the API server can store, and sums of container
// requests are computed before rounding to milli-units or units, as Go does.

use std::fmt;

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;
/// Saturation bound: far beyond what any node or pod can carry, and still safe to add a few thousand of.
const LIMIT: i128 = i128::MAX / 1_000_000;

/// A parsed quantity in nano-units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(i128);

/// Why a quantity string is not a Kubernetes quantity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity `{input}`: {reason}")]
pub struct QuantityError {
    /// The text as written.
    pub input: String,
    /// What is wrong with it (the wording of apimachinery's errors).
    pub reason: &'static str,
}

impl Amount {
    /// Zero.
    pub const ZERO: Amount = Amount(0);

    /// An amount of whole units.
    pub(crate) fn from_units(units: i64) -> Amount {
        Amount(i128::from(units) * NANO)
    }

    /// An amount of milli-units.
    pub(crate) fn from_milli(milli: i64) -> Amount {
        Amount(i128::from(milli) * 1_000_000)
    }

    /// The exact value in nano-units.
    pub(crate) fn nano(self) -> i128 {
        self.0
    }

    /// Whole units rounded away from zero, like `Quantity.Value()` (saturating at the `i64` range).
    pub fn value(self) -> i64 {
        saturate(div_away_from_zero(self.0, NANO))
    }

    /// Milli-units rounded away from zero, like `Quantity.MilliValue()`.
    pub(crate) fn milli_value(self) -> i64 {
        saturate(div_away_from_zero(self.0, 1_000_000))
    }

    /// Exact sum (saturating far outside any real cluster).
    pub fn saturating_add(self, other: Amount) -> Amount {
        Amount(self.0.saturating_add(other.0).clamp(-LIMIT, LIMIT))
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / NANO;
        let frac = (self.0 % NANO).abs();
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d == 0 {
        q
    } else if n > 0 {
        q + 1
    } else {
        q - 1
    }
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v > 0 { i64::MAX } else { i64::MIN })
}

/// Parses a quantity the way `resource.ParseQuantity` does.
pub fn parse(input: &str) -> Result<Amount, QuantityError> {
    let error = |reason| QuantityError {
        input: input.to_string(),
        reason,
    };
    const FORMAT: &str = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    if input.is_empty() {
        return Err(error(FORMAT));
    }
    let bytes = input.as_bytes();
    let mut pos = 0;
    let mut negative = false;
    if let Some(&sign) = bytes.first()
        && (sign == b'-' || sign == b'+')
    {
        negative = sign == b'-';
        pos = 1;
    }
    let int_start = pos;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let integer = &input[int_start..pos];
    let mut fraction = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        pos += 1;
        let frac_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        fraction = &input[frac_start..pos];
    }
    let suffix = &input[pos..];
    if !suffix_is_well_formed(suffix) {
        return Err(error(FORMAT));
    }
    let (base, exponent) = interpret_suffix(suffix).ok_or_else(|| error("unable to parse quantity's suffix"))?;
    let digits: String = integer.chars().chain(fraction.chars()).collect();
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(error("too many significant digits"));
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits
            .parse()
            .map_err(|_| error("unable to parse quantity's numeric part"))?
    };
    let nano = scale_to_nano(mantissa, fraction.len() as i64, base, exponent).ok_or_else(|| error("out of range"))?;
    Ok(Amount(if negative { -nano } else { nano }))
}

/// `mantissa · 10^-decimals · base^exponent` in nano-units, rounded up to a whole nano-unit.
fn scale_to_nano(mantissa: i128, decimals: i64, base: u32, exponent: i64) -> Option<i128> {
    if mantissa == 0 {
        return Some(0);
    }
    let (mut numerator, mut ten_power) = (mantissa, 9 - decimals);
    if base == 2 {
        let shift = u32::try_from(exponent).ok()?;
        numerator = numerator.checked_mul(1i128.checked_shl(shift)?)?;
    } else {
        ten_power += exponent;
    }
    if ten_power >= 0 {
        let factor = 10i128.checked_pow(u32::try_from(ten_power).ok()?)?;
        let value = numerator.checked_mul(factor)?;
        (value <= LIMIT).then_some(value)
    } else {
        // Finer than a nano-unit: round up, as apimachinery does ("if you want some, you get some").
        let divisor = match u32::try_from(-ten_power).ok().and_then(|p| 10i128.checked_pow(p)) {
            Some(divisor) => divisor,
            None => return Some(1),
        };
        Some(div_away_from_zero(numerator, divisor))
    }
}

/// The suffix grammar of `parseQuantityString`: suffix letters, then an optional signed integer exponent.
fn suffix_is_well_formed(suffix: &str) -> bool {
    let rest = suffix.trim_start_matches(|c: char| "eEinumkKMGTP".contains(c));
    let rest = rest.strip_prefix(['-', '+']).unwrap_or(rest);
    rest.bytes().all(|b| b.is_ascii_digit())
}

/// (base, exponent) of a suffix: decimal SI, binary SI or an `e`/`E` exponent.
fn interpret_suffix(suffix: &str) -> Option<(u32, i64)> {
    let decimal = match suffix {
        "" => Some(0),
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(exponent) = decimal {
        return Some((10, exponent));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(exponent) = binary {
        return Some((2, exponent));
    }
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    if exponent.is_empty() {
        return None;
    }
    // Go parses the exponent as an int64; absurd exponents saturate through `scale_to_nano`.
    exponent.parse::<i64>().ok().map(|e| (10, e.clamp(-1000, 1000)))
}
