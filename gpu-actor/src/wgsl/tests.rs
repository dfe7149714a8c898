//! The emitter without a GPU: literals, names, bindings, and malformed programs refused.

use sampler::{
    CheckedModel, DataRef, DensityKind, Dist, Inst, Limits, ModelBuilder, Operand, Program, SlotId,
};

use super::ast::real_literal;
use super::library::{LibFn, TermFn, all_sources};
use super::*;

mod size;
mod snapshots;

fn program() -> Program {
    let mut m = ModelBuilder::new("small");
    let y = m.data_vector("y", vec![0.5, -1.0, 2.0]);
    let idx = m.data_int_vector("idx", vec![2, 0, 1]);
    let mu = m.param("mu");
    let sigma = m.param_constrained("sigma", sampler::Constraint::Positive);
    let z = m.vector_param("z", 3);
    m.sample(&y, Dist::normal(&mu + z.gather(&idx), &sigma));
    m.sample(&z, Dist::normal(0.0, 1.0));
    let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
    (**checked.program()).clone()
}

fn options(precision: Precision, placement: TapePlacement) -> ShaderOptions {
    ShaderOptions {
        precision,
        placement,
        workgroup_size: DEFAULT_WORKGROUP_SIZE,
        data: DataPlacement::Storage,
        lanes: 1,
        checks: IndexChecks::All,
    }
}

fn source(program: &Program, options: &ShaderOptions) -> Result<String, CodegenError> {
    kernel_source(program, KernelKind::LogpGrad, options)
}

#[test]
fn literals_are_printed_in_the_module_precision() {
    assert_eq!(real_literal(0.5, Precision::F32), "0.5f");
    assert_eq!(real_literal(0.1, Precision::F64), "0.1lf");
    assert_eq!(real_literal(1e-10, Precision::F32), "1e-10f");
    assert_eq!(real_literal(1e-10, Precision::F64), "1e-10lf");
    assert_eq!(real_literal(-2.0, Precision::F32), "(-2.0f)");
    assert_eq!(real_literal(f64::INFINITY, Precision::F64), "sf_inf()");
    assert_eq!(
        real_literal(f64::NEG_INFINITY, Precision::F32),
        "(-sf_inf())"
    );
    assert_eq!(real_literal(f64::NAN, Precision::F64), "sf_nan()");
    // Finite in f64, infinite in f32.
    assert_eq!(real_literal(1e300, Precision::F32), "sf_inf()");
    assert_eq!(real_literal(-1e300, Precision::F32), "(-sf_inf())");
    assert_eq!(real_literal(1e300, Precision::F64), "1e300lf");
    // Every f64 survives the round trip through its text.
    for value in [0.1, 1.0 / 3.0, 6.02e23, -7.5e-300, f64::MIN_POSITIVE] {
        let text = real_literal(value, Precision::F64);
        let digits = text.trim_start_matches('(').trim_end_matches(')');
        let parsed: f64 = digits.trim_end_matches("lf").parse().expect("a number");
        assert_eq!(parsed, value, "{text}");
    }
}

#[test]
fn every_library_function_the_generator_calls_is_defined() {
    let library = all_sources().join("\n");
    let kinds = [
        DensityKind::Normal,
        DensityKind::HalfNormal,
        DensityKind::Exponential,
        DensityKind::StudentT,
        DensityKind::Cauchy,
        DensityKind::HalfCauchy,
        DensityKind::LogNormal,
        DensityKind::Gamma,
        DensityKind::InverseGamma,
        DensityKind::Beta,
        DensityKind::Uniform,
        DensityKind::Laplace,
        DensityKind::BernoulliLogit,
        DensityKind::BinomialLogit,
        DensityKind::PoissonLog,
        DensityKind::Logistic,
        DensityKind::Weibull,
        DensityKind::ChiSquare,
        DensityKind::Bernoulli,
        DensityKind::Binomial,
        DensityKind::Poisson,
        DensityKind::NegBinomial2,
        DensityKind::NegBinomial2Log,
    ];
    let functions = [
        LibFn::Exp,
        LibFn::Log,
        LibFn::Log1p,
        LibFn::Expm1,
        LibFn::Softplus,
        LibFn::Logistic,
        LibFn::Pow,
        LibFn::SignOrZero,
        LibFn::Lgamma,
        LibFn::Digamma,
        LibFn::LogPhi,
        LibFn::LogPhiSlope,
        LibFn::LogStep,
        LibFn::SqrtSlope,
        LibFn::Inf,
        LibFn::Nan,
        LibFn::SumAdd,
        LibFn::SumTotal,
    ]
    .into_iter()
    .chain(TermFn::ALL.map(LibFn::Term))
    .chain(kinds.map(LibFn::Kernel));
    for function in functions {
        let definition = format!("fn {}(", function.name());
        assert!(
            library.contains(&definition),
            "{definition} is not in shaders/"
        );
    }
}

#[test]
fn every_term_function_is_used_by_some_density() {
    let used = density::used_terms();
    for term in TermFn::ALL {
        assert!(
            used.contains(&term),
            "{term:?} is defined but no density uses it"
        );
    }
}

