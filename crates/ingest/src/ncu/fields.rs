//! Which ncu metrics fill the named [`NcuKernel`] fields, and the builder that collects one
//! kernel's values from however many rows and files they are spread over.
//!
//! Raw pages and `--metrics` name metrics by their ncu identifiers
//! (`gpu__time_duration.sum`); section exports by display names that only mean something
//! within their section ("Memory Throughput" is a percentage in *GPU Speed Of Light
//! Throughput* but Gbyte/s in *Memory Workload Analysis*), so display names are matched
//! together with their section and, where the name is ambiguous, their unit.

use std::collections::BTreeMap;

use llmprof_bundle::NcuKernel;

use super::number::{whole_u32, whole_u64};

/// A named field of [`NcuKernel`] filled from a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Duration,
    SmThroughput,
    MemoryThroughput,
    DramThroughput,
    AchievedOccupancy,
    TheoreticalOccupancy,
    TensorPipe,
    L2Hit,
    DramBytesRead,
    DramBytesWrite,
    Registers,
}

const FIELDS: usize = 11;

impl Field {
    fn index(self) -> usize {
        self as usize
    }
}

/// The field a metric identifier fills, in any section.
fn field_by_metric_name(metric: &str) -> Option<Field> {
    Some(match metric {
        "gpu__time_duration.sum" => Field::Duration,
        "sm__throughput.avg.pct_of_peak_sustained_elapsed" => Field::SmThroughput,
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed" => {
            Field::MemoryThroughput
        }
        "dram__throughput.avg.pct_of_peak_sustained_elapsed" => Field::DramThroughput,
        "sm__warps_active.avg.pct_of_peak_sustained_active" => Field::AchievedOccupancy,
        "sm__maximum_warps_per_active_cycle_pct" => Field::TheoreticalOccupancy,
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" => {
            Field::TensorPipe
        }
        "lts__t_sector_hit_rate.pct" => Field::L2Hit,
        "dram__bytes_read.sum" => Field::DramBytesRead,
        "dram__bytes_write.sum" => Field::DramBytesWrite,
        "launch__registers_per_thread" => Field::Registers,
        _ => return None,
    })
}

/// The sections whose display names fill fields. ncu prints the display name in the CSV;
/// the identifier is accepted too in case a version prints that instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    SpeedOfLight,
    MemoryWorkload,
    Occupancy,
    Launch,
}

fn section(name: &str) -> Option<Section> {
    Some(match name.trim() {
        "GPU Speed Of Light Throughput" | "SpeedOfLight" => Section::SpeedOfLight,
        "Memory Workload Analysis" | "MemoryWorkloadAnalysis" => Section::MemoryWorkload,
        "Occupancy" => Section::Occupancy,
        "Launch Statistics" | "LaunchStats" => Section::Launch,
        _ => return None,
    })
}

/// The field a section's display-name metric fills.
fn field_by_display_name(section_name: &str, metric: &str, unit: &str) -> Option<Field> {
    let pct = unit.trim() == "%";
    Some(match (section(section_name)?, metric.trim()) {
        (Section::SpeedOfLight, "Duration") => Field::Duration,
        (Section::SpeedOfLight, "Compute (SM) Throughput") if pct => Field::SmThroughput,
        (Section::SpeedOfLight, "Memory Throughput") if pct => Field::MemoryThroughput,
        (Section::SpeedOfLight, "DRAM Throughput") if pct => Field::DramThroughput,
        (Section::Occupancy, "Achieved Occupancy") if pct => Field::AchievedOccupancy,
        (Section::Occupancy, "Theoretical Occupancy") if pct => Field::TheoreticalOccupancy,
        (Section::MemoryWorkload, "L2 Hit Rate") if pct => Field::L2Hit,
        (Section::Launch, "Registers Per Thread") => Field::Registers,
        _ => return None,
    })
}

/// Collects one profiled kernel launch.
#[derive(Debug)]
pub(super) struct KernelBuilder {
    kernel: NcuKernel,
    /// Which fields were set from a metric identifier; those win over display names, which
    /// ncu rounds for people.
    by_identifier: [bool; FIELDS],
}

