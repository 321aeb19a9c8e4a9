//! The visible time window and how input moves it.
//!
//! The window is `[t0, t1)` in ns from the timeline's start, mapped onto the plot area's
//! width. Zoom keeps the time under the pointer fixed; pan moves by pixels; both clamp to the
//! run (with a little margin) and to a smallest window of 100 ns.

/// Smallest window, ns.
pub const MIN_SPAN: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    pub t0: f64,
    pub t1: f64,
    /// Plot-area width in CSS pixels.
    pub width: f64,
    /// The run's length, ns.
    pub end: f64,
}

impl Viewport {
    /// The whole run on `width` pixels.
    pub fn new(end_ns: u64, width: f64) -> Viewport {
        let end = (end_ns as f64).max(MIN_SPAN);
        Viewport {
            t0: 0.0,
            t1: end,
            width: width.max(1.0),
            end,
        }
    }

    pub fn span(&self) -> f64 {
        self.t1 - self.t0
    }

    pub fn ns_per_px(&self) -> f64 {
        self.span() / self.width
    }

    /// Plot-area x of time `t`.
    pub fn x_of(&self, t: f64) -> f64 {
        (t - self.t0) / self.ns_per_px()
    }

    /// Time at plot-area x.
    pub fn t_of(&self, x: f64) -> f64 {
        self.t0 + x * self.ns_per_px()
    }

    /// Shows `[t0, t1)`, clamped.
    pub fn set(&mut self, t0: f64, t1: f64) {
        let (a, b) = if t0 <= t1 { (t0, t1) } else { (t1, t0) };
        if !(a.is_finite() && b.is_finite()) {
            return;
        }
        let margin = self.end * 0.05;
        let max_span = self.end + 2.0 * margin;
        let span = (b - a).clamp(MIN_SPAN, max_span);
        let mid = (a + b) / 2.0;
        // At the widest window the two bounds meet; rounding can put `hi` a hair below `lo`,
        // and `f64::clamp` panics on that, so clamp by hand.
        let hi = (self.end + margin - span).max(-margin);
        let lo = (mid - span / 2.0).max(-margin).min(hi);
        self.t0 = lo;
        self.t1 = lo + span;
    }

    /// Zooms by `factor` (< 1 zooms in) keeping the time at plot-area `x` in place.
    pub fn zoom_at(&mut self, x: f64, factor: f64) {
        if !(factor.is_finite() && factor > 0.0) {
            return;
        }
        let x = x.clamp(0.0, self.width);
        let anchor = self.t_of(x);
        let frac = x / self.width;
        let span = (self.span() * factor).max(MIN_SPAN);
        let t0 = anchor - frac * span;
        self.set(t0, t0 + span);
    }

    /// Moves the window right by `dx` pixels' worth of time (left for negative `dx`).
    pub fn pan_px(&mut self, dx: f64) {
        let dt = dx * self.ns_per_px();
        let (t0, t1) = (self.t0 + dt, self.t1 + dt);
        let margin = self.end * 0.05;
        let shift = if t0 < -margin {
            -margin - t0
        } else if t1 > self.end + margin {
            self.end + margin - t1
        } else {
            0.0
        };
        self.t0 = t0 + shift;
        self.t1 = t1 + shift;
    }

    /// Changes the plot width, keeping the time window.
    pub fn resize(&mut self, width: f64) {
        self.width = width.max(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x_and_t_are_inverse() {
        let v = Viewport::new(1_000_000, 1000.0);
        assert_eq!(v.x_of(500_000.0), 500.0);
        assert_eq!(v.t_of(250.0), 250_000.0);
    }

    #[test]
    fn zoom_keeps_the_pointer_time_fixed() {
        let mut v = Viewport::new(1_000_000, 1000.0);
        let before = v.t_of(300.0);
        v.zoom_at(300.0, 0.5);
        assert!((v.span() - 500_000.0).abs() < 1e-6);
        assert!((v.t_of(300.0) - before).abs() < 1e-6);
    }

    #[test]
    fn zoom_stops_at_the_smallest_window_and_the_whole_run() {
        let mut v = Viewport::new(1_000_000, 1000.0);
        for _ in 0..100 {
            v.zoom_at(500.0, 0.5);
        }
        assert_eq!(v.span(), MIN_SPAN);
        for _ in 0..100 {
            v.zoom_at(500.0, 2.0);
        }
        assert!((v.span() - 1_100_000.0).abs() < 1e-6, "{}", v.span());
        assert!((v.t0 + 50_000.0).abs() < 1e-6);
    }

    #[test]
    fn zooming_all_the_way_out_never_panics_whatever_the_run_length() {
        // 1_000_000_002 ns made the clamp bounds cross by one ulp.
        for end in [
            1_000_000_002u64,
            1_000_000_000,
            3,
            61_700_000_017,
            99_999_999_999,
        ] {
            let mut v = Viewport::new(end, 1268.0);
            for _ in 0..200 {
                v.zoom_at(300.0, 1.4);
            }
            v.set(-1e12, 1e12);
            assert!(v.t0 <= v.t1 && v.t0.is_finite(), "{end}: {v:?}");
        }
    }

    #[test]
    fn zoom_over_the_label_column_anchors_at_the_plot_edge() {
        let mut v = Viewport::new(1_000_000, 1000.0);
        v.set(400_000.0, 600_000.0);
        v.zoom_at(-120.0, 0.5);
        assert_eq!(v.t0, 400_000.0);
    }

    #[test]
    fn pan_moves_by_pixels_and_stops_at_the_margin() {
        let mut v = Viewport::new(1_000_000, 1000.0);
        v.set(100_000.0, 200_000.0);
        v.pan_px(100.0);
        assert_eq!((v.t0, v.t1), (110_000.0, 210_000.0));
        v.pan_px(1e9);
        assert_eq!(v.t1, 1_050_000.0);
        v.pan_px(-1e9);
        assert_eq!(v.t0, -50_000.0);
    }

    #[test]
    fn set_orders_and_ignores_nonsense() {
        let mut v = Viewport::new(1_000_000, 1000.0);
        v.set(300_000.0, 200_000.0);
        assert_eq!((v.t0, v.t1), (200_000.0, 300_000.0));
        v.set(f64::NAN, 5.0);
        assert_eq!((v.t0, v.t1), (200_000.0, 300_000.0));
        v.zoom_at(10.0, f64::INFINITY);
        assert_eq!((v.t0, v.t1), (200_000.0, 300_000.0));
    }
}
