//! What this machine allows, found once by running the real helper on `true` and cached in
//! `$GIT_SANDBOX_HOME/probe.json` (stale when the binary version, kernel or user changes).
//! Layers it found unavailable are not attempted again by runs; `git sandbox doctor` prints it.

use crate::sandbox::Sandbox;
use gs_model::{Isolation, Layer, LayerStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// What the probe checks changes with the sandbox's layers: a probe of another format is
    /// stale whatever the version says.
    #[serde(default)]
    pub format: u32,
    pub version: String,
    pub kernel: String,
    pub euid: u32,
    pub probed_at: String,
    pub isolation: Isolation,
    /// The limits the probe's run got, read back from the kernel (at the default policy).
    #[serde(default)]
    pub limits: gs_model::AppliedLimits,
}

/// The probe's format: raised whenever the layers the helper reports change.
pub const FORMAT: u32 = 3;

impl Sandbox {
    /// This sandbox with what the machine probe (from `data_dir`, run and cached on first use)
    /// found unavailable skipped, and whether runs may use overlays.
    pub fn probed(mut self, data_dir: &Path) -> Sandbox {
        let probe = Probe::load_or_run(data_dir, &self);
        self.skip = probe.skip();
        self.overlay = probe.overlay();
        self
    }
}

/// The file name under the data directory.
pub const FILE: &str = "probe.json";

pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn euid() -> u32 {
    // SAFETY: plain getter.
    unsafe { libc::geteuid() }
}

impl Probe {
    fn fresh_for_this_machine(&self) -> bool {
        self.format == FORMAT
            && self.version == env!("CARGO_PKG_VERSION")
            && self.kernel == kernel_release()
            && self.euid == euid()
    }

    /// The cached probe, or a new one (written back) when there is none or it is stale.
    pub fn load_or_run(data_dir: &Path, sandbox: &Sandbox) -> Probe {
        let path = data_dir.join(FILE);
        if let Some(p) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Probe>(&b).ok())
            .filter(Probe::fresh_for_this_machine)
        {
            return p;
        }
        let probe = Probe::run(sandbox);
        if gs_util::private::create_private_dir(data_dir).is_ok() {
            let tmp = path.with_extension("json.tmp");
            let body = serde_json::to_vec_pretty(&probe).unwrap_or_default();
            let written = gs_util::private::create_file(&tmp)
                .and_then(|mut f| std::io::Write::write_all(&mut f, &body));
            if written.is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        probe
    }

    /// Run the helper on `true` with every layer asked for, and keep its report.
    pub fn run(sandbox: &Sandbox) -> Probe {
        let mut bare = sandbox.clone();
        bare.skip.clear();
        let dir = tempfile::Builder::new()
            .prefix("git-sandbox-probe-")
            .tempdir_in(gs_git::checkout::scratch_root())
            .or_else(|_| tempfile::tempdir());
        let mut applied = gs_model::AppliedLimits::default();
        let layers = match dir {
            Ok(dir) => {
                let work = dir.path().join("tree");
                let _ = std::fs::create_dir_all(&work);
                // A CPU quota of every core (it holds nothing back): whether one can be set here.
                let limits = gs_config::Limits {
                    cpu_millicores: std::thread::available_parallelism().map_or(1, usize::from)
                        as u64
                        * 1000,
                    ..gs_config::Config::default().limits
                };
                let flag = AtomicBool::new(false);
                let out = crate::process::run(crate::process::Spec {
                    command: "true",
                    cwd: &work,
                    root: dir.path(),
                    // The runs' own: what they bind back read-only (toolchains under a hidden
                    // home, found from PATH's shims) is what the probe reports.
                    env: crate::env::toolchain_env(),
                    timeout: Duration::from_secs(10),
                    output: crate::process::Output::Discard,
                    limits: &limits,
                    sandbox: &bare,
                    interrupt: &flag,
                    artifacts: &[],
                    lower: None,
                    run_uid: None,
                    cache_layers: &[],
                    cache_out: None,
                    cache_paths: &[],
                    work_layers: &[],
                    watch: None,
                    egress: crate::process::Egress::Closed,
                });
                applied = out.limits.clone();
                let mut layers = out.isolation.layers;
                if out.exit_code != Some(0) {
                    layers.push(Layer::new(
                        "helper",
                        LayerStatus::Unavailable,
                        format!(
                            "the probe's `true` did not succeed inside the sandbox (exit {:?}, signal {:?}): {}",
                            out.exit_code,
                            out.signal,
                            out.spawn_error.unwrap_or(out.output_tail)
                        ),
                    ));
                }
                layers
            }
            Err(e) => vec![Layer::new(
                "helper",
                LayerStatus::Unavailable,
                format!("cannot create a temp dir: {e}"),
            )],
        };
        let layers = with_kept_checkouts(layers);
        Probe {
            format: FORMAT,
            version: env!("CARGO_PKG_VERSION").into(),
            kernel: kernel_release(),
            euid: euid(),
            probed_at: gs_util::time::rfc3339(gs_util::time::now_millis()),
            isolation: Isolation::from_layers(layers),
            limits: applied,
        }
    }

