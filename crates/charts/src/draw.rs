//! Drawing primitives on plotters' SVG backend in pixel coordinates, and the text, number and
//! axis helpers every chart shares.
//!
//! All text reaches the SVG through [`Painter::text`], which first makes it safe for XML
//! ([`clean`]); plotters' SVG backend then escapes `<`, `>`, `&`, `"` and `'` in text and
//! attribute values.

use llmprof_report::fmt;
use llmprof_report::palette::{self, Rgb};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The font family written into every `<text>` element. No font is loaded: plotters is built
/// without a font backend, so text is laid out by the SVG viewer.
const FONT: &str = "sans-serif";

/// Text colour of titles and labels.
pub const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
/// Secondary text (axis ticks, notes).
pub const MUTED: RGBColor = RGBColor(0x66, 0x66, 0x66);
/// Grid lines.
pub const GRID: RGBColor = RGBColor(0xE3, 0xE3, 0xE3);
/// Axis lines.
pub const AXIS: RGBColor = RGBColor(0x99, 0x99, 0x99);

/// Widths are estimated from DejaVu Sans' advances (one of the widest common sans-serif
/// fonts; Arial and Helvetica are narrower) plus this margin, so they rarely fall short.
const WIDTH_MARGIN: f64 = 1.04;

pub type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// Renders a `width` × `height` SVG document; `None` when drawing failed.
pub fn render(
    width: u32,
    height: u32,
    draw: impl FnOnce(&Painter<'_>) -> DrawResult,
) -> Option<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let painter = Painter { area: root };
        draw(&painter).ok()?;
        painter.area.present().ok()?;
    }
    Some(svg)
}

/// A drawing area addressed in pixels from the top-left corner.
pub struct Painter<'a> {
    area: DrawingArea<SVGBackend<'a>, Shift>,
}

/// Horizontal alignment of a text at its anchor point.
#[derive(Debug, Clone, Copy)]
pub enum Align {
    Left,
    Center,
    Right,
}

/// How a text is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Font {
    /// Font size in CSS pixels.
    pub px: u32,
    pub color: RGBColor,
    pub align: Align,
    pub bold: bool,
    /// Rotated 90° counter-clockwise (a vertical axis title).
    pub vertical: bool,
}

impl Font {
    pub fn new(px: u32) -> Font {
        Font {
            px,
            color: INK,
            align: Align::Left,
            bold: false,
            vertical: false,
        }
    }
    pub fn color(self, color: RGBColor) -> Font {
        Font { color, ..self }
    }
    pub fn align(self, align: Align) -> Font {
        Font { align, ..self }
    }
    pub fn bold(self) -> Font {
        Font { bold: true, ..self }
    }
    pub fn vertical(self) -> Font {
        Font {
            vertical: true,
            ..self
        }
    }
}

