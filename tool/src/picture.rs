//! Pictures of a cluster as SVG (`status --out`, `predict --out`): each master's memory as bars
//! (now, and after each plan) against its share and its `maxmemory`; and strips of the 16384
//! slots coloured by owner (now, and after each plan), with the slots a plan moves marked
//! under its strip (each pixel column's mark as tall as the share of its slots that move).
//! Drawn with `plotters`' SVG backend in the benchmark charts' palette.
//! Knows nothing of predictions or statuses: [`Picture`] is plain figures.

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use ringslot_engine::SLOT_COUNT;

/// The palette of every chart of the project (the benchmark program's too): Tableau 10,
/// bounded loads' violet, a spare, then three blues (light to dark).
pub const PALETTE: [RGBColor; 15] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(120, 60, 200),
    RGBColor(110, 70, 0),
    RGBColor(158, 202, 225),
    RGBColor(107, 174, 214),
    RGBColor(8, 48, 107),
];

/// Colour `i` of [`PALETTE`], round and round.
pub fn colour(i: usize) -> RGBColor {
    PALETTE.get(i % PALETTE.len()).copied().unwrap_or(BLACK)
}

/// One master's column: its address, a value for each series (bytes; `None`: not known),
/// its share (bytes; `None`: not drawn) and its `maxmemory` (bytes; 0: none).
#[derive(Debug, Clone)]
pub struct Column {
    pub address: String,
    pub values: Vec<Option<f64>>,
    pub share: Option<f64>,
    pub maxmemory: f64,
}

/// A strip of the slots: its label, and the owner (`ip:port`) of each of the 16384 slots.
#[derive(Debug, Clone)]
pub struct Strip {
    pub label: String,
    pub owners: Vec<Option<String>>,
}

/// What a picture shows.
#[derive(Debug, Clone)]
pub struct Picture {
    /// The title, and what the bars measure (`used_memory`).
    pub title: String,
    pub measure: String,
    /// The series of bars (`now`, `after redis-cli's plan`, ...), each a colour of its own.
    pub series: Vec<String>,
    /// The masters, each a column and a colour in the strips.
    pub columns: Vec<Column>,
    /// The strips, the first the slots as they are: under each later one, the slots whose
    /// owner differs from the first's are marked.
    pub strips: Vec<Strip>,
}

/// A value in MiB as the labels show it (one decimal).
pub fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / (1024.0 * 1024.0))
}

const WIDTH: u32 = 1000;
const BARS_TOP: i32 = 70;
const BARS_BOTTOM: i32 = 330;
const LEFT: i32 = 70;
const STRIP_HEIGHT: i32 = 22;
const STRIP_GAP: i32 = 28;

/// The colours of the series of bars: greys, light to dark (now, then each plan), so that
/// colour is the masters' alone.
fn series_colour(i: usize) -> RGBColor {
    const GREYS: [RGBColor; 4] = [
        RGBColor(190, 190, 190),
        RGBColor(120, 120, 120),
        RGBColor(50, 50, 50),
        RGBColor(0, 0, 0),
    ];
    GREYS.get(i).copied().unwrap_or(BLACK)
}

/// The colour of master `i` in the strips and under its column: the palette without its
/// grey (the bars') and its red (the limits').
pub fn master_colour(i: usize) -> RGBColor {
    const MASTERS: [usize; 13] = [0, 1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14];
    colour(MASTERS.get(i % MASTERS.len()).copied().unwrap_or(0))
}

