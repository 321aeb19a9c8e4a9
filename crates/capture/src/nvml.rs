//! NVML sampling on its own thread: power, clocks, utilization, memory, temperature, throttle
//! reasons and the total-energy counter every few milliseconds, on the host's wall clock (UTC ns
//! since the epoch, `SystemTime`), the clock the workload driver stamps its stage windows with
//! (`time.time_ns()`), so samples line up with stages for energy per stage.
//!
//! Power is NVML's instant reading (field `NVML_FI_DEV_POWER_INSTANT`) where the driver has it:
//! `nvmlDeviceGetPowerUsage` is a 1 s average on Ampere and newer, too slow for a 20 ms prefill.
//! The source is chosen once, when sampling starts, and the series records it; a read that
//! fails later is a gap (`power_gaps`), never a 0 W sample and never a reading of the other
//! source. A failed energy-counter read is a gap too (`energy_gaps`). The sampler keeps to its
//! ticks (the reads' own time included); when it stops, the real sampling period and NVML's
//! refresh periods are read from the series (`resolution`).
//!
//! On a machine without a GPU `Nvml::init()` fails (the library cannot be loaded): that is the
//! CPU-only path, reported as "NVML unavailable", never a crash.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// A GPU as NVML names it, for the checks of `--nproc`'s devices.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub index: u32,
    /// Its name, or why NVML could not read it.
    pub name: Result<String, String>,
    pub mig_enabled: bool,
}

/// Every GPU NVML sees; empty when NVML is unavailable.
pub fn gpus() -> Vec<Gpu> {
    let Ok(nvml) = Nvml::init() else {
        return Vec::new();
    };
    let n = nvml.device_count().unwrap_or(0);
    (0..n)
        .map(|index| match nvml.device_by_index(index) {
            Ok(d) => Gpu {
                index,
                name: d.name().map_err(|e| e.to_string()),
                mig_enabled: d.mig_mode().is_ok_and(|m| m.current == 1),
            },
            Err(e) => Gpu {
                index,
                name: Err(e.to_string()),
                mig_enabled: false,
            },
        })
        .collect()
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
            if let Ok(dev) = nvml.device_by_index(index) {
                sample_until(&dev, &mut s, interval, &flag);
            }
            crate::resolution::describe(&mut s);
            s
        });
        Ok(Sampler { stop, handle })
    }

    pub fn stop(self) -> NvmlSeries {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Samples `dev` into `s` every `interval` (from one tick to the next, the reads' time
/// included) until `stop` is set.
fn sample_until(dev: &Device, s: &mut NvmlSeries, interval: Duration, stop: &AtomicBool) {
    let source = PowerSource::choose(dev);
    s.power_source = source.map(|p| p.name().to_string());
    let counter = dev.total_energy_consumption().is_ok();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        push_sample(
            s,
            now_ns(),
            source.and_then(|p| p.read(dev)),
            counter.then(|| dev.total_energy_consumption().ok()),
        );
        push_others(s, dev);
        next += interval;
        match next.checked_duration_since(Instant::now()) {
            Some(wait) => std::thread::sleep(wait),
            // The reads took longer than the interval: start again from now.
            None => next = Instant::now(),
        }
    }
}

/// Which power reading a series holds: chosen once, at the start, and kept. A read that fails
/// later is a gap, never the other source, so one series never mixes instant and averaged
/// power.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PowerSource {
    /// `NVML_FI_DEV_POWER_INSTANT`.
    Instant,
    /// `nvmlDeviceGetPowerUsage`, a 1 s average on Ampere and newer.
    Average,
}

/// What a power source is read from: the device, or a stand-in in tests.
trait PowerReader {
    fn instant_mw(&self) -> Option<u32>;
    fn average_mw(&self) -> Option<u32>;
}

impl PowerReader for Device<'_> {
    fn instant_mw(&self) -> Option<u32> {
        instant_power_mw(self)
    }

    fn average_mw(&self) -> Option<u32> {
        self.power_usage().ok().filter(|&mw| mw > 0)
    }
}