    /// Whether a run's directory can be an overlay here (the `disk_limit` layer worked).
    pub fn overlay(&self) -> bool {
        overlay_in(&self.isolation.layers)
    }

    /// Layers runs should not attempt again, with the probe's reason.
    pub fn skip(&self) -> BTreeMap<String, String> {
        self.isolation
            .layers
            .iter()
            .filter(|l| l.status == LayerStatus::Unavailable)
            .filter(|l| {
                ["cgroup", "mount_namespace", "landlock", "seccomp"].contains(&l.layer.as_str())
            })
            .map(|l| {
                (
                    l.layer.clone(),
                    format!("unavailable on this machine (probe): {}", l.detail),
                )
            })
            .collect()
    }
}

/// What a missing layer would need, for `doctor`.
pub fn needs(layer: &str) -> &'static str {
    match layer {
        "cgroup" => "root, or a cgroup delegated to your user, with the memory and pids controllers (v1 here; v2 needs `+memory +pids` in cgroup.subtree_control)",
        "user_namespace" | "mount_namespace" | "pid_namespace" | "ipc_namespace"
        | "uts_namespace" | "network" => "unprivileged user namespaces (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 where it exists, no AppArmor restriction), or running as root",
        "read_only_root" | "private_tmp" | "secrets_hidden" => "a mount namespace (see mount_namespace) and mount_setattr (Linux 5.12+)",
        "landlock" => "Linux 6.7+ with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot parameter); ABI 6 for signal scoping",
        "seccomp" => "a kernel with CONFIG_SECCOMP_FILTER",
        "rlimits" => "nothing usually: a hard limit set lower by whoever started git-sandbox cannot be raised",
        "unprivileged_uid" => "root with CAP_SETUID and CAP_SETGID",
        _ => "see the detail",
    }
}

fn overlay_in(layers: &[Layer]) -> bool {
    layers.iter().any(|l| {
        l.layer == "disk_limit" && matches!(l.status, LayerStatus::Enforced | LayerStatus::Off)
    })
}

/// The probe's own run has a fresh checkout; what runs get is decided by the overlay: say that.
fn with_kept_checkouts(mut layers: Vec<Layer>) -> Vec<Layer> {
    let kept = if overlay_in(&layers) {
        Layer::new(
            "kept_checkout",
            LayerStatus::Enforced,
            "runs get an overlay over a checkout kept per slot and brought up to date by the tree diff, with build caches per branch",
        )
    } else {
        Layer::new(
            "kept_checkout",
            LayerStatus::Off,
            "unavailable here (a run's directory cannot be an overlay): every run gets a fresh checkout, and no build cache is kept",
        )
    };
    match layers.iter_mut().find(|l| l.layer == "kept_checkout") {
        Some(l) => *l = kept,
        None => layers.push(kept),
    }
    layers
}