/// Names declared by the generated function (not the library): all prefixed `g_`. With a
/// long program over a storage tape the function only calls the interpreter, whose names
/// start with `it_`.
#[test]
fn generated_names_are_prefixed() {
    let long = sampler::CheckedModel::new(
        sampler::growing::Family::Chain.model(100),
        &sampler::Limits::default(),
    )
    .expect("the model checks");
    let long = (**long.program()).clone();
    assert!(long.insts.len() > GENERATED_STORAGE_MAX_INSTS);
    let text =
        source(&long, &options(Precision::F32, TapePlacement::Interpreted)).expect("generates");
    let start = text.find("fn g_logp_grad").expect("the model function");
    assert!(text[start..].starts_with("fn g_logp_grad() -> T {\n    return it_logp_grad();\n}"));
    for line in super::library::interp_library().lines() {
        for keyword in ["fn ", "var<private> ", "const ", "struct "] {
            if let Some(name) = line.strip_prefix(keyword) {
                assert!(
                    ["it_", "IT_", "It"]
                        .iter()
                        .any(|prefix| name.starts_with(prefix)),
                    "unprefixed interpreter name: {line}"
                );
            }
        }
    }
    let program = program();
    for placement in [TapePlacement::Private, TapePlacement::Storage] {
        let text = source(&program, &options(Precision::F32, placement)).expect("generates");
        let start = text.find("fn g_logp_grad").expect("the model function");
        let end = start + text[start..].find("\n}\n").expect("its end");
        let mut declared = 0;
        for line in text[start..end].lines() {
            let line = line.trim_start();
            let name = line
                .strip_prefix("let ")
                .or_else(|| line.strip_prefix("var "))
                .or_else(|| line.strip_prefix("for (var "));
            if let Some(name) = name {
                declared += 1;
                assert!(name.starts_with("g_"), "unprefixed declaration: {line}");
            }
        }
        assert!(declared > 5, "{declared} declarations found");
    }
}

#[test]
fn bindings_in_the_shader_match_the_layout_constants() {
    let text =
        source(&program(), &options(Precision::F32, TapePlacement::Storage)).expect("generates");
    let module = naga::front::wgsl::parse_str(&text).expect("parses");
    let expected = [
        ("g_data", DATA_BINDING),
        ("g_index", INDEX_BINDING),
        ("g_scratch", SCRATCH_BINDING),
        ("lg_params", LOGP_GRAD_PARAMS_BINDING),
        ("lg_theta", LOGP_GRAD_THETA_BINDING),
        ("lg_logp", LOGP_GRAD_LOGP_BINDING),
        ("lg_grad", LOGP_GRAD_GRAD_BINDING),
    ];
    let mut found = 0;
    for (_, global) in module.global_variables.iter() {
        let (Some(name), Some(binding)) = (&global.name, &global.binding) else {
            continue;
        };
        let (_, want) = expected
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("unexpected binding {name}"));
        assert_eq!(
            (binding.group, binding.binding),
            (want.group, want.binding),
            "{name}"
        );
        found += 1;
    }
    assert_eq!(found, expected.len());
}

#[test]
fn placement_is_private_for_short_tapes_and_storage_for_long_ones() {
    // A gather indexes the tape at run time: storage.
    let mut program = program();
    assert_eq!(TapePlacement::choose(&program), TapePlacement::Storage);
    // Short loops that unroll, and a long one over data only: private.
    let mut m = ModelBuilder::new("constant_indices");
    let y = m.data_vector("y", (0..100).map(|k| f64::from(k) / 10.0).collect());
    let mu = m.param("mu");
    let z = m.vector_param("z", 3);
    m.sample(&z, Dist::normal(&mu, 1.0));
    m.sample(&y, Dist::normal(&mu, 2.0));
    let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
    program = (**checked.program()).clone();
    assert_eq!(TapePlacement::choose(&program), TapePlacement::Private);
    program.tape_len = PRIVATE_TAPE_LEN_THRESHOLD + 1;
    assert_eq!(TapePlacement::choose(&program), TapePlacement::Storage);
    program.tape_len = MAX_PRIVATE_TAPE_LEN + 1;
    assert!(matches!(
        source(&program, &options(Precision::F32, TapePlacement::Private)),
        Err(CodegenError::PrivateTapeTooLong { .. })
    ));
    assert!(source(&program, &options(Precision::F32, TapePlacement::Storage)).is_ok());
}

/// IR v2 instructions generate valid WGSL (naga) in every placement and precision; the GPU's
/// values are checked against the CPU by the parity tests.
#[test]
fn ir_v2_instructions_generate_code_in_every_placement() {
    type Term = fn(&sampler::Expr) -> sampler::Expr;
    let terms: [(&str, Term); 5] = [
        ("log_sum_exp", |x| x.log_sum_exp()),
        ("lgamma", |x| x.exp().lgamma().sum()),
        ("max", |x| x.max(0.5).sum()),
        ("min", |x| x.min(0.5).sum()),
        ("concat", |x| {
            sampler::Expr::concat([x.clone(), x.elem(0)]).sum()
        }),
    ];
    for (kind, term) in terms {
        let mut m = ModelBuilder::new("v2");
        let x = m.vector_param("x", 3);
        m.factor(term(&x));
        let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
        let program = (**checked.program()).clone();
        for placement in [
            TapePlacement::Private,
            TapePlacement::Storage,
            TapePlacement::Interpreted,
        ] {
            for precision in [Precision::F32, Precision::F64] {
                let text = source(&program, &options(precision, placement))
                    .unwrap_or_else(|err| panic!("{kind} {placement} {precision}: {err}"));
                let module = naga::front::wgsl::parse_str(&text).expect("parses");
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&module)
                .unwrap_or_else(|err| panic!("{kind} {placement} {precision}: {err:?}"));
            }
        }
        let _ = (device_indices(&program), device_data(&program));
    }
}