impl Painter<'_> {
    /// A filled rectangle; nothing when it has no area.
    pub fn rect(&self, x0: i32, y0: i32, x1: i32, y1: i32, color: RGBColor) -> DrawResult {
        self.rect_alpha(x0, y0, x1, y1, color, 1.0)
    }

    pub fn rect_alpha(
        &self,
        x0: i32,
        y0: i32,
        x1: i32,
        y1: i32,
        color: RGBColor,
        alpha: f64,
    ) -> DrawResult {
        if x1 <= x0 || y1 <= y0 {
            return Ok(());
        }
        self.area.draw(&Rectangle::new(
            [(x0, y0), (x1, y1)],
            color.mix(alpha).filled(),
        ))
    }

    /// A polyline of width `width`.
    pub fn line(&self, points: &[(i32, i32)], color: RGBColor, width: u32) -> DrawResult {
        self.area.draw(&PathElement::new(
            points.to_vec(),
            color.stroke_width(width),
        ))
    }

    /// A filled circle.
    pub fn dot(&self, x: i32, y: i32, r: u32, color: RGBColor, alpha: f64) -> DrawResult {
        self.area
            .draw(&Circle::new((x, y), r, color.mix(alpha).filled()))
    }

    /// One line of text, vertically centred on `y`. The text is [`clean`]ed here, so every text
    /// of every chart is.
    pub fn text(&self, text: &str, x: i32, y: i32, font: Font) -> DrawResult {
        let text = clean(text, usize::MAX);
        if text.is_empty() {
            return Ok(());
        }
        let h = match font.align {
            Align::Left => HPos::Left,
            Align::Center => HPos::Center,
            Align::Right => HPos::Right,
        };
        let style = if font.bold {
            FontStyle::Bold
        } else {
            FontStyle::Normal
        };
        let mut desc = FontDesc::new(FontFamily::Name(FONT), plotters_size(font.px), style);
        if font.vertical {
            desc = desc.transform(FontTransform::Rotate270);
        }
        let style = desc.color(&font.color).pos(Pos::new(h, VPos::Center));
        self.area.draw(&Text::new(text, (x, y), style))
    }

    /// The value label of a bar ending at `bar_end`, centred on `y`: right of the bar when it
    /// fits in the chart's width, else inside the bar's end in a colour that reads on `bar`.
    pub fn bar_value(
        &self,
        text: &str,
        bar_end: i32,
        y: i32,
        px: u32,
        bar: RGBColor,
    ) -> DrawResult {
        let (w, _) = self.area.dim_in_pixel();
        let width = text_width(&clean(text, usize::MAX), px);
        let font = Font::new(px);
        if bar_end + 6 + width <= w as i32 - 4 {
            self.text(text, bar_end + 6, y, font)
        } else {
            self.text(
                text,
                bar_end - 6,
                y,
                font.color(ink_on(bar)).align(Align::Right),
            )
        }
    }

    /// A legend laid out by [`legend_layout`].
    pub fn legend(&self, items: &[(RGBColor, String)], x: i32, y: i32, x_max: i32) -> DrawResult {
        let font = Font::new(11).color(INK);
        for ((color, _), (cx, cy, label)) in items.iter().zip(legend_layout(items, x, y, x_max)) {
            self.rect(cx, cy - 5, cx + 11, cy + 6, *color)?;
            self.text(&label, cx + 16, cy, font)?;
        }
        Ok(())
    }

    /// Vertical grid lines and tick labels of a value axis from `x0` (value 0) to `x1`
    /// (value `axis.max`), grid from `y0` to `y1`, labels below `y1`.
    pub fn x_axis(
        &self,
        axis: &Axis,
        x0: i32,
        x1: i32,
        y0: i32,
        y1: i32,
        unit: &str,
    ) -> DrawResult {
        for (i, value) in axis.ticks().enumerate() {
            let x = axis.px(value, x0, x1);
            if i > 0 {
                self.line(&[(x, y0), (x, y1)], GRID, 1)?;
            }
            let label = format!("{}{unit}", axis.label(value));
            self.text(
                &label,
                x,
                y1 + 12,
                Font::new(10).color(MUTED).align(Align::Center),
            )?;
        }
        self.line(&[(x0, y0), (x0, y1)], AXIS, 1)
    }
}

/// plotters' SVG backend writes `font-size` as the given size / 1.24 (its point-to-pixel
/// convention): the size to give so the document says exactly `px` (`15`, not
/// `16.000000000000004`) where some f64 gives it, as for every size the charts use.
fn plotters_size(px: u32) -> f64 {
    let want = f64::from(px);
    let guess = want * 1.24;
    let bits = guess.to_bits();
    (0..16u64)
        .flat_map(|d| [bits.wrapping_add(d), bits.wrapping_sub(d)])
        .map(f64::from_bits)
        .find(|s| s / 1.24 == want)
        .unwrap_or(guess)
}

/// Where a legend puts each item: a coloured square and a label (cut to 40 characters) per
/// item, on one line from (`x`, `y`) when it fits before `x_max`, else in aligned columns as
/// wide as the widest item. Returns (x, y, label) per item.
pub fn legend_layout(
    items: &[(RGBColor, String)],
    x: i32,
    y: i32,
    x_max: i32,
) -> Vec<(i32, i32, String)> {
    let labels: Vec<(String, i32)> = items
        .iter()
        .map(|(_, label)| {
            let label = clean(label, 40);
            let w = 16 + text_width(&label, 11) + 14;
            (label, w)
        })
        .collect();
    let total: i32 = labels.iter().map(|(_, w)| *w).sum();
    if x + total - 14 <= x_max {
        let mut cx = x;
        return labels
            .into_iter()
            .map(|(label, w)| {
                let at = (cx, y, label);
                cx += w;
                at
            })
            .collect();
    }
    let column = labels.iter().map(|(_, w)| *w).max().unwrap_or(1).max(1);
    let columns = ((x_max - x + 14) / column).max(1) as usize;
    labels
        .into_iter()
        .enumerate()
        .map(|(i, (label, _))| {
            let col = (i % columns) as i32;
            let row = (i / columns) as i32;
            (x + col * column, y + row * 18, label)
        })
        .collect()
}

/// The y of the last line of a legend laid out by [`legend_layout`] (`y` when empty).
pub fn legend_bottom(items: &[(RGBColor, String)], x: i32, y: i32, x_max: i32) -> i32 {
    legend_layout(items, x, y, x_max)
        .last()
        .map_or(y, |(_, cy, _)| *cy)
}

