//! Lanes: one chain per group of `lanes` neighbouring invocations of a subgroup, which split
//! the model's long vectors between them (the plan of which slots are split, and where each
//! slot lives on a lane's tape).
//!
//! With `lanes = L > 1`, every invocation of a group runs the chain's NUTS state machine and
//! keeps the chain's short vectors whole (they are *replicated*: each lane computes the same
//! values the same way). A *split* slot's element `i` lives only on lane `i % L`, at local
//! position `i / L`. Elementwise instructions over split slots run on each lane's own
//! elements; sums over them (a `Sum`, a `Dot`, a density's terms, the adjoint of a broadcast
//! scalar, the transposed product of `Matvec`) add each lane's part and then combine the parts
//! with a butterfly of `subgroupShuffleXor` over the group. A butterfly gives every lane the
//! same bits (floating-point addition is commutative), so every lane takes the same branches
//! and the chain stays one chain.
//!
//! A slot is split when its instruction is elementwise over operands that are split, scalars
//! or data (a long observation vector, the product of a data matrix with a replicated vector),
//! and it has at least `L` elements. A parameter vector of at least `L` coordinates is split
//! too (its `Constrain` reads each lane's coordinates from the kernel's split chain state
//! through `g_theta_split` and writes their gradient through `g_set_grad_split`), and so is a
//! Gaussian random walk over a split vector (each step's previous element comes from the
//! neighbouring lane). When splitting the parameter vectors leaves a split slot that must be
//! gathered whole (a replicated vector combined with a split one, a cumulative sum over a
//! split slot, a gather from one, a product with one), the plan keeps parameter vectors
//! replicated instead; a program that needs such a gather even then cannot use lanes:
//! [`plan`] says which instruction is in the way.
//!
//! # Fused
//!
//! When no reduction (`Sum`, `Dot`) reads a split slot and no parameter vector or random walk
//! is split, nothing outside the split instructions reads what they write: their results only
//! flow into densities and factors, whose adjoint is 1. Then the plan is *fused*: the split instructions run after all the others, in one
//! loop over each lane's elements (`G_SPLIT_TRIPS` trips), whose trip runs their forward sweep
//! and at once their backward sweep on one element. A split slot then holds one value on the
//! lane's tape (the current element's), so the tape stays short whatever the data's size; a
//! matrix row is loaded once for both sweeps; the adjoints of replicated operands and the
//! log density gather in per-lane parts that are summed over the lanes once, after the loop
//! (by butterflies, or where fewer shuffles do it, by a reduce-scatter that leaves each sum on
//! one lane and a broadcast of it from there: every lane again gets the same bits).
//! A density's terms that do not depend on the element (`n` times a term of broadcast
//! scalars) run once, outside the loop.

use sampler::{Inst, Operand, Program, SlotId};

/// Where one slot lives on a lane's tape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocalSlot {
    /// First local value.
    pub offset: u32,
    /// Local values: the slot's length, or `ceil(len / lanes)` when split.
    pub len: u32,
    /// Whether the slot is split across the lanes.
    pub split: bool,
}

/// Which slots are split and the lane's tape layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Invocations per chain (1: no splitting).
    pub lanes: u32,
    /// Indexed by [`SlotId`].
    pub slots: Vec<LocalSlot>,
    /// Values on one lane's tape.
    pub tape_len: u32,
    /// Whether each instruction runs split (its loop over elements is over each lane's own).
    pub insts: Vec<bool>,
    /// Whether the split instructions run fused, as one loop over each lane's elements (see
    /// the module documentation); then a split slot holds one value on the lane's tape.
    pub fused: bool,
    /// Trips of that loop: the longest split instruction's elements per lane.
    pub trips: u32,
}

impl Plan {
    /// The identity plan: one chain per invocation.
    pub(crate) fn whole(program: &Program) -> Plan {
        Plan {
            lanes: 1,
            slots: program
                .slots
                .iter()
                .map(|slot| LocalSlot {
                    offset: slot.offset,
                    len: slot.len,
                    split: false,
                })
                .collect(),
            tape_len: program.tape_len.max(1) as u32,
            insts: vec![false; program.insts.len()],
            fused: false,
            trips: 0,
        }
    }

    pub(crate) fn slot(&self, id: SlotId) -> LocalSlot {
        self.slots[id.0 as usize]
    }

    /// The longest split slot's length in elements (0 when none is split).
    pub(crate) fn longest_split(&self, program: &Program) -> u32 {
        program
            .slots
            .iter()
            .zip(&self.slots)
            .filter(|(_, local)| local.split)
            .map(|(slot, _)| slot.len)
            .max()
            .unwrap_or(0)
    }
}

/// Why a program cannot be split across lanes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("instruction {inst} ({kind}) {problem}")]
pub struct SplitRefusal {
    /// Its position in `program.insts`.
    pub inst: usize,
    /// Its kind.
    pub kind: &'static str,
    /// What is in the way.
    pub problem: &'static str,
}

/// How an operand is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Data or a constant: any lane can read any element.
    Free,
    /// A replicated scalar slot.
    Scalar,
    /// A replicated vector slot.
    Vector,
    /// A split slot.
    Split,
}

/// The plan for `program` on groups of `lanes` invocations (a power of two), which has passed
/// `check`.
pub(crate) fn plan(program: &Program, lanes: u32) -> Result<Plan, SplitRefusal> {
    if lanes <= 1 {
        return Ok(Plan::whole(program));
    }
    plan_with(program, lanes, true).or_else(|_| plan_with(program, lanes, false))
}

