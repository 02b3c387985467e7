//! Design tokens of the canvas views. Colours are CSS custom properties in `www/style.css` (one
//! place for both themes; the canvas reads them with `getComputedStyle`), sizes are here.

use rankscope_core::model::Class;

/// Height of one nesting row of a lane, CSS px.
pub const ROW_H: f64 = 14.0;
/// Height of a rank's header row.
pub const RANK_H: f64 = 20.0;
/// Space below each lane.
pub const LANE_GAP: f64 = 3.0;
/// Width of the lane-label gutter.
pub const GUTTER_W: f64 = 190.0;
/// Height of the time ruler.
pub const RULER_H: f64 = 22.0;
/// Font of labels on the canvas.
pub const FONT: &str = "11px system-ui, sans-serif";
/// Approximate width of one character of [`FONT`] (for cutting labels without measuring each).
pub const CHAR_W: f64 = 6.2;

/// The CSS custom property holding the colour of a class (`--class-compute`, ...).
pub fn class_var(c: Class) -> String {
    format!("--class-{}", c.name().replace('_', "-"))
}

/// Ranks × steps heatmap: colour bins (`heat-0` … `heat-8` in `www/style.css`), row height,
/// rank-label width and the width the grid aims at (CSS px; readable at 1280×800).
pub const HEAT_BINS: usize = 9;
pub const HEAT_CELL_H: f64 = 24.0;
pub const HEAT_LABEL_W: f64 = 70.0;
pub const HEAT_WIDTH: f64 = 1180.0;

/// Fabric charts: width, height and left padding (CSS px).
pub const CHART_W: f64 = 580.0;
pub const CHART_H: f64 = 260.0;
pub const CHART_PAD: f64 = 46.0;

/// Layout view (CSS px): cells between these sizes (the grid fits [`HEAT_WIDTH`] when it can),
/// blocks of a third dimension wrap rather than shrink cells below [`LAYOUT_CELL_WRAP`]; the
/// row-label gutter and the space between blocks.
pub const LAYOUT_CELL_MIN: f64 = 12.0;
pub const LAYOUT_CELL_MAX: f64 = 120.0;
pub const LAYOUT_CELL_WRAP: f64 = 22.0;
pub const LAYOUT_LABEL_W: f64 = 70.0;
pub const LAYOUT_GAP: f64 = 18.0;
