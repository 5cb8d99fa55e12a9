//! The image store, shared by every repository of a home: `$GIT_SANDBOX_HOME/images/` holds
//! `blobs/sha256/HEX` (manifests, configs and layers as the registry sent them, each verified
//! against its digest), `layers/HEX/` (each layer unpacked once, named by its `diff_id`),
//! `images/HEX.json` (what a reference resolved to: its layers, `Env`, `WorkingDir`, platform,
//! when it was last used) and `tags/*.json` (the digest a tag resolved to last, for a run
//! offline). Everything is written beside its place and renamed into it.

use crate::http::Net;
use crate::isolate::{self, How};
use crate::reference::Reference;
use crate::registry::{self, Credentials, Document, ImageConfig, Session, INDEX_TYPES};
use crate::unpack::Bounds;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A pulled image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// The reference it was last pulled by.
    pub reference: String,
    /// What that reference resolved to (an index's digest when the tag names one).
    pub digest: String,
    /// The manifest of this host's platform.
    pub manifest: String,
    pub platform: String,
    pub config: String,
    /// Bottom first, as the manifest lists them.
    pub layers: Vec<LayerInfo>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// The image's `USER`: recorded, never honoured (a run is the sandbox's own uid).
    pub user: Option<String>,
    /// Bytes of the layers as pulled (compressed).
    pub size: u64,
    /// Bytes of the layers' files.
    pub unpacked: u64,
    pub pulled_at: String,
    pub used_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerInfo {
    pub digest: String,
    pub diff_id: String,
    pub size: u64,
}

/// What a tag resolved to last.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TagRecord {
    reference: String,
    digest: String,
    resolved_at: String,
}

/// What a pull did.
#[derive(Debug, Clone, Serialize)]
pub struct Pulled {
    pub image: Image,
    /// Requests to the registry (tokens included).
    pub requests: u32,
    pub blobs_fetched: u32,
    pub layers_unpacked: u32,
    /// The registry could not be reached: the digest the tag resolved to last is used.
    pub offline: bool,
}

/// How a pull may reach registries and what it may take.
#[derive(Debug, Clone)]
pub struct PullOptions {
    pub net: Net,
    pub credentials: Credentials,
    /// The most bytes an image may hold, compressed and unpacked alike (`image_mb`).
    pub max_bytes: u64,
    pub how: How,
}

pub struct Store {
    pub root: PathBuf,
}

