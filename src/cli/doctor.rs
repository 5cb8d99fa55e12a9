use super::ui::{self, say};
use super::{print_json, CmdResult, CommandError};
use gs_config::Paths;
use gs_model::LayerStatus;
use gs_sandbox::{probe, sandbox, sandbox::Sandbox, Probe};

/// What this machine's sandbox can enforce: every layer, available or not, the reason, and what
/// a missing one would need. Probes afresh and updates the cache that runs use.
///
/// Example: `git sandbox doctor --json | jq '.isolation.layers[] | select(.status != "enforced")'`
#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print the probe as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_doctor(args: DoctorArgs) -> CmdResult {
    let paths = Paths::from_env();
    let config_dir = paths
        .user_config
        .parent()
        .unwrap_or(&paths.home)
        .to_path_buf();
    let _ = std::fs::remove_file(paths.home.join(probe::FILE));
    let helper = std::env::current_exe().map_err(|e| {
        CommandError::environment(format!(
            "cannot find this binary to run the sandbox helper: {e}"
        ))
    })?;
    let bare = Sandbox {
        helper,
        hide: sandbox::hidden_dirs(&paths.home, &config_dir),
        ..Sandbox::default()
    };
    let probe = Probe::load_or_run(&paths.home, &bare);
    if args.json {
        let mut value = serde_json::to_value(&probe).expect("probes serialize");
        for layer in value["isolation"]["layers"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            if layer["status"] == "unavailable" {
                let name = layer["layer"].as_str().unwrap_or_default().to_string();
                layer["needs"] = probe::needs(&name).into();
            }
        }
        value["caches"] = serde_json::to_value(cache_generations(&paths)).expect("plain data");
        value["images"] = images_json(&paths);
        print_json(&value);
    } else {
        let mut out = String::new();
        say!(
            out,
            "git-sandbox {} on Linux {} as uid {} ({})",
            probe.version,
            probe.kernel,
            probe.euid,
            if probe.isolation.degraded {
                "degraded: some layers are unavailable"
            } else {
                "every layer available"
            }
        );
        for l in &probe.isolation.layers {
            let mark = match l.status {
                LayerStatus::Enforced => "✔",
                LayerStatus::Off => "-",
                LayerStatus::Unavailable => "✘",
                LayerStatus::Unknown => "?",
            };
            say!(out, "{mark} {:<17} {}", l.layer, l.detail);
            if l.status == LayerStatus::Unavailable {
                say!(out, "  {:<17} needs: {}", "", probe::needs(&l.layer));
            }
        }
        limits_lines(&mut out, &probe);
        network_lines(&mut out, &paths);
        caches_lines(&mut out, &paths);
        images_lines(&mut out, &paths);
        say!(
            out,
            "(cached in {})",
            paths.home.join(probe::FILE).display()
        );
        print!("{out}");
    }
    Ok(if probe.isolation.degraded { 1 } else { 0 })
}

/// A branch's build cache as doctor shows it.
#[derive(serde::Serialize)]
struct CacheGenerations {
    repository_key: String,
    /// The registered repository the cache is of, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    repository: Option<std::path::PathBuf>,
    branch: Option<String>,
    /// Oldest first: the generation's number, whether it is a base, its size on disk.
    generations: Vec<GenerationRow>,
    /// The branch's last audit (a warm result run again cold by the daemon), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    audit: Option<gs_runner::caches::AuditState>,
}

#[derive(serde::Serialize)]
struct GenerationRow {
    number: u64,
    base: bool,
    bytes: u64,
}

fn cache_generations(paths: &Paths) -> Vec<CacheGenerations> {
    let owners = crate::app::repo::gc::repositories_by_cache_key(&paths.home);
    let mut out: Vec<CacheGenerations> = gs_runner::caches::list(&paths.caches())
        .into_iter()
        .map(|c| CacheGenerations {
            audit: gs_runner::caches::audit_of(&c).filter(|a| a.commit.is_some()),
            generations: gs_runner::caches::generations_of(&c)
                .into_iter()
                .map(|(number, base, bytes)| GenerationRow {
                    number,
                    base,
                    bytes,
                })
                .collect(),
            repository: owners.get(&c.repo_key).cloned(),
            repository_key: c.repo_key,
            branch: c.branch,
        })
        .filter(|c| !c.generations.is_empty())
        .collect();
    out.sort_by(|a, b| (&a.repository_key, &a.branch).cmp(&(&b.repository_key, &b.branch)));
    out
}

