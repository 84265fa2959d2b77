//! Fixed-point decimals, written from scratch with strings and integer arithmetic.

/// A plain decimal as an integer scaled by 10^decimals, rounded half away from zero.
pub(crate) fn fixed(s: &str, decimals: usize) -> Option<i64> {
    let s = s.trim_start_matches('+');
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.chars().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) || int.len() > 16 {
        return None;
    }
    let mut padded: String = frac.chars().take(decimals).collect();
    while padded.len() < decimals {
        padded.push('0');
    }
    let mut v: i64 = format!("{}{padded}", if int.is_empty() { "0" } else { int }).parse().ok()?;
    if frac.len() > decimals && frac.as_bytes()[decimals] >= b'5' {
        v += 1;
    }
    // Operators refuse magnitudes above 2^53 so that sums cannot overflow.
    if v > 1 << 53 {
        return None;
    }
    Some(if neg { -v } else { v })
}

/// `v / 10^decimals` written with exactly `decimals` decimals.
pub(crate) fn show(v: i64, decimals: u32) -> String {
    let scale = 10i64.pow(decimals);
    let sign = if v < 0 { "-" } else { "" };
    let a = v.abs();
    if decimals == 0 {
        return format!("{v}");
    }
    format!("{sign}{}.{:0width$}", a / scale, a % scale, width = decimals as usize)
}

/// Integer division rounded half away from zero.
pub(crate) fn round_div(n: i128, d: i128) -> i128 {
    let q = (n.abs() * 2 + d) / (2 * d);
    if n < 0 { -q } else { q }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_match_their_definitions() {
        assert_eq!(fixed("12.3456", 4), Some(123_456));
        assert_eq!(fixed("-1.23455", 4), Some(-12_346));
        assert_eq!(fixed(".5", 1), Some(5));
        assert_eq!(fixed("1e3", 1), None);
        assert_eq!(show(-1_234, 3), "-1.234");
        assert_eq!(show(5, 2), "0.05");
        assert_eq!(round_div(7, 2), 4);
        assert_eq!(round_div(-7, 2), -4);
    }
}
