//! The layers a process puts on itself: rlimits, Landlock (files, TCP, signal and abstract-socket
//! scopes) and a seccomp deny-list. Each returns the [`Layer`] line for the report.

use super::{errno_text, PlanLimits};
use gs_model::{Layer, LayerStatus};
use std::collections::BTreeMap;
use std::path::Path;

const MIB: u64 = 1024 * 1024;

fn setrlimit(res: libc::__rlimit_resource_t, soft: u64, hard: u64) -> Result<(), String> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: plain FFI call with a valid pointer.
    if unsafe { libc::setrlimit(res, &lim) } == 0 {
        Ok(())
    } else {
        Err(errno_text(&std::io::Error::last_os_error()))
    }
}

/// Memory (address space, only where no cgroup limits memory), CPU seconds, open files, file
/// size, processes, and no core dumps. A limit of 0 means "no limit" for that resource (only the
/// user's own config can say so). The detail names the resources, not the values: those are
/// read back into the record's `tests.limits`, and the layer table stays the same for runs
/// sandboxed the same way.
///
/// Address space is not memory: V8 and WebAssembly reserve ranges of many GiB they never touch
/// (a wasm memory of 4 GiB maximum, pnpm's heap), so `RLIMIT_AS` fails them far below the
/// memory they use. Where the run's cgroup limits memory in use, it is left off.
pub fn rlimits(l: &PlanLimits, memory_by_cgroup: bool) -> Layer {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    let mut apply = |name: &str, res, soft: u64, hard: u64| {
        if soft == 0 {
            return;
        }
        match setrlimit(res, soft, hard) {
            Ok(()) => done.push(name.to_string()),
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    };
    if !memory_by_cgroup {
        apply(
            "address space",
            libc::RLIMIT_AS,
            l.memory_mb.saturating_mul(MIB),
            l.memory_mb.saturating_mul(MIB),
        );
    }
    apply("cpu", libc::RLIMIT_CPU, l.cpu_seconds, l.cpu_seconds + 1);
    apply(
        "open files",
        libc::RLIMIT_NOFILE,
        l.open_files,
        l.open_files,
    );
    apply(
        "file size",
        libc::RLIMIT_FSIZE,
        l.file_size_mb.saturating_mul(MIB),
        l.file_size_mb.saturating_mul(MIB),
    );
    // Two more than the cap for the namespace's init and the shell, so that where there is a
    // pids cgroup it is hit first and the supervisor can say the run was stopped for it.
    apply(
        "processes",
        libc::RLIMIT_NPROC,
        l.processes.saturating_add(2),
        l.processes.saturating_add(2),
    );
    match setrlimit(libc::RLIMIT_CORE, 0, 0) {
        Ok(()) => done.push("no core dumps".into()),
        Err(e) => failed.push(format!("core: {e}")),
    }
    if failed.is_empty() {
        Layer::new("rlimits", LayerStatus::Enforced, done.join(", "))
    } else {
        Layer::new(
            "rlimits",
            LayerStatus::Unavailable,
            format!("set: {}; failed: {}", done.join(", "), failed.join(", ")),
        )
    }
}

/// The soft rlimits in force now, as the kernel has them: what a command exec'd from here
/// inherits. `None`: unlimited.
pub fn read_rlimits(into: &mut gs_model::AppliedLimits) {
    let get = |res| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain FFI call with a valid pointer.
        let ok = unsafe { libc::getrlimit(res, &mut lim) } == 0;
        (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
    };
    into.rlimit_as_mb = get(libc::RLIMIT_AS).map(|b| b / MIB);
    into.rlimit_cpu_s = get(libc::RLIMIT_CPU);
    into.rlimit_nofile = get(libc::RLIMIT_NOFILE);
    into.rlimit_fsize_mb = get(libc::RLIMIT_FSIZE).map(|b| b / MIB);
    into.rlimit_nproc = get(libc::RLIMIT_NPROC);
    into.memory_by = if into.cgroup_memory_mb.is_some() {
        "cgroup".into()
    } else if into.rlimit_as_mb.is_some() {
        "address space".into()
    } else {
        String::new()
    };
}

/// What Landlock may allow, by path.
pub struct FsRules<'a> {
    /// Fully writable (the run's directory, private tmp dirs).
    pub writable: Vec<&'a Path>,
    /// Deny every TCP bind and connect (when there is no network namespace to do it).
    pub deny_tcp: bool,
}

