//! An environment built from the commit's own Dockerfile (`[environment] dockerfile`, the subset
//! `gs_image::dockerfile` reads): `FROM` pulled as `[environment] image` is, then each
//! instruction in turn. `ENV`, `WORKDIR` and `USER` change what the image records; `COPY` and
//! `ADD` write the commit's files as a layer made here (fixed owners and times: the same files
//! give the same layer), unpacked as any layer is; `RUN` runs in `gs_image::buildrun` (uid 0 of
//! a user namespace over the image so far, no network unless the user's config gives builds the
//! host's), and what it wrote becomes a layer tar unpacked as any layer is. Every instruction's
//! key is its parent's, its text and the blob ids it copies (a `RUN`'s, the repository too: its
//! layer is never another's); each `RUN` is kept by its key, and the built image under the last
//! key, so a tree whose Dockerfile and copied files did not change builds nothing.

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
    let steps = dockerfile::parse(&text).map_err(|e| AppError::usage(format!("{label}: {e}")))?;
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

/// What makes a layer.
enum Make {
    Copy(Vec<Copied>),
    Run {
        line: usize,
        command: String,
        env: Vec<String>,
        workdir: String,
    },
}

/// Run a `RUN` over `layers` (bottom first): its layer (a tar of what it wrote) is unpacked into
/// the store as any layer is, and the step's key kept beside it, so that the same step on the same
/// layers is not run again. The layer and the bytes unpacked (0 when it was kept). A command
/// that fails is the commit's error, with the end of its output.
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
    room: u64,
) -> Result<(LayerInfo, u64)> {
    let kept = store.root.join("steps").join(step_key);
    if let Some(layer) = std::fs::read(&kept)
        .ok()
        .and_then(|b| serde_json::from_slice::<LayerInfo>(&b).ok())
        .filter(|l| store.layer_dir(&l.diff_id).is_dir())
    {
        return Ok((layer, 0));
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
    let code = gs_image::buildrun::run(&gs_image::buildrun::Step {
        exe: &exe,
        lowers: &lowers,
        layer_out: &tar,
        max_bytes: room,
        command,
        env,
        workdir,
        host_network: config.limits.setup_network && config.limits.network_host,
        timeout: config.test.timeout,
        log: &log,
    })
    .map_err(failed)?;
    if code != 0 {
        let output = std::fs::read(&log).unwrap_or_default();
        let tail = String::from_utf8_lossy(&output[output.len().saturating_sub(600)..])
            .trim()
            .replace('\n', " | ");
        return Err(AppError::usage(format!(
            "{at}: exited with {code}; the end of its output: {tail}"
        ))
        .hint(
            "fix the step; it runs with no network unless your user config gives builds the host's",
        ));
    }
    let diff_id = {
        use std::io::Read;
        let mut f = std::fs::File::open(&tar).map_err(|e| failed(e.to_string()))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf).map_err(|e| failed(e.to_string()))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
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
    if let Some(dir) = kept.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = gs_util::write_atomic(&kept, &serde_json::to_vec(&layer).unwrap_or_default());
    Ok((layer, bytes))
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

/// What the plan builds on `base`: each instruction's key in turn, and the image the last one
/// stands for. With `build`, the layers are made (a key whose image is held makes nothing).
fn walk(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &CommitInfo,
    config: &Config,
    plan: &Plan,
    base: &Image,
    build: bool,
) -> Result<Image> {
    let store = super::image::store(ctx);
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
                makes.push((key.clone(), Make::Copy(files)));
            }
            Instruction::Run(command) => {
                // The ARGs in scope, under the ENVs of the same names.
                let run_env: Vec<String> = args
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .chain(env.iter().cloned())
                    .collect();
                key = hash(&[&key, "RUN", command, &run_env.join("\n"), &repository]);
                makes.push((
                    key.clone(),
                    Make::Run {
                        line: *line,
                        command: command.clone(),
                        env: run_env,
                        workdir: workdir.clone(),
                    },
                ));
            }
            Instruction::From(_) => {}
        }
    }
    let digest = format!("sha256:{key}");
    if let Some(mut held) = store.image(&digest) {
        if build {
            store.touch(&mut held);
        }
        return Ok(held);
    }
    let mut layers = base.layers.clone();
    let mut unpacked = base.unpacked;
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
                } => {
                    let (layer, bytes) = run_step(
                        config,
                        &store,
                        plan,
                        &layers,
                        step_key,
                        *line,
                        command,
                        env,
                        workdir,
                        max.saturating_sub(unpacked),
                    )?;
                    unpacked += bytes;
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
    if build {
        store
            .record(&image)
            .map_err(|e| AppError::refused(format!("{}: {e}", plan.label)))?;
    }
    Ok(image)
}

/// The image the Dockerfile builds on `base`: held under its key, else built now.
pub fn build(
    ctx: &Context,
    repo: &gs_git::Repository,
    info: &CommitInfo,
    config: &Config,
    plan: &Plan,
    base: &Image,
) -> Result<Image> {
    walk(ctx, repo, info, config, plan, base, true)
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
    Ok(walk(ctx, repo, info, config, plan, base, false)?.digest)
}
