//! The palettes: one colour per kernel category and one per run (series), as `#rrggbb`, and
//! the one parser of that notation. Charts, the site legend and the viewer all use these.

use llmprof_bundle::Category;

/// A colour as red, green, blue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

/// The grey of an unparsable colour.
pub const GREY: Rgb = Rgb(0x88, 0x88, 0x88);

/// Parses `#rrggbb`; [`GREY`] for anything else.
pub fn rgb(hex: &str) -> Rgb {
    let part = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|s| u8::from_str_radix(s, 16).ok())
    };
    match (
        hex.len() == 7 && hex.starts_with('#'),
        part(1),
        part(3),
        part(5),
    ) {
        (true, Some(r), Some(g), Some(b)) => Rgb(r, g, b),
        _ => GREY,
    }
}

/// The fixed colour of a category (Tableau 10 hues). Every chart also names the categories,
/// so colour is never the only cue.
pub fn category(c: Category) -> &'static str {
    match c {
        Category::Gemm => "#4e79a7",
        Category::Attention => "#f28e2b",
        Category::MoeRouting => "#b07aa1",
        Category::Elementwise => "#59a14f",
        Category::ReductionNorm => "#edc948",
        Category::MemcpyMemset => "#76b7b2",
        Category::Communication => "#e15759",
        Category::CudaGraph => "#ff9da7",
        Category::Other => "#9c9c9c",
    }
}

/// Colours of runs in a comparison, in order (Tableau 10); they repeat after ten runs.
pub const RUNS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// The colour of the `i`-th run of a comparison.
pub fn run(i: usize) -> &'static str {
    RUNS[i % RUNS.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hex_and_greys_the_rest() {
        assert_eq!(rgb("#4e79a7"), Rgb(0x4e, 0x79, 0xa7));
        assert_eq!(rgb("4e79a7"), GREY);
        assert_eq!(rgb("#4e79zz"), GREY);
        assert_eq!(rgb("#é9a7xx"), GREY);
    }

    #[test]
    fn category_colours_are_distinct() {
        let mut seen: Vec<&str> = Category::ALL.iter().map(|&c| category(c)).collect();
        assert!(seen.iter().all(|c| rgb(c) != GREY || *c == "#888888"));
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), Category::ALL.len());
        assert_eq!(run(10), run(0));
    }
}