impl KernelBuilder {
    pub(super) fn new(id: u64, name: String, file: String) -> Self {
        KernelBuilder {
            kernel: NcuKernel {
                id,
                name,
                kernel: None,
                duration_ns: None,
                sm_throughput_pct: None,
                memory_throughput_pct: None,
                dram_throughput_pct: None,
                achieved_occupancy_pct: None,
                theoretical_occupancy_pct: None,
                tensor_pipe_pct: None,
                l2_hit_pct: None,
                dram_bytes_read: None,
                dram_bytes_write: None,
                registers_per_thread: None,
                grid: None,
                block: None,
                nvtx_range: None,
                stream: None,
                metrics: BTreeMap::new(),
                file,
            },
            by_identifier: [false; FIELDS],
        }
    }

    /// Records one metric value, already in base units. `key` is its name in
    /// [`NcuKernel::metrics`] when it fills no named field; `section` is `None` on raw pages.
    /// The first value of a key is kept: the same metric appears in several files of one
    /// kernel directory (details and per-section exports) with the same value.
    pub(super) fn metric(
        &mut self,
        key: impl FnOnce() -> String,
        section: Option<&str>,
        metric: &str,
        unit: &str,
        value: f64,
    ) {
        let named = match field_by_metric_name(metric) {
            Some(f) => Some((f, true)),
            None => section
                .and_then(|s| field_by_display_name(s, metric, unit))
                .map(|f| (f, false)),
        };
        match named {
            Some((field, identifier)) => self.set(field, value, identifier),
            None => {
                self.kernel.metrics.entry(key()).or_insert(value);
            }
        }
    }

    fn set(&mut self, field: Field, value: f64, identifier: bool) {
        let i = field.index();
        let keep_old = self.by_identifier.get(i).copied().unwrap_or(false) || !identifier;
        let written = if field == Field::Registers {
            if self.kernel.registers_per_thread.is_some() && keep_old {
                return;
            }
            let n = whole_u32(value);
            self.kernel.registers_per_thread = n.or(self.kernel.registers_per_thread);
            n.is_some()
        } else {
            let Some(slot) = self.float_slot(field) else {
                return;
            };
            if slot.is_some() && keep_old {
                return;
            }
            *slot = Some(value);
            true
        };
        if written {
            if let Some(flag) = self.by_identifier.get_mut(i) {
                *flag = identifier;
            }
        }
    }

    /// The `Option<f64>` field a metric fills; `None` for the integer register count.
    fn float_slot(&mut self, field: Field) -> Option<&mut Option<f64>> {
        let k = &mut self.kernel;
        Some(match field {
            Field::Duration => &mut k.duration_ns,
            Field::SmThroughput => &mut k.sm_throughput_pct,
            Field::MemoryThroughput => &mut k.memory_throughput_pct,
            Field::DramThroughput => &mut k.dram_throughput_pct,
            Field::AchievedOccupancy => &mut k.achieved_occupancy_pct,
            Field::TheoreticalOccupancy => &mut k.theoretical_occupancy_pct,
            Field::TensorPipe => &mut k.tensor_pipe_pct,
            Field::L2Hit => &mut k.l2_hit_pct,
            Field::DramBytesRead => &mut k.dram_bytes_read,
            Field::DramBytesWrite => &mut k.dram_bytes_write,
            Field::Registers => return None,
        })
    }

    /// Sets launch geometry and stream where not set yet.
    pub(super) fn launch(
        &mut self,
        grid: Option<[u32; 3]>,
        block: Option<[u32; 3]>,
        stream: Option<u64>,
    ) {
        let k = &mut self.kernel;
        k.grid = k.grid.or(grid);
        k.block = k.block.or(block);
        k.stream = k.stream.or(stream);
    }

    pub(super) fn set_nvtx_range(&mut self, range: Option<String>) {
        if self.kernel.nvtx_range.is_none() {
            self.kernel.nvtx_range = range;
        }
    }

    /// The kernel, with grid and block taken from the `launch__*_dim_*` metrics when the
    /// `Grid Size`/`Block Size` columns were missing.
    pub(super) fn finish(mut self) -> NcuKernel {
        let dims = |m: &BTreeMap<String, f64>, prefix: &str| -> Option<[u32; 3]> {
            let get = |axis: &str| {
                m.get(&format!("{prefix}{axis}"))
                    .copied()
                    .and_then(whole_u32)
            };
            Some([get("x")?, get("y")?, get("z")?])
        };
        let k = &mut self.kernel;
        if k.grid.is_none() {
            k.grid = dims(&k.metrics, "launch__grid_dim_");
        }
        if k.block.is_none() {
            k.block = dims(&k.metrics, "launch__block_dim_");
        }
        if k.stream.is_none() {
            k.stream = k
                .metrics
                .get("launch__stream_id")
                .copied()
                .and_then(whole_u64);
        }
        self.kernel
    }
}
