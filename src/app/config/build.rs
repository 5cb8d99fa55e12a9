//! An environment built from the commit's own Dockerfile (`[environment] dockerfile`, the subset
//! `gs_image::dockerfile` reads): `FROM` pulled as `[environment] image` is, then each
//! instruction in turn. `ENV`, `WORKDIR` and `USER` change what the image records; `COPY` and
//! `ADD` write the commit's files as a layer made here (fixed owners and times: the same files
//! give the same layer), unpacked as any layer is; `RUN` runs in `gs_image::buildrun` (uid 0 of
//! a user namespace over the image so far, with the setup step's network: none, unless the
//! user's config gives setup steps the proxy or the host's), and what it wrote becomes a layer
//! tar unpacked as any layer is. Every instruction's key is its parent's, its text and the blob
//! ids it copies (a `RUN`'s, the repository and the network too: its layer is never another
//! repository's); each `RUN` is kept by its key, and the built image under the last key, so a
//! tree whose Dockerfile and copied files did not change builds nothing.
//!
//! A `RUN` with the network is not a function of its key (what it downloads changes), so its
//! layer follows the build caches' rule ([`Scope`]): kept for a branch only by runs of that
//! branch that may write its cache, read by the branch's runs, else production's; a run that
//! may write neither builds one it throws away. The result key stands for the plan (the same
//! on every branch); the record's digest names the image the run had.

use super::commit_config::committed_text;
use crate::app::{AppError, Context, Result};
use gs_config::Config;
use gs_git::CommitInfo;
use gs_image::dockerfile::{self, Instruction};
use gs_image::layer::Member;
use gs_image::store::LayerInfo;
use gs_image::{Image, Reference};
use sha2::{Digest, Sha256};

/// A Dockerfile read and keyed, nothing built yet.
pub struct Plan {
    /// The label errors name the file by (`abc1234:Dockerfile`).
    pub label: String,
    pub from: Reference,
    /// Every step but `FROM`.
    steps: Vec<dockerfile::Step>,
}

/// What the Dockerfile `config` names says, read from the commit; `None` without one.
pub fn read(repo: &gs_git::Repository, info: &CommitInfo, config: &Config) -> Result<Option<Plan>> {
    let Some(path) = config.environment.dockerfile.as_deref() else {
        return Ok(None);
    };
    let label = format!("{}:{path}", gs_util::short(&info.id.to_string()));
    let text = committed_text(repo, info, path, &label)?.ok_or_else(|| {
        AppError::usage(format!("{label}: no such file in the commit"))
            .hint("commit it, or take [environment] dockerfile out of the config")
    })?;
    let steps = dockerfile::parse_with(&text, &config.environment.build_args)
        .map_err(|e| AppError::usage(format!("{label}: {e}")))?;
    let mut from = None;
    let mut rest = Vec::new();
    for s in steps {
        match s.instruction {
            Instruction::From(image) => from = Some(image),
            _ => rest.push(s),
        }
    }
    let from = from.unwrap_or_default();
    let from = super::image::parse(&from)
        .map_err(|e| AppError::usage(format!("{label}: FROM {from}: {e}")))?;
    Ok(Some(Plan {
        label,
        from,
        steps: rest,
    }))
}

/// Whose kept layers a build reads and writes: the run's branch, production, and whether the
/// run may keep what it builds for its branch ([`gs_runner::caches::writes`]).
pub struct Scope<'a> {
    pub branch: Option<&'a str>,
    pub production: &'a str,
    pub writes: bool,
    /// `false` (`run --clean`): nothing kept is read.
    pub read: bool,
}

/// What makes a layer.
enum Make {
    Copy(Vec<Copied>),
    Run {
        line: usize,
        command: String,
        env: Vec<String>,
        workdir: String,
        /// Kept under its key (`false`: a step with the network, or one after it, built for a
        /// run that may not keep it).
        keep: bool,
    },
}