/// Makes untrusted text safe to put in an XML document and pleasant to draw: control
/// characters (newlines and tabs included) become spaces, characters XML 1.0 forbids or that
/// reorder text (bidirectional overrides) become U+FFFD, runs of whitespace collapse, and the
/// result is cut to `max_chars` characters with an ellipsis. Markup characters are left alone:
/// plotters escapes them.
pub fn clean(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(256));
    let mut chars = 0usize;
    let mut pending_space = false;
    let mut truncated = false;
    for c in text.chars() {
        let c = if c.is_control() {
            ' '
        } else if matches!(c, '\u{FFFE}' | '\u{FFFF}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        {
            '\u{FFFD}'
        } else {
            c
        };
        if c.is_whitespace() {
            pending_space = chars > 0;
            continue;
        }
        let needed = usize::from(pending_space) + 1;
        if chars + needed > max_chars {
            truncated = true;
            break;
        }
        if pending_space {
            out.push(' ');
            chars += 1;
            pending_space = false;
        }
        out.push(c);
        chars += 1;
    }
    if truncated && max_chars > 0 {
        // Make room for the ellipsis.
        if chars >= max_chars {
            out.pop();
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('…');
    }
    out
}

/// Estimated advance of `c` in em, after DejaVu Sans' metrics by class of glyph.
fn advance(c: char) -> f64 {
    match c {
        'i' | 'j' | 'l' | '\'' | '|' | '!' | '.' | ',' | ':' | ';' => 0.30,
        ' ' => 0.32,
        'f' | 't' | 'r' | 'I' | 'J' | '/' | '\\' | '(' | ')' | '[' | ']' | '{' | '}' | '-'
        | '"' => 0.42,
        'm' | 'w' | 'M' | 'W' | '%' | '@' | '…' | '–' | '—' => 1.0,
        '<' | '>' | '=' | '+' | '~' | '#' | '&' | '*' | '^' => 0.84,
        '_' => 0.5,
        'c' | 's' | 'z' | 'k' | 'v' | 'x' | 'y' | '?' => 0.6,
        '0'..='9' | '$' => 0.64,
        'a'..='z' => 0.64,
        'A'..='Z' => 0.77,
        '·' => 0.32,
        _ => 1.0,
    }
}

/// Estimated width in pixels of `text` at `px` pixels, on the generous side.
pub fn text_width(text: &str, px: u32) -> i32 {
    let em: f64 = text.chars().map(advance).sum();
    (em * f64::from(px) * WIDTH_MARGIN).ceil().min(1e6) as i32
}

/// `text` [`clean`]ed and cut to `max_chars` characters and to what fits in `width` pixels at
/// `px` pixels by [`text_width`], with an ellipsis where it was cut.
pub fn fit(text: &str, max_chars: usize, px: u32, width: i32) -> String {
    let text = clean(text, max_chars);
    if text_width(&text, px) <= width {
        return text;
    }
    let budget = f64::from(width) / (f64::from(px) * WIDTH_MARGIN) - advance('…');
    let mut used = 0.0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        used += advance(c);
        if used > budget {
            break;
        }
        end = i + c.len_utf8();
    }
    let kept = text.get(..end).unwrap_or("").trim_end();
    if kept.is_empty() {
        return String::new();
    }
    format!("{kept}…")
}

/// Nanoseconds as milliseconds.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A linear value axis from 0 to a round maximum with round steps.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    pub max: f64,
    pub step: f64,
    decimals: usize,
}

impl Axis {
    /// An axis from 0 covering `max` with about five steps of 1, 2, 2.5 or 5 × 10ⁿ. A
    /// non-finite or non-positive `max` gives 0..1.
    pub fn covering(max: f64) -> Axis {
        let max = if max.is_finite() && max > 0.0 {
            max
        } else {
            1.0
        };
        let raw = max / 5.0;
        // 10^exp <= raw < 10^(exp+1), by exact steps rather than libm's log10/powf, whose
        // last bits differ between platforms.
        let (exp, base) = decade(raw);
        let frac = raw / base;
        let mult = if frac <= 1.0 {
            1.0
        } else if frac <= 2.0 {
            2.0
        } else if frac <= 2.5 {
            2.5
        } else if frac <= 5.0 {
            5.0
        } else {
            10.0
        };
        let step = mult * base;
        if !(step.is_finite() && step > 0.0) {
            return Axis::fixed(1.0, 0.2).with_decimals(1);
        }
        let steps = (max / step - 1e-9).ceil().max(1.0);
        let decimals = (-exp).max(0) as usize + usize::from(mult == 2.5 && exp <= 0);
        Axis {
            max: steps * step,
            step,
            decimals: decimals.min(9),
        }
    }

    /// An axis with a fixed maximum and step.
    pub fn fixed(max: f64, step: f64) -> Axis {
        Axis {
            max,
            step,
            decimals: 0,
        }
    }

    fn with_decimals(self, decimals: usize) -> Axis {
        Axis { decimals, ..self }
    }

