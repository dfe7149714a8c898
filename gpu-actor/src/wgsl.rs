//! IR to WGSL: a [`sampler::Program`] becomes a WGSL function that computes one chain's log
//! density and gradient, and kernels that call it for many chains.
//!
//! # What is generated
//!
//! [`kernel_source`] returns one WGSL module made of
//! 1. a generated prelude: `alias T = f32 | f64`, the constants `G_DIM`, `G_TAPE_LEN`,
//!    `G_WORKGROUP_SIZE` and `G_TAPE_BLOCK`, the model's bindings and the private variable
//!    `g_chain` (below);
//! 2. the hand-written library of `shaders/` (`math_f32.wgsl` or `math_f64.wgsl`,
//!    `special.wgsl`, `density.wgsl`), loaded by `wgsl/library.rs` only;
//! 3. the model, `fn g_logp_grad() -> T`: the CPU evaluator's forward and backward sweeps.
//!    With a private tape it is generated instruction by instruction (`wgsl/model.rs`,
//!    `wgsl/density.rs`), built with the typed emitter of `wgsl/ast.rs`; with a storage tape
//!    it calls the interpreter of `shaders/interp.wgsl`, which runs the program as a table
//!    (`wgsl/interp.rs`). Either way it computes the same function as the CPU: the same
//!    terms are dropped (dist.rs's rules), the same branches are taken, scalars broadcast the
//!    same way. Only rounding differs;
//! 4. the kernel, hand-written in `shaders/` (`logp_grad.wgsl` for [`KernelKind::LogpGrad`]).
//!
//! # Size
//!
//! What a driver compiles must stay small whatever the model: compile time grows faster than
//! code (lavapipe took minutes for a few hundred instructions of straight-line code over a
//! storage tape, and Mesa and LLVM unroll short loops of their own accord; measurements in
//! `bench/journal.md`, 2026-11-28). So generated code is only for programs of at most
//! [`PRIVATE_MAX_INSTS`] instructions, whose loops are unrolled up to a fixed number of
//! statements (`wgsl/unroll.rs`), and beyond that every loop bound is made opaque to the driver
//! (`+ g_zero`, a zero read from the index buffer); longer programs take a storage tape and the
//! interpreter, whose WGSL is the same for every program. The module's size is thus bounded by
//! a constant, and a compile-time budget ([`crate::DeviceOptions::compile_budget`]) guards the
//! rest.
//!
//! Every generated identifier starts with `g_` (library ones with `sf_`, `dt_`, `dk_`, `lg_`),
//! so none can be a WGSL reserved word. No name from the model is ever emitted. Programs are
//! checked first (`wgsl/check.rs`): a malformed one is a [`CodegenError`], never a panic or an
//! out-of-range read on the device.
//!
//! # The contract between a kernel and the model
//!
//! A kernel that calls `g_logp_grad()` must
//! * define `fn g_theta(j: u32) -> T` (coordinate `j` of the chain's unconstrained point) and
//!   `fn g_set_grad(j: u32, value: T)` (called exactly once per coordinate, with the final
//!   gradient: nothing needs zeroing first), and their split forms `fn g_theta_split(k: u32,
//!   offset: u32) -> T` and `fn g_set_grad_split(k: u32, offset: u32, len: u32, value: T)`,
//!   which every lane of a chain calls together for its element `k` of a parameter vector
//!   split across the lanes (see "Lanes"; `wgsl/ast.rs`'s `Hook` says exactly what they do);
//! * call `g_stage_data(local)` first, in uniform control flow (it may stage the data in
//!   workgroup memory, and it sets `g_zero`), and set the private variable `g_chain` (which
//!   chain this invocation evaluates) before the call: a storage tape is indexed by it;
//! * bind group 0 to the model's data ([`DATA_BINDING`], [`INDEX_BINDING`], as
//!   [`device_data`] and [`device_indices`] lay them out) and binding 0 of
//!   group 1 to a scratch buffer of [`storage_tape_values`] values when the tape is in
//!   storage ([`SCRATCH_BINDING`]); its own bindings are group 1, bindings 1 and up.
//!
//! So a fused leapfrog kernel keeps its position wherever it likes (registers, a private
//! array of `G_DIM` values, a storage buffer) and only says how to read it.
//!
//! # Chain state layout
//!
//! The `logp_grad` kernel's per-chain vectors are dim-major: coordinate `j` of chain `c` is
//! element `j * n_chains + c`, so that the 32 invocations of a warp, which evaluate 32
//! neighbouring chains, read 32 neighbouring words; log densities are at `c`.
//!
//! # Where the tape lives ([`TapePlacement`])
//!
//! The CPU keeps a value tape and an adjoint tape of `program.tape_len` values per chain.
//! * [`TapePlacement::Private`]: two function-local arrays `array<T, G_TAPE_LEN>` in
//!   `g_logp_grad` (zeroed by WGSL on entry). Fast for small tapes. Loops of up to
//!   `unroll::MAX_TRIP` iterations are unrolled with literal indices (`wgsl/unroll.rs`), so
//!   that a small model indexes its tape only with constants and a GPU compiler can keep it
//!   in registers; arrays indexed at run time live in per-thread local memory (cached) on an
//!   NVIDIA GPU, on the stack on lavapipe. Capped at
//!   [`MAX_PRIVATE_TAPE_LEN`] values: every resident invocation reserves them, and lavapipe
//!   compiles dynamically indexed private arrays of a thousand values for over a minute.
//! * [`TapePlacement::Storage`]: `2 * tape_len` values per chain in the scratch buffer, in
//!   blocks of [`TAPE_BLOCK`] chains (value `k` of chain `c` at
//!   `(c / 32) * 2 * tape_len * 32 + k * 32 + c % 32`, adjoints at `k >= tape_len`), so a
//!   warp's accesses coalesce. The interpreter (`shaders/interp.wgsl`) runs these. Each
//!   adjoint is cleared when its value is written, so there is no clearing pass. One
//!   invocation per chain. Any tape size, bounded by the device's
//!   largest storage binding: `storage_tape_values(program, n) * size_of::<T>()` bytes
//!   (logistic, 1021 values: 65536 chains need 535 MB in f32, 1.07 GB in f64; the H100 binds
//!   2 GiB, lavapipe 128 MiB).
//!
//! [`TapePlacement::choose`] picks private up to [`PRIVATE_TAPE_LEN_THRESHOLD`] values and
//! [`PRIVATE_MAX_INSTS`] instructions where the unrolled code indexes the tape only with
//! constants (eight schools), and storage otherwise (logistic, whose two 500-vectors make its
//! tape long; sv on one lane, whose walk's loop indexes the tape; long programs). Generated
//! code over a storage tape took lavapipe's LLVM time that grew faster than the program
//! (every access is a per-lane gather); the interpreter's is the same for every program.
//! Chains split across lanes keep the private tape whatever its indices.
//!
//! # Model data
//!
//! All model data is in storage buffers (no push constants: size is bounded by memory): the
//! real values of `program.data` as `array<T>` (converted to f32 for [`Precision::F32`]), the
//! `Gather` indices as `array<u32>`. Every chain reads the same data, so on a GPU it is served
//! from cache. With [`DataPlacement::Workgroup`] the kernels read it from workgroup memory
//! instead: each kernel's entry point first calls the generated `g_stage_data(local)`, in which
//! the workgroup's invocations copy `g_data` into `var<workgroup> g_shared_data` (a loop with
//! the same trip count for every invocation) and meet at a `workgroupBarrier()`. The call comes
//! before any invocation can leave (chains past the end, chains that finish early), because a
//! barrier must be reached by every invocation of the workgroup. [`DataPlacement::choose`]
//! takes it when the data fits the adapter's `Limits::max_compute_workgroup_storage_size`:
//! the logistic model's data (a 500 x 20 matrix and 500 outcomes) is 42 000 bytes in f32,
//! under the H100's 48 KiB but over lavapipe's 32 KiB, and 84 000 bytes in f64, which fits
//! neither. Split chains (below) take it only in workgroups of [`SPLIT_WORKGROUP_SIZE`]
//! ([`DataPlacement::choose_for_lanes`]). With [`DataPlacement::Storage`] `g_stage_data` is
//! empty.
//!
//! # Lanes
//!
//! [`ShaderOptions::lanes`] invocations run each chain: 1, or a power of two up to the
//! adapter's smallest subgroup ([`choose_lanes`] picks the subgroup size, at most
//! [`MAX_LANES`], or half of it, for programs with a vector of at least
//! [`SPLIT_MIN_PER_LANE`] elements per lane, such as the logistic model's 500 observations or
//! the stochastic-volatility model's 100 log-volatilities). The kernels find their chain with
//! the generated `g_chain_of(invocation)`, which also sets `g_lane`; a chain's lanes are
//! neighbouring invocations, an aligned run of one subgroup. The model's long vectors are
//! split across the lanes (`wgsl/split.rs`), and the NUTS kernels split the chain's vectors
//! (`shaders/nuts_state.wgsl`). Sums over lanes go through the generated `g_lane_sum`, a
//! butterfly of `subgroupShuffleXor` that leaves the same bits on every lane, and
//! `g_lane_get(x, source)` reads another lane's value; with one lane both are the identity,
//! so such kernels need no subgroup operations. Split chains need the private tape.
//!
//! # Precision
//!
//! f32 uses the GPU's `exp`/`log`; f64 uses `sf_exp`/`sf_log` built from arithmetic
//! (`shaders/math_f64.wgsl`, msun's algorithms, within 1 ulp): WGSL's own f64 `exp`/`log`
//! are silently wrong on lavapipe and make NVIDIA's compiler fail and lose the device (driver
//! 580; see [`crate::GpuDevice::check_f64_builtins`]), and a round trip through f32 would cap
//! accuracy at 1e-7. `sqrt`, `abs`, `floor`, `ldexp` and f32's `frexp` are exact and are used
//! directly (naga's f64 `frexp` needs 64-bit integers).
//!
//! In f32, sums over a vector's elements are compensated (Neumaier's, `sf_sum_add` of
//! `shaders/math_f32.wgsl`; `wgsl/tape.rs`'s `Sum`): a density's terms, the adjoints of
//! broadcast scalars (the gradient of `alpha` and `beta` in `alpha + beta * x`, whose terms
//! cancel at the mode), `Sum`, `Dot`, `Factor` and a product's column sums; the interpreter
//! does the same for its densities and broadcast adjoints. Over many elements they keep the
//! log density and gradient to about one rounding of the result where plain sums lose a
//! factor growing with the length (issue 25; figures in `bench/journal.md`, 2026-11-29).
//! Not compensated: a fused plan's per-lane sums (each lane sums its share of the elements,
//! and the lanes' parts meet in a butterfly), the sum of the log density's few terms (the
//! result is returned in f32 anyway), and f64.

