//! Versioned settings: every change is a new row; the newest row is the effective settings.

use crate::db::{Database, StoreError};
use async_trait::async_trait;
use sqlx::Row;

#[derive(Clone, Debug, PartialEq)]
pub struct SettingsVersion {
    pub version: i64,
    /// The whole settings document as JSON text.
    pub settings: String,
    /// JSON array of the dotted paths this version changed.
    pub updated: String,
    pub actor: String,
    pub created_at: i64,
}

#[async_trait]
pub trait SettingsRepository: Send + Sync {
    async fn latest_settings(&self) -> Result<Option<SettingsVersion>, StoreError>;
    /// Appends a version; `version` must be the previous latest + 1, so two writers racing on
    /// the same base cannot both succeed.
    async fn append_settings(&self, version: &SettingsVersion) -> Result<(), StoreError>;
    /// Versions newest first, at most `limit`, below `before` when given.
    async fn settings_history(&self, before: Option<i64>, limit: u32) -> Result<Vec<SettingsVersion>, StoreError>;
}

fn version(row: &sqlx::any::AnyRow) -> Result<SettingsVersion, sqlx::Error> {
    Ok(SettingsVersion {
        version: row.try_get("version")?,
        settings: row.try_get("settings")?,
        updated: row.try_get("updated")?,
        actor: row.try_get("actor")?,
        created_at: row.try_get("created_at")?,
    })
}

#[async_trait]
impl SettingsRepository for Database {
    async fn latest_settings(&self) -> Result<Option<SettingsVersion>, StoreError> {
        let row = sqlx::query(
            "SELECT version, settings, updated, actor, created_at FROM settings_versions ORDER BY version DESC LIMIT 1",
        )
        .fetch_optional(self.pool()?)
        .await?;
        Ok(row.as_ref().map(version).transpose()?)
    }

    async fn append_settings(&self, v: &SettingsVersion) -> Result<(), StoreError> {
        let result = sqlx::query(
            "INSERT INTO settings_versions (version, settings, updated, actor, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(v.version)
        .bind(&v.settings)
        .bind(&v.updated)
        .bind(&v.actor)
        .bind(v.created_at)
        .execute(self.pool()?)
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(StoreError::Conflict(format!("settings version {} already exists", v.version)))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn settings_history(&self, before: Option<i64>, limit: u32) -> Result<Vec<SettingsVersion>, StoreError> {
        let rows = sqlx::query(
            "SELECT version, settings, updated, actor, created_at FROM settings_versions \
             WHERE ($1 IS NULL OR version < $1) ORDER BY version DESC LIMIT $2",
        )
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(self.pool()?)
        .await?;
        Ok(rows.iter().map(version).collect::<Result<_, _>>()?)
    }
}
