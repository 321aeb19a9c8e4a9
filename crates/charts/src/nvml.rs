//! GPU power, SM clock, utilization and device memory used over time from the NVML samples of
//! a capture, with the capture's passes as labelled bands.

use llmprof_bundle::{Bundle, NvmlSeries};
use plotters::style::RGBColor;

use crate::draw::{render, rgb, Align, Axis, DrawResult, Font, Painter, AXIS, GRID, MUTED};
use crate::run::header;
use crate::WIDTH;

const PANEL: i32 = 92;
const GAP: i32 = 26;
const LEFT: i32 = 70;
const FIRST: i32 = 64;
/// Most points drawn per line (samples are averaged into buckets beyond that).
const MAX_POINTS: usize = 600;

/// Four panels sharing a time axis: power (W), SM clock (MHz), GPU utilization (%), device
/// memory used (GiB, the whole device as NVML reports it); `None` without samples.
pub fn nvml_timeline(bundle: &Bundle) -> Option<String> {
    let s = bundle.nvml.as_ref()?;
    let time = TimeAxis::of(s)?;
    let panels = panels(s);
    let bottom = FIRST + PANELS as i32 * PANEL + (PANELS as i32 - 1) * GAP;
    let height = (bottom + 40) as u32;
    let subtitle = subtitle(s, time.span);
    render(WIDTH, height, |p| {
        header(
            p,
            "GPU power, SM clock, utilization and memory used (NVML)",
            &subtitle,
        )?;
        pass_bands(p, s, &time, bottom)?;
        for (k, panel) in panels.iter().enumerate() {
            panel.draw(p, FIRST + k as i32 * (PANEL + GAP), &time)?;
        }
        time_labels(p, &time, bottom)
    })
}

/// The shared time axis: seconds since the first sample, mapped onto the panels' width.
struct TimeAxis {
    t0: i64,
    /// Seconds from the first sample to the last.
    span: f64,
    /// Right end of the plot, px.
    x1: i32,
}

impl TimeAxis {
    /// `None` with fewer than two samples or no time between the first and the last.
    fn of(s: &NvmlSeries) -> Option<Self> {
        if s.t_ns.len() < 2 {
            return None;
        }
        let t0 = *s.t_ns.first()?;
        let t1 = *s.t_ns.last()?;
        if t1 <= t0 {
            return None;
        }
        Some(TimeAxis {
            t0,
            span: (t1 - t0) as f64 / 1e9,
            x1: WIDTH as i32 - 20,
        })
    }

    /// Seconds since the first sample.
    fn secs(&self, t: i64) -> f64 {
        (t - self.t0) as f64 / 1e9
    }

    /// The x pixel of `t` seconds, clamped to the plot.
    fn x_of(&self, t: f64) -> i32 {
        LEFT + ((t / self.span).clamp(0.0, 1.0) * f64::from(self.x1 - LEFT)).round() as i32
    }
}

/// One panel's series.
struct Panel {
    label: &'static str,
    /// The samples' times and values (power leaves its failed reads out).
    t_ns: Vec<i64>,
    values: Vec<f64>,
    color: RGBColor,
    /// The axis maximum when fixed (utilization's 100%); else it covers the values.
    fixed_max: Option<f64>,
}

const PANELS: usize = 4;

/// Power (W), SM clock (MHz), GPU utilization (%) and memory used (GiB), top to bottom.
fn panels(s: &NvmlSeries) -> [Panel; PANELS] {
    [
        Panel {
            label: "power (W)",
            t_ns: (0..s.t_ns.len())
                .filter(|&i| s.has_power(i))
                .map(|i| s.t_ns[i])
                .collect(),
            values: (0..s.t_ns.len())
                .filter(|&i| s.has_power(i))
                .map(|i| f64::from(s.power_mw[i]) / 1000.0)
                .collect(),
            color: rgb("#e15759"),
            fixed_max: None,
        },
        Panel {
            label: "SM clock (MHz)",
            t_ns: s.t_ns.clone(),
            values: s.sm_clock_mhz.iter().map(|&v| f64::from(v)).collect(),
            color: rgb("#4e79a7"),
            fixed_max: None,
        },
        Panel {
            label: "GPU utilization (%)",
            t_ns: s.t_ns.clone(),
            values: s.gpu_util_pct.iter().map(|&v| f64::from(v)).collect(),
            color: rgb("#59a14f"),
            fixed_max: Some(100.0),
        },
        Panel {
            label: "memory used (GiB)",
            t_ns: s.t_ns.clone(),
            values: (s.mem_used_bytes.iter())
                .map(|&v| v as f64 / (1u64 << 30) as f64)
                .collect(),
            color: rgb("#b07aa1"),
            fixed_max: None,
        },
    ]
}