#[test]
fn workgroup_sizes_outside_the_range_are_refused() {
    for size in [0, 1025] {
        let options = ShaderOptions {
            workgroup_size: size,
            ..options(Precision::F32, TapePlacement::Private)
        };
        assert!(matches!(
            source(&program(), &options),
            Err(CodegenError::WorkgroupSize { .. })
        ));
    }
}

#[test]
fn storage_tapes_are_sized_in_whole_blocks() {
    let program = program();
    let per_chain = 2 * program.tape_len as u64;
    assert_eq!(
        storage_tape_values(&program, 1),
        per_chain * u64::from(TAPE_BLOCK)
    );
    assert_eq!(storage_tape_values(&program, 32), per_chain * 32);
    assert_eq!(storage_tape_values(&program, 33), per_chain * 64);
}

/// Each corruption of a valid program is refused with an error that says where.
#[test]
fn malformed_programs_are_errors_not_panics() {
    let good = program();
    let options = options(Precision::F32, TapePlacement::Private);
    assert!(source(&good, &options).is_ok());
    let first_density = good
        .insts
        .iter()
        .position(|inst| matches!(inst, Inst::Density { .. }))
        .expect("a density");
    let gather = good
        .insts
        .iter()
        .position(|inst| matches!(inst, Inst::Gather { .. }))
        .expect("a gather");
    type Corrupt = Box<dyn Fn(&mut Program)>;
    let cases: Vec<(&str, Corrupt)> = vec![
        (
            "slot 99",
            Box::new(move |p| {
                if let Inst::Density { x, .. } = &mut p.insts[first_density] {
                    *x = Operand::Slot(SlotId(99));
                }
            }),
        ),
        (
            "outside the",
            Box::new(move |p| {
                if let Inst::Density { params, .. } = &mut p.insts[first_density] {
                    params[1] = Operand::Data(DataRef {
                        offset: 1000,
                        len: 1,
                    });
                }
            }),
        ),
        (
            "coordinate",
            Box::new(|p| {
                p.dim += 1;
            }),
        ),
        (
            "out of range",
            Box::new(|p| {
                p.index[0] = 17;
            }),
        ),
        (
            "written twice",
            Box::new(move |p| {
                let copy = p.insts[gather];
                p.insts.insert(gather, copy);
            }),
        ),
        (
            "read before it is written",
            Box::new(|p| {
                p.insts.swap(0, 1);
                let last = p.insts.len() - 1;
                p.insts.swap(2, last);
            }),
        ),
        (
            "tape",
            Box::new(|p| {
                p.tape_len = 1;
            }),
        ),
    ];
    for (expected, corrupt) in cases {
        let mut bad = good.clone();
        corrupt(&mut bad);
        match source(&bad, &options) {
            Ok(_) => panic!("a program corrupted at \"{expected}\" was accepted"),
            Err(err) => assert!(
                err.to_string().contains(expected),
                "expected \"{expected}\" in: {err}"
            ),
        }
    }
}

#[test]
fn data_goes_to_workgroup_memory_only_when_it_fits() {
    let program = program();
    // Whole vec4s of data (`shared_rows`).
    let f32_bytes = 16 * program.data.len().div_ceil(4) as u32;
    assert!(f32_bytes > 0);
    assert_eq!(
        workgroup_data_bytes(&program, Precision::F32),
        u64::from(f32_bytes)
    );
    assert_eq!(
        DataPlacement::choose(&program, Precision::F32, f32_bytes),
        DataPlacement::Workgroup
    );
    assert_eq!(
        DataPlacement::choose(&program, Precision::F64, f32_bytes),
        DataPlacement::Storage
    );
    let empty = {
        let mut m = ModelBuilder::new("no data");
        let mu = m.param("mu");
        m.sample(&mu, Dist::normal(0.0, 1.0));
        let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
        (**checked.program()).clone()
    };
    assert!(empty.data.is_empty());
    assert_eq!(
        DataPlacement::choose(&empty, Precision::F32, 49_152),
        DataPlacement::Storage
    );
    let options = ShaderOptions {
        data: DataPlacement::Workgroup,
        ..options(Precision::F32, TapePlacement::Private)
    };
    assert_eq!(source(&empty, &options), Err(CodegenError::NoDataToStage));
}

