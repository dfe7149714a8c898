//! Unit tests of the device layer that need no GPU.

use super::thread::dispatch_grid;
use crate::error::GpuError;

#[test]
fn dispatch_grid_is_one_dimensional_until_the_limit() {
    assert_eq!(dispatch_grid(1, 64, 65535).ok(), Some((1, 1)));
    assert_eq!(dispatch_grid(64, 64, 65535).ok(), Some((1, 1)));
    assert_eq!(dispatch_grid(65, 64, 65535).ok(), Some((2, 1)));
    assert_eq!(dispatch_grid(65535 * 64, 64, 65535).ok(), Some((65535, 1)));
}

#[test]
fn dispatch_grid_covers_every_chain_in_two_dimensions() {
    for (n_chains, size, max) in [(100, 4, 7), (65536 * 64 + 1, 64, 65535), (40, 1, 7)] {
        let (x, y) = dispatch_grid(n_chains, size, max).unwrap_or((0, 0));
        assert!(x <= max && y <= max, "{n_chains} chains: grid {x} x {y}");
        let covered = u64::from(x) * u64::from(y) * u64::from(size);
        assert!(
            covered >= n_chains as u64,
            "{n_chains} chains: grid {x} x {y}"
        );
        // No whole row of workgroups is wasted.
        assert!(
            (u64::from(y) - 1) * u64::from(x) * u64::from(size) < n_chains as u64,
            "{n_chains} chains: grid {x} x {y}"
        );
    }
}

#[test]
fn dispatch_grid_refuses_more_than_two_dimensions_hold() {
    assert!(matches!(
        dispatch_grid(7 * 7 * 2 + 1, 2, 7),
        Err(GpuError::TooLarge { .. })
    ));
}

#[test]
fn transposed_puts_each_value_at_its_column_position() {
    // Sizes around the block of rows, and one row or column alone.
    for (rows, cols) in [
        (1, 1),
        (1, 5),
        (7, 1),
        (63, 3),
        (64, 21),
        (65, 2),
        (200, 21),
    ] {
        let values: Vec<f64> = (0..rows * cols).map(|i| i as f64).collect();
        let out = crate::kernels::layout::transposed(&values, rows, cols);
        assert_eq!(out.len(), values.len());
        for row in 0..rows {
            for col in 0..cols {
                assert_eq!(
                    out[col * rows + row],
                    values[row * cols + col],
                    "{rows} x {cols}"
                );
            }
        }
        assert_eq!(crate::kernels::layout::transposed(&out, cols, rows), values);
    }
}
