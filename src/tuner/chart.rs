//! The search as a chart: the best verified time so far against the candidates measured and
//! against wall time, beside the untransformed build and LLVM Polly (SVG).

use super::TuneReport;
use plotters::prelude::*;
use std::path::Path;

/// Writes the chart as SVG.
pub fn svg(report: &TuneReport, path: &Path) -> Result<(), String> {
    let pts: Vec<(usize, f64, f64)> =
        report.trace.iter().filter_map(|(n, at, b)| b.map(|b| (*n, *at, b * 1e3))).collect();
    let anchors: Vec<(&str, f64, RGBColor)> = report
        .final_round
        .iter()
        .filter_map(|c| match c.name.as_str() {
            "untransformed" => Some(("untransformed", c.median_s * 1e3, RGBColor(0, 0, 0))),
            "polly" => Some(("LLVM Polly", c.median_s * 1e3, RGBColor(70, 130, 180))),
            _ => None,
        })
        .collect();
    let values: Vec<f64> = pts.iter().map(|p| p.2).chain(anchors.iter().map(|a| a.1)).collect();
    let (lo, hi) = values.iter().fold((f64::MAX, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
    let (lo, hi) = if values.is_empty() { (0.1, 10.0) } else { (lo / 1.3, hi * 1.3) };
    let n_max = report.trace.last().map_or(1, |t| t.0).max(1) as f64;
    let t_max = report.trace.last().map_or(1.0, |t| t.1).max(1e-3);
    let root = SVGBackend::new(path, (1100, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(550);
    let title = format!("{} ({} search)", report.space, report.strategy);
    for (area, by_time) in [(left, false), (right, true)] {
        let x_max = if by_time { t_max } else { n_max };
        let mut chart = ChartBuilder::on(&area)
            .caption(&title, ("sans-serif", 13))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..x_max * 1.02, (lo..hi).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .y_labels(12)
            .x_desc(if by_time { "wall time (s)" } else { "candidates" })
            .y_desc("best verified time (ms, log)")
            .draw()
            .map_err(|e| e.to_string())?;
        let line: Vec<(f64, f64)> =
            pts.iter().map(|(n, at, b)| (if by_time { *at } else { *n as f64 }, *b)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), RGBColor(220, 120, 40).stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label("best so far")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], RGBColor(220, 120, 40).stroke_width(2)));
        chart
            .draw_series(line.iter().map(|p| Circle::new(*p, 2, RGBColor(220, 120, 40).filled())))
            .map_err(|e| e.to_string())?;
        for (name, t, colour) in &anchors {
            let c = *colour;
            chart
                .draw_series(LineSeries::new([(0.0, *t), (x_max * 1.02, *t)], c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(format!("{name} ({t:.1} ms)"))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}
