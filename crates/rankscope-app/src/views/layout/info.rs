//! What the Layout view knows of a job apart from the figure shown, made once per job: the
//! grid ([`super::grid`]), each rank's host and groups, and the drawing's sizes (the cells fit
//! [`HEAT_WIDTH`] between [`LAYOUT_CELL_MIN`] and [`LAYOUT_CELL_MAX`]; a third dimension's blocks
//! wrap rather than shrink cells below [`LAYOUT_CELL_WRAP`]).

use std::collections::{BTreeMap, BTreeSet};

use rankscope_core::analyze::layout::Role;

use super::grid::{Grid, Place};
use crate::state::JobView;
use crate::tokens::*;

/// What the view knows of the job apart from the figure shown: made once per job.
#[derive(Debug)]
pub struct Info {
    pub grid: Grid,
    /// Distinct host names, sorted; each place's index into them.
    pub hosts: Vec<String>,
    pub host_of: Vec<Option<u32>>,
    /// Each place's groups (indices into `layout.groups`), mesh roles first.
    pub groups_of: Vec<Vec<usize>>,
    pub index_of: BTreeMap<u32, usize>,
    pub geom: Geom,
}

/// Pixel sizes of the drawing (CSS px).
#[derive(Debug, Clone, Copy)]
pub struct Geom {
    pub cell: f64,
    /// The band above each line of blocks: block title, column numbers.
    pub head: f64,
    pub block_w: f64,
    pub block_h: f64,
    pub width: f64,
    pub height: f64,
}

/// The order roles are listed in: the mesh's first, fastest first, then the rest.
pub fn role_order(job: &JobView) -> Vec<Role> {
    let Some(l) = &job.analysis.layout else { return Vec::new() };
    let mut out: Vec<Role> = l.mesh.iter().map(|d| d.role).collect();
    for r in Role::ALL {
        if !out.contains(r) && l.groups.iter().any(|g| g.role == *r) {
            out.push(*r);
        }
    }
    out
}

impl Info {
    pub fn new(job: &JobView) -> Info {
        let a = &job.analysis;
        let ranks: Vec<u32> = a.ranks.iter().map(|r| r.rank).collect();
        let mesh = a.layout.as_ref().map_or(&[][..], |l| &l.mesh[..]);
        let cols = mesh.first().map_or(1.0, |d| f64::from(d.size.max(1)));
        let avail = HEAT_WIDTH - LAYOUT_LABEL_W - 8.0;
        let max_blocks =
            ((avail + LAYOUT_GAP) / (cols * LAYOUT_CELL_WRAP + LAYOUT_GAP)).floor().max(1.0) as u32;
        let grid = Grid::new(mesh, &ranks, max_blocks);
        let bc = f64::from(grid.block_cols);
        let across = bc * f64::from(grid.cols.size);
        let cell =
            ((avail - (bc - 1.0) * LAYOUT_GAP) / across).floor().clamp(LAYOUT_CELL_MIN, LAYOUT_CELL_MAX);
        let head = if grid.blocks.is_empty() { 0.0 } else { 16.0 } + if cell >= 16.0 { 15.0 } else { 3.0 };
        let block_w = cell * f64::from(grid.cols.size);
        let block_h = cell * f64::from(grid.rows.size);
        let geom = Geom {
            cell,
            head,
            block_w,
            block_h,
            width: LAYOUT_LABEL_W + bc * block_w + (bc - 1.0) * LAYOUT_GAP + 8.0,
            height: f64::from(grid.block_rows) * (head + block_h + LAYOUT_GAP),
        };
        let host_name: BTreeMap<u32, &str> =
            a.ranks.iter().filter_map(|r| Some((r.rank, r.host.as_deref()?))).collect();
        let hosts: Vec<String> = {
            let set: BTreeSet<&str> = host_name.values().copied().collect();
            set.into_iter().map(str::to_string).collect()
        };
        let host_of = grid
            .places
            .iter()
            .map(|p| host_name.get(&p.rank).and_then(|h| hosts.iter().position(|x| x == h)).map(|i| i as u32))
            .collect();
        let index_of: BTreeMap<u32, usize> =
            grid.places.iter().enumerate().map(|(i, p)| (p.rank, i)).collect();
        let mut groups_of = vec![Vec::new(); grid.places.len()];
        if let Some(l) = &a.layout {
            let order = role_order(job);
            let mut by_role: Vec<usize> = (0..l.groups.len()).collect();
            by_role.sort_by_key(|&i| (order.iter().position(|r| *r == l.groups[i].role), i));
            for gi in by_role {
                for r in &l.groups[gi].ranks {
                    if let Some(v) = index_of.get(r).and_then(|&i| groups_of.get_mut(i)) {
                        v.push(gi);
                    }
                }
            }
        }
        Info { grid, hosts, host_of, groups_of, index_of, geom }
    }

    /// Top-left corner of a place's cell (content px).
    pub fn xy(&self, p: &Place) -> (f64, f64) {
        let g = &self.geom;
        let (bx, by) = self.grid.block_at(p.block);
        let x = LAYOUT_LABEL_W + f64::from(bx) * (g.block_w + LAYOUT_GAP) + f64::from(p.col) * g.cell;
        let y = f64::from(by) * (g.head + g.block_h + LAYOUT_GAP) + g.head + f64::from(p.row) * g.cell;
        (x, y)
    }

    /// "tensor 1, data 1" (the rank's coordinates), or "" without a mesh.
    pub fn coords(&self, p: &Place) -> String {
        let gr = &self.grid;
        if !gr.mesh {
            return String::new();
        }
        let mut v = vec![format!("{} {}", gr.cols.name, p.col)];
        if !gr.rows.name.is_empty() {
            v.push(format!("{} {}", gr.rows.name, p.row));
        }
        let t = gr.block_title(p.block);
        if !t.is_empty() {
            v.push(t);
        }
        v.join(", ")
    }
}
