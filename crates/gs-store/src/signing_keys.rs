//! The signing keys of the data dirs sharing this index: records signed by one of them are the
//! fleet's own (whoever can write the index is inside the boundary already).

use super::sql::params;
use super::{Index, Result};

impl Index {
    /// Register (or replace) the public key a data dir signs its records with.
    pub fn register_signing_key(&self, home_id: &str, public_key: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO signing_keys (home_id, public_key, registered_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (home_id) DO UPDATE SET public_key = excluded.public_key,
                registered_at = excluded.registered_at
             WHERE signing_keys.public_key != excluded.public_key",
            params![home_id, public_key, gs_util::time::now_rfc3339()],
        )?;
        Ok(())
    }

    /// Every registered key: (home id, public key line).
    pub fn signing_keys(&self) -> Result<Vec<(String, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT home_id, public_key FROM signing_keys ORDER BY home_id")?;
        let rows = stmt
            .query_map(params![], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<super::sql::Result<Vec<_>>>()?;
        Ok(rows)
    }
}