mod ast;
mod check;
mod cost;
mod density;
mod interp;
mod layout;
pub(crate) mod library;
mod model;
mod split;
mod tape;
mod unroll;

pub use interp::{device_data, device_indices};

#[cfg(test)]
pub(crate) mod tests;

use std::fmt;

use sampler::{MatrixRef, Program};

pub use cost::{LoopBudget, LoopLimitExceeded, SOFTWARE_LOOP_LIMIT, model_loop_iterations};
pub use split::SplitRefusal;

use ast::{
    Access, BinOp, Builtin, Element, Expr, Function, Global, Hook, Ident, Item, Module,
    ModuleConst, Stmt, Ty,
};
use tape::Tape;

/// Floating-point precision of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Precision {
    /// 32-bit: every adapter; parity with the CPU to about 1e-4 relative.
    F32,
    /// 64-bit: adapters with `wgpu::Features::SHADER_F64`; parity to about 1e-10.
    F64,
}

impl Precision {
    /// Bytes per value.
    pub fn size_bytes(self) -> u64 {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        })
    }
}

/// Where each chain's value and adjoint tapes live (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TapePlacement {
    /// Function-local arrays.
    Private,
    /// A region of a storage buffer, interleaved across chains, read and written by
    /// generated code.
    Storage,
    /// The same storage tape, run by the interpreter of `shaders/interp.wgsl` (`interp.rs`):
    /// the same WGSL for every program.
    Interpreted,
}

/// Tapes up to this many values go to [`TapePlacement::Private`] by default.
pub const PRIVATE_TAPE_LEN_THRESHOLD: usize = 256;

/// Programs of more instructions than this go to [`TapePlacement::Interpreted`] by default,
/// whatever their tape: generated code grows with the program, and the
/// time drivers take to compile it faster (`bench/journal.md`, 2026-11-28). Below it, a
/// private tape's generated code is the faster to run and, on lavapipe, to compile.
pub const PRIVATE_MAX_INSTS: usize = 256;

/// Programs of at most this many instructions that do not take a private tape take generated
/// code over a storage tape ([`TapePlacement::Storage`]); longer ones the interpreter
/// ([`TapePlacement::Interpreted`]). Generated code runs faster (on an H200, two
/// 200 x 200 data matrices of a 16-instruction program sampled several times faster than
/// interpreted: `bench/journal.md`, 2026-11-28), and for so few instructions its size and
/// compile time stay small; what grew past bounds were long programs.
pub const GENERATED_STORAGE_MAX_INSTS: usize = 32;

