//! The thresholds of the findings (`--threshold NAME=VALUE`).

use serde::Serialize;

macro_rules! thresholds {
    ($($(#[$m:meta])* $name:ident = $default:expr),+ $(,)?) => {
        /// Finding thresholds. Ratios are fractions of the step (0.1 = 10%). docs/analysis-schema.md
        /// lists every name with its default (a test keeps the two in step).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        pub struct Thresholds {
            $($(#[$m])* pub $name: f64,)+
        }

        impl Default for Thresholds {
            fn default() -> Self {
                Thresholds { $($name: $default,)+ }
            }
        }

        impl Thresholds {
            /// Every threshold as `(name, value)`, in declaration order.
            pub fn entries(&self) -> Vec<(&'static str, f64)> {
                vec![$((stringify!($name), self.$name)),+]
            }

            fn slot(&mut self, name: &str) -> Option<&mut f64> {
                match name {
                    $(stringify!($name) => Some(&mut self.$name),)+
                    _ => None,
                }
            }
        }
    };
}

thresholds! {
    /// Exposed transfer / step wall time above this is a finding.
    exposed_comm_ratio = 0.10,
    /// A rank is a consistent straggler when late in at least this share of the steps.
    straggler_consistency = 0.6,
    /// A finding must save at least this share of the step.
    min_saving_ratio = 0.01,
    /// (max − min) / mean compute across ranks above this flags a step in `imbalance` (a
    /// table, not a finding: uneven work shows as a late rank).
    compute_imbalance = 0.05,
    /// Data loading (host work the device or the step waits on) / step above this.
    input_ratio = 0.05,
    /// Time every CPU rank spends in one region with no operator running (and no collective to
    /// wait for) / step above this: a host stall on every rank.
    shared_stall_ratio = 0.30,
    /// ...or, when that time is one block (the longest operator-free stretch every rank has
    /// there holds at least half of it: a sleep, a blocking write, not the Python between
    /// operators), that block / step above this.
    shared_stall_block_ratio = 0.08,
    /// GPU idle waiting on the host (CPU-bound gaps) / step.
    cpu_bound_ratio = 0.10,
    /// Host synchronization / step.
    host_sync_ratio = 0.05,
    /// Allocation calls per step after the first step.
    alloc_calls_per_step = 1.0,
    /// Median collective size below this many bytes...
    small_collective_bytes = 4.0 * 1024.0 * 1024.0,
    /// ...with at least this many collectives per step.
    small_collectives_per_step = 8.0,
    /// The bucket size fewer, larger collectives are projected with (DDP's default 25 MiB).
    bucket_bytes = 25.0 * 1024.0 * 1024.0,
    /// Step-time jitter (stdev / mean) above this.
    step_jitter = 0.10,
    /// Achieved busbw below this fraction of what nccl-tests measured at the same size.
    fabric_fraction = 0.5,
}

impl Thresholds {
    /// Sets one threshold by name (`exposed_comm_ratio=0.15`).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), String> {
        let slot = self.slot(name).ok_or_else(|| format!("unknown threshold `{name}`"))?;
        if !value.is_finite() {
            return Err(format!("threshold `{name}` must be a finite number"));
        }
        *slot = value;
        Ok(())
    }
}
