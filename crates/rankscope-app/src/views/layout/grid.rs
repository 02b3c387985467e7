//! Where each rank goes on the Layout view: an arrangement of the mesh's dimensions, in grid
//! coordinates (no pixels here; `cells.rs` turns them into a drawing).
//!
//! **The rule.** The mesh's dimensions come fastest first (`layout.mesh`, by stride); a rank's
//! coordinate along a dimension of size n and stride s is `(rank / s) % n`. The fastest
//! dimension is the columns, the next the rows, and every slower one makes small multiples:
//! blocks of columns × rows, the third dimension's blocks left to right, the fourth's (and any
//! further, folded together) top to bottom. So Megatron's tensor × data × pipeline (tensor
//! fastest) is tensor across, data down, one block per pipeline stage; a tensor group is a
//! stretch of one row, a data group a column, and `gpus_per_node` consecutive ranks (one host)
//! a row or a few. When the third dimension's blocks do not fit across, they wrap.
//!
//! A mesh that does not place every rank on a cell of its own (a dimension missing, ranks
//! beyond the mesh) gets one more, slowest dimension, `other`: the ranks that share
//! coordinates, in rank order. Without a mesh (groups that form none), the ranks go in order,
//! 16 or 32 to a row, and the view lists the groups instead.

use std::collections::BTreeMap;

use rankscope_core::analyze::layout::MeshDim;

/// One axis drawn: its name (the role, or `rank` / `other`) and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    pub name: String,
    pub size: u32,
}

/// A rank's cell: the block it is in and its column and row inside the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub rank: u32,
    pub block: u32,
    pub col: u32,
    pub row: u32,
}

/// The arrangement of a job's ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    /// Columns (fastest dimension), rows (the next; size 1 when there is none).
    pub cols: Axis,
    pub rows: Axis,
    /// The dimensions the blocks stand for, fastest first (empty: one block).
    pub blocks: Vec<Axis>,
    /// Blocks per line of blocks, and lines.
    pub block_cols: u32,
    pub block_rows: u32,
    /// Every rank's cell, in rank order.
    pub places: Vec<Place>,
    /// The ranks are on the mesh's dimensions (false: in order, no mesh).
    pub mesh: bool,
}

impl Grid {
    /// Arranges `ranks` (sorted) on `mesh` (fastest first); blocks wrap after `max_block_cols`.
    pub fn new(mesh: &[MeshDim], ranks: &[u32], max_block_cols: u32) -> Grid {
        if mesh.is_empty() || ranks.is_empty() {
            return Grid::in_order(ranks);
        }
        let mut axes: Vec<Axis> =
            mesh.iter().map(|d| Axis { name: d.role.to_string(), size: d.size.max(1) }).collect();
        let mut coords: Vec<Vec<u32>> = ranks
            .iter()
            .map(|&r| mesh.iter().map(|d| (r / d.stride.max(1)) % d.size.max(1)).collect())
            .collect();
        // Ranks that share a cell get the `other` dimension, in rank order.
        let mut seen: BTreeMap<Vec<u32>, u32> = BTreeMap::new();
        let mut other = Vec::with_capacity(ranks.len());
        for c in &coords {
            let n = seen.entry(c.clone()).or_insert(0);
            other.push(*n);
            *n += 1;
        }
        let extra = seen.values().copied().max().unwrap_or(1);
        if extra > 1 {
            axes.push(Axis { name: "other".into(), size: extra });
            for (c, o) in coords.iter_mut().zip(other) {
                c.push(o);
            }
        }
        let one = Axis { name: String::new(), size: 1 };
        let cols = axes.first().cloned().unwrap_or_else(|| one.clone());
        let rows = axes.get(1).cloned().unwrap_or(one);
        let blocks: Vec<Axis> = axes.iter().skip(2).cloned().collect();
        let n_blocks: u32 = blocks.iter().map(|a| a.size).product();
        // The third dimension's blocks across, in as few lines as fit, balanced (32 blocks of
        // which 17 fit: two lines of 16).
        let across = blocks.first().map_or(1, |a| a.size).max(1);
        let block_cols = across.div_ceil(across.div_ceil(max_block_cols.max(1)));
        let block_rows = n_blocks.div_ceil(block_cols).max(1);
        let places = ranks
            .iter()
            .zip(&coords)
            .map(|(&rank, c)| {
                // Mixed radix over the block dimensions, the third fastest.
                let mut block = 0u32;
                for (k, a) in blocks.iter().enumerate().rev() {
                    block = block * a.size + c.get(k + 2).copied().unwrap_or(0);
                }
                Place {
                    rank,
                    block,
                    col: c.first().copied().unwrap_or(0),
                    row: c.get(1).copied().unwrap_or(0),
                }
            })
            .collect();
        Grid { cols, rows, blocks, block_cols, block_rows, places, mesh: true }
    }

