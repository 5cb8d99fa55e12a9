//! Watching each repository's refs. inotify misses refs created in new folders and reports
//! `pack-refs` as deletions, so an event only means "refs may have changed": the scheduler
//! rescans the repository (and rescans everything on each heartbeat anyway).

use super::Msg;
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub struct RefWatcher {
    watcher: Option<Mutex<notify::RecommendedWatcher>>,
    dirs: Arc<Mutex<HashMap<PathBuf, String>>>,
}

pub fn start(dirs: &[(String, PathBuf)], tx: tokio::sync::mpsc::Sender<Msg>) -> RefWatcher {
    let map: Arc<Mutex<HashMap<PathBuf, String>>> = Arc::default();
    let lookup = map.clone();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else { return };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        let dirs = lookup.lock().expect("watch map");
        for path in &event.paths {
            let Some((dir, id)) = dirs.iter().find(|(d, _)| path.starts_with(d)) else {
                continue;
            };
            let rel = path.strip_prefix(dir).unwrap_or(path);
            let relevant = rel.starts_with("refs/heads")
                || rel == std::path::Path::new("packed-refs")
                || rel == std::path::Path::new("refs");
            if relevant {
                // Never block the watcher: a full channel already holds a wake-up.
                let _ = tx.try_send(Msg::Wake(Some(id.clone())));
            }
        }
    })
    .ok();
    let w = RefWatcher {
        watcher: watcher.map(Mutex::new),
        dirs: map,
    };
    w.update(dirs);
    w
}

impl RefWatcher {
    /// Watch the repositories in `dirs` that are not watched yet.
    pub fn update(&self, dirs: &[(String, PathBuf)]) {
        let Some(watcher) = &self.watcher else { return };
        let new: Vec<(String, PathBuf)> = {
            let known = self.dirs.lock().expect("watch map");
            dirs.iter()
                .filter(|(_, d)| !known.contains_key(d))
                .cloned()
                .collect()
        };
        // `watch` waits for the event thread, whose callback takes the map's lock: never hold
        // that lock here, or an event arriving meanwhile deadlocks the two.
        let mut watcher = watcher.lock().expect("watcher");
        for (id, dir) in new {
            let ok = watcher
                .watch(&dir.join("refs"), RecursiveMode::Recursive)
                .is_ok();
            let _ = watcher.watch(&dir, RecursiveMode::NonRecursive);
            if ok {
                self.dirs.lock().expect("watch map").insert(dir, id);
            }
        }
    }
}
