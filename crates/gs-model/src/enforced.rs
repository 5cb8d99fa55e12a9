//! What the sandbox of a run enforced and what the run reached: the isolation layers, the limits
//! read back from the kernel, the network through the proxy. Parts of [`crate::Tests`].

use serde::{Deserialize, Serialize};

/// A run's network, as its proxy saw it: the policy, and each host it contacted or was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkUse {
    /// `proxy` (the hosts `[network] allow` names, or any public host), `host` (the host's own
    /// network, `network = "host"`).
    pub policy: String,
    /// The hosts the policy allowed: `["*"]` for any public host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(default)]
    pub contacted: Vec<Contacted>,
    #[serde(default)]
    pub refused: Vec<Refused>,
}

impl NetworkUse {
    /// Two sessions' use as one (a two-phase run): contacts added up by host and port.
    pub fn merge(a: Option<NetworkUse>, b: Option<NetworkUse>) -> Option<NetworkUse> {
        let (mut a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (a, b) => return a.or(b),
        };
        for c in b.contacted {
            match a
                .contacted
                .iter_mut()
                .find(|x| x.host == c.host && x.port == c.port)
            {
                Some(x) => {
                    x.requests += c.requests;
                    x.bytes_in += c.bytes_in;
                    x.bytes_out += c.bytes_out;
                }
                None => a.contacted.push(c),
            }
        }
        for r in b.refused {
            if !a.refused.contains(&r) {
                a.refused.push(r);
            }
        }
        Some(a)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contacted {
    pub host: String,
    pub port: u16,
    pub requests: u64,
    /// From the origin to the run.
    pub bytes_in: u64,
    /// From the run to the origin.
    pub bytes_out: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub host: String,
    pub port: u16,
    pub reason: String,
}

/// The limits a run had, as the kernel reports them once set, not as the config asked.
///
/// Read from `getrlimit` of the process that becomes the command, the run's cgroup files and
/// the size of its writable file system. `None`: no such limit was in force. Values are the
/// kernel's: `rlimit_nproc` is the process cap plus 2 (the namespace's init and the shell),
/// `cgroup_pids_max` the cap plus 1 (the helper).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedLimits {
    pub rlimit_as_mb: Option<u64>,
    pub rlimit_cpu_s: Option<u64>,
    pub rlimit_nofile: Option<u64>,
    pub rlimit_fsize_mb: Option<u64>,
    pub rlimit_nproc: Option<u64>,
    pub cgroup_memory_mb: Option<u64>,
    pub cgroup_pids_max: Option<u64>,
    /// The run cgroup's CPU quota (`[limits] cpu_cores`), as the kernel holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<Millicores>,
    /// What limits the memory of the run: `cgroup` (memory in use, page cache and the tmpfs it
    /// writes included), `address space` (`RLIMIT_AS`, where no cgroup can: reservations count
    /// too, and V8 or WebAssembly may fail far below the limit), or empty for nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory_by: String,
    /// The size of the file system the run writes to (its tree, HOME and temp dirs).
    pub disk_mb: Option<u64>,
    /// Enforced by the supervisor.
    pub timeout_ms: u64,
    pub output_bytes: u64,
}

/// A share of the CPU, in thousandths of a core; written as cores (`0.5`, `2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millicores(pub u64);

impl std::fmt::Display for Millicores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&gs_util::cores_text(self.0))
    }
}

impl Serialize for Millicores {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        gs_util::serialize_cores(self.0, s)
    }
}

impl<'de> Deserialize<'de> for Millicores {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let cores = f64::deserialize(d)?;
        if !cores.is_finite() || cores < 0.0 {
            return Err(serde::de::Error::custom(format!(
                "{cores} is not a number of cores"
            )));
        }
        Ok(Millicores((cores * 1000.0).round() as u64))
    }
}

/// The sandbox of one run as the note keeps it: whether it was degraded, which profile (the
/// full layer table, keyed by this id, is in the index), and only the layers that were not
/// enforced. No host paths, uids or cgroup names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationSummary {
    pub degraded: bool,
    #[serde(default)]
    pub profile: String,
    /// How many layers were enforced.
    #[serde(default)]
    pub enforced: u64,
    /// Layers that were unavailable (the run is degraded) or off on purpose.
    #[serde(default)]
    pub not_enforced: Vec<Layer>,
}

/// The sandbox of one run: every layer with what happened to it. `degraded` is true when any
/// layer that should have been on was not (the reason is in that layer's `detail`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    pub degraded: bool,
    pub layers: Vec<Layer>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    pub layer: String,
    pub status: LayerStatus,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerStatus {
    /// In force for the whole run.
    Enforced,
    /// Wanted but not available on this machine (or it failed): the run is degraded.
    Unavailable,
    /// Switched off on purpose (e.g. `network = true` allowed by the user's policy).
    Off,
    /// A status this build does not know (written by a newer git-sandbox): not vouched for.
    #[serde(other)]
    Unknown,
}

impl Layer {
    pub fn new(layer: &str, status: LayerStatus, detail: impl Into<String>) -> Layer {
        Layer {
            layer: layer.to_string(),
            status,
            detail: detail.into(),
        }
    }
}

impl Isolation {
    pub fn from_layers(layers: Vec<Layer>) -> Isolation {
        Isolation {
            degraded: layers
                .iter()
                .any(|l| matches!(l.status, LayerStatus::Unavailable | LayerStatus::Unknown)),
            layers,
        }
    }

    /// A stable id of this layer table: runs sandboxed the same way share it.
    pub fn profile_id(&self) -> String {
        let json = serde_json::to_string(&self.layers).expect("layers always serialize");
        format!("p{}", &gs_util::fnv64_hex(json.as_bytes())[..12])
    }

    pub fn summary(&self) -> IsolationSummary {
        IsolationSummary {
            degraded: self.degraded,
            profile: self.profile_id(),
            enforced: self
                .layers
                .iter()
                .filter(|l| l.status == LayerStatus::Enforced)
                .count() as u64,
            not_enforced: self
                .layers
                .iter()
                .filter(|l| l.status != LayerStatus::Enforced)
                .cloned()
                .collect(),
        }
    }
}