/// Read and execute everywhere, write only the run's own directories, device files usable,
/// no signals or abstract sockets outside the sandbox, and optionally no TCP at all.
pub fn landlock(rules: &FsRules<'_>) -> Layer {
    use landlock::{
        Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, ABI,
    };
    // The newest ABI these rules were written and tested against.
    let abi = ABI::V6;
    let build = || -> Result<landlock::RestrictionStatus, String> {
        let mut rs = Ruleset::default()
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| e.to_string())?;
        if rules.deny_tcp {
            rs = rs
                .handle_access(AccessNet::from_all(abi))
                .map_err(|e| e.to_string())?;
        }
        rs = rs.scope(Scope::from_all(abi)).map_err(|e| e.to_string())?;
        let mut created = rs.create().map_err(|e| e.to_string())?;
        let read = AccessFs::from_read(abi);
        let mut entries = vec![
            (Path::new("/"), read),
            (
                Path::new("/dev"),
                read | AccessFs::WriteFile | AccessFs::IoctlDev,
            ),
            (Path::new("/proc"), read | AccessFs::WriteFile),
        ];
        entries.extend(rules.writable.iter().map(|p| (*p, AccessFs::from_all(abi))));
        for (path, access) in entries {
            if let Ok(fd) = PathFd::new(path) {
                created = created
                    .add_rule(PathBeneath::new(fd, access))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        created.restrict_self().map_err(|e| e.to_string())
    };
    match build() {
        Ok(status) => match status.ruleset {
            RulesetStatus::FullyEnforced => Layer::new(
                "landlock",
                LayerStatus::Enforced,
                format!(
                    "ABI 6 fully enforced: write only the run's directories{}; signals and abstract sockets scoped",
                    if rules.deny_tcp { "; no TCP" } else { "" }
                ),
            ),
            RulesetStatus::PartiallyEnforced => Layer::new(
                "landlock",
                LayerStatus::Unavailable,
                "partially enforced: the kernel's Landlock ABI is older than 6",
            ),
            RulesetStatus::NotEnforced => Layer::new(
                "landlock",
                LayerStatus::Unavailable,
                "not enforced: the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock)",
            ),
        },
        Err(e) => Layer::new("landlock", LayerStatus::Unavailable, e),
    }
}

/// Syscalls a test never needs and an escape often does.
fn denied() -> Vec<i64> {
    use libc::*;
    vec![
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_bpf,
        SYS_perf_event_open,
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_chroot,
        SYS_unshare,
        SYS_setns,
        SYS_keyctl,
        SYS_add_key,
        SYS_request_key,
        SYS_io_uring_setup,
        SYS_io_uring_enter,
        SYS_io_uring_register,
        SYS_userfaultfd,
        SYS_kexec_load,
        SYS_kexec_file_load,
        SYS_init_module,
        SYS_finit_module,
        SYS_delete_module,
        SYS_reboot,
        SYS_swapon,
        SYS_swapoff,
        SYS_acct,
        SYS_quotactl,
        SYS_open_by_handle_at,
        SYS_name_to_handle_at,
        SYS_fsopen,
        SYS_fsconfig,
        SYS_fsmount,
        SYS_fspick,
        SYS_move_mount,
        SYS_open_tree,
        SYS_mount_setattr,
        SYS_syslog,
        SYS_settimeofday,
        SYS_clock_settime,
        SYS_clock_adjtime,
        SYS_adjtimex,
        SYS_vhangup,
        SYS_iopl,
        SYS_ioperm,
        SYS_lookup_dcookie,
        SYS_uselib,
    ]
}

const NS_FLAGS: &[i32] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
    0x80, // CLONE_NEWTIME
];

type Programs = (seccompiler::BpfProgram, seccompiler::BpfProgram);

/// The filters, compiled once per process: the fork server compiles them before it forks (see
/// [`prepare_seccomp`]), so a forked helper finds them ready.
fn programs() -> &'static Result<Programs, String> {
    static PROGRAMS: std::sync::OnceLock<Result<Programs, String>> = std::sync::OnceLock::new();
    PROGRAMS.get_or_init(compile)
}

/// Compile the filters now (they depend on nothing a run decides).
pub fn prepare_seccomp() {
    let _ = programs();
}

fn compile() -> Result<Programs, String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let build = || -> Result<(BpfProgram, BpfProgram), String> {
        let arch: TargetArch = std::env::consts::ARCH
            .try_into()
            .map_err(|e| format!("{e:?}"))?;
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
            denied().into_iter().map(|nr| (nr, Vec::new())).collect();
        let clone_rules = NS_FLAGS
            .iter()
            .map(|&f| {
                let f = f as u64;
                SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(f), f)
                    .and_then(|c| SeccompRule::new(vec![c]))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        rules.insert(libc::SYS_clone, clone_rules);
        let deny = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .map_err(|e| e.to_string())?;
        let clone3 = SeccompFilter::new(
            [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )
        .map_err(|e| e.to_string())?;
        Ok((
            deny.try_into()
                .map_err(|e: seccompiler::BackendError| e.to_string())?,
            clone3
                .try_into()
                .map_err(|e: seccompiler::BackendError| e.to_string())?,
        ))
    };
    build()
}

/// A deny-list: the calls above fail with EPERM, `clone` with any namespace flag too, and
/// `clone3` (whose flags seccomp cannot see) with ENOSYS so libc falls back to `clone`.
pub fn seccomp() -> Layer {
    let (deny, clone3) = match programs() {
        Ok(p) => p,
        Err(e) => return Layer::new("seccomp", LayerStatus::Unavailable, e.clone()),
    };
    // SAFETY: plain prctl; no_new_privs is required to install a filter without CAP_SYS_ADMIN.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    for prog in [clone3, deny] {
        if let Err(e) = seccompiler::apply_filter(prog) {
            return Layer::new("seccomp", LayerStatus::Unavailable, e.to_string());
        }
    }
    Layer::new(
        "seccomp",
        LayerStatus::Enforced,
        format!(
            "deny-list of {} calls (ptrace, bpf, mount, unshare/setns, keyctl, io_uring, …) and namespace flags of clone",
            denied().len() + 1
        ),
    )
}
