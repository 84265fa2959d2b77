//! Seeded inputs: mutations of a corpus of valid examples, and random bytes.

use clasp_core::rng::SeededRng;
use rand::{Rng, RngExt, SeedableRng};

/// Integers that sit on boundaries decoders get wrong.
const INTERESTING: [u64; 10] =
    [0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fff_ffff, 0xffff_ffff, u64::MAX >> 1, u64::MAX];

/// Draws inputs from a corpus.
#[derive(Debug)]
pub struct Mutator {
    rng: SeededRng,
    corpus: Vec<Vec<u8>>,
}

impl Mutator {
    /// Inputs drawn from `seed` around `corpus` (which may be empty).
    pub fn new(seed: u64, corpus: Vec<Vec<u8>>) -> Self {
        Self { rng: SeededRng::seed_from_u64(seed), corpus }
    }

    fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n.max(1))
    }

    /// Writes the next input into `out`.
    pub fn next_input(&mut self, out: &mut Vec<u8>) {
        out.clear();
        if self.corpus.is_empty() || self.rng.random_bool(0.05) {
            let len = self.below(512);
            out.extend((0..len).map(|_| self.rng.next_u64() as u8));
            return;
        }
        let i = self.below(self.corpus.len());
        out.extend_from_slice(&self.corpus[i]);
        let rounds = 1 + self.below(4);
        for _ in 0..rounds {
            self.mutate(out);
        }
    }

    fn mutate(&mut self, b: &mut Vec<u8>) {
        let at = self.below(b.len() + 1);
        match self.below(8) {
            0 if !b.is_empty() => {
                let i = self.below(b.len());
                b[i] ^= 1 << self.below(8);
            }
            1 if !b.is_empty() => {
                let i = self.below(b.len());
                b[i] = self.rng.next_u64() as u8;
            }
            2 => {
                let n = 1 + self.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| self.rng.next_u64() as u8).collect();
                b.splice(at..at, bytes);
            }
            3 if !b.is_empty() => {
                let n = self.below(16).min(b.len() - at.min(b.len()));
                b.drain(at.min(b.len())..at.min(b.len()) + n);
            }
            4 => b.truncate(at),
            5 => {
                let v = INTERESTING[self.below(INTERESTING.len())];
                let width = [1, 2, 4, 8][self.below(4)];
                let bytes = v.to_le_bytes();
                let end = (at + width).min(b.len());
                b.splice(at..end, bytes[..width].iter().copied());
            }
            6 if !self.corpus.is_empty() => {
                // A piece of another example spliced in.
                let pick = self.below(self.corpus.len());
                let len = self.corpus[pick].len();
                let from = self.below(len);
                let to = (from + self.below(64)).min(len);
                b.splice(at..at, self.corpus[pick][from..to].iter().copied());
            }
            _ => {
                if !b.is_empty() {
                    let i = self.below(b.len());
                    let j = self.below(b.len());
                    b.swap(i, j);
                }
            }
        }
    }
}