    pub fn ticks(&self) -> impl Iterator<Item = f64> + '_ {
        let n = (self.max / self.step).round().clamp(0.0, 50.0) as u32;
        (0..=n).map(move |i| f64::from(i) * self.step)
    }

    pub fn label(&self, value: f64) -> String {
        let text = format!("{value:.*}", self.decimals);
        if value >= 1000.0 {
            fmt::group_thousands(&text)
        } else {
            text
        }
    }

    /// The pixel of `value` on an axis drawn from `p0` (0) to `p1` (max); values outside
    /// 0..max and non-finite values are clamped.
    pub fn px(&self, value: f64, p0: i32, p1: i32) -> i32 {
        let t = if value.is_finite() && self.max > 0.0 {
            (value / self.max).clamp(0.0, 1.0)
        } else {
            0.0
        };
        p0 + (t * f64::from(p1 - p0)).round() as i32
    }
}

/// The power of ten at or below `x` (> 0) as (exponent, value), within f64's range.
fn decade(x: f64) -> (i32, f64) {
    let mut exp = 0i32;
    let mut pow = 1.0f64; // 10^|exp|, exact up to 10^22
    if x >= 1.0 {
        while x >= pow * 10.0 && exp < 308 {
            pow *= 10.0;
            exp += 1;
        }
        (exp, pow)
    } else {
        while x < 1.0 / pow && exp > -320 {
            pow *= 10.0;
            exp -= 1;
        }
        (exp, 1.0 / pow)
    }
}

/// Black or white, whichever reads better on `bg`.
pub fn ink_on(bg: RGBColor) -> RGBColor {
    let RGBColor(r, g, b) = bg;
    let luma = 0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b);
    if luma > 150.0 {
        INK
    } else {
        WHITE
    }
}

/// A palette colour (`#rrggbb`, parsed by the report crate's one parser) for plotters.
pub fn rgb(hex: &str) -> RGBColor {
    let Rgb(r, g, b) = palette::rgb(hex);
    RGBColor(r, g, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_replaces_controls_collapses_space_and_truncates() {
        assert_eq!(clean("  a\n\tb\u{0}c  ", 100), "a b c");
        assert_eq!(clean("abcdef", 4), "abc…");
        assert_eq!(clean("abc", 3), "abc");
        assert_eq!(clean("ab cdef", 4), "ab…");
        assert_eq!(clean("\u{202E}x\u{FFFF}", 10), "\u{FFFD}x\u{FFFD}");
        assert_eq!(clean("", 10), "");
        assert_eq!(clean("abc", 0), "");
        // Markup is kept for plotters to escape.
        assert_eq!(clean("<a&'\">", 10), "<a&'\">");
    }

    #[test]
    fn fit_cuts_to_the_width() {
        let long = "x".repeat(100);
        let fitted = fit(&long, 40, 12, 100);
        assert!(text_width(&fitted, 12) <= 100, "{fitted}");
        assert!(fitted.ends_with('…'));
        assert_eq!(fit("decode", 40, 12, 100), "decode");
        assert_eq!(fit("decode", 40, 12, -5), "");
    }

    #[test]
    fn axis_steps_are_round() {
        let a = Axis::covering(1213.4);
        assert_eq!((a.max, a.step), (1250.0, 250.0));
        assert_eq!(a.label(1000.0), "1,000");
        let a = Axis::covering(47.5);
        assert_eq!((a.max, a.step), (50.0, 10.0));
        let a = Axis::covering(0.23);
        assert_eq!((a.max, a.step), (0.25, 0.05));
        assert_eq!(a.label(0.05), "0.05");
        let a = Axis::covering(12.0);
        assert_eq!(a.step, 2.5);
        assert_eq!(a.label(2.5), "2.5");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let a = Axis::covering(bad);
            assert_eq!(a.max, 1.0);
        }
        assert_eq!(Axis::covering(5e-324).max, 1.0);
        let a = Axis::covering(1e300);
        assert!(a.ticks().count() <= 51);
        assert_eq!(a.px(f64::NAN, 0, 100), 0);
        assert_eq!(a.px(2e300, 0, 100), 100);
    }

    #[test]
    fn font_sizes_come_out_whole() {
        // Sizes the charts use (13, 15, 26, 27 and 30 have no exact f64 for plotters).
        for px in [9, 10, 11, 12, 14, 16] {
            assert_eq!(format!("{}", plotters_size(px) / 1.24), px.to_string());
        }
    }

    #[test]
    fn rgb_parses_hex() {
        assert_eq!(rgb("#4e79a7"), RGBColor(0x4e, 0x79, 0xa7));
        assert_eq!(rgb("nope"), RGBColor(0x88, 0x88, 0x88));
        assert_eq!(rgb("#é12345"), RGBColor(0x88, 0x88, 0x88));
    }
}