/// Chains per block of the storage tape layout: value `k` of chain `c` is at
/// `(c / B) * (2 * tape_len * B) + k * B + c % B`, so the 32 chains of a warp touch 32
/// neighbouring words, and every access of a chain is one base plus a compile-time constant
/// (no multiplication by the run-time number of chains).
pub const TAPE_BLOCK: u32 = 32;

/// Values of the scratch buffer that `n_chains` chains need with [`TapePlacement::Storage`].
pub fn storage_tape_values(program: &Program, n_chains: usize) -> u64 {
    let blocks = (n_chains as u64).div_ceil(u64::from(TAPE_BLOCK));
    blocks * u64::from(TAPE_BLOCK) * 2 * program.tape_len.max(1) as u64
}

/// Bytes of the scratch buffer that `n_chains` chains of kernels built with `options` need:
/// [`storage_tape_values`] with [`TapePlacement::Storage`], none with private tapes.
pub fn scratch_bytes(program: &Program, options: &ShaderOptions, n_chains: usize) -> u64 {
    match options.placement {
        TapePlacement::Private => 0,
        TapePlacement::Storage | TapePlacement::Interpreted => {
            storage_tape_values(program, n_chains) * options.precision.size_bytes()
        }
    }
}

/// The longest tape [`TapePlacement::Private`] accepts.
pub const MAX_PRIVATE_TAPE_LEN: usize = 1024;

impl TapePlacement {
    /// The default placement for `program`: private for a tape of at most
    /// [`PRIVATE_TAPE_LEN_THRESHOLD`] values and at most [`PRIVATE_MAX_INSTS`] instructions
    /// that its generated code, loops unrolled, indexes only with constants (so that a
    /// compiler keeps it in registers); else storage, with generated code up to
    /// [`GENERATED_STORAGE_MAX_INSTS`] instructions and interpreted beyond (its kernels are
    /// the same size whatever the program). A private tape indexed at run time is the slow
    /// case of both: per-thread local memory on NVIDIA, and on lavapipe a chain of selects at
    /// every access, whose compile time grows with the tape times the accesses.
    pub fn choose(program: &Program) -> TapePlacement {
        if program.tape_len <= PRIVATE_TAPE_LEN_THRESHOLD
            && interp::records(program) <= PRIVATE_MAX_INSTS
            && check::check(program).is_ok()
            && !private_tape_indexed_at_run_time(program)
        {
            TapePlacement::Private
        } else if interp::records(program) <= GENERATED_STORAGE_MAX_INSTS {
            TapePlacement::Storage
        } else {
            TapePlacement::Interpreted
        }
    }

    /// Whether the tape lives in the scratch buffer ([`TapePlacement::Storage`] or
    /// [`TapePlacement::Interpreted`]).
    pub fn in_storage(self) -> bool {
        self != TapePlacement::Private
    }

    /// The default for kernels with `lanes` invocations per chain: [`TapePlacement::choose`]
    /// with one, private with more (split chains need it).
    pub fn choose_for_lanes(program: &Program, lanes: u32) -> TapePlacement {
        if lanes > 1 {
            TapePlacement::Private
        } else {
            TapePlacement::choose(program)
        }
    }
}

impl fmt::Display for TapePlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TapePlacement::Private => "private",
            TapePlacement::Storage => "storage",
            TapePlacement::Interpreted => "interpreted",
        })
    }
}

/// Which array accesses of a kernel are checked while it runs.
///
/// WebGPU bounds every index: naga clamps each dynamic index into a function-local or
/// workgroup array to its last element, and storage-buffer accesses are checked by the
/// driver (Vulkan's robust buffer access, which wgpu enables) or by naga. The clamps cost
/// the hot loops dearly: on the H100 each read of the logistic model's matrix from workgroup
/// memory took three instructions (add-and-clamp, shift, load) instead of one load with a
/// constant offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IndexChecks {
    /// Every access checked: naga's clamps on local and workgroup arrays, and storage buffers.
    All,
    /// Storage-buffer accesses only, by the driver's robust buffer access (Vulkan only). The
    /// indices into local and workgroup arrays are in range by construction: loop bounds
    /// and offsets come from the checked program's slot and data sizes, gather indices are
    /// checked against their source when the model is lowered (`sampler::lower`), and the
    /// hand-written kernels index their arrays below the constants that size them. The
    /// integration test `index_checks_change_no_draw` samples with the NUTS kernels (one lane
    /// and split, step-size search included) and the fused kernel both ways and requires the
    /// same draws to the bit; the GPU-against-CPU parity tests run the log-density kernel
    /// this way.
    Buffers,
}

impl IndexChecks {
    /// The default on a backend: [`IndexChecks::Buffers`] on Vulkan, whose robust buffer
    /// access keeps storage checked; elsewhere [`IndexChecks::All`].
    pub fn default_for(backend: wgpu::Backend) -> IndexChecks {
        if backend == wgpu::Backend::Vulkan {
            IndexChecks::Buffers
        } else {
            IndexChecks::All
        }
    }
}

impl fmt::Display for IndexChecks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IndexChecks::All => "all",
            IndexChecks::Buffers => "buffers",
        })
    }
}

/// Where the kernels read the model's real data from (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataPlacement {
    /// The storage buffer bound at [`DATA_BINDING`].
    Storage,
    /// A copy in workgroup memory, made at the start of every dispatch.
    Workgroup,
}

/// Bytes of workgroup memory that [`DataPlacement::Workgroup`] takes for `program`: its data,
/// rounded up to whole `vec4`s (the layout of `shared_rows`, which reads product rows as `vec4`s).
pub fn workgroup_data_bytes(program: &Program, precision: Precision) -> u64 {
    program.data.len().div_ceil(4) as u64 * 4 * precision.size_bytes()
}

/// The product matrices that workgroup memory holds row-major, a row as whole `vec4`s, for
/// kernels of `options`: with [`DataPlacement::Workgroup`] and chains split across lanes,
/// the matrices stored column-major (`layout.rs`) whose rows are whole `vec4`s from a
/// `vec4` boundary (offset and columns multiples of 4) and short enough to unroll. A lane
/// then loads its row of the product in `cols / 4` loads instead of `cols` (slightly faster
/// for logistic on the H100; measurements in `bench/journal.md`). Where any matrix
/// qualifies, `g_shared_data` is an `array<vec4<T>>` and every other value is read as
/// `g_shared_data[i / 4][i % 4]`.
pub(crate) fn shared_rows(program: &Program, options: &ShaderOptions) -> Vec<MatrixRef> {
    if options.data != DataPlacement::Workgroup || options.lanes <= 1 {
        return Vec::new();
    }
    layout::column_major(program)
        .into_iter()
        .filter(|m| m.offset % 4 == 0 && m.cols % 4 == 0 && m.cols <= unroll::MAX_TRIP)
        .collect()
}

