//! GPU power, SM clock and utilization over time from the NVML samples of a capture, with the
//! capture's passes as labelled bands.

use llmprof_bundle::{Bundle, NvmlSeries};
use plotters::style::RGBColor;

use crate::draw::{render, rgb, Align, Axis, Font, AXIS, GRID, MUTED};
use crate::run::header;
use crate::WIDTH;

const PANEL: i32 = 92;
const GAP: i32 = 26;
const LEFT: i32 = 70;
const FIRST: i32 = 64;
/// Most points drawn per line (samples are averaged into buckets beyond that).
const MAX_POINTS: usize = 600;

/// Three panels sharing a time axis: power (W), SM clock (MHz), GPU utilization (%); `None`
/// without samples.
pub fn nvml_timeline(bundle: &Bundle) -> Option<String> {
    let s = bundle.nvml.as_ref()?;
    let n = s.t_ns.len();
    if n < 2 {
        return None;
    }
    let t0 = *s.t_ns.first()?;
    let t1 = *s.t_ns.last()?;
    if t1 <= t0 {
        return None;
    }
    let secs = |t: i64| (t - t0) as f64 / 1e9;
    let span = secs(t1);
    let x1 = WIDTH as i32 - 20;
    let x_of = |t: f64| LEFT + ((t / span).clamp(0.0, 1.0) * f64::from(x1 - LEFT)).round() as i32;
    let series: [(&str, Vec<f64>, RGBColor, Option<f64>); 3] = [
        (
            "power (W)",
            s.power_mw.iter().map(|&v| f64::from(v) / 1000.0).collect(),
            rgb("#e15759"),
            None,
        ),
        (
            "SM clock (MHz)",
            s.sm_clock_mhz.iter().map(|&v| f64::from(v)).collect(),
            rgb("#4e79a7"),
            None,
        ),
        (
            "GPU utilization (%)",
            s.gpu_util_pct.iter().map(|&v| f64::from(v)).collect(),
            rgb("#59a14f"),
            Some(100.0),
        ),
    ];
    let bottom = FIRST + 3 * PANEL + 2 * GAP;
    let height = (bottom + 40) as u32;
    let throttled = s
        .throttle_reasons
        .iter()
        .filter(|&&r| r != 0 && r != 1)
        .count();
    let subtitle = format!(
        "{n} NVML samples every {} ms over {span:.1} s; shaded: capture passes{}",
        s.interval_ms,
        if throttled > 0 {
            format!("; {throttled} samples with a throttle reason")
        } else {
            String::new()
        }
    );
    render(WIDTH, height, |p| {
        header(p, "GPU power, SM clock and utilization (NVML)", &subtitle)?;
        // Pass bands across all panels.
        for (i, w) in windows(s).iter().enumerate() {
            let (a, b) = (x_of(secs(w.1)), x_of(secs(w.2)));
            let shade = if i % 2 == 0 {
                rgb("#f2f2f2")
            } else {
                rgb("#e8eef5")
            };
            p.rect(a, FIRST, b.max(a + 1), bottom, shade)?;
            p.text(&w.0, a + 3, FIRST - 8, Font::new(10).color(MUTED))?;
        }
        for (k, (label, values, color, fixed_max)) in series.iter().enumerate() {
            let top = FIRST + k as i32 * (PANEL + GAP);
            let y_end = top + PANEL;
            let max = fixed_max.unwrap_or_else(|| values.iter().cloned().fold(0.0, f64::max));
            let axis = match fixed_max {
                Some(m) => Axis::fixed(*m, m / 4.0),
                None => Axis::covering(max),
            };
            for v in axis.ticks() {
                let y = y_end - axis.px(v, 0, PANEL);
                p.line(&[(LEFT, y), (x1, y)], GRID, 1)?;
                p.text(
                    &axis.label(v),
                    LEFT - 6,
                    y,
                    Font::new(10).color(MUTED).align(Align::Right),
                )?;
            }
            p.line(&[(LEFT, y_end), (x1, y_end)], AXIS, 1)?;
            p.text(label, LEFT + 4, top + 8, Font::new(11).color(*color).bold())?;
            let step = values.len().div_ceil(MAX_POINTS).max(1);
            let points: Vec<(i32, i32)> = values
                .chunks(step)
                .zip(s.t_ns.chunks(step))
                .map(|(vs, ts)| {
                    let v = vs.iter().sum::<f64>() / vs.len() as f64;
                    let t = ts.first().map_or(0.0, |&t| secs(t));
                    (x_of(t), y_end - axis.px(v, 0, PANEL))
                })
                .collect();
            p.line(&points, *color, 2)?;
        }
        for i in 0..=4 {
            let t = span * f64::from(i) / 4.0;
            p.text(
                &format!("{t:.1} s"),
                x_of(t),
                bottom + 12,
                Font::new(10).color(MUTED).align(Align::Center),
            )?;
        }
        Ok(())
    })
}

fn windows(s: &NvmlSeries) -> Vec<(String, i64, i64)> {
    s.windows
        .iter()
        .filter(|w| w.end_ns > w.start_ns)
        .map(|w| (w.name.clone(), w.start_ns, w.end_ns))
        .collect()
}