/// Run a `RUN` over `layers` (bottom first): its layer (a tar of what it wrote) is unpacked into
/// the store as any layer is, and the step's key kept beside it, so that the same step on the same
/// layers is not run again. The layer, the bytes unpacked and whether it ran (a kept one: 0 and
/// `false`). A command that fails is the commit's error, with the end of its output.
#[allow(clippy::too_many_arguments)]
fn run_step(
    config: &Config,
    store: &gs_image::Store,
    plan: &Plan,
    layers: &[LayerInfo],
    step_key: &str,
    line: usize,
    command: &str,
    env: &[String],
    workdir: &str,
    keep: bool,
    room: u64,
) -> Result<(LayerInfo, u64, bool)> {
    let kept = kept_step(store, step_key);
    if let Some(layer) = read_kept(store, step_key) {
        return Ok((layer, 0, false));
    }
    let at = format!("{}: line {line}: RUN {command}", plan.label);
    let failed = |why: String| AppError::refused(format!("{at}: {why}"));
    let tmp = tempfile::Builder::new()
        .prefix(".run-")
        .tempdir_in(&store.root)
        .map_err(|e| failed(e.to_string()))?;
    let lowers: Vec<std::path::PathBuf> = layers
        .iter()
        .rev()
        .map(|l| store.layer_dir(&l.diff_id))
        .collect();
    let (log, tar) = (tmp.path().join("output.log"), tmp.path().join("layer.tar"));
    let exe = std::env::current_exe().unwrap_or_else(|_| "git-sandbox".into());
    let egress = gs_sandbox::process::Egress::setup(config);
    let network = match (&egress, egress.policy()) {
        (_, Some(policy)) => gs_image::buildrun::Network::Proxy(policy),
        (gs_sandbox::process::Egress::Host, _) => gs_image::buildrun::Network::Host,
        _ => gs_image::buildrun::Network::Closed,
    };
    let ended = gs_image::buildrun::run(&gs_image::buildrun::Step {
        exe: &exe,
        lowers: &lowers,
        layer_out: &tar,
        max_bytes: room,
        command,
        env,
        workdir,
        network,
        timeout: config.test.timeout,
        log: &log,
    })
    .map_err(failed)?;
    if ended.code != 0 {
        let output = std::fs::read(&log).unwrap_or_default();
        let tail = String::from_utf8_lossy(&output[output.len().saturating_sub(600)..])
            .trim()
            .replace('\n', " | ");
        let refused: Vec<String> = ended
            .traffic
            .iter()
            .flat_map(|t| &t.refused)
            .map(|r| format!("{}:{}", r.host, r.port))
            .collect();
        let (seen, hint) = if !refused.is_empty() {
            (
                format!("; the proxy refused {}", refused.join(", ")),
                "allow those hosts under [network] setup_allow in your user config, or fix the step",
            )
        } else if config.limits.setup_network {
            (String::new(), "fix the step")
        } else {
            (
                String::new(),
                "fix the step; it has no network unless your user config says `setup_network = true` under [limits]",
            )
        };
        return Err(AppError::usage(format!(
            "{at}: exited with {}{seen}; the end of its output: {tail}",
            ended.code
        ))
        .hint(hint));
    }
    let diff_id = {
        let mut h = Sha256::new();
        std::fs::File::open(&tar)
            .and_then(|mut f| std::io::copy(&mut f, &mut h))
            .map_err(|e| failed(e.to_string()))?;
        format!("sha256:{:x}", h.finalize())
    };
    let how = gs_image::isolate::How::Helper(exe);
    let bounds = gs_image::unpack::Bounds {
        bytes: room,
        members: 1_000_000,
    };
    let bytes = store
        .add_layer(&how, &tar, &diff_id, bounds)
        .map_err(failed)?
        .unwrap_or(0);
    let layer = LayerInfo {
        digest: diff_id.clone(),
        diff_id,
        size: std::fs::metadata(&tar).map(|m| m.len()).unwrap_or(0),
    };
    if keep {
        if let Some(dir) = kept.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = gs_util::write_atomic(&kept, &serde_json::to_vec(&layer).unwrap_or_default());
    }
    Ok((layer, bytes, true))
}

/// Where the layer a `RUN` of `key` made is named.
fn kept_step(store: &gs_image::Store, key: &str) -> std::path::PathBuf {
    store.root.join("steps").join(key)
}

/// The layer kept for a `RUN` of `key`, when it is still held.
fn read_kept(store: &gs_image::Store, key: &str) -> Option<LayerInfo> {
    std::fs::read(kept_step(store, key))
        .ok()
        .and_then(|b| serde_json::from_slice::<LayerInfo>(&b).ok())
        .filter(|l| store.layer_dir(&l.diff_id).is_dir())
}

/// One `COPY`'s files: each one's path in the image (relative to `/`) and what it is.
enum Copied {
    File(String, gs_git::ObjectId, bool),
    Link(String, gs_git::ObjectId),
}

