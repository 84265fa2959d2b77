//! Helpers shared by the `clasp` binary's tests: the repository root and scratch directories.

#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root (specs under `pipelines/`, devices under `devices/`).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory for one test, emptied when made and removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `clasp-<suite>-<pid>-<test>` in the system's temporary directory.
    pub fn new(suite: &str, test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("clasp-{suite}-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// A file in it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
