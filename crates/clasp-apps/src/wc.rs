//! Word count: `wc.split` turns a line into lower-case words (maximal runs of alphanumeric
//! characters), `wc.count` counts each word in keyed state.

use clasp_core::{Batch, Context, Operator, Registry};

/// Calls `f` with every lower-case word of `line`. ASCII lines (the common case) are scanned
/// bytewise and words already in lower case are passed without copying.
#[inline]
pub fn for_each_word(line: &[u8], mut f: impl FnMut(&[u8])) {
    if !line.is_ascii() {
        for word in String::from_utf8_lossy(line).split(|c: char| !c.is_alphanumeric()) {
            if !word.is_empty() {
                f(word.to_lowercase().as_bytes());
            }
        }
        return;
    }
    let mut lowered = [0u8; 64];
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && !line[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let start = i;
        let mut upper = false;
        while i < line.len() && line[i].is_ascii_alphanumeric() {
            upper |= line[i].is_ascii_uppercase();
            i += 1;
        }
        let word = &line[start..i];
        if word.is_empty() {
            break;
        }
        if !upper {
            f(word);
        } else if word.len() <= lowered.len() {
            let buf = &mut lowered[..word.len()];
            buf.copy_from_slice(word);
            buf.make_ascii_lowercase();
            f(buf);
        } else {
            f(&word.to_ascii_lowercase());
        }
    }
}

/// `wc.split`: one line in (the record value), one record per word out, keyed by the word.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split;

impl Operator for Split {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for r in input.iter() {
            for_each_word(r.value, |w| ctx.emit(w, b""));
        }
    }
}

/// `wc.count`: the number of times each word (record key) was seen.
#[derive(Clone, Copy, Debug, Default)]
pub struct Count;

impl Operator for Count {
    type State = u64;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, u64>) {
        for r in input.iter() {
            *ctx.state(r) += 1;
        }
    }
}

/// Registers `wc.split` and `wc.count`.
pub fn register(r: &mut Registry) {
    r.register_operator("wc.split", Split);
    r.register_operator("wc.count", Count);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let mut v = Vec::new();
        for_each_word(line.as_bytes(), |w| v.push(String::from_utf8(w.to_vec()).unwrap()));
        v
    }

    #[test]
    fn words_are_lower_case_alphanumeric_runs() {
        assert_eq!(words("The cat, the HAT!  x2y"), ["the", "cat", "the", "hat", "x2y"]);
        assert_eq!(words("  "), Vec::<String>::new());
        assert_eq!(words("Ünïcode Straße—ok"), ["ünïcode", "straße", "ok"]);
        let long = "A".repeat(100);
        assert_eq!(words(&long), [long.to_lowercase()]);
    }
}