impl DataPlacement {
    /// [`DataPlacement::Workgroup`] when `program` has data and it fits in
    /// `max_workgroup_storage` bytes (the adapter's
    /// `Limits::max_compute_workgroup_storage_size`), else [`DataPlacement::Storage`].
    pub fn choose(
        program: &Program,
        precision: Precision,
        max_workgroup_storage: u32,
    ) -> DataPlacement {
        let bytes = workgroup_data_bytes(program, precision);
        if bytes > 0 && bytes <= u64::from(max_workgroup_storage) {
            DataPlacement::Workgroup
        } else {
            DataPlacement::Storage
        }
    }

    /// The default for kernels with `lanes` invocations per chain in workgroups of
    /// `workgroup_size`: [`DataPlacement::choose`] with one lane, or with split chains in
    /// workgroups of at least [`SPLIT_WORKGROUP_SIZE`]; storage for split chains in smaller
    /// workgroups. A workgroup's copy of the data caps the workgroups resident on a
    /// multiprocessor: the logistic model's copy per workgroup of 64 left few warps
    /// resident, and its dispatches ran faster reading the matrix through the cache. A
    /// workgroup of 512 split-chain invocations already fills a multiprocessor's registers
    /// alone; there workgroup memory was the faster (measurements in `bench/journal.md`).
    pub fn choose_for_lanes(
        program: &Program,
        precision: Precision,
        max_workgroup_storage: u32,
        lanes: u32,
        workgroup_size: u32,
    ) -> DataPlacement {
        if lanes > 1 && workgroup_size < SPLIT_WORKGROUP_SIZE {
            DataPlacement::Storage
        } else {
            DataPlacement::choose(program, precision, max_workgroup_storage)
        }
    }
}

impl fmt::Display for DataPlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DataPlacement::Storage => "storage",
            DataPlacement::Workgroup => "workgroup",
        })
    }
}

/// The kernels the generator can produce; part of the pipeline cache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelKind {
    /// Log density and gradient of N chains at N points (`shaders/logp_grad.wgsl`).
    LogpGrad,
    /// Whole NUTS transitions, one state machine per chain (`shaders/nuts.wgsl`).
    Nuts,
    /// Warmup's step-size searches on the NUTS kernel's chain state
    /// (`shaders/nuts_search.wgsl`).
    NutsSearch,
    /// K leapfrog steps per chain for a tree builder on the CPU (`shaders/fused.wgsl`).
    Fused,
}

impl KernelKind {
    /// Every kernel, for tests.
    pub const ALL: [KernelKind; 4] = [
        KernelKind::LogpGrad,
        KernelKind::Nuts,
        KernelKind::NutsSearch,
        KernelKind::Fused,
    ];

    /// The kernel's entry point.
    pub fn entry_point(self) -> &'static str {
        match self {
            KernelKind::LogpGrad => "logp_grad_main",
            KernelKind::Nuts => "nuts_main",
            KernelKind::NutsSearch => "nuts_search_main",
            KernelKind::Fused => "fused_main",
        }
    }
}

impl fmt::Display for KernelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelKind::LogpGrad => "logp_grad",
            KernelKind::Nuts => "nuts",
            KernelKind::NutsSearch => "nuts_search",
            KernelKind::Fused => "fused",
        })
    }
}

/// How to generate a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShaderOptions {
    /// Float type of values, data and results.
    pub precision: Precision,
    /// Where tapes live.
    pub placement: TapePlacement,
    /// Invocations per workgroup (a chain each, or `lanes` per chain).
    pub workgroup_size: u32,
    /// Where the model's data is read from.
    pub data: DataPlacement,
    /// Invocations per chain: 1, or a power of two up to the adapter's smallest subgroup
    /// size whose invocations split the model's long vectors (module documentation, "Lanes").
    pub lanes: u32,
    /// Which array accesses are checked while the kernel runs (not part of the WGSL text:
    /// the module is compiled with or without the checks).
    pub checks: IndexChecks,
}

/// The default workgroup size: two NVIDIA warps, eight lavapipe SIMD lanes.
pub const DEFAULT_WORKGROUP_SIZE: u32 = 64;

/// The workgroup size of split chains (more than one invocation per chain) when there are
/// enough of them: on an H100, logistic's split chains ran their NUTS kernel faster in
/// workgroups of 512 than of 64; chains on one invocation ran slower in larger workgroups
/// (measurements in `bench/journal.md`).
pub const SPLIT_WORKGROUP_SIZE: u32 = 512;

/// The fewest workgroups [`default_workgroup_size`] leaves a dispatch of chains split across
/// [`MAX_LANES`] lanes, so that a few chains still spread over every multiprocessor; chains
/// on fewer lanes, more of them to a workgroup, keep proportionally fewer (128 on 8 lanes).
pub const MIN_SPLIT_WORKGROUPS: u64 = 512;

/// The workgroup size of `n_chains` chains of `lanes` invocations each when a request leaves
/// it open: [`DEFAULT_WORKGROUP_SIZE`] for one invocation per chain; for split chains the
/// largest power of two up to [`SPLIT_WORKGROUP_SIZE`] (and the adapter's
/// `max_invocations`) that leaves [`MIN_SPLIT_WORKGROUPS`] workgroups (in proportion to the
/// lanes), at least the default.
pub fn default_workgroup_size(n_chains: usize, lanes: u32, max_invocations: u32) -> u32 {
    if lanes <= 1 {
        return DEFAULT_WORKGROUP_SIZE;
    }
    let invocations = n_chains as u64 * u64::from(lanes);
    let fewest = (MIN_SPLIT_WORKGROUPS * u64::from(lanes) / u64::from(MAX_LANES)).max(1);
    let cap = max_invocations.checked_ilog2().map_or(1, |bits| 1 << bits);
    let mut size = SPLIT_WORKGROUP_SIZE.min(cap);
    while size > DEFAULT_WORKGROUP_SIZE && invocations / u64::from(size) < fewest {
        size /= 2;
    }
    size.max(lanes)
}

/// Lanes per chain for many chains of a small fused model ([`lanes_for_chains`]).
pub const MANY_CHAINS_LANES: u32 = 8;

