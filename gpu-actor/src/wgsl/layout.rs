//! How the model's real data is laid out on the device: the program's data, except that a
//! matrix read only by products (`Matvec`) is stored column-major.
//!
//! The lanes of a split chain each take every `L`-th row of a product (`split.rs`), so in
//! one step they read the same column of `L` neighbouring rows: in row-major order those
//! words are a row apart and each lane's load touches its own cache line; column-major they
//! are neighbours and the subgroup's load is one or two lines. A chain on one invocation reads
//! every element, and the invocations of a subgroup (other chains) read the same word at the
//! same time, so the order does not matter there. The layout depends only on the program,
//! so one upload of the data serves every kernel and every lane count.

use sampler::{Inst, MatrixRef, Operand, Program};

/// The matrices stored column-major: those that only `Matvec`s read, whose values no other
/// operand or differently shaped matrix reads.
pub(crate) fn column_major(program: &Program) -> Vec<MatrixRef> {
    let mut products = Vec::new();
    for inst in &program.insts {
        if let Inst::Matvec { m, .. } = *inst
            && !products.contains(&m)
        {
            products.push(m);
        }
    }
    let others = operand_ranges(program);
    products
        .iter()
        .filter(|m| {
            let own = range(m);
            products
                .iter()
                .all(|other| other == *m || !overlaps(own, range(other)))
                && others.iter().all(|&r| !overlaps(own, r))
        })
        .copied()
        .collect()
}

/// The data as the device holds it: `program.data` with the `column_major` matrices
/// transposed in place (element `(r, c)` at `offset + c * rows + r`).
pub fn device_data(program: &Program) -> Vec<f64> {
    let mut data = program.data.clone();
    for m in column_major(program) {
        let (rows, cols, offset) = (m.rows as usize, m.cols as usize, m.offset as usize);
        let row_major = &program.data[offset..offset + rows * cols];
        for (k, &value) in row_major.iter().enumerate() {
            data[offset + (k % cols) * rows + k / cols] = value;
        }
    }
    data
}

fn range(m: &MatrixRef) -> (u32, u32) {
    (m.offset, m.offset + m.rows * m.cols)
}

fn overlaps(a: (u32, u32), b: (u32, u32)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// The data ranges that operands (not matrices) read.
fn operand_ranges(program: &Program) -> Vec<(u32, u32)> {
    program
        .insts
        .iter()
        .flat_map(|inst| program.reads(inst))
        .filter_map(|operand| match operand {
            Operand::Data(data) => Some((data.offset, data.offset + data.len)),
            _ => None,
        })
        .collect()
}