/// The files a `COPY sources dest` copies from the commit's tree (the context is its root).
fn copied(
    entries: &[gs_git::objects::Entry],
    sources: &[String],
    dest: &str,
    workdir: &str,
    at: &str,
) -> Result<Vec<Copied>> {
    use gs_git::objects::Kind;
    let bad = |why: String| AppError::usage(format!("{at}: {why}"));
    let dest_path = gs_util::path_within(workdir, dest)
        .ok_or_else(|| bad(format!("the destination {dest} leaves the image's root")))?;
    let mut out = Vec::new();
    let into_dir = dest.ends_with('/') || dest == "." || sources.len() > 1;
    for src in sources {
        let clean = gs_util::path_within("", src)
            .filter(|_| !src.starts_with('/') && !src.split('/').any(|c| c == ".."))
            .ok_or_else(|| bad(format!("{src} is not a path inside the commit")))?;
        let file = entries
            .iter()
            .find(|e| e.path == clean && !matches!(e.kind, Kind::Tree | Kind::Submodule));
        let place = |rel: &str| {
            if dest_path.is_empty() {
                rel.to_string()
            } else {
                format!("{dest_path}/{rel}")
            }
        };
        if let Some(e) = file {
            let name = clean.rsplit('/').next().unwrap_or(&clean);
            let to = if into_dir {
                place(name)
            } else {
                dest_path.clone()
            };
            if to.is_empty() {
                return Err(bad(format!("COPY {src} {dest}: a file cannot be the root")));
            }
            out.push(match e.kind {
                Kind::Link => Copied::Link(to, e.id),
                k => Copied::File(to, e.id, k == Kind::Executable),
            });
            continue;
        }
        let prefix = if clean.is_empty() {
            String::new()
        } else {
            format!("{clean}/")
        };
        let mut any = false;
        for e in entries.iter().filter(|e| e.path.starts_with(&prefix)) {
            let rel = &e.path[prefix.len()..];
            match e.kind {
                Kind::Tree | Kind::Submodule => {}
                Kind::Link => out.push(Copied::Link(place(rel), e.id)),
                k => out.push(Copied::File(place(rel), e.id, k == Kind::Executable)),
            }
            any = true;
        }
        if !any {
            return Err(bad(format!(
                "COPY {src}: no such file or directory in the commit"
            )));
        }
    }
    Ok(out)
}

fn hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    format!("{:x}", h.finalize())
}

/// The key a step is kept under: the plan's, and whose layers the steps with the network before
/// it (and it) are.
fn kept_key(key: &str, whose: &[String]) -> String {
    if whose.is_empty() {
        key.to_string()
    } else {
        hash(&[key, &whose.join("\n")])
    }
}

/// Whose layer a `RUN` with the network of plan key `key` is, the steps before it being
/// `whose`: the first kept one of the run's branch and production, else the branch's when the
/// run may keep it (`true`), else one built for this run alone (`false`).
fn whose_run(
    store: &gs_image::Store,
    scope: &Scope<'_>,
    key: &str,
    whose: &[String],
) -> (String, bool) {
    if scope.read {
        let mut candidates: Vec<&str> = scope.branch.into_iter().collect();
        if scope.branch != Some(scope.production) {
            candidates.push(scope.production);
        }
        for c in candidates {
            let mut w = whose.to_vec();
            w.push(c.to_string());
            if read_kept(store, &kept_key(key, &w)).is_some() {
                return (c.to_string(), true);
            }
        }
    }
    match scope.branch.filter(|_| scope.writes && scope.read) {
        Some(b) => (b.to_string(), true),
        None => (
            format!(
                "once {} {}",
                std::process::id(),
                gs_util::time::now_millis()
            ),
            false,
        ),
    }
}

/// What a plan built: the image (its digest names whose layers it has), the plan's key (the
/// same on every branch: what the result key takes) and how many `RUN`s ran now.
pub struct Built {
    pub image: Image,
    pub key: String,
    pub ran: usize,
}