/// With workgroup data the model reads only `g_shared_data`, the copy loop's bound is a
/// constant (so the barrier after it is in uniform control flow), and every kernel stages the
/// data before its first `return`.
#[test]
fn workgroup_data_is_staged_before_any_return_and_read_from_workgroup_memory() {
    let program = program();
    let options = ShaderOptions {
        data: DataPlacement::Workgroup,
        ..options(Precision::F32, TapePlacement::Private)
    };
    for kernel in KernelKind::ALL {
        let text = kernel_source(&program, kernel, &options).expect("generates");
        let declaration = format!(
            "var<workgroup> g_shared_data: array<T, {}u>;",
            program.data.len()
        );
        assert!(text.contains(&declaration), "{kernel}: no {declaration}");
        let model = &text[text.find("fn g_logp_grad").expect("the model")..];
        assert!(
            model.contains("g_shared_data["),
            "{kernel}: no workgroup read"
        );
        assert!(
            !model.contains("g_data["),
            "{kernel}: a storage read is left"
        );
        let stage = &text[text
            .find("fn g_stage_data(g_local: u32) {")
            .expect("stage fn")..];
        // One round of copies for this data: a block, no loop.
        assert!(stage.contains("let g_round = 0u;"), "{kernel}: {stage}");
        assert!(stage.contains("workgroupBarrier();"));
        let entry = &text[text
            .find(&format!("fn {}(", kernel.entry_point()))
            .expect("entry point")..];
        let call = entry.find("g_stage_data(local);").expect("the call");
        let first_return = entry.find("return;").expect("a return");
        assert!(call < first_return, "{kernel}: staged after a return");
    }
    let plain =
        kernel_source(&program, KernelKind::Nuts, &options_storage_data()).expect("generates");
    assert!(!plain.contains("g_shared_data"));
    assert!(!plain.contains("workgroupBarrier"));
}

fn options_storage_data() -> ShaderOptions {
    options(Precision::F32, TapePlacement::Private)
}

/// A logistic regression's builder: 40 rows of 3 columns.
struct Regression {
    m: ModelBuilder,
    x: sampler::Expr,
    beta: sampler::Expr,
}

fn regression_builder() -> Regression {
    let mut m = ModelBuilder::new("regression");
    let rows: Vec<Vec<f64>> = (0..40)
        .map(|r| (0..3).map(|c| f64::from(r * 3 + c) / 50.0 - 1.0).collect())
        .collect();
    let x = m.data_matrix("x", rows);
    let y = m.data_vector("y", (0..40).map(|r| f64::from(r % 2)).collect());
    let alpha = m.param("alpha");
    let beta = m.vector_param("beta", 3);
    m.sample(&beta, Dist::normal(0.0, 1.0));
    m.sample(&y, Dist::bernoulli_logit(&alpha + x.matvec(&beta)));
    Regression { m, x, beta }
}

/// A logistic regression: 40 rows of 3 columns.
fn regression() -> Program {
    let checked = CheckedModel::new(regression_builder().m.build(), &Limits::default())
        .expect("the model checks");
    (**checked.program()).clone()
}

/// In the fused loop a product's row is loaded once; its dot product is summed in independent
/// parts (not one chain of dependent multiply-adds), and its backward sweep adds one product
/// per column to the lane's partial adjoints. The trip has no branch: 40 rows on 8 lanes fill
/// every trip, and on 16 lanes a lane past the end repeats the last row, its terms gated.
#[test]
fn a_fused_product_sums_in_parts_and_adds_one_product_per_column() {
    let program = regression();
    let options = ShaderOptions {
        lanes: 8,
        ..options(Precision::F32, TapePlacement::Private)
    };
    let text = source(&program, &options).expect("generates");
    let loop_body = &text[text.find("for (var g_li").expect("the fused loop")..];
    for part in ["g_s0", "g_s1", "g_s2"] {
        assert!(
            loop_body.contains(&format!("var {part}: T = 0.0f;")),
            "{part}"
        );
    }
    assert!(loop_body.contains("((g_s0 + g_s1) + g_s2)"), "{loop_body}");
    // Three columns: three partial adjoints, each one multiply-add of the cached row.
    for c in 0..3 {
        let add = format!("g_fadj[{}u] += (g_adj[", c + 1);
        assert_eq!(loop_body.matches(&add).count(), 1, "{add}");
        assert!(
            loop_body.contains(&format!("* g_row3[{c}u])")),
            "column {c}"
        );
    }
    assert!(
        !loop_body.contains("var g_s: T"),
        "no column sum left in the fused loop"
    );
    // lp, alpha and the three betas: five sums on 8 lanes, 12 shuffles as a reduce-scatter
    // and broadcasts against 15 as butterflies.
    assert_eq!(loop_body.matches("subgroupShuffleXor(g_send").count(), 7);
    assert_eq!(loop_body.matches("g_lane_get(g_rs0, ").count(), 5);
    assert!(!loop_body.contains("g_lane_sum("), "{loop_body}");
    let trip = &loop_body[..loop_body.find("var g_rs0").expect("the lane sums")];
    assert!(!trip.contains("if ("), "{trip}");
    assert!(!trip.contains("min("), "every trip whole: {trip}");

    let options = ShaderOptions {
        lanes: 16,
        ..options
    };
    let text = source(&program, &options).expect("generates");
    let loop_body = &text[text.find("for (var g_li").expect("the fused loop")..];
    let trip = &loop_body[..loop_body.find("var g_rs0").expect("the lane sums")];
    assert!(!trip.contains("if ("), "{trip}");
    assert!(trip.contains("min(((g_li * 16u) + g_lane), 39u)"), "{trip}");
    assert!(
        trip.contains("let g_keep = (40u > ((g_li * 16u) + g_lane));"),
        "{trip}"
    );
    // The density's value and its one adjoint, and nothing else, are gated.
    assert_eq!(trip.matches("select(0.0f, ").count(), 2, "{trip}");
}

