//! The cache store: latest snapshots (radar, quotes) that any replica may read. In-process by
//! default; Redis when configured. The cache is never the only copy of anything an operator
//! relies on, so when Redis is unreachable callers degrade (health `DEGRADED`) and carry on;
//! the Redis connection manager reconnects by itself when the server returns.

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache unavailable: {0}")]
    Unavailable(String),
}

#[async_trait]
pub trait Cache: Send + Sync {
    /// `memory` or `redis`.
    fn backend(&self) -> &'static str;
    async fn get(&self, key: &str) -> Result<Option<String>, CacheError>;
    async fn set(&self, key: &str, value: &str, ttl: Option<Duration>) -> Result<(), CacheError>;
    async fn delete(&self, key: &str) -> Result<(), CacheError>;
    /// A round trip; returns how long it took.
    async fn ping(&self) -> Result<Duration, CacheError>;
}

/// In-process cache with per-key expiry.
#[derive(Default)]
pub struct MemoryCache {
    entries: Mutex<HashMap<String, (String, Option<Instant>)>>,
}

impl MemoryCache {
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Option<Instant>)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Cache for MemoryCache {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn get(&self, key: &str) -> Result<Option<String>, CacheError> {
        let mut entries = self.entries();
        match entries.get(key) {
            Some((_, Some(expires))) if *expires <= Instant::now() => {
                entries.remove(key);
                Ok(None)
            }
            Some((value, _)) => Ok(Some(value.clone())),
            None => Ok(None),
        }
    }

    async fn set(&self, key: &str, value: &str, ttl: Option<Duration>) -> Result<(), CacheError> {
        let expires = ttl.map(|t| Instant::now() + t);
        self.entries().insert(key.to_string(), (value.to_string(), expires));
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), CacheError> {
        self.entries().remove(key);
        Ok(())
    }

    async fn ping(&self) -> Result<Duration, CacheError> {
        let started = Instant::now();
        drop(self.entries());
        Ok(started.elapsed())
    }
}

/// Redis cache. Keys are prefixed so one Redis can serve several deployments.
pub struct RedisCache {
    client: redis::Client,
    manager: AsyncMutex<Option<ConnectionManager>>,
    prefix: String,
    timeout: Duration,
}

impl RedisCache {
    /// Parses the URL; connecting is lazy, so the service starts even while Redis is down.
    pub fn new(url: &str, prefix: &str) -> Result<RedisCache, CacheError> {
        let client = redis::Client::open(url).map_err(|e| CacheError::Unavailable(e.to_string()))?;
        Ok(RedisCache {
            client,
            manager: AsyncMutex::new(None),
            prefix: prefix.to_string(),
            timeout: Duration::from_millis(500),
        })
    }

    async fn connection(&self) -> Result<ConnectionManager, CacheError> {
        let mut slot = self.manager.lock().await;
        if let Some(manager) = slot.as_ref() {
            return Ok(manager.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(self.timeout)
            .set_response_timeout(self.timeout)
            .set_number_of_retries(1)
            .set_max_delay(1000);
        let manager =
            tokio::time::timeout(self.timeout * 2, ConnectionManager::new_with_config(self.client.clone(), config))
                .await
                .map_err(|_| CacheError::Unavailable("timed out connecting to Redis".into()))?
                .map_err(|e| CacheError::Unavailable(e.to_string()))?;
        *slot = Some(manager.clone());
        Ok(manager)
    }

    async fn run<T, F, Fut>(&self, op: F) -> Result<T, CacheError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let conn = self.connection().await?;
        tokio::time::timeout(self.timeout, op(conn))
            .await
            .map_err(|_| CacheError::Unavailable("Redis did not answer in time".into()))?
            .map_err(|e| CacheError::Unavailable(e.to_string()))
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

#[async_trait]
impl Cache for RedisCache {
    fn backend(&self) -> &'static str {
        "redis"
    }

    async fn get(&self, key: &str) -> Result<Option<String>, CacheError> {
        let key = self.key(key);
        self.run(|mut c| async move { c.get(key).await }).await
    }

    async fn set(&self, key: &str, value: &str, ttl: Option<Duration>) -> Result<(), CacheError> {
        let key = self.key(key);
        let value = value.to_string();
        self.run(|mut c| async move {
            match ttl {
                Some(ttl) => c.pset_ex(key, value, ttl.as_millis().max(1) as u64).await,
                None => c.set(key, value).await,
            }
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<(), CacheError> {
        let key = self.key(key);
        self.run(|mut c| async move { c.del(key).await }).await
    }

    async fn ping(&self) -> Result<Duration, CacheError> {
        let started = Instant::now();
        self.run(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await }).await?;
        Ok(started.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn memory_cache_expires_entries() {
        let cache = MemoryCache::new();
        cache.set("a", "1", None).await.unwrap();
        cache.set("b", "2", Some(Duration::from_millis(10))).await.unwrap();
        tokio::time::advance(Duration::from_millis(9)).await;
        assert_eq!(cache.get("b").await.unwrap().as_deref(), Some("2"), "alive until its ttl");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get("a").await.unwrap().as_deref(), Some("1"));
        assert_eq!(cache.get("b").await.unwrap(), None);
        cache.delete("a").await.unwrap();
        assert_eq!(cache.get("a").await.unwrap(), None);
    }

    #[tokio::test]
    async fn redis_cache_is_unavailable_not_hanging_when_nothing_listens() {
        // Port 9 (discard) has no Redis on it: the call must fail fast, not hang.
        let cache = RedisCache::new("redis://127.0.0.1:9", "test:").unwrap();
        let started = Instant::now();
        assert!(cache.get("k").await.is_err());
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