/// From how many chains [`lanes_for_chains`] gives them [`MANY_CHAINS_LANES`]: 8192 chains
/// of 8 lanes are 128 workgroups of 512, about one per multiprocessor of an H100.
pub const MANY_CHAINS: usize = 8192;

/// The most coordinates per lane [`lanes_for_chains`] gives a chain on
/// [`MANY_CHAINS_LANES`] lanes (logistic's 21 take 3): each lane keeps its coordinates of
/// the chain's position, momentum, gradient and momentum sum in registers.
pub const MANY_CHAINS_COORDINATES_PER_LANE: usize = 3;

/// Invocations per chain for `n_chains` chains of `program` whose default is `lanes`
/// ([`choose_lanes`]): [`MANY_CHAINS_LANES`] instead where there are [`MANY_CHAINS`] or more,
/// the program fuses its split instructions on that many lanes with at least
/// [`SPLIT_MIN_PER_LANE`] elements each, and its coordinates take at most
/// [`MANY_CHAINS_COORDINATES_PER_LANE`] per lane. Every lane of a chain runs the NUTS state
/// machine: on 8 lanes a subgroup runs it for four chains at once instead of one. With few
/// chains fewer lanes leave multiprocessors idle. On an H100, logistic's NUTS kernel was
/// faster on 8 lanes than on 32 at 8192 chains and more, slower at 1024; the
/// stochastic-volatility model (not fused, 102 coordinates) was slower on 8. Models on one
/// invocation per chain keep it: their kernels ran faster on 8 lanes, but
/// eight_schools_noncentered's sampling, bound by the host's recording, gained nothing
/// (measurements in `bench/journal.md`).
pub fn lanes_for_chains(program: &Program, lanes: u32, n_chains: usize) -> u32 {
    let few = MANY_CHAINS_LANES;
    let fits =
        |plan: split::Plan| plan.fused && plan.longest_split(program) >= SPLIT_MIN_PER_LANE * few;
    if lanes > few
        && n_chains >= MANY_CHAINS
        && program.dim.div_ceil(few as usize) <= MANY_CHAINS_COORDINATES_PER_LANE
        && split::plan(program, few).is_ok_and(fits)
    {
        few
    } else {
        lanes
    }
}

impl ShaderOptions {
    /// Defaults for `program` in `precision`: [`TapePlacement::choose`],
    /// [`DEFAULT_WORKGROUP_SIZE`] and data in storage (a device picks
    /// [`DataPlacement::choose`] from its limits).
    pub fn new(program: &Program, precision: Precision) -> ShaderOptions {
        ShaderOptions {
            precision,
            placement: TapePlacement::choose(program),
            workgroup_size: DEFAULT_WORKGROUP_SIZE,
            data: DataPlacement::Storage,
            lanes: 1,
            checks: IndexChecks::All,
        }
    }
}

/// The most invocations per chain: a subgroup of NVIDIA's.
pub const MAX_LANES: u32 = 32;

/// A split vector must have at least this many elements per lane for [`choose_lanes`] to
/// split a chain: on an H100, sv's 100 log-volatilities (3.1 per lane) sampled fastest on 32
/// lanes, several times slower on fewer (measurements in `bench/journal.md`).
pub const SPLIT_MIN_PER_LANE: u32 = 3;

/// The default invocations per chain for `program`: the adapter's smallest subgroup size
/// (at most [`MAX_LANES`]), or half of it, whichever first splits a vector into at least
/// [`SPLIT_MIN_PER_LANE`] elements per lane (the logistic model's 500 observations and the
/// stochastic-volatility model's 100 log-volatilities take a whole NVIDIA subgroup), when
/// the adapter has subgroup operations and the program has at most [`PRIVATE_MAX_INSTS`]
/// instructions; else 1.
pub fn choose_lanes(program: &Program, subgroup: bool, min_subgroup_size: u32) -> u32 {
    let largest = min_subgroup_size.min(MAX_LANES);
    // Split chains need a private tape, and so generated code: not for long programs.
    if !subgroup
        || largest < 2
        || !largest.is_power_of_two()
        || interp::records(program) > PRIVATE_MAX_INSTS
        || check::check(program).is_err()
    {
        return 1;
    }
    [largest, largest / 2]
        .into_iter()
        .filter(|&lanes| lanes >= 2)
        .find(|&lanes| {
            split::plan(program, lanes)
                .is_ok_and(|plan| plan.longest_split(program) >= SPLIT_MIN_PER_LANE * lanes)
        })
        .unwrap_or(1)
}

/// The longest vector of `program` that `lanes` invocations per chain split (0: none), or
/// why the program cannot run that way.
pub fn longest_split(program: &Program, lanes: u32) -> Result<u32, SplitRefusal> {
    split::plan(program, lanes).map(|plan| plan.longest_split(program))
}

/// Whether `lanes` invocations per chain run `program`'s split instructions fused, as one
/// loop over each lane's elements (`false` where nothing splits or it cannot split).
pub fn fuses_split(program: &Program, lanes: u32) -> bool {
    split::plan(program, lanes).is_ok_and(|plan| plan.fused)
}

/// A `@group(g) @binding(b)` slot of the kernels' bind groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Binding {
    /// Bind group index.
    pub group: u32,
    /// Binding index within the group.
    pub binding: u32,
}

/// The model's real data, `array<T>`, read-only. Group 0 is the model's and is shared by all
/// kernels: it is created once, when the model is uploaded.
pub const DATA_BINDING: Binding = Binding {
    group: 0,
    binding: 0,
};
/// The model's `Gather` indices, `array<u32>`, read-only.
pub const INDEX_BINDING: Binding = Binding {
    group: 0,
    binding: 1,
};
/// Per-chain tapes for [`TapePlacement::Storage`], `array<T>`, read-write. Group 1 is the
/// kernel's; this binding is the same in every kernel.
pub const SCRATCH_BINDING: Binding = Binding {
    group: 1,
    binding: 0,
};
/// `logp_grad`: `{ n_chains: u32, pad: 3 x u32 }`, uniform.
pub const LOGP_GRAD_PARAMS_BINDING: Binding = Binding {
    group: 1,
    binding: 1,
};
/// `logp_grad`: the points, `array<T>`, dim-major, read-only.
pub const LOGP_GRAD_THETA_BINDING: Binding = Binding {
    group: 1,
    binding: 2,
};
/// `logp_grad`: the log densities, `array<T>`, one per chain.
pub const LOGP_GRAD_LOGP_BINDING: Binding = Binding {
    group: 1,
    binding: 3,
};
/// `logp_grad`: the gradients, `array<T>`, dim-major.
pub const LOGP_GRAD_GRAD_BINDING: Binding = Binding {
    group: 1,
    binding: 4,
};

