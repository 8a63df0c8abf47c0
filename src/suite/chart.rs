//! The paper's Figure 11 on this machine: for every kernel, a group of bars, one per variant,
//! the speedup over sequential C (the untransformed program on one thread), on a log scale; a
//! missing bar is a variant that does not exist, did not run or did not verify.

use super::Report;
use plotters::prelude::*;
use std::path::Path;

/// The variants in the order and colours of the bars.
const SERIES: &[(&str, RGBColor)] = &[
    ("polly", RGBColor(150, 150, 150)),
    ("pluto", RGBColor(70, 130, 180)),
    ("paper", RGBColor(60, 170, 110)),
    ("best", RGBColor(220, 120, 40)),
    ("tuned", RGBColor(200, 50, 60)),
    ("lifted", RGBColor(210, 170, 30)),
    ("numpy", RGBColor(140, 90, 170)),
];

/// Writes the chart as SVG.
pub fn svg(report: &Report, path: &Path) -> Result<(), String> {
    let kernels = &report.kernels;
    let n = kernels.len().max(1);
    let group = SERIES.len() + 1;
    let speedups: Vec<f64> = kernels
        .iter()
        .flat_map(|k| k.variants.iter().filter_map(|v| v.speedup))
        .filter(|s| s.is_finite() && *s > 0.0)
        .collect();
    let hi = speedups.iter().cloned().fold(1.0f64, f64::max) * 1.5;
    let lo = speedups.iter().cloned().fold(1.0f64, f64::min).min(1.0) / 1.5;
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let caption = format!("Speedup over sequential C ({})", report.host);
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..(n * group) as f64, (lo..hi).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("speedup (log scale)")
        .draw()
        .map_err(|e| e.to_string())?;
    // The kernel under its group, in the label area below the plot.
    for (g, k) in kernels.iter().enumerate() {
        let (px, py) = chart.backend_coord(&((g * group) as f64 + group as f64 / 2.0 - 0.5, lo));
        root.draw(&Text::new(
            k.kernel.clone(),
            (px - 4 * k.kernel.len() as i32, py + 8),
            ("sans-serif", 13).into_font(),
        ))
        .map_err(|e| e.to_string())?;
    }
    for (s, (name, colour)) in SERIES.iter().enumerate() {
        let bars: Vec<Rectangle<(f64, f64)>> = kernels
            .iter()
            .enumerate()
            .filter_map(|(g, k)| {
                let v = k.variants.iter().find(|v| v.variant == *name)?;
                let sp = v.speedup.filter(|x| x.is_finite() && *x > 0.0)?;
                let x0 = (g * group + s) as f64 + 0.5;
                Some(Rectangle::new([(x0, lo), (x0 + 0.9, sp)], colour.filled()))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|e| e.to_string())?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    // Sequential C: speedup 1.
    chart
        .draw_series(LineSeries::new([(0.0, 1.0), ((n * group) as f64, 1.0)], BLACK.stroke_width(1)))
        .map_err(|e| e.to_string())?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::{KernelResult, Report, VariantResult};
    use super::*;

    /// Every series of the bench draws a bar in its colour, the lifted row included; a variant
    /// with no speedup draws none.
    #[test]
    fn every_variant_with_a_speedup_draws_its_bar() {
        let bar =
            |name: &str, speedup: Option<f64>| VariantResult { speedup, ..VariantResult::new(name, "", 2) };
        let k = KernelResult {
            kernel: "mttkrp".into(),
            sizes: Default::default(),
            variants: vec![
                bar("untransformed", Some(1.0)),
                bar("tuned", Some(9.9)),
                bar("lifted", Some(17.2)),
                bar("numpy", None),
            ],
            notes: Vec::new(),
            flops: 1,
            bytes: 1,
            bound_s: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        svg(
            &Report { host: "test".into(), machine: Vec::new(), instructions: Vec::new(), kernels: vec![k] },
            &path,
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let fill = |c: RGBColor| format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        let count = |name: &str| {
            let colour = SERIES.iter().find(|(n, _)| *n == name).unwrap().1;
            text.matches(&fill(colour)).count()
        };
        // A bar and its legend's swatch; numpy has no speedup: its swatch only.
        assert_eq!(count("lifted"), 2, "{text}");
        assert_eq!(count("tuned"), 2);
        assert_eq!(count("numpy"), 1);
    }
}
