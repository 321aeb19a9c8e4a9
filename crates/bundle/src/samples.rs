//! `instance_kernels[]`: GPU kernel time per instance of each measured stage, by kernel
//! category and for the run's top kernels, so that a diff of two runs has one sample per
//! instance for a kernel or a category as it has for a stage's wall time.
//!
//! Written once, by ingest's converter, for every **measured stage**: a top-level stage
//! (`depth` 0) that is neither a warm-up ([`crate::is_warmup`]) nor a library range
//! ([`crate::Bundle::is_library_range`]). Each series holds one value per entry of the stage's
//! `instance_list`, in that order: the summed duration (ns) of the kernels (`kind: "kernel"`
//! rows; memcpys, memsets and graph spans excluded) that the instance's range projects, as
//! [`crate::Stage::kernel_ns`] counts them — 0 where the instance ran none.
//!
//! Size is bounded per instance: at most one series per [`crate::Category`] and one per top
//! kernel ([`TOP_KERNELS`] of the run's `kernels[]` rows of kind `kernel`, by total time), and
//! a series whose values are all 0 is left out. Summed over the instances, a category's series
//! is the stage's kernel time in that category (the `by_stage` totals of its kernels) and a
//! kernel's series is its `by_stage[].total_ns` for the stage.
//!
//! Bundles written before these fields existed have an empty `instance_kernels[]`; a diff
//! then has no kernel or category rows and says why.

use serde::{Deserialize, Serialize};

use crate::Category;

/// How many of the run's kernels (by total time) get a per-instance series.
pub const TOP_KERNELS: usize = 20;

/// The per-instance kernel time of one measured stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceKernels {
    /// Index into `stages[]`.
    pub stage: u32,
    /// Per category with kernel time in some instance, in [`Category::ALL`] order.
    #[serde(default)]
    pub categories: Vec<CategorySamples>,
    /// Per top kernel with time in some instance, in `kernels[]` order.
    #[serde(default)]
    pub kernels: Vec<KernelSamples>,
}

/// One category's kernel time per instance, ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategorySamples {
    pub category: Category,
    /// One value per instance of the stage, `instance_list` order.
    pub ns: Vec<u64>,
}

/// One kernel's time per instance, ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSamples {
    /// Index into `kernels[]`.
    pub kernel: u32,
    /// One value per instance of the stage, `instance_list` order.
    pub ns: Vec<u64>,
}