impl Panel {
    /// Draws the panel whose top is at `top`: grid, axis labels, title and the line, its
    /// samples averaged into at most [`MAX_POINTS`] buckets.
    fn draw(&self, p: &Painter<'_>, top: i32, time: &TimeAxis) -> DrawResult {
        let y_end = top + PANEL;
        let max = self
            .fixed_max
            .unwrap_or_else(|| self.values.iter().cloned().fold(0.0, f64::max));
        let axis = match self.fixed_max {
            Some(m) => Axis::fixed(m, m / 4.0),
            None => Axis::covering(max),
        };
        for v in axis.ticks() {
            let y = y_end - axis.px(v, 0, PANEL);
            p.line(&[(LEFT, y), (time.x1, y)], GRID, 1)?;
            p.text(
                &axis.label(v),
                LEFT - 6,
                y,
                Font::new(10).color(MUTED).align(Align::Right),
            )?;
        }
        p.line(&[(LEFT, y_end), (time.x1, y_end)], AXIS, 1)?;
        p.text(
            self.label,
            LEFT + 4,
            top + 8,
            Font::new(11).color(self.color).bold(),
        )?;
        let step = self.values.len().div_ceil(MAX_POINTS).max(1);
        let points: Vec<(i32, i32)> = self
            .values
            .chunks(step)
            .zip(self.t_ns.chunks(step))
            .map(|(vs, ts)| {
                let v = vs.iter().sum::<f64>() / vs.len() as f64;
                let t = ts.first().map_or(0.0, |&t| time.secs(t));
                (time.x_of(t), y_end - axis.px(v, 0, PANEL))
            })
            .collect();
        p.line(&points, self.color, 2)
    }
}

/// Samples, interval and span, and how many samples had a throttle reason.
fn subtitle(s: &NvmlSeries, span: f64) -> String {
    let throttled = s
        .throttle_reasons
        .iter()
        .filter(|&&r| r != 0 && r != 1)
        .count();
    format!(
        "{} NVML samples every {} ms over {span:.1} s; shaded: capture passes{}",
        s.t_ns.len(),
        s.interval_ms,
        if throttled > 0 {
            format!("; {throttled} samples with a throttle reason")
        } else {
            String::new()
        }
    )
}

/// The capture passes as alternating bands across all panels, each labelled with its name.
fn pass_bands(p: &Painter<'_>, s: &NvmlSeries, time: &TimeAxis, bottom: i32) -> DrawResult {
    for (i, w) in windows(s).iter().enumerate() {
        let (a, b) = (time.x_of(time.secs(w.1)), time.x_of(time.secs(w.2)));
        let shade = if i % 2 == 0 {
            rgb("#f2f2f2")
        } else {
            rgb("#e8eef5")
        };
        p.rect(a, FIRST, b.max(a + 1), bottom, shade)?;
        p.text(&w.0, a + 3, FIRST - 8, Font::new(10).color(MUTED))?;
    }
    Ok(())
}

/// Seconds under the bottom panel at the quarters of the span.
fn time_labels(p: &Painter<'_>, time: &TimeAxis, bottom: i32) -> DrawResult {
    for i in 0..=4 {
        let t = time.span * f64::from(i) / 4.0;
        p.text(
            &format!("{t:.1} s"),
            time.x_of(t),
            bottom + 12,
            Font::new(10).color(MUTED).align(Align::Center),
        )?;
    }
    Ok(())
}

fn windows(s: &NvmlSeries) -> Vec<(String, i64, i64)> {
    s.windows
        .iter()
        .filter(|w| w.end_ns > w.start_ns)
        .map(|w| (w.name.clone(), w.start_ns, w.end_ns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed power read is a gap in the power line, not a dip to 0 W; the other panels keep
    /// the sample.
    #[test]
    fn power_gaps_are_left_out_of_the_line() {
        let s = NvmlSeries {
            t_ns: vec![0, 20, 40, 60],
            power_mw: vec![200_000, 0, 210_000, 220_000],
            power_gaps: vec![1],
            sm_clock_mhz: vec![1980; 4],
            gpu_util_pct: vec![50; 4],
            ..NvmlSeries::default()
        };
        let [power, clock, _, _] = panels(&s);
        assert_eq!(power.t_ns, [0, 40, 60]);
        assert_eq!(power.values, [200.0, 210.0, 220.0]);
        assert_eq!(clock.t_ns.len(), 4);
    }
}
