//! A run's `bundle.json` and `timeline.json` as the WASM viewer reads them (the input is the two
//! texts separated by a NUL byte): any bytes give a run the viewer draws, hit-tests and
//! measures, or a load error, never a panic. The drawing goes to a painter that only counts.
//! The run is also laid beside a copy of itself as another rank (`ranks::merge`), as the
//! timeline page lays out ranks side by side, and that merge is drawn and measured too. And
//! the timeline is cut into chunks as the site cuts a large one (chunk size and budget from the
//! input's length): the head must open, a window's chunks must load and give the range table
//! the whole run gives, and every chunk cut short or altered must be refused or read, never
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmprof_bundle::chunks::decode_chunk;
use llmprof_bundle::ChunkedTimeline;
use llmprof_viewer::hit::hit;
use llmprof_viewer::lanes::{Geometry, Layout};
use llmprof_viewer::model::Run;
use llmprof_viewer::range::range_stats;
use llmprof_viewer::ranks::{merge, RankRun};
use llmprof_viewer::scene::{self, Align, Overlay, Painter};
use llmprof_viewer::viewport::Viewport;

/// Counts what a frame would draw.
#[derive(Default)]
struct Count(usize);

impl Painter for Count {
    fn fill_rects(&mut self, _color: &str, _alpha: f64, rects: &[[f64; 4]]) {
        self.0 += rects.len();
    }
    fn stroke_rect(&mut self, _rect: [f64; 4], _color: &str, _width: f64) {
        self.0 += 1;
    }
    fn text(&mut self, _x: f64, _y: f64, _t: &str, _c: &str, _a: Align, _w: f64) {
        self.0 += 1;
    }
    fn polyline(&mut self, points: &[(f64, f64)], _color: &str, _width: f64) {
        self.0 += points.len();
    }
    fn clip(&mut self, _rect: [f64; 4]) {}
    fn unclip(&mut self) {}
}

fuzz_target!(|data: &[u8]| {
    let Some(cut) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let (Ok(bundle), Ok(timeline)) = (
        std::str::from_utf8(&data[..cut]),
        std::str::from_utf8(&data[cut + 1..]),
    ) else {
        return;
    };
    let Ok(run) = Run::from_json(bundle, timeline) else {
        return;
    };
    exercise(&run);
    chunked(bundle, &run, data.len());
    let twin = RankRun {
        rank: run.rank.unwrap_or(0).wrapping_add(1),
        run: run.clone(),
    };
    let own = RankRun {
        rank: run.rank.unwrap_or(0),
        run,
    };
    if let Ok(m) = merge(&[own, twin]) {
        exercise(&m.run);
    }
});

/// Frames at two widths, hit tests across them, range statistics.
fn exercise(run: &Run) {
    let end = run.timeline.end_ns;
    let layout = Layout::new(&run.lanes, Geometry::default());
    let mut count = Count::default();
    for width in [1.0, 1268.0] {
        let vp = Viewport::new(end, width);
        scene::draw(run, &layout, &vp, &Overlay::default(), width + 132.0, &mut count);
        for x in [0.0, width / 2.0, width] {
            for y in [0.0, 30.0, 60.0, 200.0] {
                let _ = hit(run, &layout, &vp, x, y, 3.0);
            }
        }
    }
    let _ = range_stats(run, 0, end);
    let _ = range_stats(run, end / 3, end / 2);
}

/// The run chunked, opened, a window loaded and checked against the whole run; its chunks
/// cut and altered.
fn chunked(bundle: &str, run: &Run, seed: usize) {
    let budget = (seed % 11) as u64 + 1;
    let (head, chunks) =
        ChunkedTimeline::split(run.timeline.clone(), seed % 5 + 1, seed % 64 + 1, budget)
            .expect("a loadable run's timeline splits");
    let head_json = serde_json::to_string(&head).expect("a head serializes");
    let mut part = Run::from_chunked_json(bundle, &head_json).expect("a loadable run's head opens");
    let end = run.timeline.end_ns as f64;
    // A window inside the run, and one at its end (past the last chunk's start).
    for (t0, t1) in [(end * 0.4, end * 0.45), (end * 0.98, end * 1.3 + 1.0)] {
        let c = part.chunked.as_mut().expect("chunked");
        let Some(want) = c.wanted(t0, t1) else {
            continue;
        };
        for i in c.missing(&want) {
            c.add(i, &chunks[i]).expect("the site's own chunk decodes");
        }
        let changed = part.load_chunks(want).expect("a loadable run's chunks load");
        assert!(changed || part.chunked.as_ref().is_some_and(|c| c.covers(t0, t1)));
        let (a, b) = (t0 as u64, t1 as u64);
        assert!(part.overview_for(t0, t1).is_none(), "a loaded window is covered");
        let (mine, whole) = (range_stats(&part, a, b), range_stats(run, a, b));
        assert_eq!((mine.ops, mine.busy_ns, mine.rows), (whole.ops, whole.busy_ns, whole.rows));
        exercise(&part);
    }
    exercise(&part);
    for bytes in chunks.iter().take(3) {
        for cut in [0, bytes.len() / 2, bytes.len().saturating_sub(1)] {
            let _ = decode_chunk(&bytes[..cut]);
        }
        let mut bent = bytes.clone();
        if let Some(b) = bent.get_mut(seed % bytes.len().max(1)) {
            *b = b.wrapping_add(1 + (seed % 255) as u8);
        }
        let _ = decode_chunk(&bent);
    }
}
