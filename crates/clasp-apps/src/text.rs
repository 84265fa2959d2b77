//! Byte-level parsing and formatting shared by the operators: no `String` per record.
//!
//! Numbers with decimals are handled as fixed-point integers ([`parse_fixed`]): sums, means
//! and threshold tests are then exact and identical on every worker, whatever the order of
//! additions, and formatting them needs no float printing.

use clasp_core::operator::Context;
use clasp_core::pipeline::Operator as OperatorSpec;
use clasp_core::state::StateValue;

/// The `N` fields of `line` separated by `sep`, or `None` when there are not exactly `N`.
#[inline]
pub fn fields<const N: usize>(line: &[u8], sep: u8) -> Option<[&[u8]; N]> {
    let mut out = [&line[..0]; N];
    let mut parts = line.split(|b| *b == sep);
    for slot in &mut out {
        *slot = parts.next()?;
    }
    match parts.next() {
        None => Some(out),
        Some(_) => None,
    }
}

/// `b` without leading and trailing ASCII whitespace.
#[inline]
pub fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// A decimal unsigned integer (no sign, no spaces, at most 19 digits).
#[inline]
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut v = 0u64;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    Some(v)
}

/// A decimal integer with an optional sign.
#[inline]
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    match b.first() {
        Some(b'-') => parse_u64(&b[1..]).and_then(|v| i64::try_from(v).ok()).map(|v| -v),
        Some(b'+') => parse_u64(&b[1..]).and_then(|v| i64::try_from(v).ok()),
        _ => parse_u64(b).and_then(|v| i64::try_from(v).ok()),
    }
}

/// Largest magnitude of a fixed-point value (2^53): sums of hundreds of them, and their
/// products with parts-per-million thresholds in `i128`, cannot overflow.
pub const MAX_FIXED: i64 = 1 << 53;

/// A plain decimal number (`-12.345`, `7`, `.5`; no exponent) as an integer scaled by
/// `10^decimals`. Digits beyond `decimals` are rounded half away from zero. Values whose
/// scaled magnitude exceeds [`MAX_FIXED`] are rejected like non-numbers.
pub fn parse_fixed(b: &[u8], decimals: u32) -> Option<i64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let (int, frac) = match digits.iter().position(|c| *c == b'.') {
        Some(i) => (&digits[..i], &digits[i + 1..]),
        None => (digits, &digits[..0]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let push = |v: i64, c: u8| -> Option<i64> {
        if !c.is_ascii_digit() {
            return None;
        }
        v.checked_mul(10)?.checked_add(i64::from(c - b'0')).filter(|v| *v <= MAX_FIXED)
    };
    let mut v: i64 = 0;
    for &c in int {
        v = push(v, c)?;
    }
    let mut round_up = false;
    for (i, &c) in frac.iter().enumerate() {
        let i = i as u32;
        if i < decimals {
            v = push(v, c)?;
        } else if !c.is_ascii_digit() {
            return None;
        } else if i == decimals {
            round_up = c >= b'5';
        }
    }
    for _ in frac.len() as u32..decimals {
        v = push(v, b'0')?;
    }
    v += i64::from(round_up);
    if v > MAX_FIXED {
        return None;
    }
    Some(if neg { -v } else { v })
}

/// `num / den` rounded half away from zero (`den > 0`).
#[inline]
pub fn div_round(num: i64, den: i64) -> i64 {
    let q = num / den;
    let r = num % den;
    if 2 * r.abs() >= den { q + num.signum() } else { q }
}

/// A fixed-capacity output buffer on the stack, for formatting one record without
/// allocating. Writes past the capacity set an overflow flag instead of growing.
#[derive(Debug)]
pub struct Buf {
    bytes: [u8; Buf::CAPACITY],
    len: usize,
    overflow: bool,
}

impl Default for Buf {
    fn default() -> Self {
        Self::new()
    }
}

impl Buf {
    /// Bytes a record may take.
    pub const CAPACITY: usize = 1024;

    /// An empty buffer.
    #[inline]
    pub fn new() -> Self {
        Self { bytes: [0; Self::CAPACITY], len: 0, overflow: false }
    }

    /// Forgets the contents.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
        self.overflow = false;
    }

    /// Appends bytes.
    #[inline]
    pub fn put(&mut self, b: &[u8]) -> &mut Self {
        let end = self.len + b.len();
        if end > Self::CAPACITY {
            self.overflow = true;
        } else {
            self.bytes[self.len..end].copy_from_slice(b);
            self.len = end;
        }
        self
    }

    /// Appends one byte.
    #[inline]
    pub fn byte(&mut self, b: u8) -> &mut Self {
        self.put(&[b])
    }

    /// Appends an unsigned decimal.
    #[inline]
    pub fn u64(&mut self, mut v: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&digits[i..])
    }

    /// Appends a signed decimal.
    #[inline]
    pub fn i64(&mut self, v: i64) -> &mut Self {
        if v < 0 {
            self.byte(b'-');
        }
        self.u64(v.unsigned_abs())
    }

    /// Appends a fixed-point value scaled by `10^decimals` with exactly `decimals` decimals.
    pub fn fixed(&mut self, v: i64, decimals: u32) -> &mut Self {
        if decimals == 0 {
            return self.i64(v);
        }
        let scale = 10u64.pow(decimals);
        let a = v.unsigned_abs();
        if v < 0 {
            self.byte(b'-');
        }
        self.u64(a / scale).byte(b'.');
        let frac = a % scale;
        let mut digits = [b'0'; 19];
        let mut f = frac;
        for i in (0..decimals as usize).rev() {
            digits[i] = b'0' + (f % 10) as u8;
            f /= 10;
        }
        self.put(&digits[..decimals as usize])
    }

    /// The contents, or `None` when a write did not fit.
    #[inline]
    pub fn get(&self) -> Option<&[u8]> {
        (!self.overflow).then_some(&self.bytes[..self.len])
    }
}

