//! The roofline of the run: each stage with FLOPs and bytes as a point at its arithmetic
//! intensity (FLOP/byte) and achieved TFLOP/s, under the device's compute roof and bandwidth
//! slope, on log-log axes.

use llmprof_bundle::{Bundle, StageRole};

use crate::draw::{render, rgb, Align, Font, AXIS, GRID, MUTED};
use crate::run::header;
use crate::WIDTH;

const LEFT: i32 = 70;
const TOP: i32 = 70;
const PLOT_H: i32 = 300;

/// `None` without a peak or without a stage that has both FLOPs and bytes.
pub fn roofline(bundle: &Bundle) -> Option<String> {
    let a = bundle.analysis.as_ref()?;
    let peak = a.peak.as_ref()?;
    let points: Vec<(String, f64, f64, StageRole)> = a
        .stages
        .iter()
        .filter_map(|s| {
            let (i, t) = (s.intensity?, s.tflops?);
            (i.is_finite() && t.is_finite() && i > 0.0 && t > 0.0)
                .then(|| (s.name.clone(), i, t, s.role))
        })
        .collect();
    if points.is_empty() || !(peak.tflops > 0.0 && peak.gbps > 0.0) {
        return None;
    }
    // Decades shown: intensity 0.1 .. 10^4 FLOP/B, throughput from 10^-3 TFLOP/s to the roof.
    let (x_lo, x_hi) = (-1i32, 4i32);
    let y_hi = (peak.tflops.log10().ceil() as i32).max(1);
    let lowest = points.iter().map(|p| p.2).fold(peak.tflops, f64::min);
    let y_lo = (lowest.log10().floor() as i32).min(y_hi - 2).max(-6);
    let x1 = WIDTH as i32 - 30;
    let y1 = TOP + PLOT_H;
    let px = |i: f64| {
        let t = (i.log10() - f64::from(x_lo)) / f64::from(x_hi - x_lo);
        LEFT + (t.clamp(0.0, 1.0) * f64::from(x1 - LEFT)).round() as i32
    };
    let py = |tf: f64| {
        let t = (tf.log10() - f64::from(y_lo)) / f64::from(y_hi - y_lo);
        y1 - (t.clamp(0.0, 1.0) * f64::from(PLOT_H)).round() as i32
    };
    let ridge = peak.tflops * 1e12 / (peak.gbps * 1e9);
    let subtitle = format!(
        "{} ({} TFLOP/s, {} GB/s, ridge {:.0} FLOP/byte); stages at analytic FLOPs and bytes over wall time",
        peak.name, peak.tflops, peak.gbps, ridge
    );
    render(WIDTH, (y1 + 46) as u32, |p| {
        header(p, "Roofline: stages against the device's peaks", &subtitle)?;
        for d in x_lo..=x_hi {
            let x = px(10f64.powi(d));
            p.line(&[(x, TOP), (x, y1)], GRID, 1)?;
            p.text(
                &format!("10^{d}"),
                x,
                y1 + 12,
                Font::new(10).color(MUTED).align(Align::Center),
            )?;
        }
        for d in y_lo..=y_hi {
            let y = py(10f64.powi(d));
            p.line(&[(LEFT, y), (x1, y)], GRID, 1)?;
            p.text(
                &format!("10^{d}"),
                LEFT - 6,
                y,
                Font::new(10).color(MUTED).align(Align::Right),
            )?;
        }
        p.line(&[(LEFT, y1), (x1, y1)], AXIS, 1)?;
        p.text(
            "FLOP/byte",
            x1,
            y1 + 28,
            Font::new(10).color(MUTED).align(Align::Right),
        )?;
        p.text(
            "TFLOP/s",
            LEFT - 6,
            TOP - 14,
            Font::new(10).color(MUTED).align(Align::Right),
        )?;
        // The roof: bandwidth slope up to the ridge, then flat at the compute peak.
        let roof = rgb("#444444");
        let x_start = 10f64.powi(x_lo);
        let slope_start = (x_start * peak.gbps * 1e9 / 1e12).max(10f64.powi(y_lo));
        p.line(
            &[
                (px(slope_start * 1e12 / (peak.gbps * 1e9)), py(slope_start)),
                (px(ridge), py(peak.tflops)),
                (x1, py(peak.tflops)),
            ],
            roof,
            2,
        )?;
        for (name, i, t, role) in &points {
            let color = match role {
                StageRole::Prefill => rgb("#4e79a7"),
                StageRole::Decode => rgb("#e15759"),
                StageRole::Vision => rgb("#59a14f"),
                StageRole::Other => rgb("#9c755f"),
            };
            let (x, y) = (px(*i), py(*t));
            p.dot(x, y, 5, color, 0.9)?;
            p.text(name, x + 8, y, Font::new(11).color(color))?;
        }
        Ok(())
    })
}
