//! The dense kernels of the CPU evaluator (matrix-vector products and lane sums), compiled for
//! AVX2 when the CPU has it and for the baseline otherwise.
//!
//! Both builds give the same bits: the code fixes the order of every addition and uses no fused
//! multiply-add, so the instruction set changes the speed only.

/// Rows handled together: each pass over `v` serves four rows.
const ROWS: usize = 4;

/// Runs `body` compiled with AVX2 where the CPU has it.
macro_rules! with_avx2 {
    ($name:ident($($arg:ident: $ty:ty),*) $body:block) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $name($($arg: $ty),*) $body
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            #[allow(unsafe_code)]
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { $name($($arg),*) };
        }
        $body
    }};
}

/// `out = M v` for a row-major `M` with `cols` columns and `out.len()` rows.
pub(crate) fn matvec(matrix: &[f64], cols: usize, v: &[f64], out: &mut [f64]) {
    with_avx2!(matvec_avx2(matrix: &[f64], cols: usize, v: &[f64], out: &mut [f64]) {
        matvec_body(matrix, cols, v, out)
    })
}

/// `v_adj += Mᵀ out_adj` for a row-major `M` with `cols` columns and `out_adj.len()` rows.
pub(crate) fn matvec_transpose_add(
    matrix: &[f64],
    cols: usize,
    out_adj: &[f64],
    v_adj: &mut [f64],
) {
    with_avx2!(transpose_avx2(matrix: &[f64], cols: usize, out_adj: &[f64], v_adj: &mut [f64]) {
        transpose_body(matrix, cols, out_adj, v_adj)
    })
}

#[inline(always)]
fn matvec_body(matrix: &[f64], cols: usize, v: &[f64], out: &mut [f64]) {
    let v = &v[..cols];
    let block = ROWS * cols;
    let full = out.len() - out.len() % ROWS;
    for (rows, out) in matrix[..full * cols]
        .chunks_exact(block)
        .zip(out[..full].chunks_exact_mut(ROWS))
    {
        let (r0, rest) = rows.split_at(cols);
        let (r1, rest) = rest.split_at(cols);
        let (r2, r3) = rest.split_at(cols);
        let mut acc = [0.0; ROWS];
        for j in 0..cols {
            acc[0] += r0[j] * v[j];
            acc[1] += r1[j] * v[j];
            acc[2] += r2[j] * v[j];
            acc[3] += r3[j] * v[j];
        }
        out.copy_from_slice(&acc);
    }
    for (row, o) in matrix[full * cols..]
        .chunks_exact(cols)
        .zip(&mut out[full..])
    {
        *o = row.iter().zip(v).map(|(m, v)| m * v).sum();
    }
}

#[inline(always)]
fn transpose_body(matrix: &[f64], cols: usize, out_adj: &[f64], v_adj: &mut [f64]) {
    let v_adj = &mut v_adj[..cols];
    let block = ROWS * cols;
    let full = out_adj.len() - out_adj.len() % ROWS;
    for (rows, g) in matrix[..full * cols]
        .chunks_exact(block)
        .zip(out_adj[..full].chunks_exact(ROWS))
    {
        let (r0, rest) = rows.split_at(cols);
        let (r1, rest) = rest.split_at(cols);
        let (r2, r3) = rest.split_at(cols);
        for j in 0..cols {
            v_adj[j] += (g[0] * r0[j] + g[1] * r1[j]) + (g[2] * r2[j] + g[3] * r3[j]);
        }
    }
    for (row, &g) in matrix[full * cols..]
        .chunks_exact(cols)
        .zip(&out_adj[full..])
    {
        for (va, m) in v_adj.iter_mut().zip(row) {
            *va += g * m;
        }
    }
}

/// Sums `f(i)` over `0..n` in four lane accumulators, added pairwise at the end.
#[inline(always)]
pub(crate) fn sum_lanes(n: usize, f: impl Fn(usize) -> f64) -> f64 {
    let mut lanes = [0.0; 4];
    let full = n - n % 4;
    for base in (0..full).step_by(4) {
        for (k, lane) in lanes.iter_mut().enumerate() {
            *lane += f(base + k);
        }
    }
    let mut total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for i in full..n {
        total += f(i);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic matrix and vectors with no special structure.
    fn values(n: usize, salt: f64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as f64 + salt) * 0.618_033_988_75).fract() - 0.5)
            .collect()
    }

    #[test]
    fn matvec_and_its_transpose_match_the_plain_loops() {
        for (rows, cols) in [(1, 1), (3, 5), (4, 4), (7, 20), (500, 20), (9, 1)] {
            let m = values(rows * cols, 0.3);
            let v = values(cols, 1.7);
            let g = values(rows, 2.9);
            let mut out = vec![0.0; rows];
            matvec(&m, cols, &v, &mut out);
            let mut v_adj = vec![1.0; cols];
            matvec_transpose_add(&m, cols, &g, &mut v_adj);
            for r in 0..rows {
                let expected: f64 = (0..cols).map(|j| m[r * cols + j] * v[j]).sum();
                assert!((out[r] - expected).abs() <= 1e-13, "{rows}x{cols} row {r}");
            }
            for j in 0..cols {
                let expected: f64 = 1.0 + (0..rows).map(|r| m[r * cols + j] * g[r]).sum::<f64>();
                assert!(
                    (v_adj[j] - expected).abs() <= 1e-12,
                    "{rows}x{cols} col {j}"
                );
            }
            // Both builds give the same bits.
            let mut baseline = vec![0.0; rows];
            matvec_body(&m, cols, &v, &mut baseline);
            assert_eq!(baseline, out);
            let mut baseline = vec![1.0; cols];
            transpose_body(&m, cols, &g, &mut baseline);
            assert_eq!(baseline, v_adj);
        }
    }

    #[test]
    fn lane_sums_add_every_term() {
        for n in [0, 1, 3, 4, 5, 8, 13] {
            let total = sum_lanes(n, |i| (i + 1) as f64);
            assert_eq!(total, (n * (n + 1) / 2) as f64);
        }
    }
}