/// NUTS kernels: `NsParams` (nuts_state.wgsl), uniform.
pub const NUTS_PARAMS_BINDING: Binding = Binding {
    group: 1,
    binding: 1,
};
/// NUTS kernels: real settings then the inverse metric, `array<T>`, read-only.
pub const NUTS_CONSTS_BINDING: Binding = Binding {
    group: 1,
    binding: 2,
};
/// NUTS kernels: per-chain vectors and scalars, `array<T>`.
pub const NUTS_VEC_BINDING: Binding = Binding {
    group: 1,
    binding: 3,
};
/// NUTS kernels: U-turn checkpoints, `array<T>`.
pub const NUTS_CKPT_BINDING: Binding = Binding {
    group: 1,
    binding: 4,
};
/// NUTS kernels: per-chain integers and the integer statistics of the output slots,
/// `array<u32>`.
pub const NUTS_UINT_BINDING: Binding = Binding {
    group: 1,
    binding: 5,
};
/// NUTS kernels: the output slots (draws, then real statistics), `array<T>`.
pub const NUTS_OUT_BINDING: Binding = Binding {
    group: 1,
    binding: 6,
};
/// Fused kernel: `FuParams`, uniform.
pub const FUSED_PARAMS_BINDING: Binding = Binding {
    group: 1,
    binding: 1,
};
/// Fused kernel: the diagonal inverse metric, `array<T>`.
pub const FUSED_CONSTS_BINDING: Binding = Binding {
    group: 1,
    binding: 2,
};
/// Fused kernel: the start points (position, momentum, gradient), then one signed step size
/// per chain, `array<T>`.
pub const FUSED_STATE_BINDING: Binding = Binding {
    group: 1,
    binding: 3,
};
/// Fused kernel: every step's state and log density, `array<T>`.
pub const FUSED_OUT_BINDING: Binding = Binding {
    group: 1,
    binding: 4,
};

/// A program the generator cannot translate. Programs lowered from a
/// [`sampler::CheckedModel`] never give one, except for the size limits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodegenError {
    /// The program is inconsistent.
    #[error("malformed program: {problem}")]
    Malformed {
        /// What is wrong.
        problem: String,
    },
    /// An instruction is inconsistent.
    #[error("malformed program: instruction {inst} ({kind}): {problem}")]
    MalformedInst {
        /// Its position in `program.insts`.
        inst: usize,
        /// Its kind.
        kind: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// An unconstrained coordinate is not read by exactly one `Constrain`.
    #[error(
        "malformed program: unconstrained coordinate {coordinate} is read by {count} transforms, not 1"
    )]
    ThetaCoverage {
        /// The coordinate.
        coordinate: usize,
        /// How many `Constrain` instructions read it.
        count: usize,
    },
    /// A size over what the generated index arithmetic allows.
    #[error("{what} is {value}, over the limit of {limit}")]
    TooLarge {
        /// What was measured.
        what: &'static str,
        /// Its size.
        value: usize,
        /// The limit.
        limit: usize,
    },
    /// [`TapePlacement::Private`] was asked for a tape too long for it.
    #[error(
        "a tape of {tape_len} values per chain is over the {limit} that private placement allows; use storage placement"
    )]
    PrivateTapeTooLong {
        /// Values on the tape.
        tape_len: usize,
        /// [`MAX_PRIVATE_TAPE_LEN`].
        limit: usize,
    },
    /// [`DataPlacement::Workgroup`] was asked for a program without data.
    #[error("workgroup data placement needs a model with data; this one has none")]
    NoDataToStage,
    /// A workgroup size outside 1..=1024.
    #[error("workgroup size {size} is outside 1..=1024")]
    WorkgroupSize {
        /// The size asked for.
        size: u32,
    },
    /// Invocations per chain that are not a power of two up to [`MAX_LANES`] dividing the
    /// workgroup size.
    #[error(
        "{lanes} invocations per chain: need a power of two up to {MAX_LANES} that divides the workgroup size {workgroup_size}"
    )]
    Lanes {
        /// The lanes asked for.
        lanes: u32,
        /// The workgroup size.
        workgroup_size: u32,
    },
    /// The program cannot be split across lanes.
    #[error("this model cannot split a chain across {lanes} invocations: {refusal}")]
    Unsplittable {
        /// The lanes asked for.
        lanes: u32,
        /// Which instruction is in the way.
        refusal: SplitRefusal,
    },
    /// Lanes need the private tape.
    #[error("a chain split across invocations needs private tape placement")]
    LanesNeedPrivateTape,
}

/// The WGSL module of `kernel` for `program`.
pub fn kernel_source(
    program: &Program,
    kernel: KernelKind,
    options: &ShaderOptions,
) -> Result<String, CodegenError> {
    let mut module = model_module(program, options)?;
    module.items.extend(
        library::kernel_sources(kernel)
            .into_iter()
            .map(Item::Source),
    );
    Ok(module.render(options.precision))
}

/// The module of the RNG check: `shaders/rng.wgsl` and a kernel that runs it on given
/// counters (entry point [`RNG_CHECK_ENTRY`]), in `precision`.
pub fn rng_check_source(precision: Precision) -> String {
    let module = Module {
        items: std::iter::once(Item::AliasT)
            .chain(
                library::rng_check_library(precision)
                    .into_iter()
                    .map(Item::Source),
            )
            .collect(),
    };
    module.render(precision)
}

/// Entry point of [`rng_check_source`].
pub const RNG_CHECK_ENTRY: &str = "rng_check_main";

/// The module of the NUTS warmup moments kernel (`shaders/nuts_moments.wgsl`, entry point
/// [`NUTS_MOMENTS_ENTRY`]) in `precision`: it depends on no model.
pub fn nuts_moments_source(precision: Precision) -> String {
    let module = Module {
        items: vec![Item::AliasT, Item::Source(library::nuts_moments_library())],
    };
    module.render(precision)
}

/// Entry point of [`nuts_moments_source`].
pub const NUTS_MOMENTS_ENTRY: &str = "nuts_moments_main";

/// The module of the f64 built-in check: WGSL's own `exp`/`log` on f64 (entry point
/// [`F64_BUILTINS_ENTRY`]).
pub fn f64_builtins_source() -> &'static str {
    library::f64_builtins_source()
}

/// Entry point of [`f64_builtins_source`].
pub const F64_BUILTINS_ENTRY: &str = "f64_builtins_main";

