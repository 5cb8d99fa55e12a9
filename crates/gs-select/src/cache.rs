//! Analyses of a tree's files cached per blob: the next commit parses only the blobs it changed.

use crate::{File, Result, Sources};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::BTreeMap;

/// What `parse` reads of each of `files`, cached per blob by the sources.
///
/// A blob an earlier selection parsed is read from the cache by its id and `key_of(path)`; the
/// others are parsed now (one over `max_bytes`, or one that does not parse, as the default:
/// nothing seen) and kept.
pub fn per_blob<'a, T>(
    sources: &dyn Sources,
    files: impl IntoIterator<Item = &'a File>,
    max_bytes: u64,
    key_of: impl Fn(&str) -> String,
    parse: impl Fn(&str, &[u8]) -> Option<T>,
) -> Result<BTreeMap<String, T>>
where
    T: Serialize + DeserializeOwned + Default,
{
    let mut fresh = Vec::new();
    let mut out = BTreeMap::new();
    for f in files {
        let key = key_of(&f.path);
        let cached = sources
            .cached(&f.id, &key)?
            .and_then(|j| serde_json::from_str::<T>(&j).ok());
        let found = match cached {
            Some(t) => t,
            None => {
                let parsed = sources
                    .blob(&f.id, max_bytes)
                    .and_then(|b| parse(&f.path, &b))
                    .unwrap_or_default();
                if let Ok(json) = serde_json::to_string(&parsed) {
                    fresh.push((f.id.clone(), key, json));
                }
                parsed
            }
        };
        out.insert(f.path.clone(), found);
    }
    if !fresh.is_empty() {
        sources.keep(&fresh)?;
    }
    Ok(out)
}
