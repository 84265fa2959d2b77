//! A checkpoint store in Redis: each blob one string key under a prefix (`SET` replaces a
//! value atomically), for runs whose workers do not share a file system.

use super::{CONNECT_TIMEOUT, CheckpointStore, StoreError, check_name};
use clasp_core::sync::lock;
use redis::Commands;
use std::sync::Mutex;

/// Blobs as keys `PREFIX:NAME` of one Redis server.
pub struct RedisStore {
    addr: String,
    prefix: String,
    conn: Mutex<redis::Connection>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("addr", &self.addr)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl RedisStore {
    /// Connects to `redis://HOST:PORT[/PREFIX]`, failing within [`CONNECT_TIMEOUT`] when no
    /// server answers there.
    pub fn open(location: &str) -> Result<Self, StoreError> {
        let spec_error = |why: &str| StoreError::Spec { spec: location.into(), why: why.into() };
        let rest = location
            .strip_prefix("redis://")
            .ok_or_else(|| spec_error("expected redis://HOST:PORT[/PREFIX]"))?;
        let (addr, prefix) = rest.split_once('/').unwrap_or((rest, "clasp"));
        let prefix = if prefix.is_empty() { "clasp" } else { prefix };
        if addr.is_empty() || !addr.contains(':') {
            return Err(spec_error("expected HOST:PORT after redis://"));
        }
        if !prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b)) {
            return Err(spec_error("the prefix may hold letters, digits, `-`, `_`, `.` and `:`"));
        }
        let fail = |source| StoreError::Redis { addr: addr.into(), source };
        let client = redis::Client::open(format!("redis://{addr}/")).map_err(fail)?;
        let mut conn = client.get_connection_with_timeout(CONNECT_TIMEOUT).map_err(fail)?;
        conn.set_read_timeout(Some(std::time::Duration::from_secs(30))).map_err(fail)?;
        conn.set_write_timeout(Some(std::time::Duration::from_secs(30))).map_err(fail)?;
        let _: String = redis::cmd("PING").query(&mut conn).map_err(fail)?;
        Ok(Self { addr: addr.into(), prefix: prefix.into(), conn: Mutex::new(conn) })
    }

    fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.prefix)
    }

    fn fail(&self, source: redis::RedisError) -> StoreError {
        StoreError::Redis { addr: self.addr.clone(), source }
    }
}

impl CheckpointStore for RedisStore {
    fn location(&self) -> String {
        format!("redis://{}/{}", self.addr, self.prefix)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        check_name(name)?;
        lock(&self.conn).set::<_, _, ()>(self.key(name), bytes).map_err(|e| self.fail(e))
    }

    fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_name(name)?;
        lock(&self.conn).get(self.key(name)).map_err(|e| self.fail(e))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let pattern = format!("{}:{prefix}*", self.prefix);
        let mut conn = lock(&self.conn);
        let keys: Vec<String> = conn
            .scan_match::<_, String>(pattern)
            .map_err(|e| self.fail(e))?
            .filter_map(Result::ok)
            .collect();
        let strip = format!("{}:", self.prefix);
        let mut names: Vec<String> =
            keys.iter().filter_map(|k| k.strip_prefix(&strip)).map(str::to_owned).collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn delete(&self, name: &str) -> Result<(), StoreError> {
        check_name(name)?;
        lock(&self.conn).del::<_, ()>(self.key(name)).map_err(|e| self.fail(e))
    }
}
