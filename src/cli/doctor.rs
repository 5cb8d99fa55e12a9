use super::{print_json, CmdResult, CommandError};
use crate::config::Paths;
use crate::model::LayerStatus;
use crate::runner::sandbox::{self, probe, Probe, Sandbox};

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
        print_json(&value);
    } else {
        println!(
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
            println!("{mark} {:<17} {}", l.layer, l.detail);
            if l.status == LayerStatus::Unavailable {
                println!("  {:<17} needs: {}", "", probe::needs(&l.layer));
            }
        }
        print_limits(&probe);
        println!("(cached in {})", paths.home.join(probe::FILE).display());
    }
    Ok(if probe.isolation.degraded { 1 } else { 0 })
}

/// Each limit and the backings that enforce it here, with what the kernel held in the probe's
/// run (at the default policy).
fn print_limits(probe: &Probe) {
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
    println!("\nlimits, and what enforces each here (the probe's run, default policy):");
    let rows: Vec<(&str, String)> = vec![
        (
            "memory_mb",
            format!(
                "RLIMIT_AS {}; {}",
                show(l.rlimit_as_mb, " MiB"),
                cgroup(l.cgroup_memory_mb, " MiB")
            ),
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
        println!("  {name:<13} {how}");
    }
}
