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
        println!("(cached in {})", paths.home.join(probe::FILE).display());
    }
    Ok(if probe.isolation.degraded { 1 } else { 0 })
}
