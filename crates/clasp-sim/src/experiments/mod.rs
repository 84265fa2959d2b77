//! The paper's experiments (filled in below).