/// The build-cache generations kept: a run reads its branch's newest base and those above it.
fn caches_lines(out: &mut String, paths: &Paths) {
    let caches = cache_generations(paths);
    if caches.is_empty() {
        say!(out, "\nbuild caches: none kept");
        return;
    }
    say!(
        out,
        "\nbuild caches, the generations kept (a run reads the newest base and those above it):"
    );
    for c in &caches {
        let gens: Vec<String> = c
            .generations
            .iter()
            .map(|g| format!("{}{}", g.number, if g.base { " (base)" } else { "" }))
            .collect();
        let bytes: u64 = c.generations.iter().map(|g| g.bytes).sum();
        let repo = match &c.repository {
            Some(p) => p.display().to_string(),
            None => format!("{} (no registered repository)", c.repository_key),
        };
        say!(
            out,
            "  {} {}: {} ({:.1} MiB)",
            repo,
            c.branch.as_deref().unwrap_or("?"),
            gens.join(", "),
            bytes as f64 / (1 << 20) as f64
        );
        if let Some(a) = &c.audit {
            let when = gs_util::time::rfc3339(a.at_ms);
            let commit = gs_util::short(a.commit.as_deref().unwrap_or(""));
            match a.outcome.as_deref() {
                Some("disagreed") => say!(
                    out,
                    "    last audit {when}: {commit} warm and cold DISAGREED: discarded {}, made again {} result(s)",
                    a.discarded.join(", "),
                    a.rerun.len()
                ),
                Some(o) => say!(out, "    last audit {when}: {commit} warm and cold {o}"),
                None => {}
            }
        }
    }
}

/// The image store and where images may come from, by the user's policy.
fn images_json(paths: &Paths) -> serde_json::Value {
    let env = gs_config::Layers::load(paths)
        .map(|l| l.resolve().environment)
        .unwrap_or_default();
    let store = gs_image::Store::at(&paths.home);
    serde_json::json!({
        "store": store.root,
        "registries": env.registries,
        "insecure_registries": env.insecure_registries,
        "image_mb": env.image_mb,
        "images": store.images(),
    })
}