/// [`plan`], with parameter vectors split or kept replicated.
fn plan_with(program: &Program, lanes: u32, split_params: bool) -> Result<Plan, SplitRefusal> {
    let mut split = vec![false; program.slots.len()];
    let mut inst_split = vec![false; program.insts.len()];
    // Fused unless a reduction (`Sum`, `Dot`) reads a split slot: its result's adjoint is only
    // known in the backward sweep.
    let mut fused = true;
    let mut longest = 0;
    let held = |split: &[bool], operand: Operand| match operand {
        Operand::Slot(id) if split[id.0 as usize] => Held::Split,
        Operand::Slot(id) if program.slot(id).len == 1 => Held::Scalar,
        Operand::Slot(_) => Held::Vector,
        Operand::Data(_) | Operand::Const(_) => Held::Free,
    };
    // Elementwise over `operands` with `len` elements: split when any operand is, or when
    // long enough and no operand is a replicated vector.
    let elementwise = |split: &[bool], operands: &[Operand], len: u32| -> Result<bool, &str> {
        let helds: Vec<Held> = operands.iter().map(|&op| held(split, op)).collect();
        let any_split = helds.contains(&Held::Split);
        let any_vector = helds.contains(&Held::Vector);
        match (any_split, any_vector) {
            (true, true) => Err("combines a split vector with a replicated one"),
            (true, false) => Ok(true),
            (false, _) => Ok(!any_vector && len >= lanes),
        }
    };
    for (k, inst) in program.insts.iter().enumerate() {
        let refuse = |problem| SplitRefusal {
            inst: k,
            kind: super::model::inst_name(inst),
            problem,
        };
        let (dst, runs_split) = match *inst {
            Inst::Constrain { theta, dst, .. } => (Some(dst), split_params && theta.len >= lanes),
            Inst::Map { a, dst, .. } => {
                let len = program.slot(dst).len;
                let s = elementwise(&split, &[a], len).map_err(refuse)?;
                (Some(dst), s)
            }
            Inst::Zip { a, b, dst, .. } => {
                let len = program.slot(dst).len;
                let s = elementwise(&split, &[a, b], len).map_err(refuse)?;
                (Some(dst), s)
            }
            Inst::Sum { a, dst } => (Some(dst), held(&split, a) == Held::Split),
            Inst::Dot { a, b, dst } => {
                (Some(dst), elementwise(&split, &[a, b], 0).map_err(refuse)?)
            }
            Inst::Factor { a, .. } => (None, held(&split, a) == Held::Split),
            Inst::Cumsum { a, dst } => {
                if held(&split, a) == Held::Split {
                    return Err(refuse("runs over a split vector"));
                }
                (Some(dst), false)
            }
            Inst::Gather { a, dst, .. } => {
                if held(&split, a) == Held::Split {
                    return Err(refuse("gathers from a split vector"));
                }
                (Some(dst), false)
            }
            // Refused by `check::unsupported` before a split is planned for a kernel.
            Inst::Concat { .. } | Inst::LogSumExp { .. } => {
                return Err(refuse("is not supported on the GPU yet"));
            }
            // Its parameters are scalars (sampler's lowering).
            Inst::RandomWalk { x, .. } => (None, held(&split, x) == Held::Split),
            Inst::Matvec { m, v, dst } => {
                if held(&split, v) == Held::Split {
                    return Err(refuse("multiplies by a split vector"));
                }
                (Some(dst), m.rows >= lanes)
            }
            Inst::Density {
                kind,
                x,
                params,
                len,
                ..
            } => {
                let operands: Vec<Operand> = std::iter::once(x)
                    .chain(params[..kind.n_params()].iter().copied())
                    .collect();
                let s = elementwise(&split, &operands, len).map_err(refuse)?;
                (None, s)
            }
        };
        inst_split[k] = runs_split;
        // A reduction's result is a replicated scalar.
        let reduces = matches!(inst, Inst::Sum { .. } | Inst::Dot { .. });
        if let Some(dst) = dst {
            split[dst.0 as usize] = runs_split && !reduces;
        }
        if runs_split {
            // A split parameter vector or walk reads other lanes' elements (shuffles every
            // lane runs), which a fused loop's one element at a time cannot give.
            let gathers = matches!(inst, Inst::Constrain { .. } | Inst::RandomWalk { .. });
            fused &= !reduces && !gathers;
            longest = longest.max(elements(program, inst));
        }
    }
    // Fused, each split slot holds the lane's current element only.
    let fused = fused && longest > 0;
    let mut offset = 0;
    let slots: Vec<LocalSlot> = program
        .slots
        .iter()
        .zip(&split)
        .map(|(slot, &split)| {
            let len = if split && fused {
                1
            } else if split {
                slot.len.div_ceil(lanes)
            } else {
                slot.len
            };
            let local = LocalSlot { offset, len, split };
            offset += len;
            local
        })
        .collect();
    Ok(Plan {
        lanes,
        slots,
        tape_len: offset.max(1),
        insts: inst_split,
        fused,
        trips: if fused { longest.div_ceil(lanes) } else { 0 },
    })
}

/// The elements a split instruction runs over.
fn elements(program: &Program, inst: &Inst) -> u32 {
    match *inst {
        Inst::Map { dst, .. } | Inst::Zip { dst, .. } | Inst::Matvec { dst, .. } => {
            program.slot(dst).len
        }
        Inst::Density { len, .. } => len,
        Inst::Constrain { theta, .. } => theta.len,
        Inst::RandomWalk { x: a, .. } | Inst::Factor { a, .. } => program.len_of(a) as u32,
        _ => 0,
    }
}