#[test]
fn split_plans_split_observation_vectors_and_keep_parameters_whole() {
    let program = regression();
    let plan = split::plan(&program, 8).expect("a regression splits");
    for (k, inst) in program.insts.iter().enumerate() {
        let dst = match *inst {
            Inst::Constrain { dst, .. } => Some((dst, false)),
            Inst::Matvec { dst, .. } | Inst::Zip { dst, .. } => Some((dst, true)),
            _ => None,
        };
        if let Some((dst, split)) = dst {
            assert_eq!(plan.slot(dst).split, split, "instruction {k}: {inst:?}");
            // Fused, a split slot holds the lane's current element.
            let len = program.slot(dst).len;
            let expected = if split { 1 } else { len };
            assert_eq!(plan.slot(dst).len, expected, "instruction {k}");
        }
    }
    assert!(plan.fused, "nothing reduces the split slots but densities");
    assert_eq!(plan.trips, 5, "40 rows on 8 lanes");
    assert_eq!(plan.longest_split(&program), 40);
    assert_eq!(
        layout::column_major(&program).len(),
        1,
        "the matrix only feeds a product"
    );
    // Local slots are packed: 1 + 3 + 1 + 1 values.
    assert_eq!(plan.tape_len, 6);
    // A sum of a split slot is read in the backward sweep: not fused, split slots hold
    // ceil(len / lanes) values each.
    let mut summed = regression_builder();
    let eta = summed.x.matvec(&summed.beta);
    summed.m.factor(eta.sum());
    let checked =
        CheckedModel::new(summed.m.build(), &Limits::default()).expect("the model checks");
    let unfused = split::plan(checked.program(), 8).expect("it splits");
    assert!(!unfused.fused);
    assert_eq!(unfused.trips, 0);
    let split_lens: Vec<u32> = unfused
        .slots
        .iter()
        .filter(|slot| slot.split)
        .map(|slot| slot.len)
        .collect();
    assert!(!split_lens.is_empty() && split_lens.iter().all(|&len| len == 5));
    // With more lanes than rows nothing splits.
    assert_eq!(
        split::plan(&program, 64).unwrap().longest_split(&program),
        0
    );
    assert_eq!(choose_lanes(&program, true, 8), 8);
    assert_eq!(choose_lanes(&program, false, 8), 1);
    assert_eq!(
        choose_lanes(&program, true, 32),
        1,
        "40 rows are under 3 per lane, on 32 lanes and on 16"
    );
    // Splitting the 3 coefficients (2 lanes) would multiply the matrix by a split vector:
    // they stay whole and the rows still split, fused.
    let two = split::plan(&program, 2).expect("a regression splits");
    assert!(two.fused);
    for inst in &program.insts {
        if let Inst::Constrain { dst, .. } = *inst {
            assert!(!two.slot(dst).split, "{inst:?}");
        }
    }
}

/// The stochastic-volatility model's shape: two positive scalars, a random walk of `n`
/// log-volatilities from coordinate 2, Student-t returns scaled by their exponential.
pub(crate) fn volatility(n: usize) -> Program {
    let mut m = ModelBuilder::new("volatility");
    let returns = m.data_vector("returns", (0..n).map(|k| (k as f64 * 0.7).sin()).collect());
    let sigma = m.param_constrained("sigma", sampler::Constraint::Positive);
    let nu = m.param_constrained("nu", sampler::Constraint::Positive);
    let s = m.vector_param("s", n);
    m.sample(&sigma, Dist::exponential(50.0));
    m.sample(&nu, Dist::exponential(0.1));
    m.sample(&s, Dist::gaussian_random_walk(&sigma));
    m.sample(&returns, Dist::student_t(&nu, 0.0, s.exp()));
    let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
    (**checked.program()).clone()
}