/// The prelude, the library and `g_logp_grad`: everything but a kernel.
fn model_module(program: &Program, options: &ShaderOptions) -> Result<Module, CodegenError> {
    check::check(program)?;
    if !(1..=1024).contains(&options.workgroup_size) {
        return Err(CodegenError::WorkgroupSize {
            size: options.workgroup_size,
        });
    }
    let lanes = options.lanes;
    if lanes == 0
        || lanes > MAX_LANES
        || !lanes.is_power_of_two()
        || !options.workgroup_size.is_multiple_of(lanes)
    {
        return Err(CodegenError::Lanes {
            lanes,
            workgroup_size: options.workgroup_size,
        });
    }
    if lanes > 1 && options.placement != TapePlacement::Private {
        return Err(CodegenError::LanesNeedPrivateTape);
    }
    let plan = split::plan(program, lanes)
        .map_err(|refusal| CodegenError::Unsplittable { lanes, refusal })?;
    // `check` bounds both by u32.
    let tape_len = plan.tape_len;
    if options.placement == TapePlacement::Private && tape_len as usize > MAX_PRIVATE_TAPE_LEN {
        return Err(CodegenError::PrivateTapeTooLong {
            tape_len: tape_len as usize,
            limit: MAX_PRIVATE_TAPE_LEN,
        });
    }
    let dim = program.dim as u32;
    let storage = |binding: Binding, global, access, element| Item::Storage {
        group: binding.group,
        binding: binding.binding,
        global,
        access,
        element,
    };
    let mut items = vec![
        Item::Comment(format!(
            "Generated by gpu-actor from a sampler::Program ({} instructions, tape {} values, {} placement). Do not edit.",
            program.insts.len(),
            program.tape_len,
            options.placement
        )),
        Item::AliasT,
        Item::ConstU32(ModuleConst::Dim, dim),
        Item::ConstU32(ModuleConst::TapeLen, tape_len),
        Item::ConstU32(ModuleConst::WorkgroupSize, options.workgroup_size),
        Item::ConstU32(ModuleConst::TapeBlock, TAPE_BLOCK),
        Item::ConstU32(ModuleConst::Lanes, lanes),
        Item::ConstU32(ModuleConst::SplitTrips, plan.trips),
        Item::ConstU32(ModuleConst::ZeroAt, interp::zero_at(program)),
        Item::ConstU32(ModuleConst::CodeAt, interp::code_at(program)),
        Item::ConstU32(ModuleConst::CodeLen, interp::records(program) as u32),
        storage(DATA_BINDING, Global::Data, Access::Read, Element::Real),
        storage(INDEX_BINDING, Global::Index, Access::Read, Element::U32),
        storage(
            SCRATCH_BINDING,
            Global::Scratch,
            Access::ReadWrite,
            Element::Real,
        ),
        Item::PrivateU32(Global::Chain),
        Item::PrivateU32(Global::Lane),
        Item::PrivateU32(Global::Zero),
        Item::Function(chain_of_function()),
        Item::Function(lane_sum_function(lanes)),
        Item::Function(lane_get_function(lanes)),
    ];
    items.extend(
        library::model_library(options.precision)
            .into_iter()
            .map(Item::Source),
    );
    let rows = shared_rows(program, options);
    if options.data == DataPlacement::Workgroup {
        if program.data.is_empty() {
            return Err(CodegenError::NoDataToStage);
        }
        let len = data_len(program)?;
        items.push(if rows.is_empty() {
            Item::WorkgroupReals(Global::SharedData, len)
        } else {
            Item::WorkgroupQuads(Global::SharedData, len.div_ceil(4))
        });
    }
    items.push(Item::Function(stage_data_function(
        program, options, &rows,
    )?));
    if options.placement == TapePlacement::Interpreted {
        // The interpreter: the same code for every program (`interp.rs`).
        items.push(Item::Source(library::interp_library()));
        items.push(Item::Function(Function {
            name: Hook::LogpGrad,
            params: Vec::new(),
            ret: Some(Ty::Real),
            body: vec![Stmt::Return(Expr::lib(
                library::LibFn::InterpLogpGrad,
                Vec::new(),
            ))],
        }));
        return Ok(Module { items });
    }
    let split_trips = plan.trips;
    let tape = Tape::new(
        options.placement,
        options.data,
        plan,
        layout::column_major(program),
        (!rows.is_empty()).then_some(rows),
        options.precision == Precision::F32,
    );
    let mut logp_grad = model::logp_grad_function(program, &tape);
    // A private tape is unrolled so that a compiler can keep it in registers, and loops that
    // a driver might unroll past the cap get an opaque bound; over a storage tape every loop
    // does.
    logp_grad.body = match options.placement {
        TapePlacement::Private => unroll::bound(unroll::unroll(logp_grad.body), split_trips),
        TapePlacement::Storage | TapePlacement::Interpreted => unroll::opaque(logp_grad.body),
    };
    items.push(Item::Function(logp_grad));
    Ok(Module { items })
}

/// Whether the private-tape code of `program` (one lane, loops unrolled as they would be)
/// indexes the tape with anything but a literal. `program` has passed `check`.
fn private_tape_indexed_at_run_time(program: &Program) -> bool {
    let tape = Tape::new(
        TapePlacement::Private,
        DataPlacement::Storage,
        split::Plan::whole(program),
        layout::column_major(program),
        None,
        // Compensated sums index nothing: the answer is the same either way.
        true,
    );
    let body = unroll::unroll(model::logp_grad_function(program, &tape).body);
    unroll::indexes_dynamically(&body, &tape::private_arrays())
}

/// The number of real data values, as the `u32` WGSL indexes with.
fn data_len(program: &Program) -> Result<u32, CodegenError> {
    u32::try_from(program.data.len()).map_err(|_| CodegenError::TooLarge {
        what: "the model's data",
        value: program.data.len(),
        limit: u32::MAX as usize,
    })
}

