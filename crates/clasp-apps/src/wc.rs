//! Word count: `wc.split` turns a line into lower-case words (maximal runs of alphanumeric
//! characters), `wc.count` counts each word in keyed state, and `wc.running_count` counts
//! the same way and emits every updated count (the changelog a Kafka sink writes).

use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::{Batch, Context, Operator, Registry};
use rand::RngExt;
use rand_distr::Zipf;

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

/// `wc.running_count`: counts each word like [`Count`] and emits `(word, count)` after every
/// update, the count in decimal: a word's latest record holds its count so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunningCount;

impl Operator for RunningCount {
    type State = u64;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, u64>) {
        for r in input.iter() {
            let count = ctx.state(r);
            *count += 1;
            let count = count.to_string();
            ctx.emit(r.key, count.as_bytes());
        }
    }
}

/// Registers `wc.split`, `wc.count` and `wc.running_count`.
pub fn register(r: &mut Registry) {
    r.register_operator("wc.split", Split);
    r.register_operator("wc.count", Count);
    r.register_operator("wc.running_count", RunningCount);
}

/// Words in the generated corpus's vocabulary.
pub const VOCABULARY: usize = 20_000;

/// Syllables the vocabulary's words are made of.
const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fi", "go", "hu", "ja", "ke", "li",
    "ma", "no", "pe", "qu", "ra", "si", "to", "wu",
];

/// The `i`-th word of the vocabulary: `i` in bijective base 24 over [`SYLLABLES`], so every
/// word is distinct and the most frequent words are the shortest.
pub fn vocabulary_word(i: usize) -> String {
    let mut n = i;
    let mut w = String::new();
    loop {
        w.push_str(SYLLABLES[n % SYLLABLES.len()]);
        n /= SYLLABLES.len();
        if n == 0 {
            return w;
        }
        n -= 1;
    }
}

/// Generates a text corpus: sentences of 6–14 words (10 on average, so `wc.split` emits
/// about ten records per line) drawn from a 20,000-word vocabulary with Zipf (s = 1)
/// frequencies, as in natural language; the first word is capitalized, some words are
/// followed by a comma and each line ends with `.`, `!` or `?`.
#[derive(Debug)]
pub struct Generator {
    rng: SeededRng,
    words: Vec<String>,
    zipf: Zipf<f64>,
}

impl Generator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let zipf = Zipf::new(VOCABULARY as f64, 1.0).expect("valid Zipf parameters");
        let words = (0..VOCABULARY).map(vocabulary_word).collect();
        Self { rng: independent_stream(seed, 0x5743), words, zipf }
    }

    /// A vocabulary index drawn with Zipf weights.
    fn pick(&mut self) -> usize {
        // Zipf draws are 1..=n.
        (self.rng.sample(self.zipf) as usize - 1).min(self.words.len() - 1)
    }

    /// Writes the next line into `out` (cleared first).
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        out.clear();
        let n = 6 + self.rng.random_range(0..9);
        for i in 0..n {
            if i > 0 {
                out.extend_from_slice(if self.rng.random_bool(0.08) { b", " } else { b" " });
            }
            let start = out.len();
            let w = self.pick();
            out.extend_from_slice(self.words[w].as_bytes());
            if i == 0 {
                out[start] = out[start].to_ascii_uppercase();
            }
        }
        let end = [b'.', b'.', b'.', b'!', b'?'][self.rng.random_range(0..5) as usize];
        out.push(end);
    }
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

    #[test]
    fn running_counts_emit_every_count_of_every_word() {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/kafka/wc-counts.toml");
        let p = clasp_core::spec::load(spec.as_ref()).unwrap();
        let options = clasp_core::local::LocalOptions::default();
        let mut d = clasp_core::local::LocalDriver::new(&p, &crate::registry(), options).unwrap();
        let lines = ["a B a", "b, a c", "", "C a"];
        for line in lines {
            d.push(p.sources[0].id, b"", line.as_bytes());
        }
        d.finish();
        // From scratch: the n-th occurrence of a word emits n.
        let mut seen = std::collections::BTreeMap::<String, u64>::new();
        let mut expected = Vec::new();
        for line in lines {
            for w in words(line) {
                let n = seen.entry(w.clone()).or_default();
                *n += 1;
                expected.push((w, n.to_string()));
            }
        }
        let mut got: Vec<(String, String)> = d
            .sink_records_named("counts")
            .iter()
            .map(|r| {
                (String::from_utf8_lossy(r.key).into(), String::from_utf8_lossy(r.value).into())
            })
            .collect();
        got.sort();
        expected.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn corpus_has_about_ten_words_a_line() {
        let distinct: std::collections::HashSet<String> =
            (0..VOCABULARY).map(vocabulary_word).collect();
        assert_eq!(distinct.len(), VOCABULARY);
        let mut g = Generator::new(4);
        let mut line = Vec::new();
        let mut n = 0;
        for _ in 0..1000 {
            g.next_line(&mut line);
            n += words(std::str::from_utf8(&line).unwrap()).len();
        }
        assert!((9_500..10_500).contains(&n), "{n}");
    }
}
