//! Charts drawn by the server as inline SVG, no script: one column per commit, oldest on the
//! left, each a link to the commit's page whose `<title>` (the tooltip) holds its numbers. The
//! plot stretches to the page's width (`preserveAspectRatio="none"`, strokes that do not scale),
//! so its labels are HTML beside it, readable at any width; `<title>` and `<desc>` say what a
//! screen reader cannot see.

use maud::{html, Markup};

/// The plot's height in the SVG's units, and each column's width.
const H: f64 = 100.0;
const COL: f64 = 10.0;
/// The most pixels a column takes: a few commits make a narrow chart, not a wall of green.
const PX: usize = 36;

/// One commit's column: where it leads and what its tooltip says.
pub struct Column {
    pub commit: String,
    pub href: String,
    pub tip: String,
}

/// What a column draws, heights as fractions of the plot (0 at the bottom, 1 at the top).
pub enum Mark {
    /// A bar from `from` to `to`, coloured by its class (`passed`, `failed`, …).
    Bar {
        from: f64,
        to: f64,
        class: &'static str,
    },
    /// A point at `at`; the points of neighbouring columns are joined by a line.
    Point { at: f64 },
}

/// A chart: its caption, the labels of its vertical axis (top and bottom), a sentence saying
/// what it shows for those who cannot see it, and the marks of each column.
pub struct Chart<'a> {
    /// The element id, and the prefix of its title's and description's.
    pub id: &'a str,
    pub caption: &'a str,
    pub top: String,
    pub bottom: String,
    pub summary: String,
    pub columns: &'a [Column],
    pub marks: Vec<Vec<Mark>>,
}

/// The chart as a `<figure>`: caption, axis labels and the SVG.
pub fn render(c: &Chart) -> Markup {
    let n = c.columns.len().max(1);
    let width = n as f64 * COL;
    let y = |f: f64| H * (1.0 - f.clamp(0.0, 1.0));
    let points: Vec<Option<(f64, f64)>> = c
        .marks
        .iter()
        .enumerate()
        .map(|(i, marks)| {
            marks.iter().find_map(|m| match m {
                Mark::Point { at } => Some((i as f64 * COL + COL / 2.0, y(*at))),
                Mark::Bar { .. } => None,
            })
        })
        .collect();
    let oldest = c.columns.first().map(|k| short(&k.commit));
    let newest = c.columns.last().map(|k| short(&k.commit));
    html! {
        figure.chart id=(c.id) {
            figcaption { (c.caption) }
            div.plot {
                div.y aria-hidden="true" { span { (c.top) } span { (c.bottom) } }
                div.area {
                svg viewBox=(format!("0 0 {width} {H}")) width=(n * PX) preserveAspectRatio="none" role="img"
                    aria-labelledby=(format!("{0}-title {0}-desc", c.id)) data-commits=(c.columns.len()) {
                    title id=(format!("{}-title", c.id)) { (c.caption) }
                    desc id=(format!("{}-desc", c.id)) { (c.summary) }
                    line.axis x1="0" y1=(H) x2=(width) y2=(H) {}
                    line.grid x1="0" y1="0" x2=(width) y2="0" {}
                    @for segment in segments(&points) {
                        polyline.line points=(segment) {}
                    }
                    @for (i, (k, marks)) in c.columns.iter().zip(&c.marks).enumerate() {
                        @let x = i as f64 * COL;
                        a href=(k.href) data-commit=(k.commit) tabindex="-1" {
                            title { (k.tip) }
                            rect.hit x=(x) y="0" width=(COL) height=(H) {}
                            @for m in marks {
                                @match m {
                                    Mark::Bar { from, to, class } => {
                                        // A bar of nothing still shows, as a sliver.
                                        @let (top, bottom) = (y(*to), y(*from));
                                        @let height = (bottom - top).max(1.5);
                                        rect class=(format!("bar {class}")) x=(num(x + 2.0)) y=(num(bottom - height)) width=(num(COL - 4.0)) height=(num(height)) {}
                                    }
                                    Mark::Point { at } => {
                                        path.point d=(format!("M{} {}h0", num(x + COL / 2.0), num(y(*at)))) {}
                                    }
                                }
                            }
                        }
                    }
                }
                div.x aria-hidden="true" {
                    @if let Some(o) = oldest { span { "oldest " span.mono { (o) } } }
                    @if n > 1 { @if let Some(o) = newest { span { "newest " span.mono { (o) } } } }
                }
                }
            }
        }
    }
}

/// The runs of consecutive points, each as a polyline's `points`; a column without a point
/// breaks the line (a run of one point is left to its dot).
fn segments(points: &[Option<(f64, f64)>]) -> Vec<String> {
    let mut out = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    for p in points.iter().chain(std::iter::once(&None)) {
        match p {
            Some(p) => run.push(*p),
            None => {
                if run.len() > 1 {
                    out.push(
                        run.iter()
                            .map(|(x, y)| format!("{},{}", num(*x), num(*y)))
                            .collect::<Vec<_>>()
                            .join(" "),
                    );
                }
                run.clear();
            }
        }
    }
    out
}

/// A coordinate in few characters: two decimals at most, no trailing zeros.
fn num(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn short(commit: &str) -> &str {
    gs_util::short(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(c: &str) -> Column {
        Column {
            commit: c.repeat(40),
            href: format!("/c/r/{c}"),
            tip: format!("{c} <tip>"),
        }
    }

    #[test]
    fn every_column_links_its_commit_with_its_numbers_in_a_tooltip() {
        let columns = [column("a"), column("b"), column("c")];
        let svg = render(&Chart {
            id: "time",
            caption: "Test time",
            top: "3s".into(),
            bottom: "0".into(),
            summary: "three".into(),
            columns: &columns,
            marks: vec![
                vec![Mark::Bar {
                    from: 0.0,
                    to: 0.5,
                    class: "passed",
                }],
                vec![],
                vec![Mark::Bar {
                    from: 0.0,
                    to: 1.0,
                    class: "failed",
                }],
            ],
        })
        .into_string();
        assert_eq!(svg.matches("<a href=").count(), 3, "{svg}");
        assert!(svg.contains("<title>a &lt;tip&gt;</title>"), "{svg}");
        assert!(svg.contains(r#"class="bar passed""#), "{svg}");
        assert!(svg.contains(r#"viewBox="0 0 30 100""#), "{svg}");
        assert!(
            svg.contains(r#"aria-labelledby="time-title time-desc""#),
            "{svg}"
        );
    }

    #[test]
    fn a_missing_point_breaks_the_line() {
        let p = |x: f64| Some((x, 1.0));
        assert_eq!(
            segments(&[p(1.0), p(2.0), None, p(4.0), None, p(6.0), p(7.0)]),
            vec!["1,1 2,1".to_string(), "6,1 7,1".to_string()]
        );
        assert_eq!(num(19.999999999999996), "20");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(0.0), "0");
    }
}