impl PowerSource {
    /// The instant reading where the driver has it, else the average; `None` when neither
    /// reads.
    fn choose(dev: &impl PowerReader) -> Option<PowerSource> {
        if dev.instant_mw().is_some() {
            Some(PowerSource::Instant)
        } else {
            dev.average_mw().map(|_| PowerSource::Average)
        }
    }

    fn read(self, dev: &impl PowerReader) -> Option<u32> {
        match self {
            PowerSource::Instant => dev.instant_mw(),
            PowerSource::Average => dev.average_mw(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            PowerSource::Instant => "instant",
            PowerSource::Average => "average",
        }
    }
}

/// Appends one sample's time, power and energy counter: a failed read (`None`) is recorded
/// as a gap (its index in `power_gaps` / `energy_gaps`, 0 in the column only to keep the
/// columns aligned). `energy` is `None` when the GPU has no counter (the column stays empty).
fn push_sample(s: &mut NvmlSeries, t_ns: i64, power_mw: Option<u32>, energy: Option<Option<u64>>) {
    let i = u32::try_from(s.t_ns.len()).unwrap_or(u32::MAX);
    s.t_ns.push(t_ns);
    s.power_mw.push(power_mw.unwrap_or(0));
    if power_mw.is_none() {
        s.power_gaps.push(i);
    }
    if let Some(e) = energy {
        s.energy_mj.push(e.unwrap_or(0));
        if e.is_none() {
            s.energy_gaps.push(i);
        }
    }
}

/// Clocks, utilization, memory, temperature and throttle reasons of one sample (0 where a
/// read failed).
fn push_others(s: &mut NvmlSeries, dev: &Device) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A device whose instant reading fails from the third read on, while the average still
    /// reads: the mid-run failure defect 5 describes.
    struct Flaky {
        reads: Cell<u32>,
    }

    impl PowerReader for Flaky {
        fn instant_mw(&self) -> Option<u32> {
            self.reads.set(self.reads.get() + 1);
            (self.reads.get() <= 3).then_some(250_000)
        }

        fn average_mw(&self) -> Option<u32> {
            Some(180_000)
        }
    }

    #[test]
    fn a_failed_instant_read_is_a_gap_not_the_average_nor_0_w() {
        let dev = Flaky {
            reads: Cell::new(0),
        };
        let source = PowerSource::choose(&dev).unwrap();
        assert_eq!(source, PowerSource::Instant);
        let mut s = NvmlSeries::default();
        for k in 0..5 {
            push_sample(
                &mut s,
                k * 20_000_000,
                source.read(&dev),
                Some(Some(1_000 * k as u64)),
            );
        }
        assert_eq!(s.power_mw, [250_000, 250_000, 0, 0, 0]);
        assert_eq!(s.power_gaps, [2, 3, 4]);
        assert!(s.has_power(1) && !s.has_power(2));
        assert!(s.energy_gaps.is_empty() && s.has_energy(4));
    }

    #[test]
    fn the_average_is_used_only_when_there_is_no_instant_reading_at_the_start() {
        struct AverageOnly;
        impl PowerReader for AverageOnly {
            fn instant_mw(&self) -> Option<u32> {
                None
            }
            fn average_mw(&self) -> Option<u32> {
                Some(90_000)
            }
        }
        assert_eq!(
            PowerSource::choose(&AverageOnly),
            Some(PowerSource::Average)
        );
        let mut s = NvmlSeries::default();
        push_sample(&mut s, 0, None, Some(None));
        push_sample(&mut s, 1, Some(90_000), Some(Some(5)));
        assert_eq!(s.power_gaps, [0]);
        assert_eq!(s.energy_gaps, [0]);
        // No counter: its column stays empty.
        let mut s = NvmlSeries::default();
        push_sample(&mut s, 0, Some(90_000), None);
        assert!(s.energy_mj.is_empty() && s.has_power(0) && !s.has_energy(0));
    }
}
