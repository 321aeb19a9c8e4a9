//! NVML sampling on its own thread: power, clocks, utilization, memory, temperature, throttle
//! reasons and the total-energy counter every few milliseconds, on the host's wall clock (UTC ns
//! since the epoch, `SystemTime`), the clock the workload driver stamps its stage windows with
//! (`time.time_ns()`), so samples line up with stages for energy per stage.
//!
//! Power is NVML's instant reading (field `NVML_FI_DEV_POWER_INSTANT`) where the driver has it:
//! `nvmlDeviceGetPowerUsage` is a 1 s average on Ampere and newer, too slow for a 20 ms prefill.
//! The series records which one it read.
//!
//! On a machine without a GPU `Nvml::init()` fails (the library cannot be loaded): that is the
//! CPU-only path, reported as "NVML unavailable", never a crash.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use llmprof_bundle::{EnvSnapshot, NvmlSeries};
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_POWER_INSTANT;
use nvml_wrapper::{Device, Nvml};

/// UTC ns since the epoch.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Facts NVML reports about `index`, for the environment snapshot.
pub fn snapshot(index: u32) -> Result<EnvSnapshot, String> {
    let nvml = Nvml::init().map_err(|e| format!("NVML unavailable: {e}"))?;
    let dev = nvml
        .device_by_index(index)
        .map_err(|e| format!("GPU {index}: {e}"))?;
    let mig = dev.mig_mode().ok().map(|m| {
        if m.current == 1 {
            "enabled"
        } else {
            "disabled"
        }
        .to_string()
    });
    Ok(EnvSnapshot {
        gpu: dev.name().ok(),
        gpu_uuid: dev.uuid().ok(),
        driver: nvml.sys_driver_version().ok(),
        cuda: nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        power_limit_w: dev.enforced_power_limit().ok().map(|mw| mw as f64 / 1000.0),
        sm_clock_max_mhz: dev.max_clock_info(Clock::SM).ok(),
        mem_clock_max_mhz: dev.max_clock_info(Clock::Memory).ok(),
        mig_mode: mig,
        device_index: Some(index),
        ..EnvSnapshot::default()
    })
}

/// CPU words NVML is asked for: 64 × 16 = 1024 CPUs, Linux's `CPU_SETSIZE`.
const AFFINITY_WORDS: usize = 16;

/// The CPUs NVML names as local to GPU `index` (its ideal CPU affinity: the cores of the NUMA
/// node or socket the GPU hangs off), for pinning the workload.
pub fn cpu_affinity(index: u32) -> Result<Vec<usize>, String> {
    let nvml = Nvml::init().map_err(|e| format!("NVML unavailable: {e}"))?;
    let dev = nvml
        .device_by_index(index)
        .map_err(|e| format!("GPU {index}: {e}"))?;
    let words = dev
        .cpu_affinity(AFFINITY_WORDS)
        .map_err(|e| format!("NVML has no CPU affinity for GPU {index}: {e}"))?;
    #[allow(clippy::useless_conversion)] // c_ulong is u64 on 64-bit Linux, u32 elsewhere
    let words: Vec<u64> = words.into_iter().map(u64::from).collect();
    Ok(crate::cpu::cpus_from_mask(&words))
}

/// A running sampler; [`Sampler::stop`] returns the series.
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<NvmlSeries>,
}

impl Sampler {
    /// Starts sampling GPU `index` every `interval`; `Err` when NVML cannot be used.
    pub fn start(index: u32, interval: Duration) -> Result<Sampler, String> {
        let nvml = Nvml::init().map_err(|e| format!("NVML unavailable: {e}"))?;
        // Fail early, on this thread, if the device is not there.
        nvml.device_by_index(index)
            .map_err(|e| format!("GPU {index}: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut s = NvmlSeries {
                interval_ms: interval.as_millis() as u32,
                ..NvmlSeries::default()
            };
            let Ok(dev) = nvml.device_by_index(index) else {
                return s;
            };
            let instant = instant_power_mw(&dev).is_some();
            s.power_source = Some(if instant { "instant" } else { "average" }.into());
            let counter = dev.total_energy_consumption().is_ok();
            while !flag.load(Ordering::Relaxed) {
                s.t_ns.push(now_ns());
                let power = if instant {
                    instant_power_mw(&dev)
                } else {
                    None
                };
                s.power_mw
                    .push(power.unwrap_or_else(|| dev.power_usage().unwrap_or(0)));
                if counter {
                    // Keep the series aligned: a failed read repeats the last value.
                    let last = s.energy_mj.last().copied().unwrap_or(0);
                    s.energy_mj
                        .push(dev.total_energy_consumption().unwrap_or(last));
                }
                s.sm_clock_mhz.push(dev.clock_info(Clock::SM).unwrap_or(0));
                s.mem_clock_mhz
                    .push(dev.clock_info(Clock::Memory).unwrap_or(0));
                let util = dev.utilization_rates().ok();
                s.gpu_util_pct.push(util.as_ref().map_or(0, |u| u.gpu));
                s.mem_util_pct.push(util.as_ref().map_or(0, |u| u.memory));
                s.mem_used_bytes
                    .push(dev.memory_info().map(|m| m.used).unwrap_or(0));
                s.temp_c
                    .push(dev.temperature(TemperatureSensor::Gpu).unwrap_or(0));
                s.throttle_reasons.push(
                    dev.current_throttle_reasons()
                        .map(|r| r.bits())
                        .unwrap_or(0),
                );
                std::thread::sleep(interval);
            }
            s
        });
        Ok(Sampler { stop, handle })
    }

    pub fn stop(self) -> NvmlSeries {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// NVML's instant power reading in mW, when the driver has the field.
fn instant_power_mw(dev: &Device) -> Option<u32> {
    let values = dev
        .field_values_for(&[FieldId(NVML_FI_DEV_POWER_INSTANT)])
        .ok()?;
    let sample = values.into_iter().next()?.ok()?;
    match sample.value.ok()? {
        SampleValue::U32(v) => Some(v),
        SampleValue::U64(v) => u32::try_from(v).ok(),
        SampleValue::I64(v) => u32::try_from(v).ok(),
        SampleValue::F64(v) if v.is_finite() && v >= 0.0 && v < f64::from(u32::MAX) => {
            Some(v as u32)
        }
        SampleValue::F64(_) => None,
    }
    .filter(|&mw| mw > 0)
}