#[test]
fn split_plans_split_parameter_vectors_and_random_walks() {
    let program = volatility(100);
    let plan = split::plan(&program, 16).expect("the walk splits");
    assert!(!plan.fused, "a split walk reads its neighbours' elements");
    for (k, inst) in program.insts.iter().enumerate() {
        let expected = match inst {
            Inst::Constrain { theta, .. } => theta.len == 100,
            Inst::RandomWalk { .. } | Inst::Map { .. } => true,
            Inst::Density { len, .. } => *len == 100,
            _ => false,
        };
        assert_eq!(plan.insts[k], expected, "instruction {k}: {inst:?}");
    }
    // Scalars whole, the two vectors 7 values per lane.
    assert_eq!(plan.tape_len, 1 + 1 + 7 + 7);
    assert_eq!(plan.longest_split(&program), 100);
    // 100 values are at least 3 per lane on 32 lanes; 60 only on 16.
    assert_eq!(choose_lanes(&program, true, 32), 32);
    assert_eq!(choose_lanes(&volatility(60), true, 32), 16);
    assert_eq!(choose_lanes(&volatility(40), true, 32), 1);
    assert_eq!(choose_lanes(&program, true, 8), 8);
    assert_eq!(choose_lanes(&program, false, 8), 1);
    // The generated model reads the vector's coordinates (from coordinate 2) and passes their
    // gradient through the split hooks, and takes each step's predecessor from a neighbour.
    let options = ShaderOptions {
        lanes: 16,
        ..options(Precision::F32, TapePlacement::Private)
    };
    for kernel in [KernelKind::LogpGrad, KernelKind::Nuts, KernelKind::Fused] {
        let text = kernel_source(&program, kernel, &options).expect("the kernel generates");
        assert!(text.contains("g_theta_split(6u, 2u)"), "{kernel:?}");
        assert!(
            text.contains("g_set_grad_split(6u, 2u, 100u, g_gr)"),
            "{kernel:?}"
        );
        assert!(text.contains("g_lane_get(g_supply, ((g_lane + 15u) % 16u))"));
        assert!(
            !text.contains("g_li"),
            "every split loop unrolled: {kernel:?}"
        );
    }
}

#[test]
fn device_data_holds_product_matrices_column_major_and_the_rest_as_is() {
    let program = regression();
    let matrix = match program
        .insts
        .iter()
        .find(|inst| matches!(inst, Inst::Matvec { .. }))
    {
        Some(Inst::Matvec { m, .. }) => *m,
        _ => panic!("the regression has a product"),
    };
    assert_eq!(layout::column_major(&program), vec![matrix]);
    // The program's data, then the interpreter's constants (interp.rs).
    let data = device_data(&program);
    assert!(data.len() >= program.data.len());
    let (rows, cols, offset) = (matrix.rows, matrix.cols, matrix.offset);
    for k in 0..program.data.len() as u32 {
        let inside = (offset..offset + rows * cols).contains(&k);
        let at = if inside {
            let (r, c) = ((k - offset) / cols, (k - offset) % cols);
            offset + c * rows + r
        } else {
            k
        };
        assert_eq!(data[at as usize], program.data[k as usize], "value {k}");
    }
    // A matrix whose values another operand also reads keeps its order.
    let mut shared = program.clone();
    for inst in &mut shared.insts {
        if let Inst::Density {
            x: Operand::Data(y),
            ..
        } = inst
        {
            y.offset = offset;
        }
    }
    assert!(layout::column_major(&shared).is_empty());
    assert_eq!(device_data(&shared)[..shared.data.len()], shared.data[..]);
}

#[test]
fn split_refuses_what_would_gather_a_split_vector() {
    let mut m = ModelBuilder::new("cumulative");
    let y = m.data_vector("y", (0..16).map(f64::from).collect());
    let mu = m.param("mu");
    let path = (&y * &mu).cumsum();
    m.sample(&path, Dist::normal(0.0, 1.0));
    let program = (**CheckedModel::new(m.build(), &Limits::default())
        .expect("the model checks")
        .program())
    .clone();
    let refusal = split::plan(&program, 4).expect_err("a cumsum over a split vector");
    assert_eq!(refusal.kind, "cumsum");
    let options = ShaderOptions {
        lanes: 4,
        placement: TapePlacement::Private,
        ..options(Precision::F32, TapePlacement::Private)
    };
    assert!(matches!(
        source(&program, &options),
        Err(CodegenError::Unsplittable { lanes: 4, .. })
    ));
    assert_eq!(choose_lanes(&program, true, 4), 1);
}

#[test]
fn lanes_must_be_a_power_of_two_dividing_the_workgroup_and_use_a_private_tape() {
    let program = regression();
    for lanes in [0, 3, 64] {
        let options = ShaderOptions {
            lanes,
            ..options(Precision::F32, TapePlacement::Private)
        };
        assert!(
            matches!(source(&program, &options), Err(CodegenError::Lanes { .. })),
            "{lanes} lanes"
        );
    }
    let storage = ShaderOptions {
        lanes: 8,
        ..options(Precision::F32, TapePlacement::Storage)
    };
    assert_eq!(
        source(&program, &storage),
        Err(CodegenError::LanesNeedPrivateTape)
    );
}

/// A generated function's parameter must not shadow a module-scope name it reads (as
/// `g_lane_get(x, g_lane)` once did, which made every lane read its own value).
#[test]
fn generated_parameters_do_not_shadow_globals() {
    let options = ShaderOptions {
        lanes: 8,
        ..options(Precision::F32, TapePlacement::Private)
    };
    let text = source(&regression(), &options).expect("the kernel generates");
    let globals: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("var<private> "))
        .filter_map(|rest| rest.split(':').next())
        .collect();
    assert!(globals.contains(&"g_lane"), "{globals:?}");
    for line in text.lines().filter(|line| line.starts_with("fn g_")) {
        let params = &line[line.find('(').unwrap() + 1..line.find(')').unwrap()];
        for param in params.split(',').filter(|p| !p.trim().is_empty()) {
            let name = param.split(':').next().unwrap().trim();
            assert!(!globals.contains(&name), "{line}");
        }
    }
    assert!(text.contains("subgroupShuffleXor(g_x, (g_lane ^ g_source))"));
}

