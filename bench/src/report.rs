//! Output: Markdown tables on stdout and in `.md` files and CSV files (the operator tool's
//! [`ringslot_tool::output`], shared), and SVG line charts.

pub use ringslot_tool::output::{announce, fixed, write, written, Table};

// The palette is the operator's tool's, so that the benchmarks' charts and the tool's pictures
// colour alike.
use anyhow::{Context, Result};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use ringslot_tool::picture::PALETTE;
use std::path::Path;

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Index into the palette; `None` draws it black and thicker (a reference line).
    pub colour: Option<usize>,
    /// Draw markers only, no line (a scheme with a single configuration).
    pub markers_only: bool,
    /// Draw the line dashed (a second node count of the same scheme, in the same colour).
    pub dashed: bool,
    /// For each point, the lowest and highest value it summarises, drawn as an error bar
    /// (empty: no bars).
    pub errors: Vec<(f64, f64)>,
}

impl Series {
    /// A solid line with dots in palette colour `colour`.
    pub fn line(label: String, points: Vec<(f64, f64)>, colour: usize) -> Series {
        Series {
            label,
            points,
            colour: Some(colour),
            markers_only: false,
            dashed: false,
            errors: Vec::new(),
        }
    }

    /// A thick black horizontal line at `y` from `x0` to `x1`: the target a chart is read
    /// against.
    pub fn reference(label: &str, y: f64, x0: f64, x1: f64) -> Series {
        Series {
            label: label.to_string(),
            points: vec![(x0, y), (x1, y)],
            colour: None,
            markers_only: false,
            dashed: false,
            errors: Vec::new(),
        }
    }
}

/// What a chart shows.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Logarithmic x axis (virtual-node counts).
    pub x_log: bool,
    /// Logarithmic y axis.
    pub y_log: bool,
    /// Labels of integer x positions (steps); empty for a numeric axis.
    pub x_names: Vec<String>,
    /// Where the legend goes (where the lines are not).
    pub legend: SeriesLabelPosition,
}

/// One chart of a figure, and its share of the figure's width.
pub struct Panel<'a> {
    pub chart: Chart<'a>,
    pub series: Vec<Series>,
    pub width: u32,
}

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The one colour of a scheme in every chart (an index into the palette), by the name the
/// reports give it: the native ring blue, ketama orange, the slot table green, modulo red,
/// groupcache purple, native-fnv brown, jump pink, rendezvous grey, Maglev olive, multi-probe
/// cyan, bounded loads violet; the native ring at 160 points (its default) blue, at fewer
/// points lighter blues, at more a dark one.
pub fn scheme_colour(name: &str) -> usize {
    let mut words = name.split_whitespace();
    let base = words.next().unwrap_or(name);
    if base == "ring" {
        let vnodes = words
            .find_map(|w| w.strip_prefix("vnodes="))
            .and_then(|v| v.parse::<u32>().ok());
        return match vnodes {
            None | Some(160) => 0,
            Some(v) if v < 50 => 12,
            Some(v) if v < 160 => 13,
            Some(_) => 14,
        };
    }
    match base {
        "ring" | "native" | "ring(native)" => 0,
        "ketama" => 1,
        "slot" | "slots" => 2,
        "modulo" => 3,
        "groupcache" => 4,
        "native-fnv" => 5,
        "jump" => 6,
        "rendezvous" => 7,
        "maglev" => 8,
        "multiprobe" => 9,
        "bounded" => 10,
        _ => 11,
    }
}

/// The corner of a chart of `series` whose quarter (45% of the width, 40% of the height of
/// the data's range) holds the fewest points: where the legend hides the least.
pub fn free_corner(series: &[Series]) -> SeriesLabelPosition {
    let points: Vec<(f64, f64)> = series
        .iter()
        .filter(|s| s.colour.is_some())
        .flat_map(|s| s.points.iter().copied())
        .collect();
    let (x0, x1) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    // The axis as draw_panel makes it: over the data for ratios near 1, else from 0.
    let (y0, y1) = if y0 > 0.0 && y0 > 0.5 * y1 {
        (y0, y1)
    } else {
        (y0.min(0.0), y1 * 1.08)
    };
    let count = |right: bool, upper: bool| {
        points
            .iter()
            .filter(|p| {
                let in_x = if right {
                    p.0 >= x1 - 0.45 * (x1 - x0)
                } else {
                    p.0 <= x0 + 0.45 * (x1 - x0)
                };
                let in_y = if upper {
                    p.1 >= y1 - 0.4 * (y1 - y0)
                } else {
                    p.1 <= y0 + 0.4 * (y1 - y0)
                };
                in_x && in_y
            })
            .count()
    };
    [
        (SeriesLabelPosition::LowerRight, count(true, false)),
        (SeriesLabelPosition::LowerLeft, count(false, false)),
        (SeriesLabelPosition::UpperRight, count(true, true)),
        (SeriesLabelPosition::UpperLeft, count(false, true)),
    ]
    .into_iter()
    .min_by_key(|(_, n)| *n)
    .map_or(SeriesLabelPosition::LowerRight, |(p, _)| p)
}