/// `g_stage_data(local)`: sets `g_zero` from the index buffer; with
/// [`DataPlacement::Workgroup`], invocation `local` then copies every `G_WORKGROUP_SIZE`-th
/// value of `g_data` into `g_shared_data`, and all wait at a barrier. The loop runs the same
/// rounds in every invocation (the bound is a constant), so the barrier stays in uniform
/// control flow. `rows`: the matrices staged row-major as `vec4`s ([`shared_rows`]).
fn stage_data_function(
    program: &Program,
    options: &ShaderOptions,
    rows: &[MatrixRef],
) -> Result<Function, CodegenError> {
    let local = Ident::new("local");
    // Before anything else: the zero that keeps loops from being unrolled (`unroll::bound`).
    let mut body = vec![Stmt::Assign(
        Expr::Global(Global::Zero),
        Expr::Global(Global::Index).index(Expr::Const(ModuleConst::ZeroAt)),
    )];
    if !rows.is_empty() {
        body.push(stage_quads(program, options, rows, &local)?);
        body.push(Stmt::Call(Expr::builtin(
            Builtin::WorkgroupBarrier,
            Vec::new(),
        )));
    } else if options.data == DataPlacement::Workgroup {
        let len = data_len(program)?;
        let rounds = len.div_ceil(options.workgroup_size);
        let round = Ident::new("round");
        let at = Ident::new("at");
        let copy = vec![Stmt::Assign(
            Expr::Global(Global::SharedData).index(Expr::local(&at)),
            Expr::Global(Global::Data).index(Expr::local(&at)),
        )];
        body.push(Stmt::for_(
            &round,
            Expr::U32(rounds),
            vec![
                Stmt::let_(
                    &at,
                    Expr::local(&round) * Expr::Const(ModuleConst::WorkgroupSize)
                        + Expr::local(&local),
                ),
                Stmt::If(Expr::U32(len).gt(Expr::local(&at)), copy, Vec::new()),
            ],
        ));
        body.push(Stmt::Call(Expr::builtin(
            Builtin::WorkgroupBarrier,
            Vec::new(),
        )));
    }
    Ok(Function {
        name: Hook::StageData,
        params: vec![(local, Ty::U32)],
        ret: None,
        body,
    })
}

/// The copy loop of `g_stage_data` into `vec4`s ([`shared_rows`]): invocation `local` fills
/// every `G_WORKGROUP_SIZE`-th `vec4`, value `i` from `g_data[i]`, except in the `rows`
/// matrices, which it reads transposed from their column-major storage; values past the end
/// (at most 3, never read) repeat the last one.
fn stage_quads(
    program: &Program,
    options: &ShaderOptions,
    rows: &[MatrixRef],
    local: &Ident,
) -> Result<Stmt, CodegenError> {
    let len = data_len(program)?;
    let quads = len.div_ceil(4);
    let (round, at) = (Ident::new("round"), Ident::new("at"));
    let source = |part: u32| {
        let i = Expr::builtin(
            Builtin::Min,
            vec![
                Expr::U32(4) * Expr::local(&at) + Expr::U32(part),
                Expr::U32(len - 1),
            ],
        );
        // Element (r, c) of a row-major matrix at i = offset + r * cols + c is stored at
        // offset + c * rows + r; `i - offset` wraps past every size below the offset.
        let mut index = i.clone();
        for m in rows {
            let within = i.clone() - Expr::U32(m.offset);
            let stored = (within.clone() % Expr::U32(m.cols)) * Expr::U32(m.rows)
                + within.clone() / Expr::U32(m.cols);
            index = Expr::builtin(
                Builtin::Select,
                vec![
                    index,
                    stored.plus_u32(m.offset),
                    Expr::U32(m.rows * m.cols).gt(within),
                ],
            );
        }
        Expr::Global(Global::Data).index(index)
    };
    let copy = vec![Stmt::Assign(
        Expr::Global(Global::SharedData).index(Expr::local(&at)),
        Expr::builtin(Builtin::Vec4, (0..4).map(source).collect()),
    )];
    Ok(Stmt::for_(
        &round,
        Expr::U32(quads.div_ceil(options.workgroup_size)),
        vec![
            Stmt::let_(
                &at,
                Expr::local(&round) * Expr::Const(ModuleConst::WorkgroupSize) + Expr::local(local),
            ),
            Stmt::If(Expr::U32(quads).gt(Expr::local(&at)), copy, Vec::new()),
        ],
    ))
}

/// `g_chain_of(invocation) -> u32`: the chain of a global invocation index, `invocation /
/// G_LANES`; sets `g_lane` to `invocation % G_LANES`. The lanes of a chain are neighbouring
/// invocations of one subgroup (subgroups are runs of neighbouring invocations, and
/// `G_LANES` divides both the workgroup size and the subgroup size).
fn chain_of_function() -> Function {
    let invocation = Ident::new("invocation");
    let lanes = || Expr::Const(ModuleConst::Lanes);
    Function {
        name: Hook::ChainOf,
        params: vec![(invocation.clone(), Ty::U32)],
        ret: Some(Ty::U32),
        body: vec![
            Stmt::Assign(
                Expr::Global(Global::Lane),
                Expr::local(&invocation) % lanes(),
            ),
            Stmt::Return(Expr::local(&invocation) / lanes()),
        ],
    }
}

/// `g_lane_sum(x) -> T`: a butterfly of `subgroupShuffleXor` over the chain's `lanes`
/// (`Tape::lane_sum`); `x` itself with one lane, so that such kernels need no subgroup
/// operations.
fn lane_sum_function(lanes: u32) -> Function {
    let x = Ident::new("x");
    let s = Ident::new("s");
    let mut body = vec![Stmt::Var(s.clone(), Ty::Real, Some(Expr::local(&x)))];
    let mut mask = 1;
    while mask < lanes {
        body.push(Stmt::Assign(
            Expr::local(&s),
            Expr::local(&s)
                + Expr::builtin(
                    Builtin::SubgroupShuffleXor,
                    vec![Expr::local(&s), Expr::U32(mask)],
                ),
        ));
        mask <<= 1;
    }
    body.push(Stmt::Return(Expr::local(&s)));
    Function {
        name: Hook::LaneSum,
        params: vec![(x, Ty::Real)],
        ret: Some(Ty::Real),
        body,
    }
}

/// `g_lane_get(x, source) -> T`: `x` of the chain's lane `source`, `subgroupShuffleXor(x,
/// g_lane ^ source)` (the partner of this invocation under that mask is the chain's lane `source`,
/// because the chain's lanes are an aligned run of the subgroup); `x` with one lane.
fn lane_get_function(lanes: u32) -> Function {
    let x = Ident::new("x");
    // Not `g_lane`: that is the global.
    let lane = Ident::new("source");
    let value = if lanes > 1 {
        Expr::builtin(
            Builtin::SubgroupShuffleXor,
            vec![
                Expr::local(&x),
                Expr::binary(BinOp::Xor, Expr::Global(Global::Lane), Expr::local(&lane)),
            ],
        )
    } else {
        Expr::local(&x)
    };
    Function {
        name: Hook::LaneGet,
        params: vec![(x, Ty::Real), (lane, Ty::U32)],
        ret: Some(Ty::Real),
        body: vec![Stmt::Return(value)],
    }
}