#[test]
fn split_chains_get_large_workgroups_only_when_enough_remain() {
    for chains in [1, 8192, 65536] {
        assert_eq!(
            default_workgroup_size(chains, 1, 1024),
            DEFAULT_WORKGROUP_SIZE
        );
    }
    // At least 512 workgroups of 32-lane chains.
    assert_eq!(default_workgroup_size(65536, 32, 1024), 512);
    assert_eq!(default_workgroup_size(8192, 32, 1024), 512);
    assert_eq!(default_workgroup_size(4096, 32, 1024), 256);
    assert_eq!(
        default_workgroup_size(1024, 32, 1024),
        DEFAULT_WORKGROUP_SIZE
    );
    assert_eq!(default_workgroup_size(16, 8, 1024), DEFAULT_WORKGROUP_SIZE);
    // On 8 lanes, four times the chains to a workgroup: at least 128 workgroups.
    assert_eq!(default_workgroup_size(8192, 8, 1024), 512);
    assert_eq!(default_workgroup_size(4096, 8, 1024), 256);
    // The adapter's limit, rounded down to a power of two, wins.
    assert_eq!(default_workgroup_size(8192, 32, 256), 256);
    assert_eq!(default_workgroup_size(8192, 32, 300), 256);
}

/// The reduce-scatter of the fused loop's lane sums (`model::lane_sums`), run on the host
/// exactly as the generated code runs it on each lane (keep the positions whose stage bit is
/// the lane's, send the others to lane `lane ^ m`, add what comes back): lane `i` ends with
/// the sum of value `i` at position 0, for every group size on every lane count, and the
/// stages skip only pairs that are zero on every lane.
#[test]
fn a_reduce_scatter_leaves_each_values_sum_on_its_lane() {
    for lanes in [2u32, 4, 8, 16, 32] {
        for n in 1..=lanes as usize {
            let stages = model::scatter_stages(n, lanes);
            // values[lane][x]: value x of the lane, distinct and exact in f64.
            let mut held: Vec<Vec<f64>> = (0..lanes)
                .map(|lane| {
                    (0..lanes as usize)
                        .map(|x| {
                            if x < n {
                                f64::from(lane * 100) + x as f64
                            } else {
                                0.0
                            }
                        })
                        .collect()
                })
                .collect();
            for (m, ts) in &stages {
                let before = held.clone();
                for lane in 0..lanes {
                    let bit = !(lane / m).is_multiple_of(2);
                    let partner = (lane ^ m) as usize;
                    for t in 0..*m {
                        let (low, high) = (t as usize, (t + m) as usize);
                        if !ts.contains(&t) {
                            assert_eq!(
                                before[lane as usize][low], 0.0,
                                "{lanes} lanes, {n} values"
                            );
                            assert_eq!(
                                before[lane as usize][high], 0.0,
                                "{lanes} lanes, {n} values"
                            );
                            continue;
                        }
                        let pick = |v: &Vec<f64>, bit: bool| if bit { v[low] } else { v[high] };
                        let keep = if bit {
                            before[lane as usize][high]
                        } else {
                            before[lane as usize][low]
                        };
                        let received =
                            pick(&before[partner], !(partner as u32 / m).is_multiple_of(2));
                        held[lane as usize][low] = keep + received;
                    }
                }
            }
            for (i, lane) in held.iter().enumerate().take(n) {
                let expected: f64 = (0..lanes).map(|l| f64::from(l * 100) + i as f64).sum();
                assert_eq!(lane[0], expected, "{lanes} lanes, {n} values: value {i}");
            }
            let shuffles: usize = stages.iter().map(|(_, ts)| ts.len()).sum();
            if n == lanes as usize {
                assert_eq!(shuffles, lanes as usize - 1, "a full group");
            }
        }
    }
}

/// The eight schools' shape: a location, a positive scale and `n` standardised effects, `n`
/// observations.
fn schools(n: usize) -> Program {
    let mut m = ModelBuilder::new("schools");
    let y = m.data_vector("y", (0..n).map(|k| k as f64 - 2.0).collect());
    let mu = m.param("mu");
    let tau = m.param_constrained("tau", sampler::Constraint::Positive);
    let z = m.vector_param("z", n);
    m.sample(&z, Dist::normal(0.0, 1.0));
    m.sample(&y, Dist::normal(&mu + &tau * &z, 10.0));
    let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
    (**checked.program()).clone()
}