fn images_lines(out: &mut String, paths: &Paths) {
    let v = images_json(paths);
    let list = |k: &str| {
        let items: Vec<&str> = v[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
            .collect();
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    say!(out, "\nimages ([environment] in your user config):");
    say!(out, "  registries    {}", list("registries"));
    say!(out, "  plain HTTP    {}", list("insecure_registries"));
    let images = v["images"].as_array().cloned().unwrap_or_default();
    let bytes: u64 = images
        .iter()
        .map(|i| i["size"].as_u64().unwrap_or(0) + i["unpacked"].as_u64().unwrap_or(0))
        .sum();
    say!(
        out,
        "  store         {} ({}, {})",
        v["store"].as_str().unwrap_or_default(),
        ui::plural(images.len() as u64, "image"),
        ui::bytes(bytes)
    );
    for i in &images {
        say!(
            out,
            "    {} {} {} ({} layers)",
            i["reference"].as_str().unwrap_or_default(),
            i["digest"].as_str().unwrap_or_default(),
            i["platform"].as_str().unwrap_or_default(),
            i["layers"].as_array().map_or(0, Vec::len)
        );
    }
}

/// Where runs with the network reach it, by the user's policy.
fn network_lines(out: &mut String, paths: &Paths) {
    let Ok(layers) = gs_config::Layers::load(paths) else {
        return;
    };
    let c = layers.resolve();
    let to = |allow: &Option<Vec<String>>, default: &str| match allow {
        Some(a) => a.join(", "),
        None => default.to_string(),
    };
    say!(
        out,
        "
network (your policy):"
    );
    let (tests, setup) = if c.limits.network_host {
        let host = "the host's own network (network = \"host\" in your user config): its loopback included";
        (
            if c.limits.network {
                host.to_string()
            } else {
                "none".into()
            },
            if c.limits.setup_network {
                host.to_string()
            } else {
                "none".into()
            },
        )
    } else {
        (
            if c.limits.network {
                format!(
                    "git-sandbox's proxy, to {}",
                    to(&c.network.allow, "any public host")
                )
            } else {
                "none (network = false)".into()
            },
            if c.limits.setup_network {
                format!(
                    "git-sandbox's proxy, to {}",
                    c.network.setup_hosts().join(", ")
                )
            } else {
                "none (setup_network = false)".into()
            },
        )
    };
    say!(out, "  tests         {tests}");
    say!(out, "  setup, RUN    {setup}");
}

/// What holds `[limits] cpu_cores` here: the probe's run asked for a quota of every core.
fn cpu_quota(probe: &Probe) -> String {
    let cgroup = probe
        .isolation
        .layers
        .iter()
        .find(|x| x.layer == "cgroup" && x.status == LayerStatus::Enforced);
    match (cgroup, probe.limits.cpu_cores) {
        (Some(c), Some(_)) if c.detail.contains("v2") => {
            "the run cgroup's CPU quota (cpu.max, cgroup v2)".into()
        }
        (Some(_), Some(_)) => "the run cgroup's CPU quota (cpu.cfs_quota_us, cgroup v1)".into(),
        (Some(c), None) => match c.detail.split_once("no CPU quota: ") {
            Some((_, why)) => format!("nothing here: {why}"),
            None => "nothing here: the cgroup took no CPU quota".into(),
        },
        (None, _) => "nothing here: no cgroup here".into(),
    }
}

/// Each limit and the backings that enforce it here, with what the kernel held in the probe's
/// run (at the default policy).
fn limits_lines(out: &mut String, probe: &Probe) {
    let l = &probe.limits;
    let layer_on = |name: &str| {
        probe
            .isolation
            .layers
            .iter()
            .any(|x| x.layer == name && x.status == LayerStatus::Enforced)
    };
    let show = |v: Option<u64>, unit: &str| match v {
        Some(v) => format!("{v}{unit}"),
        None => "none".into(),
    };
    let cgroup = |v: Option<u64>, unit: &str| {
        if layer_on("cgroup") {
            format!("cgroup {}", show(v, unit))
        } else {
            "no cgroup here".into()
        }
    };
    say!(
        out,
        "\nlimits, and what enforces each here (the probe's run, default policy):"
    );
    let rows: Vec<(&str, String)> = vec![
        (
            "memory_mb",
            match l.memory_by.as_str() {
                "cgroup" => format!(
                    "memory in use, by the run's cgroup ({}; its tmpfs writes count too); no RLIMIT_AS",
                    show(l.cgroup_memory_mb, " MiB")
                ),
                "address space" => format!(
                    "address space only (RLIMIT_AS {}; {}): V8 and WebAssembly may fail far below it",
                    show(l.rlimit_as_mb, " MiB"),
                    cgroup(l.cgroup_memory_mb, " MiB")
                ),
                _ => "nothing here".into(),
            },
        ),
        (
            "processes",
            format!(
                "RLIMIT_NPROC {} (the cap + 2); {}",
                show(l.rlimit_nproc, ""),
                cgroup(l.cgroup_pids_max, " pids (the cap + 1)")
            ),
        ),
        (
            "cpu_seconds",
            format!("RLIMIT_CPU {}", show(l.rlimit_cpu_s, " s")),
        ),
        ("cpu_cores", cpu_quota(probe)),
        (
            "open_files",
            format!("RLIMIT_NOFILE {}", show(l.rlimit_nofile, "")),
        ),
        (
            "file_size_mb",
            format!("RLIMIT_FSIZE {}", show(l.rlimit_fsize_mb, " MiB")),
        ),
        (
            "disk_mb",
            if layer_on("disk_limit") {
                format!(
                    "an overlay over the checkout on a tmpfs of {}, and tmpfs /tmp, /var/tmp, /dev/shm of the same size",
                    show(l.disk_mb, " MiB")
                )
            } else {
                "nothing here: the run writes to its directory's file system unbounded".into()
            },
        ),
        (
            "timeout",
            "the supervisor's wall clock, then the whole tree is killed".into(),
        ),
        ("output_bytes", "the supervisor, reading the output".into()),
        (
            "checkout_mb",
            "the supervisor, from object sizes before the checkout is written".into(),
        ),
    ];
    for (name, how) in rows {
        say!(out, "  {name:<13} {how}");
    }
}