    /// No mesh: the ranks in order, a row of up to 16 (32 from 512 ranks on).
    fn in_order(ranks: &[u32]) -> Grid {
        let n = ranks.len() as u32;
        let width = if n <= 16 {
            n.max(1)
        } else if n < 512 {
            16
        } else {
            32
        };
        let places = ranks
            .iter()
            .enumerate()
            .map(|(i, &rank)| Place { rank, block: 0, col: i as u32 % width, row: i as u32 / width })
            .collect();
        Grid {
            cols: Axis { name: "rank".into(), size: width },
            rows: Axis { name: String::new(), size: n.div_ceil(width).max(1) },
            blocks: Vec::new(),
            block_cols: 1,
            block_rows: 1,
            places,
            mesh: false,
        }
    }

    /// The block's line and place in it.
    pub fn block_at(&self, block: u32) -> (u32, u32) {
        (block % self.block_cols.max(1), block / self.block_cols.max(1))
    }

    /// The block's title: "pipeline 1", "data 0 · pipeline 1".
    pub fn block_title(&self, block: u32) -> String {
        let mut b = block;
        let mut parts = Vec::new();
        for a in &self.blocks {
            parts.push(format!("{} {}", a.name, b % a.size.max(1)));
            b /= a.size.max(1);
        }
        parts.join(" · ")
    }