/// Many chains of a small fused model take 8 lanes; few chains, or a model that does not
/// fuse, has many coordinates or runs on one invocation per chain, keep the default.
#[test]
fn many_chains_of_a_small_fused_model_take_eight_lanes() {
    let eight = MANY_CHAINS_LANES;
    let fused = regression();
    assert_eq!(lanes_for_chains(&fused, 32, MANY_CHAINS), eight);
    assert_eq!(lanes_for_chains(&fused, 32, 65536), eight);
    assert_eq!(lanes_for_chains(&fused, 32, MANY_CHAINS - 1), 32);
    assert_eq!(lanes_for_chains(&fused, 8, 65536), 8);
    assert_eq!(lanes_for_chains(&fused, 4, 65536), 4);
    // 40 rows are 5 per lane on 8: fused and long enough.
    assert!(fuses_split(&fused, 8));
    // A split walk does not fuse; 100 log-volatilities are 102 coordinates.
    assert_eq!(lanes_for_chains(&volatility(100), 32, 65536), 32);
    // Ten coordinates on one invocation per chain (8 effects are too few to split) keep it.
    let ten = schools(8);
    assert_eq!(choose_lanes(&ten, true, 32), 1);
    assert_eq!(lanes_for_chains(&ten, 1, 65536), 1);
}

/// `program()` with a concatenation of a constant, the parameter `mu` and the vector `z`
/// appended (its parts in the list buffer), and its sum added as a factor.
fn with_concat(program: &Program) -> (Program, usize) {
    let mut p = program.clone();
    let mu = p
        .insts
        .iter()
        .find_map(|inst| match *inst {
            Inst::Constrain { theta, dst, .. } if theta.len == 1 => Some(dst),
            _ => None,
        })
        .expect("mu");
    let z = p
        .insts
        .iter()
        .find_map(|inst| match *inst {
            Inst::Constrain { theta, dst, .. } if theta.len == 3 => Some(dst),
            _ => None,
        })
        .expect("z");
    let dst = SlotId(p.slots.len() as u32);
    p.slots.push(sampler::Slot {
        offset: p.tape_len as u32,
        len: 5,
    });
    p.tape_len += 5;
    let offset = p.lists.len() as u32;
    p.lists
        .extend([Operand::Const(2.0), Operand::Slot(mu), Operand::Slot(z)]);
    p.insts.push(Inst::Concat {
        parts: sampler::ListRef { offset, len: 3 },
        dst,
    });
    p.insts.push(Inst::Factor {
        a: Operand::Slot(dst),
        source: sampler::StatementId(0),
    });
    let concat = p.insts.len() - 2;
    (p, concat)
}

/// A concatenation's list run and lengths are checked before anything reads them: a run
/// outside the list buffer, an empty one and a result of the wrong length are refused.
#[test]
fn malformed_concatenations_are_errors_not_panics() {
    let (good, concat) = with_concat(&program());
    for placement in [
        TapePlacement::Private,
        TapePlacement::Storage,
        TapePlacement::Interpreted,
    ] {
        let options = options(Precision::F64, placement);
        assert!(source(&good, &options).is_ok(), "{placement}");
    }
    let options = options(Precision::F32, TapePlacement::Storage);
    type Corrupt = Box<dyn Fn(&mut Program)>;
    let cases: Vec<(&str, Corrupt)> = vec![
        (
            "outside the 3 listed operands",
            Box::new(move |p| {
                if let Inst::Concat { parts, .. } = &mut p.insts[concat] {
                    parts.offset = 2;
                }
            }),
        ),
        (
            "outside the 3 listed operands",
            Box::new(move |p| {
                if let Inst::Concat { parts, .. } = &mut p.insts[concat] {
                    parts.offset = u32::MAX;
                }
            }),
        ),
        (
            "concatenated parts is 4294967",
            Box::new(move |p| {
                if let Inst::Concat { parts, .. } = &mut p.insts[concat] {
                    parts.len = u32::MAX;
                }
            }),
        ),
        (
            "or empty",
            Box::new(move |p| {
                if let Inst::Concat { parts, .. } = &mut p.insts[concat] {
                    parts.len = 0;
                }
            }),
        ),
        (
            "the result has length 5, expected 3",
            Box::new(|p| {
                // z (3 values) replaced by one constant.
                p.lists[2] = Operand::Const(0.0);
            }),
        ),
        (
            "slot 77",
            Box::new(|p| {
                p.lists[1] = Operand::Slot(SlotId(77));
            }),
        ),
    ];
    for (expected, corrupt) in cases {
        let mut bad = good.clone();
        corrupt(&mut bad);
        match source(&bad, &options) {
            Ok(_) => panic!("a concatenation corrupted at \"{expected}\" was accepted"),
            Err(err) => assert!(
                err.to_string().contains(expected),
                "expected \"{expected}\" in: {err}"
            ),
        }
    }
}

/// Concatenations and log-sum-exps are never split; a program that would concatenate a split
/// vector keeps its parameter vectors whole instead.
#[test]
fn concatenations_keep_their_parts_whole() {
    let (p, concat) = with_concat(&program());
    let plan = split::plan(&p, 2).expect("a plan with parameters whole");
    assert!(!plan.insts[concat]);
    if let Inst::Concat { parts, dst } = p.insts[concat] {
        assert!(!plan.slot(dst).split);
        for part in p.list(parts) {
            if let Operand::Slot(id) = part {
                assert!(!plan.slot(*id).split, "{id:?}");
            }
        }
    }
}
