//! `git sandbox image`: the images runs use as their root (`[environment] image`): pull ahead,
//! list, remove.

use super::{cwd, print_json, ui, CmdResult};
use crate::app::config::image;
use crate::app::{intake::session::Session, Context};

/// The images runs use as their root: pull one ahead, list those held, remove one.
///
/// A commit's `.sandbox.toml` names an image with `[environment] image = "python:3.12-slim"`;
/// its runs then have the image's files as their root instead of this machine's. Images are
/// pulled by git-sandbox itself (no Docker daemon), only from the registries your user config
/// allows (`[environment] registries`, default docker.io, ghcr.io and quay.io), verified blob by
/// blob and stored once for every repository of this home. Images no run used for `[gc] images`
/// (default 14d) go with `git sandbox gc`.
///
/// Examples: `git sandbox image pull python:3.12-slim`, `git sandbox image pull` (the image
/// HEAD's config names), `git sandbox image list`,
/// `git sandbox image rm python:3.12-slim`
#[derive(clap::Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(clap::Subcommand)]
pub enum ImageCommand {
    /// Pull an image into the store (a tag is resolved anew; what is held is not fetched again).
    Pull {
        /// [REGISTRY/]NAME[:TAG][@sha256:DIGEST], like python:3.12-slim; without it, the image
        /// the config of the repository's HEAD names.
        reference: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Build ahead the environment the config of the repository's HEAD names (its Dockerfile, or
    /// its devcontainer's build; an image is pulled): what its next run would build.
    Build {
        #[arg(long)]
        json: bool,
    },
    /// The images held: reference, digest, platform, size, when last used.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove an image from the store (and the layers no other image uses).
    Rm {
        reference: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn cmd_image(args: ImageArgs) -> CmdResult {
    let ctx = Context::load()?;
    match args.command {
        ImageCommand::Pull { reference, json } => {
            let (config, r) = match reference {
                Some(text) => (ctx.layers.resolve(), image::parse(&text)?),
                None => {
                    let Session { ctx, repo, .. } = Session::open(&cwd()?)?;
                    let head = gs_git::resolve_commit(&repo, "HEAD")?;
                    image::named_at(&ctx, &repo, head)?
                }
            };
            let pulled = image::pull(&ctx, &config, &r)?;
            if json {
                print_json(&pulled);
            } else {
                let i = &pulled.image;
                println!(
                    "{} {} {} ({} layers, {} unpacked)",
                    i.reference,
                    i.digest,
                    i.platform,
                    i.layers.len(),
                    ui::bytes(i.unpacked)
                );
                eprintln!(
                    "{} requests, {} blobs fetched, {} layers unpacked{}",
                    pulled.requests,
                    pulled.blobs_fetched,
                    pulled.layers_unpacked,
                    if pulled.offline {
                        "; the registry was unreachable: the digest the tag resolved to last"
                    } else {
                        ""
                    }
                );
            }
        }
        ImageCommand::Build { json } => {
            let Session { ctx, repo, .. } = Session::open(&cwd()?)?;
            let head = gs_git::resolve_commit(&repo, "HEAD")?;
            // Built as a run of HEAD's branch would have it (kept for it: HEAD is its tip).
            let branch = gs_git::head_branch(&repo);
            let Some((env, ran)) = image::environment_at(&ctx, &repo, head, branch.as_deref())?
            else {
                return Err(super::CommandError::usage(
                    "the config of HEAD names no environment to build",
                )
                .hint("set [environment] dockerfile (or image) in .sandbox.toml"));
            };
            if json {
                print_json(&env);
            } else {
                println!(
                    "{} {} {} ({} layers built)",
                    env.image,
                    env.digest,
                    env.platform,
                    env.layers.len()
                );
            }
            // What this build did, beside the record: a build kept whole runs nothing.
            if !env.layers.is_empty() {
                eprintln!(
                    "{}",
                    match ran {
                        0 => "every step was kept: nothing ran".to_string(),
                        n => format!("{} ran now", ui::plural(n as u64, "RUN step")),
                    }
                );
            }
        }
        ImageCommand::List { json } => {
            let all = image::list(&ctx);
            if json {
                print_json(&serde_json::json!({ "images": all }));
            } else if all.is_empty() {
                println!("No images; a commit's `[environment] image` pulls one, or `git sandbox image pull REF`.");
            } else {
                let rows: Vec<Vec<String>> = all
                    .iter()
                    .map(|i| {
                        vec![
                            i.reference.clone(),
                            gs_util::short(i.digest.trim_start_matches("sha256:")).to_string(),
                            i.platform.clone(),
                            ui::bytes(i.unpacked),
                            i.used_at.clone(),
                        ]
                    })
                    .collect();
                ui::table(&["IMAGE", "DIGEST", "PLATFORM", "SIZE", "USED"], &rows);
            }
        }
        ImageCommand::Rm { reference, json } => {
            let r = image::parse(&reference)?;
            let gone = image::remove(&ctx, &r)?;
            if json {
                print_json(&serde_json::json!({"removed": gone.reference, "digest": gone.digest}));
            } else {
                println!("Removed {} ({})", gone.reference, gone.digest);
            }
        }
    }
    Ok(0)
}
