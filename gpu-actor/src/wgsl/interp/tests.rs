use sampler::{CheckedModel, Dist, Limits, ModelBuilder};

use super::*;

fn lowered(m: ModelBuilder) -> Program {
    let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
    (**checked.program()).clone()
}

fn record(table: &Table, k: usize) -> &[u32] {
    &table.words[k * RECORD as usize..(k + 1) * RECORD as usize]
}

/// One record per instruction, in order, whose operands point where the program's do, and
/// constants after the data, each once.
#[test]
fn records_follow_the_program_and_constants_follow_the_data() {
    let mut m = ModelBuilder::new("table");
    let y = m.data_vector("y", vec![0.5, -1.0, 2.0]);
    let idx = m.data_int_vector("idx", vec![2, 0]);
    let mu = m.param("mu");
    let z = m.vector_param("z", 3);
    let w = m.transformed("w", &z * 0.9 + 0.9);
    m.sample(&mu, Dist::normal(0.0, 1.0));
    m.sample(&y, Dist::normal(&mu + &w, 2.0));
    m.sample(w.gather(&idx), Dist::normal(0.0, 1.0));
    let program = lowered(m);
    let table = table(&program);
    assert_eq!(table.words.len(), program.insts.len() * RECORD as usize);
    let base = program.data.len() as u32;
    for (k, inst) in program.insts.iter().enumerate() {
        let words = record(&table, k);
        let op = match inst {
            Inst::Constrain { .. } => Op::Constrain,
            Inst::Map { .. } => Op::Map,
            Inst::Zip { .. } => Op::Zip,
            Inst::Sum { .. } => Op::Sum,
            Inst::Cumsum { .. } => Op::Cumsum,
            Inst::Dot { .. } => Op::Dot,
            Inst::Matvec { .. } => Op::Matvec,
            Inst::Gather { .. } => Op::Gather,
            Inst::Density { .. } => Op::Density,
            Inst::RandomWalk { .. } => Op::RandomWalk,
            Inst::Factor { .. } => Op::Factor,
            Inst::Concat { .. } | Inst::LogSumExp { .. } => unreachable!("not in this model"),
        };
        assert_eq!(words[0], op as u32, "instruction {k}");
        if let Some(dst) = inst.writes() {
            let slot = program.slot(dst);
            assert_eq!(words[2..4], [slot.offset, slot.len], "instruction {k}");
        }
        for (j, operand) in inst.reads().into_iter().enumerate().take(OPERANDS) {
            let (offset, len, data) = (words[5 + 2 * j], words[6 + 2 * j], words[4] >> j & 1);
            match operand {
                Operand::Slot(id) => {
                    let slot = program.slot(id);
                    assert_eq!(
                        (offset, len, data),
                        (slot.offset, slot.len, 0),
                        "instruction {k}"
                    );
                }
                Operand::Data(d) => assert_eq!((offset, len, data), (d.offset, d.len, 1)),
                Operand::Const(value) => {
                    assert_eq!((len, data), (1, 1));
                    assert_eq!(
                        table.reals[(offset - base) as usize],
                        value,
                        "instruction {k}"
                    );
                }
            }
        }
    }
    // 0.9 twice, 0 and 1 of mu's density, 2.0, and no bounds (no constrained parameter):
    // each constant once.
    let mut sorted: Vec<u64> = table.reals.iter().map(|r| r.to_bits()).collect();
    let n = sorted.len();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), n, "{:?}", table.reals);
    assert!(n <= 4, "{:?}", table.reals);
    // Gather indices, the zero word, the table.
    let indices = device_indices(&program);
    assert_eq!(indices[..program.index.len()], program.index[..]);
    assert_eq!(indices[zero_at(&program) as usize], 0);
    assert_eq!(indices[code_at(&program) as usize..], table.words[..]);
    assert_eq!(device_data(&program)[program.data.len()..], table.reals[..]);
}

/// A density's parts are those `density.rs` generates: a part whose operands are all data or
/// constants is dropped, and a density with none adds nothing.
#[test]
fn density_parts_are_dropped_as_the_generator_drops_them() {
    let mut m = ModelBuilder::new("parts");
    let y = m.data_vector("y", vec![0.5, -1.0, 2.0]);
    let mu = m.param("mu");
    let sigma = m.param_constrained("sigma", sampler::Constraint::Positive);
    // Normal: -ln sigma (of sigma) and the kernel.
    m.sample(&y, Dist::normal(&mu, 2.0));
    m.sample(&y, Dist::normal(&mu, &sigma));
    let program = lowered(m);
    let table = table(&program);
    let densities: Vec<&[u32]> = (0..program.insts.len())
        .map(|k| record(&table, k))
        .filter(|words| words[0] == Op::Density as u32)
        .collect();
    let parts = |words: &[u32]| words[EXTRA + 1..EXTRA + 4].to_vec();
    // sigma = 2 is data: its term is dropped, the kernel stays.
    assert_eq!(parts(densities[0]), vec![Part::Kernel as u32, 0, 0]);
    let one = Part::One as u32 | 2 << 4 | term_index(TermFn::NegLogScale) << 12;
    assert_eq!(parts(densities[1]), vec![one, Part::Kernel as u32, 0]);
    // The distribution's unused parameter is the constant 0, with no adjoint.
    let p2 = densities[1][5 + 2 * 3];
    assert_eq!(densities[1][4] >> 3 & 1, 1);
    assert_eq!(table.reals[(p2 - program.data.len() as u32) as usize], 0.0);
}
