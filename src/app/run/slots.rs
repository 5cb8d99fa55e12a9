//! How many runs this process has going at once, against how many it may (`run -j N`, the
//! daemon's workers; else one per core), and the probes beside them: a probe takes a slot no run
//! holds, and gives it back the moment a run starts that needs it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The slots: 0 until someone says (then one per core).
static CAPACITY: AtomicUsize = AtomicUsize::new(0);

/// The runs going and the probes beside them (each probe's stop flag, oldest first).
static TAKEN: Mutex<Taken> = Mutex::new(Taken {
    runs: 0,
    probes: Vec::new(),
});

struct Taken {
    runs: usize,
    probes: Vec<Arc<AtomicBool>>,
}

/// This process runs at most `n` commits at once (`run -j N`, the daemon's `--workers`).
pub fn set_capacity(n: usize) {
    CAPACITY.store(n.max(1), Ordering::Relaxed);
}

fn capacity() -> usize {
    match CAPACITY.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

fn taken() -> std::sync::MutexGuard<'static, Taken> {
    TAKEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A run's slot, held while its checks run.
pub struct RunSlot(());

impl RunSlot {
    /// A run starts: when every slot is taken, the newest probe yields its own.
    pub fn take() -> RunSlot {
        let mut t = taken();
        t.runs += 1;
        if t.runs + t.probes.len() > capacity() {
            if let Some(stop) = t.probes.pop() {
                stop.store(true, Ordering::Relaxed);
            }
        }
        RunSlot(())
    }
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        let mut t = taken();
        t.runs = t.runs.saturating_sub(1);
    }
}

/// A probe's slot: `yielded` is set when a run takes it back.
pub struct ProbeSlot {
    pub yielded: Arc<AtomicBool>,
}

impl ProbeSlot {
    /// A free slot for a probe, if there is one.
    pub fn try_take() -> Option<ProbeSlot> {
        let mut t = taken();
        if t.runs + t.probes.len() >= capacity() {
            return None;
        }
        let yielded = Arc::new(AtomicBool::new(false));
        t.probes.push(yielded.clone());
        Some(ProbeSlot { yielded })
    }
}

impl Drop for ProbeSlot {
    fn drop(&mut self) {
        let mut t = taken();
        t.probes.retain(|p| !Arc::ptr_eq(p, &self.yielded));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two slots: a run and a probe fill them; the next run takes the probe's back, and no probe
    /// starts while runs fill them.
    #[test]
    fn a_probe_takes_a_free_slot_and_yields_it_to_a_run() {
        set_capacity(2);
        let one = RunSlot::take();
        let probe = ProbeSlot::try_take().expect("a slot is free");
        assert!(!probe.yielded.load(Ordering::Relaxed));
        let two = RunSlot::take();
        assert!(
            probe.yielded.load(Ordering::Relaxed),
            "the run took it back"
        );
        drop(probe);
        assert!(ProbeSlot::try_take().is_none(), "two runs, two slots");
        drop(two);
        assert!(ProbeSlot::try_take().is_some());
        drop(one);
        CAPACITY.store(0, Ordering::Relaxed);
    }
}