/// Draws `panels` side by side (widths in proportion to their `width`) under `title` into an
/// SVG file at `path`, 600 pixels high and 960 (one panel) or 1280 (several) wide.
pub fn svg_panels(path: &Path, title: &str, panels: Vec<Panel>) -> Result<()> {
    let width = if panels.len() > 1 { 1280 } else { 960 };
    let root = SVGBackend::new(path, (width, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = if title.is_empty() {
        root.clone()
    } else {
        root.titled(title, ("sans-serif", 22))?
    };
    let total: u32 = panels.iter().map(|p| p.width).sum::<u32>().max(1);
    let mut rest = body;
    let count = panels.len();
    for (i, panel) in panels.iter().enumerate() {
        let area = if i + 1 == count {
            rest.clone()
        } else {
            let px = rest.dim_in_pixel().0 as f64 * f64::from(panel.width)
                / f64::from(total - panels[..i].iter().map(|p| p.width).sum::<u32>());
            let (left, right) = rest.split_horizontally(px as u32);
            rest = right;
            left
        };
        draw_panel(&area, &panel.chart, &panel.series)?;
    }
    root.present()
        .with_context(|| format!("write {}", path.display()))?;
    written(path);
    Ok(())
}

/// Draws one chart into `area`.
fn draw_panel(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    chart: &Chart,
    series: &[Series],
) -> Result<()> {
    let all = || {
        series.iter().flat_map(|s| {
            s.points.iter().copied().chain(
                s.errors
                    .iter()
                    .zip(&s.points)
                    .flat_map(|(e, p)| [(p.0, e.0), (p.0, e.1)]),
            )
        })
    };
    let (mut x0, mut x1) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (mut y0, mut y1) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if chart.x_log {
        x0 = x0.max(1e-9) / 1.3;
        x1 *= 1.3;
    } else {
        let pad = ((x1 - x0) * 0.05).max(0.25);
        x0 -= pad;
        x1 += pad;
    }
    if chart.y_log {
        y0 = y0.max(1e-9) / 1.1;
        y1 *= 1.15;
    } else if y0 > 0.0 && y0 > 0.5 * y1 {
        // Ratios near 1 (peak-to-mean, moved/ideal): the axis spans the data, not 0..max,
        // so that the range the reader decides in fills the chart.
        let pad = ((y1 - y0) * 0.1).max(0.01);
        y0 -= pad;
        y1 += pad;
    } else {
        y0 = y0.min(0.0);
        y1 = if y1 <= y0 { y0 + 1.0 } else { y1 * 1.08 };
    }
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(chart.title, ("sans-serif", 16))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64);
    // The four axis combinations have four coordinate types, hence the macro.
    macro_rules! draw {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            let names = chart.x_names.clone();
            let step_name = |x: &f64| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            };
            let mut mesh = ctx.configure_mesh();
            mesh.x_desc(chart.x_label)
                .y_desc(chart.y_label)
                .axis_desc_style(("sans-serif", 15));
            let whole = |x: &f64| format!("{x:.0}");
            if !names.is_empty() {
                mesh.x_labels(names.len() + 2)
                    .x_label_formatter(&step_name)
                    .x_label_style(("sans-serif", if names.len() > 6 { 10 } else { 12 }));
            } else if chart.x_log {
                mesh.x_label_formatter(&whole).x_labels(6);
            }
            // A log axis labels its decades and steps: as few digits as tell them apart, and
            // no label twice.
            let log_label = |y: &f64| {
                if *y >= 2.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.1}")
                }
            };
            if chart.y_log {
                mesh.y_label_formatter(&log_label);
            }
            mesh.draw()?;
            for s in series {
                let (c, width) = match s.colour {
                    Some(i) => (colour(i), 2),
                    None => (BLACK, 3),
                };
                let style = ShapeStyle::from(&c).stroke_width(width);
                let legend_style = style;
                if !s.errors.is_empty() {
                    let thin = ShapeStyle::from(&c).stroke_width(1);
                    ctx.draw_series(s.points.iter().zip(&s.errors).map(|(&(x, y), &(lo, hi))| {
                        ErrorBar::new_vertical(x, lo, y, hi, thin, 8)
                    }))?;
                }
                if s.markers_only && s.dashed {
                    ctx.draw_series(
                        s.points
                            .iter()
                            .map(|&p| TriangleMarker::new(p, 7, c.filled())),
                    )?
                    .label(s.label.as_str())
                    .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 7, c.filled()));
                } else if s.markers_only {
                    ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 5, c.filled())))?
                        .label(s.label.as_str())
                        .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
                } else if s.colour.is_none() {
                    // A reference (a target): black and dashed, so that a scheme lying on it
                    // shows through.
                    let thin = ShapeStyle::from(&BLACK).stroke_width(2);
                    ctx.draw_series(DashedLineSeries::new(s.points.iter().copied(), 10, 6, thin))?
                        .label(s.label.as_str())
                        .legend(move |(x, y)| {
                            DashedPathElement::new(vec![(x, y), (x + 20, y)], 6, 4, thin)
                        });
                } else if s.dashed {
                    ctx.draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 5, style))?
                        .label(s.label.as_str())
                        .legend(move |(x, y)| {
                            DashedPathElement::new(vec![(x, y), (x + 20, y)], 5, 3, legend_style)
                        });
                    ctx.draw_series(
                        s.points
                            .iter()
                            .map(|&p| TriangleMarker::new(p, 4, c.filled())),
                    )?;
                } else {
                    ctx.draw_series(LineSeries::new(s.points.iter().copied(), style))?
                        .label(s.label.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], legend_style)
                        });
                    if s.colour.is_some() {
                        ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
                    }
                }
            }
            ctx.configure_series_labels()
                .position(chart.legend.clone())
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .draw()?;
        }};
    }
    match (chart.x_log, chart.y_log) {
        (false, false) => draw!(builder.build_cartesian_2d(x0..x1, y0..y1)?),
        (true, false) => draw!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?),
        (false, true) => draw!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
        (true, true) => {
            draw!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?)
        }
    }
    Ok(())
}