impl Picture {
    /// The picture as an SVG document. Error: the drawing backend's.
    pub fn svg(&self) -> Result<String> {
        let strips_height = self.strips.len() as i32 * (STRIP_HEIGHT + STRIP_GAP);
        let height = (BARS_BOTTOM + 70 + strips_height + 40).max(420) as u32;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
            root.fill(&WHITE).map_err(draw_error)?;
            let title = ("sans-serif", 18).into_font().color(&BLACK);
            root.draw(&Text::new(self.title.clone(), (LEFT, 16), title))
                .map_err(draw_error)?;
            let key = ("sans-serif", 11).into_font().color(&BLACK);
            root.draw(&Text::new(
                "Bars: each master's memory (MiB). Even share: the memory when done over the \
                 masters that keep slots. Strips: each slot in its owner's colour (the square \
                 under each master); black: the slots a plan moves.",
                (LEFT, height as i32 - 22),
                key,
            ))
            .map_err(draw_error)?;
            self.draw_bars(&root)?;
            self.draw_strips(&root, BARS_BOTTOM + 70)?;
            root.present().map_err(draw_error)?;
        }
        Ok(out)
    }

    /// The bars' scale: bytes at the top of the panel (the largest bar or share, with room;
    /// a `maxmemory` over four times them is drawn at the top edge instead).
    fn top(&self) -> f64 {
        let most = self
            .columns
            .iter()
            .flat_map(|c| c.values.iter().flatten().copied().chain(c.share))
            .fold(0.0f64, f64::max);
        let limits = self
            .columns
            .iter()
            .map(|c| c.maxmemory)
            .filter(|&m| m > 0.0 && m <= most * 4.0)
            .fold(0.0f64, f64::max);
        (most.max(limits) * 1.15).max(1.0)
    }

    fn draw_bars<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<()> {
        let top = self.top();
        let y =
            |bytes: f64| BARS_BOTTOM - ((bytes / top) * f64::from(BARS_BOTTOM - BARS_TOP)) as i32;
        let small = ("sans-serif", 11).into_font().color(&BLACK);
        let axis = ("sans-serif", 12).into_font().color(&BLACK);
        root.draw(&Text::new(
            format!("{}, MiB", self.measure),
            (LEFT, BARS_TOP - 22),
            axis.clone(),
        ))
        .map_err(draw_error)?;
        // The legend of the series, top right.
        for (i, name) in self.series.iter().enumerate() {
            let x = WIDTH as i32 - 260;
            let yy = 12 + 16 * i as i32;
            root.draw(&Rectangle::new(
                [(x, yy), (x + 12, yy + 10)],
                series_colour(i).filled(),
            ))
            .map_err(draw_error)?;
            root.draw(&Text::new(name.clone(), (x + 18, yy), small.clone()))
                .map_err(draw_error)?;
        }
        root.draw(&PathElement::new(
            vec![(LEFT, BARS_BOTTOM), (WIDTH as i32 - 20, BARS_BOTTOM)],
            BLACK,
        ))
        .map_err(draw_error)?;
        let n = self.columns.len().max(1) as i32;
        let group = (WIDTH as i32 - LEFT - 20) / n;
        let series = self.series.len().max(1) as i32;
        // Room right of the bars for the share's and the limit's labels.
        let bar = ((group - 110) / series).clamp(4, 60);
        for (ci, c) in self.columns.iter().enumerate() {
            let x0 = LEFT + group * ci as i32 + 10;
            for (si, v) in c.values.iter().enumerate() {
                let Some(v) = v else { continue };
                let xa = x0 + bar * si as i32;
                root.draw(&Rectangle::new(
                    [(xa + 1, y(*v)), (xa + bar - 1, BARS_BOTTOM)],
                    series_colour(si).filled(),
                ))
                .map_err(draw_error)?;
                let centred = small.clone().pos(Pos::new(HPos::Center, VPos::Bottom));
                root.draw(&Text::new(mib(*v), (xa + bar / 2, y(*v) - 2), centred))
                    .map_err(draw_error)?;
            }
            let (xl, xr) = (x0 - 6, x0 + bar * series + 6);
            if let Some(share) = c.share {
                let ys = y(share);
                root.draw(&PathElement::new(
                    vec![(xl, ys), (xr, ys)],
                    BLACK.stroke_width(2),
                ))
                .map_err(draw_error)?;
                root.draw(&Text::new(
                    format!("even share {}", mib(share)),
                    (xr + 2, ys - 6),
                    small.clone(),
                ))
                .map_err(draw_error)?;
            }
            if c.maxmemory > 0.0 {
                // Red is the limit's alone (no master is drawn red). A limit far above the bars
                // is written at the top, without a line.
                let red = colour(3);
                let text = if c.maxmemory <= top {
                    let ym = y(c.maxmemory);
                    root.draw(&PathElement::new(
                        vec![(xl, ym), (xr, ym)],
                        red.stroke_width(2),
                    ))
                    .map_err(draw_error)?;
                    (format!("maxmemory {}", mib(c.maxmemory)), ym - 14)
                } else {
                    (
                        format!("maxmemory {} (off the chart)", mib(c.maxmemory)),
                        BARS_TOP - 8,
                    )
                };
                root.draw(&Text::new(
                    text.0,
                    (xl, text.1),
                    ("sans-serif", 11).into_font().color(&red),
                ))
                .map_err(draw_error)?;
            }
            // The address, and the master's colour in the strips, under its bars.
            let cx = x0 + bar * series / 2;
            let centred = axis.clone().pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(
                c.address.clone(),
                (cx, BARS_BOTTOM + 6),
                centred,
            ))
            .map_err(draw_error)?;
            root.draw(&Rectangle::new(
                [(cx - 5, BARS_BOTTOM + 24), (cx + 5, BARS_BOTTOM + 32)],
                master_colour(ci).filled(),
            ))
            .map_err(draw_error)?;
        }
        Ok(())
    }

    fn draw_strips<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        from: i32,
    ) -> Result<()> {
        let small = ("sans-serif", 11).into_font().color(&BLACK);
        let width = f64::from(WIDTH as i32 - LEFT - 20);
        let x = |slot: usize| LEFT + (slot as f64 / SLOT_COUNT as f64 * width) as i32;
        let first = self.strips.first();
        for (si, strip) in self.strips.iter().enumerate() {
            let y0 = from + si as i32 * (STRIP_HEIGHT + STRIP_GAP);
            let moved = first.map_or(0, |f| {
                strip
                    .owners
                    .iter()
                    .zip(&f.owners)
                    .filter(|(a, b)| a != b)
                    .count()
            });
            let label = if si == 0 {
                format!("slots 0-16383, {}", strip.label)
            } else {
                format!("slots 0-16383, {}: {moved} slots move", strip.label)
            };
            root.draw(&Text::new(label, (LEFT, y0 - 14), small.clone()))
                .map_err(draw_error)?;
            // Runs narrower than a pixel are drawn last, a pixel wide, so that a slot kept alone
            // (a hot tag's) shows.
            let all = runs(&strip.owners);
            let (thin, wide): (Vec<_>, Vec<_>) = all
                .iter()
                .partition(|(start, end, _)| x(end + 1) - x(*start) < 1);
            for &(start, end, owner) in wide.into_iter().chain(thin) {
                let fill = owner
                    .and_then(|o| self.columns.iter().position(|c| c.address == o))
                    .map_or(WHITE, master_colour);
                root.draw(&Rectangle::new(
                    [
                        (x(start), y0),
                        (x(end + 1).max(x(start) + 1), y0 + STRIP_HEIGHT),
                    ],
                    fill.filled(),
                ))
                .map_err(draw_error)?;
            }
            if si == 0 {
                continue;
            }
            let Some(before) = first else { continue };
            // Under each pixel column, a mark as tall as the share of its slots that move (a
            // pixel at least where any does), so that scattered moves read at their true
            // density; columns of one height are drawn as one mark.
            let columns = (WIDTH as i32 - LEFT - 20).max(1) as usize;
            let heights: Vec<i32> = (0..columns)
                .map(|c| {
                    let (a, b) = (c * SLOT_COUNT / columns, (c + 1) * SLOT_COUNT / columns);
                    let moved = (a..b)
                        .filter(|&i| strip.owners.get(i) != before.owners.get(i))
                        .count();
                    let all = b.saturating_sub(a).max(1);
                    if moved == 0 {
                        0
                    } else {
                        ((6 * moved + all / 2) / all).max(1) as i32
                    }
                })
                .collect();
            let mut c = 0;
            while c < columns {
                let h = heights.get(c).copied().unwrap_or(0);
                let mut end = c + 1;
                while end < columns && heights.get(end).copied() == Some(h) {
                    end += 1;
                }
                if h > 0 {
                    root.draw(&Rectangle::new(
                        [
                            (LEFT + c as i32, y0 + STRIP_HEIGHT + 2),
                            (LEFT + end as i32, y0 + STRIP_HEIGHT + 2 + h),
                        ],
                        BLACK.filled(),
                    ))
                    .map_err(draw_error)?;
                }
                c = end;
            }
        }
        Ok(())
    }
}

