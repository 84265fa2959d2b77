//! A checkpoint store in a local directory: each blob a file, written to a temporary name,
//! synced, renamed into place and the directory synced, so a crash leaves the old blob or the
//! new one, never a part.

use super::{CheckpointStore, StoreError, check_name};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Blobs as files of one directory.
#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
    temp: AtomicU64,
}

const TEMP_MARK: &str = ".tmp-";

impl DirStore {
    /// The store in `dir`, created if missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|source| io(&dir, source))?;
        Ok(Self { dir, temp: AtomicU64::new(0) })
    }

    /// The file holding blob `name`.
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn io(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io { path: path.display().to_string(), source }
}

impl CheckpointStore for DirStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        check_name(name)?;
        let n = self.temp.fetch_add(1, Ordering::Relaxed);
        let temp = self.dir.join(format!("{TEMP_MARK}{}-{n}-{name}", std::process::id()));
        let target = self.path_of(name);
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&temp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::rename(&temp, &target)?;
            File::open(&self.dir)?.sync_all()
        };
        write().map_err(|source| {
            let _ = fs::remove_file(&temp);
            io(&target, source)
        })
    }

    fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_name(name)?;
        let path = self.path_of(name);
        match fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(io(&path, source)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let entries = fs::read_dir(&self.dir).map_err(|source| io(&self.dir, source))?;
        let mut names = Vec::new();
        for e in entries {
            let e = e.map_err(|source| io(&self.dir, source))?;
            if let Some(name) = e.file_name().to_str()
                && name.starts_with(prefix)
                && !name.starts_with(TEMP_MARK)
            {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn delete(&self, name: &str) -> Result<(), StoreError> {
        check_name(name)?;
        let path = self.path_of(name);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(io(&path, source)),
        }
    }
}