/// Writes append, as [`Buf::put`] does: past the capacity the buffer is flagged, not grown, and
/// the write still reports success so that formatting goes on and the overflow is seen once.
impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.put(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Emits `value` under `key`, or rejects the record when its output overflowed a buffer
/// (`value` is `None`).
#[inline]
pub fn emit_or_reject<S: StateValue>(ctx: &mut Context<'_, S>, key: &[u8], value: Option<&[u8]>) {
    emit_or_reject_with(ctx, None, key, value);
}

/// [`emit_or_reject`] with the event time of the input record, if it had one.
pub fn emit_or_reject_with<S: StateValue>(
    ctx: &mut Context<'_, S>,
    time: Option<u64>,
    key: &[u8],
    value: Option<&[u8]>,
) {
    match value {
        Some(v) => ctx.emit_with(time, key, v),
        None => ctx.reject("record too long"),
    }
}

/// Reads an operator's `[operator.params]`, rejecting names it does not know so a typo in a
/// spec is an error rather than a silently ignored setting.
#[derive(Debug)]
pub struct Params<'a> {
    spec: &'a OperatorSpec,
}

impl<'a> Params<'a> {
    /// The parameters of `spec`; every name must be in `known`.
    pub fn new(spec: &'a OperatorSpec, known: &[&str]) -> Result<Self, String> {
        for name in spec.params.keys() {
            if !known.contains(&name.as_str()) {
                let hint = if known.is_empty() {
                    "this function takes no parameters".to_owned()
                } else {
                    format!("known parameters: {}", known.join(", "))
                };
                return Err(format!("unknown parameter `{name}` ({hint})"));
            }
        }
        Ok(Self { spec })
    }

    /// A positive integer parameter.
    pub fn positive(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.spec.params.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("parameter `{name}` must be a positive integer, got {v}")),
        }
    }

    /// A non-negative integer parameter.
    pub fn unsigned(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.spec.params.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| format!("parameter `{name}` must be an integer >= 0, got {v}")),
        }
    }

    /// A finite number parameter.
    pub fn number(&self, name: &str, default: f64) -> Result<f64, String> {
        match self.spec.params.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("parameter `{name}` must be a number, got {v}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_need_the_exact_count() {
        assert_eq!(fields::<3>(b"a,b,c", b','), Some([&b"a"[..], b"b", b"c"]));
        assert_eq!(fields::<3>(b"a,b", b','), None);
        assert_eq!(fields::<3>(b"a,b,c,d", b','), None);
        assert_eq!(fields::<2>(b",", b','), Some([&b""[..], b""]));
    }

    #[test]
    fn numbers_parse_strictly() {
        assert_eq!(parse_u64(b"0042"), Some(42));
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"4x"), None);
        assert_eq!(parse_u64(b"99999999999999999999"), None);
        assert_eq!(parse_i64(b"-17"), Some(-17));
        assert_eq!(parse_fixed(b"12.3456", 4), Some(123_456));
        assert_eq!(parse_fixed(b"-0.5", 2), Some(-50));
        assert_eq!(parse_fixed(b"7", 3), Some(7000));
        assert_eq!(parse_fixed(b".25", 2), Some(25));
        assert_eq!(parse_fixed(b"1.23456", 4), Some(12_346));
        assert_eq!(parse_fixed(b"-1.23455", 4), Some(-12_346));
        for bad in [&b""[..], b"-", b".", b"1e5", b"1.2.3", b"abc", b" 1"] {
            assert_eq!(parse_fixed(bad, 2), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_fixed(b"9007199254740992", 0), Some(MAX_FIXED));
        assert_eq!(parse_fixed(b"9007199254740993", 0), None);
        assert_eq!(parse_fixed(b"99999999999999999999999", 4), None);
        assert_eq!(parse_fixed(b"1000000000000", 4), None);
        assert_eq!(div_round(7, 2), 4);
        assert_eq!(div_round(-7, 2), -4);
        assert_eq!(div_round(5, 3), 2);
    }

    #[test]
    fn buf_formats_and_reports_overflow() {
        let mut b = Buf::new();
        b.put(b"x=").i64(-42).byte(b',').fixed(-1_234, 3).byte(b',').fixed(5, 2).byte(b',').u64(0);
        assert_eq!(b.get(), Some(&b"x=-42,-1.234,0.05,0"[..]));
        b.clear();
        b.put(&[b'a'; Buf::CAPACITY]);
        assert!(b.get().is_some());
        b.byte(b'b');
        assert_eq!(b.get(), None);
    }
}