/// What the plan builds on `base`: each instruction's key in turn, and the image the last one
/// stands for. With a scope, the layers are made (a key whose image is held makes nothing);
/// without, only the plan's key is had.
fn walk(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &CommitInfo,
    config: &Config,
    plan: &Plan,
    base: &Image,
    scope: Option<&Scope<'_>>,
) -> Result<Built> {
    let build = scope.is_some();
    let store = super::image::store(ctx);
    let networked = config.limits.setup_network;
    // Whose layers the steps with the network are, in order; and whether all of them are kept.
    let mut whose: Vec<String> = Vec::new();
    let mut keep_all = true;
    let mut key = hash(&["git-sandbox build 1", &base.digest, &base.platform]);
    let mut env = base.env.clone();
    let mut workdir = base.working_dir.clone().unwrap_or_default();
    let mut user = base.user.clone();
    // What makes a layer (a `COPY`'s files, a `RUN`), in order: made only when the image is
    // not held.
    let mut makes: Vec<(String, Make)> = Vec::new();
    // A `RUN` is not a function of its text alone: its layers are never another repository's.
    let repository = gs_git::objects::common_dir(repo).display().to_string();
    let mut entries = None;
    for dockerfile::Step {
        line,
        instruction: step,
        args,
    } in &plan.steps
    {
        let at = format!("{}: line {line}", plan.label);
        match step {
            Instruction::Env(pairs) => {
                for (k, v) in pairs {
                    env.retain(|e| e.split_once('=').map(|(n, _)| n) != Some(k.as_str()));
                    env.push(format!("{k}={v}"));
                }
                key = hash(&[&key, "ENV", &format!("{pairs:?}")]);
            }
            Instruction::Workdir(w) => {
                workdir = format!(
                    "/{}",
                    gs_util::path_within(&workdir, w).ok_or_else(|| AppError::usage(format!(
                        "{at}: WORKDIR {w} leaves the image's root"
                    )))?
                );
                key = hash(&[&key, "WORKDIR", &workdir]);
            }
            Instruction::User(u) => {
                user = Some(u.clone());
                key = hash(&[&key, "USER", u]);
            }
            Instruction::Copy { sources, dest } => {
                if entries.is_none() {
                    entries = Some(gs_git::objects::walk(repo, info.tree)?);
                }
                let files = copied(
                    entries.as_deref().unwrap_or_default(),
                    sources,
                    dest,
                    &workdir,
                    &at,
                )?;
                let listing: Vec<String> = files
                    .iter()
                    .map(|f| match f {
                        Copied::File(p, id, x) => format!("{p}\0{id}\0{x}"),
                        Copied::Link(p, id) => format!("{p}\0{id}\0link"),
                    })
                    .collect();
                key = hash(&[&key, "COPY", &listing.join("\n")]);
                makes.push((kept_key(&key, &whose), Make::Copy(files)));
            }
            Instruction::Run(command) => {
                // The ARGs in scope, under the ENVs of the same names.
                let run_env: Vec<String> = args
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .chain(env.iter().cloned())
                    .collect();
                let mut parts = vec![key.as_str(), "RUN", command];
                let (env_text, network) = (run_env.join("\n"), config.setup_network_key());
                parts.extend([env_text.as_str(), repository.as_str()]);
                if networked {
                    parts.push(&network);
                }
                key = hash(&parts);
                if let Some(scope) = scope.filter(|_| networked) {
                    let (who, kept) = whose_run(&store, scope, &key, &whose);
                    whose.push(who);
                    keep_all &= kept;
                }
                // A step over one built for this run alone is not kept either.
                let keep = keep_all;
                makes.push((
                    kept_key(&key, &whose),
                    Make::Run {
                        line: *line,
                        command: command.clone(),
                        env: run_env,
                        workdir: workdir.clone(),
                        keep,
                    },
                ));
            }
            Instruction::From(_) => {}
        }
    }
    let plan_key = format!("sha256:{key}");
    let digest = format!("sha256:{}", kept_key(&key, &whose));
    if let Some(mut held) = store.image(&digest) {
        if build {
            store.touch(&mut held);
        }
        return Ok(Built {
            image: held,
            key: plan_key,
            ran: 0,
        });
    }
    let mut layers = base.layers.clone();
    let mut unpacked = base.unpacked;
    let mut ran = 0;
    let max = config.environment.image_mb.saturating_mul(1 << 20);
    if build {
        let how = gs_image::isolate::How::Helper(
            std::env::current_exe().unwrap_or_else(|_| "git-sandbox".into()),
        );
        for (step_key, make) in &makes {
            let files = match make {
                Make::Copy(files) => files,
                Make::Run {
                    line,
                    command,
                    env,
                    workdir,
                    keep,
                } => {
                    let (layer, bytes, now) = run_step(
                        config,
                        &store,
                        plan,
                        &layers,
                        step_key,
                        *line,
                        command,
                        env,
                        workdir,
                        *keep,
                        max.saturating_sub(unpacked),
                    )?;
                    unpacked += bytes;
                    ran += usize::from(now);
                    layers.push(layer);
                    continue;
                }
            };
            let mut members = Vec::new();
            let mut bytes = 0u64;
            // Each file goes where the image means its directory: through the image's own links
            // (a merged-/usr root's /bin is usr/bin), never over them.
            let lowers: Vec<std::path::PathBuf> = layers
                .iter()
                .rev()
                .map(|l| store.layer_dir(&l.diff_id))
                .collect();
            let mut resolved: std::collections::HashMap<String, String> = Default::default();
            let mut place = |p: &str| -> Result<String> {
                let (dir, name) = p.rsplit_once('/').unwrap_or(("", p));
                if !resolved.contains_key(dir) {
                    let r = gs_image::rootfs::resolve_dir(&lowers, &format!("/{dir}")).ok_or_else(
                        || {
                            AppError::usage(format!(
                                "{}: COPY to /{p}: a file of the image is in the way",
                                plan.label
                            ))
                        },
                    )?;
                    resolved.insert(dir.to_string(), r);
                }
                let d = &resolved[dir];
                Ok(if d.is_empty() {
                    name.to_string()
                } else {
                    format!("{d}/{name}")
                })
            };
            for f in files {
                match f {
                    Copied::File(p, id, x) => {
                        let body = gs_git::objects::blob(repo, *id)?;
                        bytes += body.len() as u64;
                        members.push(Member::File(place(p)?, body, *x));
                    }
                    Copied::Link(p, id) => {
                        let target = String::from_utf8_lossy(&gs_git::objects::blob(repo, *id)?)
                            .into_owned();
                        members.push(Member::Symlink(place(p)?, target));
                    }
                }
                if unpacked + bytes > max {
                    return Err(AppError::refused(format!(
                        "{}: the image would hold more than [environment] image_mb ({} MB)",
                        plan.label,
                        max >> 20
                    ))
                    .hint("copy less, or raise image_mb in your user config"));
                }
            }
            let (tar, diff_id) = gs_image::layer::tar_of(&members)
                .map_err(|e| AppError::usage(format!("{}: {e}", plan.label)))?;
            let tmp = tempfile::NamedTempFile::new_in(&ctx.paths.home)
                .map_err(crate::app::io_err("cannot write a layer"))?;
            std::fs::write(tmp.path(), &tar).map_err(crate::app::io_err("cannot write a layer"))?;
            let bounds = gs_image::unpack::Bounds {
                bytes: max.saturating_sub(unpacked),
                members: 1_000_000,
            };
            store
                .add_layer(&how, tmp.path(), &diff_id, bounds)
                .map_err(|e| AppError::refused(format!("{}: {e}", plan.label)))?;
            unpacked += bytes;
            layers.push(LayerInfo {
                digest: diff_id.clone(),
                diff_id,
                size: tar.len() as u64,
            });
        }
    }
    let now = gs_util::time::rfc3339(gs_util::time::now_millis());
    let image = Image {
        reference: format!("{} (FROM {})", plan.label, plan.from),
        digest,
        manifest: base.manifest.clone(),
        platform: base.platform.clone(),
        config: base.config.clone(),
        layers,
        env,
        working_dir: Some(workdir).filter(|w| !w.is_empty()),
        user,
        size: base.size,
        unpacked,
        pulled_at: now.clone(),
        used_at: now,
    };
    // An image with a layer built for this run alone is not kept.
    if build && keep_all {
        store
            .record(&image)
            .map_err(|e| AppError::refused(format!("{}: {e}", plan.label)))?;
    }
    Ok(Built {
        image,
        key: plan_key,
        ran,
    })
}

/// The image the Dockerfile builds on `base` for a run of `scope`: held under its key, else
/// built now.
pub fn build(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &CommitInfo,
    config: &Config,
    plan: &Plan,
    base: &Image,
    scope: &Scope<'_>,
) -> Result<Built> {
    walk(ctx, repo, info, config, plan, base, Some(scope))
}

/// The key the Dockerfile would build to on `base`, building nothing.
pub fn key(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &CommitInfo,
    config: &Config,
    plan: &Plan,
    base: &Image,
) -> Result<String> {
    Ok(walk(ctx, repo, info, config, plan, base, None)?.key)
}