fn hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = path.parent().ok_or("no parent")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    use std::io::Write;
    tmp.write_all(bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

impl Store {
    pub fn at(home: &Path) -> Store {
        Store {
            root: home.join("images"),
        }
    }

    fn blob(&self, digest: &str) -> PathBuf {
        self.root.join("blobs/sha256").join(hex(digest))
    }

    /// Where a layer is unpacked.
    pub fn layer_dir(&self, diff_id: &str) -> PathBuf {
        self.root.join("layers").join(hex(diff_id))
    }

    fn image_file(&self, digest: &str) -> PathBuf {
        self.root
            .join("images")
            .join(format!("{}.json", hex(digest)))
    }

    fn tag_file(&self, r: &Reference) -> PathBuf {
        let name = format!(
            "{}/{}:{}",
            r.registry,
            r.repository,
            r.tag.as_deref().unwrap_or("latest")
        );
        self.root
            .join("tags")
            .join(format!("{:x}.json", Sha256::digest(name.as_bytes())))
    }

    /// An image's unpacked layers, topmost first, as an overlay stacks them.
    pub fn layer_dirs(&self, image: &Image) -> Vec<PathBuf> {
        image
            .layers
            .iter()
            .rev()
            .map(|l| self.layer_dir(&l.diff_id))
            .collect()
    }

    fn read_image(&self, digest: &str) -> Option<Image> {
        let text = std::fs::read(self.image_file(digest)).ok()?;
        let image: Image = serde_json::from_slice(&text).ok()?;
        image
            .layers
            .iter()
            .all(|l| self.layer_dir(&l.diff_id).is_dir())
            .then_some(image)
    }

    fn save_image(&self, image: &Image) -> Result<(), String> {
        write_atomic(
            &self.image_file(&image.digest),
            &serde_json::to_vec_pretty(image).unwrap_or_default(),
        )
    }

    /// Every image in the store, most recently used first.
    pub fn images(&self) -> Vec<Image> {
        let mut out: Vec<Image> = std::fs::read_dir(self.root.join("images"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
            .collect();
        out.sort_by(|a: &Image, b| b.used_at.cmp(&a.used_at));
        out
    }

    /// The image `r` names here, without asking a registry: by its digest, else by the digest
    /// its tag resolved to last.
    pub fn find(&self, r: &Reference) -> Option<Image> {
        if let Some(d) = &r.digest {
            return self.read_image(d);
        }
        let t: TagRecord = serde_json::from_slice(&std::fs::read(self.tag_file(r)).ok()?).ok()?;
        self.read_image(&t.digest)
    }

    /// Mark `image` used now (what `gc` goes by).
    pub fn touch(&self, image: &mut Image) {
        image.used_at = now();
        let _ = self.save_image(image);
    }

    /// A pull of an image the store already holds (marked used now): nothing fetched.
    fn held(&self, mut image: Image, requests: u32, offline: bool) -> Pulled {
        self.touch(&mut image);
        Pulled {
            image,
            requests,
            blobs_fetched: 0,
            layers_unpacked: 0,
            offline,
        }
    }

    /// Pull `r`: one manifest request when the store already holds what it resolves to.
    pub fn pull(&self, r: &Reference, opts: &PullOptions) -> Result<Pulled, String> {
        // The store is the supervisor's alone: the unprivileged uids that unpack layers (each
        // handed only its own directory) cannot reach another layer by path through it.
        gs_util::private::create_dir_all(&self.root)
            .map_err(|e| format!("{}: {e}", self.root.display()))?;
        // A digest names its content for ever: held, it needs no registry.
        if r.digest.is_some() {
            if let Some(image) = self.find(r) {
                return Ok(self.held(image, 0, false));
            }
        }
        let mut session = Session::new(&opts.net, r, opts.credentials.clone());
        let (body, digest) = match session.manifest(r.manifest_ref()) {
            Ok(m) => m,
            Err(e) => {
                // Offline (not refused): the digest the tag resolved to last, when held.
                let unreachable = crate::http::is_unreachable(&e);
                if let Some(image) = self.find(r).filter(|_| unreachable) {
                    return Ok(self.held(image, session.requests, true));
                }
                return Err(e);
            }
        };
        let record_tag = |digest: &str| {
            if r.tag.is_some() && r.digest.is_none() {
                let t = TagRecord {
                    reference: r.to_string(),
                    digest: digest.to_string(),
                    resolved_at: now(),
                };
                let _ = write_atomic(
                    &self.tag_file(r),
                    &serde_json::to_vec_pretty(&t).unwrap_or_default(),
                );
            }
        };
        if let Some(mut image) = self.read_image(&digest) {
            record_tag(&digest);
            image.reference = r.to_string();
            return Ok(self.held(image, session.requests, false));
        }
        let mut fetched = 0;
        self.keep_document(&digest, &body)?;
        let doc: Document = serde_json::from_slice(&body)
            .map_err(|e| format!("{}'s manifest is not one: {e}", r))?;
        let (os, arch) = registry::host_platform();
        let is_index = doc.manifests.is_some()
            || doc
                .media_type
                .as_deref()
                .is_some_and(|m| INDEX_TYPES.contains(&m));
        let (manifest_digest, manifest) = if is_index {
            let chosen = doc
                .manifests
                .unwrap_or_default()
                .into_iter()
                .find(|m| m.platform.as_ref().is_some_and(|p| p.os == os && p.architecture == arch))
                .ok_or_else(|| format!("{r} has no image for {os}/{arch}, this machine's platform; use an image built for it"))?;
            // The index binds its manifests by digest: one that is not a sha256 digest could
            // not be checked, so a pinned index would not pin what runs.
            crate::reference::check_digest(&chosen.digest)
                .map_err(|e| format!("{r}'s index: {e}; the image is refused"))?;
            let (b, d) = session.manifest(&chosen.digest)?;
            self.keep_document(&d, &b)?;
            let m: Document = serde_json::from_slice(&b)
                .map_err(|e| format!("{r}'s {os}/{arch} manifest is not one: {e}"))?;
            (d, m)
        } else {
            (digest.clone(), doc)
        };
        let config_d = manifest
            .config
            .ok_or_else(|| format!("{r}'s manifest names no config; the image is refused"))?;
        if config_d.size > registry::MAX_DOCUMENT {
            return Err(format!("{r}'s config is over 4 MiB; the image is refused"));
        }
        fetched += self.fetch(&mut session, &config_d)?;
        let config_bytes = std::fs::read(self.blob(&config_d.digest)).map_err(|e| e.to_string())?;
        let config: ImageConfig = serde_json::from_slice(&config_bytes)
            .map_err(|e| format!("{r}'s config is not one: {e}"))?;
        if !config.os.is_empty()
            && (config.os != os || (!config.architecture.is_empty() && config.architecture != arch))
        {
            return Err(format!(
                "{r} is built for {}/{}, not {os}/{arch}, this machine's platform",
                config.os, config.architecture
            ));
        }
        let layers = manifest.layers.unwrap_or_default();
        if layers.len() != config.rootfs.diff_ids.len() {
            return Err(format!(
                "{r}'s manifest lists {} layers and its config {}; the image is refused",
                layers.len(),
                config.rootfs.diff_ids.len()
            ));
        }
        let size: u64 = layers.iter().map(|l| l.size).sum();
        if size > opts.max_bytes {
            return Err(format!(
                "{r} is {} MB, more than [environment] image_mb ({} MB) allows; raise image_mb in your user config if you mean to run it",
                size >> 20,
                opts.max_bytes >> 20
            ));
        }
        let mut infos = Vec::new();
        let mut unpacked_total = 0u64;
        let mut unpacked_count = 0;
        for (l, diff_id) in layers.iter().zip(&config.rootfs.diff_ids) {
            if l.urls.as_ref().is_some_and(|u| !u.is_empty())
                || l.media_type.contains("nondistributable")
                || l.media_type.contains("foreign")
            {
                return Err(format!("{r} has a layer ({}) that must be fetched from elsewhere (a foreign layer); the image is refused", l.digest));
            }
            crate::reference::check_digest(diff_id).map_err(|e| format!("{r}'s config: {e}"))?;
            fetched += self.fetch(&mut session, l)?;
            let bounds = Bounds {
                bytes: opts.max_bytes.saturating_sub(unpacked_total),
                members: 1_000_000,
            };
            if let Some(bytes) = self
                .add_layer(&opts.how, &self.blob(&l.digest), diff_id, bounds)
                .map_err(|e| format!("{r}: {e}"))?
            {
                unpacked_total += bytes;
                unpacked_count += 1;
            }
            infos.push(LayerInfo {
                digest: l.digest.clone(),
                diff_id: diff_id.clone(),
                size: l.size,
            });
        }
        let run = config.config.unwrap_or_default();
        let mut image = Image {
            reference: r.to_string(),
            digest: digest.clone(),
            manifest: manifest_digest,
            platform: format!("{os}/{arch}"),
            config: config_d.digest.clone(),
            layers: infos,
            env: run.env.unwrap_or_default(),
            working_dir: run.working_dir.filter(|w| !w.is_empty()),
            user: run.user.filter(|u| !u.is_empty()),
            size,
            unpacked: unpacked_total,
            pulled_at: now(),
            used_at: now(),
        };
        let dirs = self.layer_dirs(&image);
        if !matches!(
            crate::rootfs::lookup(&dirs, "/bin/sh"),
            Some(crate::rootfs::Kind::File { executable: true })
        ) {
            return Err(format!(
                "{r} has no /bin/sh; a run's command goes through sh -c, so use an image with a shell (a -slim or busybox image has one; a distroless one does not)"
            ));
        }
        self.save_image(&image)?;
        record_tag(&digest);
        image.used_at = now();
        Ok(Pulled {
            image,
            requests: session.requests,
            blobs_fetched: fetched,
            layers_unpacked: unpacked_count,
            offline: false,
        })
    }

    fn keep_document(&self, digest: &str, body: &[u8]) -> Result<(), String> {
        let path = self.blob(digest);
        if path.is_file() {
            return Ok(());
        }
        write_atomic(&path, body)
    }

    /// Fetch the blob `d` unless held; 1 when fetched.
    fn fetch(&self, session: &mut Session<'_>, d: &registry::Descriptor) -> Result<u32, String> {
        crate::reference::check_digest(&d.digest)?;
        let path = self.blob(&d.digest);
        if path.is_file() {
            return Ok(0);
        }
        let dir = path.parent().ok_or("no parent")?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        session.blob(d, tmp.path())?;
        tmp.persist(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(1)
    }

    /// Unpack the layer (a tar, gzip'd or not) at `blob`, whose content is `diff_id`, into the
    /// store as hostile input, unless it is there already; the bytes unpacked, `None` when it
    /// was there.
    pub fn add_layer(
        &self,
        how: &How,
        blob: &Path,
        diff_id: &str,
        bounds: Bounds,
    ) -> Result<Option<u64>, String> {
        let dir = self.layer_dir(diff_id);
        if dir.is_dir() {
            return Ok(None);
        }
        let layers_root = self.root.join("layers");
        std::fs::create_dir_all(&layers_root)
            .map_err(|e| format!("{}: {e}", layers_root.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&layers_root)
            .map_err(|e| format!("{}: {e}", layers_root.display()))?
            .keep();
        match isolate::unpack_layer(how, blob, &tmp, diff_id, bounds) {
            Ok(d) => {
                if std::fs::rename(&tmp, &dir).is_err() {
                    remove_tree(&tmp); // unpacked meanwhile by another pull
                }
                Ok(Some(d.bytes))
            }
            Err(e) => {
                remove_tree(&tmp);
                Err(e)
            }
        }
    }

    /// Keep `image` (one built here from layers [`Store::add_layer`] holds) as the store keeps a
    /// pulled one: `gc` goes by its use, and its layers stay while it does.
    pub fn record(&self, image: &Image) -> Result<(), String> {
        self.save_image(image)
    }

    /// The image the store holds under `digest`, with every layer unpacked.
    pub fn image(&self, digest: &str) -> Option<Image> {
        self.read_image(digest)
    }

    /// Remove the image `r` names (and what no other image uses).
    pub fn remove(&self, r: &Reference) -> Result<Image, String> {
        let image = self
            .find(r)
            .or_else(|| {
                let shown = r.to_string();
                self.images().into_iter().find(|i| i.reference == shown)
            })
            .ok_or_else(|| {
                format!(
                    "no image {r} is in the store; `git sandbox image list` shows those that are"
                )
            })?;
        let _ = std::fs::remove_file(self.image_file(&image.digest));
        let _ = std::fs::remove_file(self.tag_file(r));
        self.sweep();
        Ok(image)
    }

    /// Remove images unused for `unused_for`, then what no image left uses; what was removed
    /// (with `dry_run`, what would be, and nothing is).
    pub fn gc(&self, unused_for: Duration, dry_run: bool) -> Vec<Image> {
        let cutoff =
            jiff::Timestamp::now() - jiff::SignedDuration::try_from(unused_for).unwrap_or_default();
        let mut gone = Vec::new();
        for image in self.images() {
            let used: Option<jiff::Timestamp> = image.used_at.parse().ok();
            if used.is_some_and(|u| u < cutoff) {
                if !dry_run {
                    let _ = std::fs::remove_file(self.image_file(&image.digest));
                }
                gone.push(image);
            }
        }
        if !dry_run {
            self.sweep();
        }
        gone
    }

    /// Remove blobs, layers and tags no image uses, and unpacking left over.
    fn sweep(&self) {
        let images = self.images();
        let mut blobs = std::collections::HashSet::new();
        let mut layers = std::collections::HashSet::new();
        for i in &images {
            blobs.insert(hex(&i.digest).to_string());
            blobs.insert(hex(&i.manifest).to_string());
            blobs.insert(hex(&i.config).to_string());
            for l in &i.layers {
                blobs.insert(hex(&l.digest).to_string());
                layers.insert(hex(&l.diff_id).to_string());
            }
        }
        let names = |dir: PathBuf| -> Vec<(String, PathBuf)> {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .collect()
        };
        for (name, path) in names(self.root.join("blobs/sha256")) {
            if !blobs.contains(&name) {
                let _ = std::fs::remove_file(path);
            }
        }
        for (name, path) in names(self.root.join("layers")) {
            if !layers.contains(&name) {
                remove_tree(&path);
            }
        }
        let digests: std::collections::HashSet<&str> =
            images.iter().map(|i| i.digest.as_str()).collect();
        for (_, path) in names(self.root.join("tags")) {
            let keep = std::fs::read(&path)
                .ok()
                .and_then(|t| serde_json::from_slice::<TagRecord>(&t).ok())
                .is_some_and(|t| digests.contains(t.digest.as_str()));
            if !keep {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Remove an unpacked tree: its directories made writable first (an image's are often not),
/// nothing followed.
pub fn remove_tree(path: &Path) {
    fn open_up(p: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return;
        };
        if !meta.is_dir() {
            return;
        }
        let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700));
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            open_up(&e.path());
        }
    }
    if std::fs::remove_dir_all(path).is_err() {
        open_up(path);
        let _ = std::fs::remove_dir_all(path);
    }
}