/// The runs of equal owners of `owners`: `(first slot, last slot, owner)`.
fn runs(owners: &[Option<String>]) -> Vec<(usize, usize, Option<&str>)> {
    let as_str: Vec<Option<&str>> = owners.iter().map(|o| o.as_deref()).collect();
    runs_of(&as_str)
}

/// The runs of equal values of `values`: `(first index, last index, value)`.
fn runs_of<'a>(values: &[Option<&'a str>]) -> Vec<(usize, usize, Option<&'a str>)> {
    let mut out: Vec<(usize, usize, Option<&'a str>)> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        match out.last_mut() {
            Some(last) if last.2 == *v && last.1 + 1 == i => last.1 = i,
            _ => out.push((i, i, *v)),
        }
    }
    out
}

/// The texts of an SVG document the picture drew (each `<text>` element's content, trimmed,
/// its XML entities read back).
pub fn labels(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = t.split_once('>')?.1;
            let text = body.split_once("</text>")?.0.trim();
            Some(
                text.replace("&apos;", "'")
                    .replace("&quot;", "\"")
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&"),
            )
        })
        .collect()
}

fn draw_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("drawing the picture: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_shows_every_master_its_values_share_and_limit_and_the_moved_slots() {
        let mb = 1024.0 * 1024.0;
        let before: Vec<Option<String>> = (0..SLOT_COUNT)
            .map(|s| Some(if s < 8192 { "a:1" } else { "b:1" }.to_string()))
            .collect();
        let mut after = before.clone();
        for o in after.iter_mut().take(100) {
            *o = Some("c:1".into());
        }
        let p = Picture {
            title: "t".into(),
            measure: "used_memory".into(),
            series: vec!["now".into(), "after".into()],
            columns: vec![
                Column {
                    address: "a:1".into(),
                    values: vec![Some(30.0 * mb), Some(20.0 * mb)],
                    share: Some(20.0 * mb),
                    maxmemory: 64.0 * mb,
                },
                Column {
                    address: "b:1".into(),
                    values: vec![Some(10.0 * mb), Some(20.0 * mb)],
                    share: Some(20.0 * mb),
                    maxmemory: 0.0,
                },
                Column {
                    address: "c:1".into(),
                    values: vec![Some(1.0 * mb), Some(21.0 * mb)],
                    share: Some(20.0 * mb),
                    maxmemory: 4096.0 * mb,
                },
            ],
            strips: vec![
                Strip {
                    label: "now".into(),
                    owners: before,
                },
                Strip {
                    label: "after".into(),
                    owners: after,
                },
            ],
        };
        let svg = p.svg().unwrap();
        let labels = labels(&svg);
        for text in [
            "a:1",
            "b:1",
            "c:1",
            "30.0",
            "21.0",
            "even share 20.0",
            "maxmemory 64.0",
            "maxmemory 4096.0 (off the chart)",
            "slots 0-16383, after: 100 slots move",
        ] {
            assert!(labels.iter().any(|l| l == text), "{text} in {labels:?}");
        }
        // The moved slots (0-99, five and a half pixel columns) are marked under the second
        // strip: a full mark, then a half one, nothing after.
        let marks: Vec<&str> = svg
            .split("<rect")
            .skip(1)
            .filter_map(|r| r.split("/>").next())
            .filter(|r| r.contains("fill=\"#000000\""))
            .collect();
        assert_eq!(marks.len(), 2, "{marks:?}");
        assert!(
            marks[0].contains("x=\"70\"") && marks[0].contains("height=\"6\""),
            "{marks:?}"
        );
        assert!(marks[1].contains("height=\"3\""), "{marks:?}");
        assert_eq!(runs_of(&[None, Some("x"), Some("x"), None]).len(), 3);
    }
}
