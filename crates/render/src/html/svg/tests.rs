//! Tests of the SVG primitives: scales and their ticks, axes, series and bars, on hand-made data.

use super::*;

#[test]
fn ticks_are_round_numbers_inside_the_axis() {
    let a = Axis::linear("x", 0.0, 97.0);
    assert_eq!(a.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0]);
    let a = Axis::linear("x", 0.0, 0.37).nice();
    assert_eq!(a.max, 0.4);
    assert_eq!(a.ticks().len(), 5);
    let a = Axis::linear("n", 0.0, 3.0).integer();
    assert_eq!(a.ticks(), vec![0.0, 1.0, 2.0, 3.0]);
    let l = Axis::log("s", 0.003, 2.0);
    assert_eq!((l.min, l.max), (0.001, 10.0));
    assert_eq!(l.ticks(), vec![0.001, 0.01, 0.1, 1.0, 10.0]);
}

#[test]
fn empty_or_degenerate_axes_still_have_extent() {
    let a = Axis::linear("x", 5.0, 5.0);
    assert!(a.max > a.min);
    let a = Axis::linear("x", 0.0, 0.0);
    assert_eq!((a.min, a.max), (0.0, 1.0));
    let a = Axis::linear("x", f64::NAN, 1.0);
    assert_eq!((a.min, a.max), (0.0, 1.0));
}

#[test]
fn tick_labels_are_short() {
    assert_eq!(tick_label(0.0), "0");
    assert_eq!(tick_label(0.25), "0.25");
    assert_eq!(tick_label(0.001), "0.001");
    assert_eq!(tick_label(20.0), "20");
    assert_eq!(tick_label(2.5), "2.5");
    assert_eq!(tick_label(15000.0), "15k");
    assert_eq!(tick_label(2_500_000.0), "2.5M");
}

#[test]
fn scale_maps_ends_of_the_domain_to_the_plot_edges() {
    let g = Geometry::standard(200.0);
    let ch = Chart::new(
        "c",
        "t",
        g,
        &Axis::linear("x", 0.0, 10.0),
        &Axis::log("y", 1.0, 100.0),
    );
    assert_eq!(ch.px(0.0), g.left);
    assert_eq!(ch.px(10.0), g.width - g.right);
    assert_eq!(ch.py(1.0), g.height - g.bottom);
    assert_eq!(ch.py(100.0), g.top);
    assert!((ch.py(10.0) - (g.top + g.height - g.bottom) / 2.0).abs() < 1e-9);
}

#[test]
fn chart_escapes_text_and_draws_steps() {
    let mut ch = Chart::new(
        "c<1>",
        "a & b",
        Geometry::standard(200.0),
        &Axis::linear("time (s)", 0.0, 10.0),
        &Axis::linear("n", 0.0, 4.0),
    );
    ch.line("s0", &[(0.0, 1.0), (5.0, 1.0), (6.0, 3.0)], true);
    let svg = ch.finish();
    assert!(svg.contains("c&lt;1&gt;"));
    assert!(svg.contains("a &amp; b"));
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    // the second point holds y (no V), the third jumps
    let d = svg.split(r#"class="line s0""#).nth(1).unwrap();
    assert!(d.contains("H") && d.contains("V"));
}