    /// "tensor 2 × data 2 × pipeline 2", or "4 ranks in order" without a mesh.
    pub fn words(&self) -> String {
        if !self.mesh {
            return format!("{} ranks in order", self.places.len());
        }
        let mut v = vec![&self.cols];
        if self.rows.size > 1 || !self.rows.name.is_empty() {
            v.push(&self.rows);
        }
        v.extend(&self.blocks);
        v.iter().map(|a| format!("{} {}", a.name, a.size)).collect::<Vec<_>>().join(" × ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rankscope_core::analyze::layout::Role;

    fn dim(role: Role, size: u32, stride: u32) -> MeshDim {
        MeshDim { role, size, stride }
    }

    /// (rank, block, col, row) of every place.
    fn cells(g: &Grid) -> Vec<(u32, u32, u32, u32)> {
        g.places.iter().map(|p| (p.rank, p.block, p.col, p.row)).collect()
    }

    fn no_two_share_a_cell(g: &Grid) {
        let mut seen = std::collections::BTreeSet::new();
        for p in &g.places {
            assert!(seen.insert((p.block, p.col, p.row)), "rank {} shares a cell", p.rank);
            assert!(p.col < g.cols.size && p.row < g.rows.size, "rank {} outside its block", p.rank);
            assert!(p.block < g.block_cols * g.block_rows);
        }
    }

    #[test]
    fn two_dimensions_are_columns_and_rows() {
        // Megatron's tensor 2 × data 2: tensor groups {0,1}, {2,3} are rows' stretches, data
        // groups {0,2}, {1,3} columns.
        let g = Grid::new(&[dim(Role::Tensor, 2, 1), dim(Role::Data, 2, 2)], &[0, 1, 2, 3], 8);
        assert_eq!(cells(&g), [(0, 0, 0, 0), (1, 0, 1, 0), (2, 0, 0, 1), (3, 0, 1, 1)]);
        assert_eq!((g.block_cols, g.block_rows), (1, 1));
        assert_eq!(g.words(), "tensor 2 × data 2");
        assert_eq!(g.block_title(0), "");
        no_two_share_a_cell(&g);
    }

    #[test]
    fn a_third_dimension_is_blocks_left_to_right_and_wraps() {
        // tensor 2 × data 2 × pipeline 2 (Megatron's order: rank = tp + 2·dp + 4·pp).
        let mesh = [dim(Role::Tensor, 2, 1), dim(Role::Data, 2, 2), dim(Role::Pipeline, 2, 4)];
        let ranks: Vec<u32> = (0..8).collect();
        let g = Grid::new(&mesh, &ranks, 8);
        assert_eq!(g.places[5], Place { rank: 5, block: 1, col: 1, row: 0 });
        assert_eq!(g.places[6], Place { rank: 6, block: 1, col: 0, row: 1 });
        assert_eq!((g.block_cols, g.block_rows), (2, 1));
        assert_eq!(g.block_title(1), "pipeline 1");
        assert_eq!(g.words(), "tensor 2 × data 2 × pipeline 2");
        no_two_share_a_cell(&g);
        // 1,024 ranks, tensor 8 × data 32 × pipeline 4, only 3 blocks fit across: they wrap,
        // two and two.
        let mesh = [dim(Role::Tensor, 8, 1), dim(Role::Data, 32, 8), dim(Role::Pipeline, 4, 256)];
        let ranks: Vec<u32> = (0..1024).collect();
        let g = Grid::new(&mesh, &ranks, 3);
        assert_eq!((g.cols.size, g.rows.size, g.block_cols, g.block_rows), (8, 32, 2, 2));
        assert_eq!(
            g.places[5 + 8 * 7 + 256 * 3],
            Place { rank: 5 + 8 * 7 + 256 * 3, block: 3, col: 5, row: 7 }
        );
        assert_eq!(g.block_at(3), (1, 1));
        no_two_share_a_cell(&g);
        let g = Grid::new(
            &[dim(Role::Tensor, 2, 1), dim(Role::Data, 2, 2), dim(Role::Pipeline, 32, 4)],
            &(0..128).collect::<Vec<u32>>(),
            17,
        );
        assert_eq!((g.block_cols, g.block_rows), (16, 2));
    }

    #[test]
    fn four_dimensions_are_blocks_across_and_down() {
        // tensor 2 × context 2 × data 2 × pipeline 3: tensor across, context down, the third
        // (data) blocks across, the fourth (pipeline) down.
        let mesh = [
            dim(Role::Tensor, 2, 1),
            dim(Role::Context, 2, 2),
            dim(Role::Data, 2, 4),
            dim(Role::Pipeline, 3, 8),
        ];
        let ranks: Vec<u32> = (0..24).collect();
        let g = Grid::new(&mesh, &ranks, 8);
        assert_eq!((g.cols.name.as_str(), g.rows.name.as_str()), ("tensor", "context"));
        assert_eq!((g.block_cols, g.block_rows), (2, 3));
        // Rank 13 = tensor 1, context 0, data 1, pipeline 1: block data 1 · pipeline 1.
        assert_eq!(g.places[13], Place { rank: 13, block: 3, col: 1, row: 0 });
        assert_eq!(g.block_at(3), (1, 1));
        assert_eq!(g.block_title(3), "data 1 · pipeline 1");
        assert_eq!(g.words(), "tensor 2 × context 2 × data 2 × pipeline 3");
        no_two_share_a_cell(&g);
    }

    #[test]
    fn without_a_mesh_the_ranks_go_in_order() {
        let g = Grid::new(&[], &[0, 1, 2, 3], 8);
        assert!(!g.mesh);
        assert_eq!(cells(&g), [(0, 0, 0, 0), (1, 0, 1, 0), (2, 0, 2, 0), (3, 0, 3, 0)]);
        assert_eq!(g.words(), "4 ranks in order");
        let ranks: Vec<u32> = (0..64).collect();
        let g = Grid::new(&[], &ranks, 8);
        assert_eq!((g.cols.size, g.rows.size), (16, 4));
        assert_eq!(g.places[37], Place { rank: 37, block: 0, col: 5, row: 2 });
        no_two_share_a_cell(&g);
        let ranks: Vec<u32> = (0..1024).collect();
        let g = Grid::new(&[], &ranks, 8);
        assert_eq!((g.cols.size, g.rows.size), (32, 32));
        no_two_share_a_cell(&g);
        assert!(Grid::new(&[], &[], 8).places.is_empty());
    }

    #[test]
    fn ranks_the_mesh_does_not_tell_apart_get_a_dimension_of_their_own() {
        // Only tensor 2 was found among 8 ranks: the other factor is `other`.
        let ranks: Vec<u32> = (0..8).collect();
        let g = Grid::new(&[dim(Role::Tensor, 2, 1)], &ranks, 8);
        assert_eq!(g.rows, Axis { name: "other".into(), size: 4 });
        assert_eq!(g.places[5], Place { rank: 5, block: 0, col: 1, row: 2 });
        no_two_share_a_cell(&g);
        // A missing middle dimension (tensor and pipeline found, data not): the data ranks
        // share tensor × pipeline cells and go to `other`, a block each.
        let mesh = [dim(Role::Tensor, 2, 1), dim(Role::Pipeline, 2, 4)];
        let g = Grid::new(&mesh, &ranks, 8);
        assert_eq!(g.blocks, [Axis { name: "other".into(), size: 2 }]);
        no_two_share_a_cell(&g);
        // A rank missing from the job leaves its cell empty.
        let g = Grid::new(&[dim(Role::Tensor, 2, 1), dim(Role::Data, 2, 2)], &[0, 1, 3], 8);
        assert_eq!(cells(&g), [(0, 0, 0, 0), (1, 0, 1, 0), (3, 0, 1, 1)]);
    }
}
