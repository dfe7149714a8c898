//! Decoding and validating damaged input never panics: every truncation of real models,
//! thousands of deterministic byte mutations and structural edits of the benchmark models, and
//! the fuzz corpus seeds (with the crashes found so far), through both decoders and, when a
//! model checks, its evaluator.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use sampler::{
    BinaryOp, ChainId, ChainRng, CheckedModel, Constraint, DataValue, Dist, Expr, Limits,
    LoadError, LogDensity, Model, Seed, Statement, Transformed, UnaryOp,
};

use crate::common::{BENCH_MODELS, repo_root};

/// Small enough that a mutated size cannot make one case slow, large enough for every
/// benchmark model (logistic has 10,500 data values).
const LIMITS: Limits = Limits {
    max_name_len: 64,
    max_data_values: 100_000,
    max_dim: 10_000,
    max_declarations: 10_000,
    max_expr_nodes: 100_000,
    max_tape_values: 1_000_000,
    max_model_bytes: 1 << 20,
};

#[derive(Clone, Copy, Debug)]
enum Format {
    Json,
    Msgpack,
}

/// What one input came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The decoder refused it.
    DecodeError,
    /// It decoded but did not validate.
    Invalid,
    /// It validated and its evaluator ran.
    Evaluated,
}

/// Counts of outcomes over many inputs.
#[derive(Debug, Default)]
struct Tally {
    decode_errors: usize,
    invalid: usize,
    evaluated: usize,
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::DecodeError => self.decode_errors += 1,
            Outcome::Invalid => self.invalid += 1,
            Outcome::Evaluated => self.evaluated += 1,
        }
    }
}

/// Decodes and validates `input`; for a valid model, checks the msgpack round trip and runs
/// the evaluator at a point drawn from `seed`.
fn load_and_evaluate(format: Format, input: &[u8], seed: u64) -> Outcome {
    let loaded = match format {
        Format::Json => CheckedModel::from_json(&String::from_utf8_lossy(input), &LIMITS),
        Format::Msgpack => CheckedModel::from_msgpack(input, &LIMITS),
    };
    let checked = match loaded {
        Ok(checked) => checked,
        Err(err) => {
            // Rendering the message must not panic either.
            assert!(!err.to_string().is_empty());
            return match err {
                LoadError::Decode(_) => Outcome::DecodeError,
                LoadError::Invalid(_) => Outcome::Invalid,
            };
        }
    };
    let round_trip = Model::from_msgpack(&checked.model().to_msgpack(), usize::MAX)
        .expect("a checked model's own msgpack decodes");
    assert_eq!(&round_trip, checked.model(), "msgpack round trip");

    let mut rng = ChainRng::new(Seed(seed), ChainId(0));
    let dim = checked.dim();
    let theta: Vec<f64> = (0..dim).map(|_| 3.0 * rng.normal()).collect();
    let mut evaluator = checked.evaluator();
    let mut grad = vec![0.0; dim];
    let _log_density = evaluator.logp_grad(&theta, &mut grad);
    let mut outputs = vec![0.0; evaluator.n_outputs()];
    evaluator.write_outputs(&theta, &mut outputs);
    let _ = evaluator.explain(&theta);
    Outcome::Evaluated
}

/// The input, shown so that it can be pasted into a test: escaped text or hex bytes.
fn show(format: Format, input: &[u8]) -> String {
    match format {
        Format::Json => format!("{:?}", String::from_utf8_lossy(input)),
        Format::Msgpack => input.iter().map(|byte| format!("{byte:02x}")).collect(),
    }
}

/// Runs [`load_and_evaluate`], turning a panic into a test failure that shows the input.
fn check_no_panic(what: &str, format: Format, input: &[u8], seed: u64) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| load_and_evaluate(format, input, seed))) {
        Ok(outcome) => outcome,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            panic!(
                "{what}: {format:?} input panicked with {message:?}; input ({} bytes): {}",
                input.len(),
                show(format, input)
            );
        }
    }
}

fn model_text(name: &str) -> String {
    let path = repo_root().join("models").join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A model's JSON text and its msgpack bytes.
type Encodings = [(Format, Vec<u8>); 2];

/// The JSON text (as in the repository) and msgpack bytes of a benchmark model.
fn encodings(name: &str) -> Encodings {
    let text = model_text(name);
    let model = Model::from_json(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
    [
        (Format::Json, text.into_bytes()),
        (Format::Msgpack, model.to_msgpack()),
    ]
}

#[test]
fn decode_robustness_every_truncation_is_an_error() {
    for name in ["simple", "medium"] {
        for (format, bytes) in encodings(name) {
            assert_eq!(
                check_no_panic(name, format, &bytes, 0),
                Outcome::Evaluated,
                "{name} {format:?} is valid whole"
            );
            for len in 0..bytes.len() {
                let prefix = &bytes[..len];
                let outcome = check_no_panic(name, format, prefix, len as u64);
                // Only trailing whitespace may go from a JSON text.
                let only_whitespace_cut = bytes[len..].iter().all(u8::is_ascii_whitespace);
                assert!(
                    outcome != Outcome::Evaluated || only_whitespace_cut,
                    "{name} {format:?} truncated to {len} of {} bytes still loads: {}",
                    bytes.len(),
                    show(format, prefix)
                );
            }
        }
    }
}

/// A deterministic xorshift64* stream, for choosing mutations.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Fragments that tend to reach new code when inserted: structure, awkward numbers, names of
/// operations and distributions, and msgpack markers (huge lengths, NaN, big integers).
const TOKENS: [&[u8]; 24] = [
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b"\"",
    b"-",
    b"0",
    b"1e308",
    b"-1e-320",
    b"18446744073709551616",
    b"{\"exp\": ",
    b"{\"gather\": [",
    b"\"matvec\"",
    b"\"size\": 0",
    b"\"gaussian_random_walk\"",
    b"\"int_vector\"",
    b"\xa3exp",
    b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",
    b"\xcb\xff\xf0\x00\x00\x00\x00\x00\x00",
    b"\xdd\xff\xff\xff\xff",
    b"\xdf\x7f\xff\xff\xff",
    b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00",
    b"\x81\xa3sum",
];

/// Applies one to four random edits to `input`, sometimes splicing in part of `other`.
fn mutate(rng: &mut Xorshift, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut bytes = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(7) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            1 if at < bytes.len() => bytes[at] = rng.next() as u8,
            2 => bytes.insert(at, rng.next() as u8),
            3 => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            4 => {
                let token = rng.pick(&TOKENS);
                bytes.splice(at..at, token.iter().copied());
            }
            5 => {
                // Splice: this input's head, the other's tail.
                let from = rng.below(other.len() + 1);
                bytes.truncate(at);
                bytes.extend_from_slice(&other[from..]);
            }
            _ => {
                // Copy a chunk of this input elsewhere (repeats a structure).
                if !bytes.is_empty() {
                    let start = rng.below(bytes.len());
                    let end = (start + 1 + rng.below(64)).min(bytes.len());
                    let chunk = bytes[start..end].to_vec();
                    bytes.splice(at..at, chunk);
                }
            }
        }
    }
    bytes
}

/// Mutants per format; a few seconds in a release build.
const N_MUTANTS: usize = 10_000;

#[test]
fn decode_robustness_random_mutations_never_panic() {
    let inputs: Vec<(&str, Encodings)> = BENCH_MODELS
        .iter()
        .map(|&name| (name, encodings(name)))
        .collect();
    for (k, format) in [Format::Json, Format::Msgpack].into_iter().enumerate() {
        let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15 + k as u64);
        let mut tally = Tally::default();
        for i in 0..N_MUTANTS {
            // The large logistic model costs 100 times the others: mutate it less often.
            let (name, encoded) = loop {
                let (name, encoded) = rng.pick(&inputs);
                if *name != "logistic" || rng.below(8) == 0 {
                    break (*name, encoded);
                }
            };
            let (_, other) = rng.pick(&inputs);
            let mutant = mutate(&mut rng, &encoded[k].1, &other[k].1);
            tally.add(check_no_panic(
                &format!("mutant {i} of {name}"),
                format,
                &mutant,
                i as u64,
            ));
        }
        eprintln!("{format:?} mutants: {tally:?}");
        // The mutations must reach every stage, or this test checks less than it claims.
        let floor = N_MUTANTS / 500;
        assert!(
            tally.decode_errors > floor && tally.invalid > floor && tally.evaluated > floor,
            "{format:?}: {tally:?}"
        );
    }
}

/// Numbers that sit on the edges of domains, supports and limits.
const AWKWARD: [f64; 14] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    2.5,
    3.0,
    -7.0,
    1e300,
    -1e-300,
    5e-324,
    f64::NAN,
    f64::INFINITY,
];

fn awkward(rng: &mut Xorshift) -> f64 {
    *rng.pick(&AWKWARD)
}

/// A random expression over `names` (and one unknown name), at most `depth` deep.
fn random_expr(rng: &mut Xorshift, names: &[String], depth: usize) -> Expr {
    match rng.below(if depth == 0 { 2 } else { 5 }) {
        0 => Expr::Const(awkward(rng)),
        1 if names.is_empty() || rng.below(20) == 0 => Expr::Ref("nowhere".into()),
        1 => Expr::Ref(rng.pick(names).clone()),
        2 => Expr::Unary(
            *rng.pick(&UnaryOp::ALL),
            Box::new(random_expr(rng, names, depth - 1)),
        ),
        3 => Expr::Binary(
            *rng.pick(&BinaryOp::ALL),
            Box::new(random_expr(rng, names, depth - 1)),
            Box::new(random_expr(rng, names, depth - 1)),
        ),
        _ => {
            let arg = Box::new(random_expr(rng, names, depth - 1));
            match rng.below(3) {
                0 => Expr::Concat(
                    (0..rng.below(4))
                        .map(|_| random_expr(rng, names, depth - 1))
                        .collect(),
                ),
                1 => Expr::Elem(arg, *rng.pick(&[0, 1, 2, 7, u32::MAX])),
                _ => Expr::Slice(
                    arg,
                    *rng.pick(&[0, 1, 2, u32::MAX]),
                    *rng.pick(&[0, 1, 2, 3, u32::MAX]),
                ),
            }
        }
    }
}

/// A random distribution whose arguments are random expressions.
fn random_dist(rng: &mut Xorshift, names: &[String]) -> Dist {
    let kind = rng.below(17);
    let mut e = || random_expr(rng, names, 2);
    match kind {
        0 => Dist::normal(e(), e()),
        1 => Dist::half_normal(e()),
        2 => Dist::exponential(e()),
        3 => Dist::student_t(e(), e(), e()),
        4 => Dist::cauchy(e(), e()),
        5 => Dist::half_cauchy(e()),
        6 => Dist::log_normal(e(), e()),
        7 => Dist::gamma(e(), e()),
        8 => Dist::inverse_gamma(e(), e()),
        9 => Dist::beta(e(), e()),
        10 => Dist::uniform(e(), e()),
        11 => Dist::laplace(e(), e()),
        12 => Dist::bernoulli_logit(e()),
        13 => Dist::binomial_logit(e(), e()),
        14 => Dist::poisson_log(e()),
        15 => Dist::GaussianRandomWalk {
            sigma: e(),
            drift: Some(e()),
            init_mu: Some(e()),
            init_sigma: Some(e()),
        },
        _ => Dist::gaussian_random_walk(e()),
    }
}

fn dist_args_mut(dist: &mut Dist) -> Vec<&mut Expr> {
    match dist {
        Dist::Normal { mu, sigma } | Dist::Cauchy { mu, sigma } | Dist::LogNormal { mu, sigma } => {
            vec![mu, sigma]
        }
        Dist::HalfNormal { sigma } | Dist::HalfCauchy { sigma } => vec![sigma],
        Dist::Exponential { rate } => vec![rate],
        Dist::StudentT { nu, mu, sigma } => vec![nu, mu, sigma],
        Dist::Gamma { shape, rate } => vec![shape, rate],
        Dist::InverseGamma { shape, scale } => vec![shape, scale],
        Dist::Beta { alpha, beta } => vec![alpha, beta],
        Dist::Uniform { lower, upper } => vec![lower, upper],
        Dist::Laplace { mu, scale } => vec![mu, scale],
        Dist::BernoulliLogit { logit } => vec![logit],
        Dist::BinomialLogit { trials, logit } => vec![trials, logit],
        Dist::PoissonLog { log_rate } => vec![log_rate],
        Dist::GaussianRandomWalk {
            sigma,
            drift,
            init_mu,
            init_sigma,
        } => std::iter::once(sigma)
            .chain([drift, init_mu, init_sigma].into_iter().flatten())
            .collect(),
    }
}

/// Every top-level expression of a model.
fn expr_roots(model: &mut Model) -> Vec<&mut Expr> {
    let mut roots: Vec<&mut Expr> = model
        .transformed
        .iter_mut()
        .map(|transformed| &mut transformed.value)
        .collect();
    for statement in &mut model.model {
        match statement {
            Statement::Sample { value, dist } => {
                roots.push(value);
                roots.extend(dist_args_mut(dist));
            }
            Statement::Factor { value } => roots.push(value),
        }
    }
    roots
}

/// A random node of `expr`: the root or, half the time, a node below it.
fn random_node<'a>(rng: &mut Xorshift, expr: &'a mut Expr) -> &'a mut Expr {
    let leaf = match expr {
        Expr::Const(_) | Expr::Ref(_) => true,
        Expr::Concat(parts) => parts.is_empty(),
        _ => false,
    };
    if leaf || rng.below(2) == 0 {
        return expr;
    }
    match expr {
        Expr::Unary(_, arg) | Expr::Elem(arg, _) | Expr::Slice(arg, _, _) => random_node(rng, arg),
        Expr::Concat(parts) => {
            let at = rng.below(parts.len());
            random_node(rng, &mut parts[at])
        }
        Expr::Binary(_, lhs, rhs) => {
            if rng.below(2) == 0 {
                random_node(rng, lhs)
            } else {
                random_node(rng, rhs)
            }
        }
        Expr::Const(_) | Expr::Ref(_) => unreachable!("leaves are returned above"),
    }
}

fn random_data(rng: &mut Xorshift) -> DataValue {
    let len = *rng.pick(&[1, 2, 3, 8]);
    let ints = [-1, 0, 1, 2, 3, 7, i64::MAX, i64::MIN];
    match rng.below(5) {
        0 => DataValue::Real(awkward(rng)),
        1 => DataValue::Int(*rng.pick(&ints)),
        2 => DataValue::Vector((0..len).map(|_| awkward(rng)).collect()),
        3 => DataValue::IntVector((0..len).map(|_| *rng.pick(&ints)).collect()),
        _ => {
            let cols = *rng.pick(&[1, 2, 3]);
            DataValue::Matrix(
                (0..len)
                    .map(|_| (0..cols).map(|_| awkward(rng)).collect())
                    .collect(),
            )
        }
    }
}

fn random_constraint(rng: &mut Xorshift) -> Constraint {
    match rng.below(10) {
        6 => Constraint::Ordered,
        7 => Constraint::PositiveOrdered,
        8 => Constraint::Simplex,
        9 => Constraint::UnitVector,
        0 => Constraint::Real,
        1 => Constraint::Positive,
        2 => Constraint::UnitInterval,
        3 => Constraint::Lower(awkward(rng)),
        4 => Constraint::Upper(awkward(rng)),
        _ => Constraint::Interval {
            lower: awkward(rng),
            upper: awkward(rng),
        },
    }
}

/// Applies one random edit to the model's structure: the kind of change a user makes.
fn mutate_model(rng: &mut Xorshift, model: &mut Model) {
    let mut names: Vec<String> = model.data.keys().cloned().collect();
    names.extend(model.parameters.iter().map(|param| param.name.clone()));
    names.extend(
        model
            .transformed
            .iter()
            .map(|transformed| transformed.name.clone()),
    );
    match rng.below(10) {
        8 if !model.parameters.is_empty() => {
            // IR v2 fields: expression bounds, affine transforms, dims.
            let at = rng.below(model.parameters.len());
            let earlier: Vec<String> = names
                .iter()
                .filter(|name| model.parameters[at..].iter().all(|p| &p.name != *name))
                .cloned()
                .collect();
            let names = if rng.below(4) == 0 { &names } else { &earlier };
            let expr = (rng.below(4) != 0).then(|| random_expr(rng, names, 2));
            let param = &mut model.parameters[at];
            match rng.below(5) {
                0 => param.lower = expr,
                1 => param.upper = expr,
                2 => param.offset = expr,
                3 => param.multiplier = expr,
                _ => {
                    param.dims = rng
                        .pick(&[vec![], vec![1], vec![2, 2], vec![3], vec![0], vec![2, 3]])
                        .clone();
                }
            }
        }
        0 => {
            let replacement = random_expr(rng, &names, 2);
            let mut roots = expr_roots(model);
            if !roots.is_empty() {
                let root = rng.below(roots.len());
                *random_node(rng, roots.swap_remove(root)) = replacement;
            }
        }
        1 => {
            let dist = random_dist(rng, &names);
            let samples: Vec<&mut Dist> = model
                .model
                .iter_mut()
                .filter_map(|statement| match statement {
                    Statement::Sample { dist, .. } => Some(dist),
                    Statement::Factor { .. } => None,
                })
                .collect();
            if !samples.is_empty() {
                let at = rng.below(samples.len());
                *samples.into_iter().nth(at).expect("in range") = dist;
            }
        }
        2 if !model.parameters.is_empty() => {
            let at = rng.below(model.parameters.len());
            model.parameters[at].size =
                *rng.pick(&[None, Some(0), Some(1), Some(2), Some(3), Some(8)]);
        }
        3 if !model.parameters.is_empty() => {
            let at = rng.below(model.parameters.len());
            model.parameters[at].constraint = random_constraint(rng);
        }
        4 => {
            let name = if names.is_empty() || rng.below(4) == 0 {
                "fresh".to_owned()
            } else {
                rng.pick(&names).clone()
            };
            model.data.insert(name, random_data(rng));
        }
        5 => {
            let statement = if rng.below(4) == 0 {
                Statement::Factor {
                    value: random_expr(rng, &names, 3),
                }
            } else {
                Statement::Sample {
                    value: random_expr(rng, &names, 1),
                    dist: random_dist(rng, &names),
                }
            };
            model.model.push(statement);
        }
        6 => model.transformed.push(Transformed {
            name: format!("t{}", model.transformed.len()),
            value: random_expr(rng, &names, 3),
            dims: Vec::new(),
        }),
        7 => match rng.below(4) {
            0 if !model.model.is_empty() => {
                model.model.remove(rng.below(model.model.len()));
            }
            1 if !model.transformed.is_empty() => {
                model.transformed.remove(rng.below(model.transformed.len()));
            }
            2 if !model.parameters.is_empty() => {
                model.parameters.remove(rng.below(model.parameters.len()));
            }
            _ => {
                if let Some(name) = model.data.keys().next().cloned() {
                    model.data.remove(&name);
                }
            }
        },
        _ if model.transformed.len() >= 2 => {
            let (a, b) = (
                rng.below(model.transformed.len()),
                rng.below(model.transformed.len()),
            );
            model.transformed.swap(a, b);
        }
        _ => model.name = "renamed".into(),
    }
}

/// Structured mutants per run: edits that keep the bytes well-formed reach the validator and
/// the evaluator far more often than byte edits do.
const N_MODEL_MUTANTS: usize = 5000;

#[test]
fn decode_robustness_random_model_edits_never_panic() {
    let models: Vec<(&str, Model)> = BENCH_MODELS
        .iter()
        .filter(|&&name| name != "logistic")
        .map(|&name| (name, Model::from_json(&model_text(name)).expect("valid")))
        .collect();
    let mut rng = Xorshift(0x0123_4567_89ab_cdef);
    let mut tally = Tally::default();
    for i in 0..N_MODEL_MUTANTS {
        let (name, model) = rng.pick(&models);
        let mut mutant = model.clone();
        for _ in 0..1 + rng.below(3) {
            mutate_model(&mut rng, &mut mutant);
        }
        let bytes = mutant.to_msgpack();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            load_and_evaluate(Format::Msgpack, &bytes, i as u64)
        }));
        match outcome {
            Ok(outcome) => tally.add(outcome),
            Err(_) => panic!(
                "edit {i} of {name} panicked (message above); model: {mutant:?}; msgpack: {}",
                show(Format::Msgpack, &bytes)
            ),
        }
    }
    eprintln!("model edits: {tally:?}");
    assert_eq!(tally.decode_errors, 0, "an edited model always encodes");
    let floor = N_MODEL_MUTANTS / 20;
    assert!(
        tally.invalid > floor && tally.evaluated > floor,
        "{tally:?}"
    );
}

/// Every file of `fuzz/corpus_seed/<target>/`: seed models and the inputs of past crashes.
fn corpus_files(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = repo_root().join("fuzz/corpus_seed").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| {
            let path = entry.expect("corpus entry").path();
            let bytes = std::fs::read(&path).expect("corpus file is readable");
            (name_of(&path), bytes)
        })
        .collect();
    files.sort();
    files
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs `body` in a child process that runs only the test `name` of this binary, so that an
/// abort (a stack overflow, or running out of memory, which `catch_unwind` cannot catch) fails
/// that one test instead of killing every test of the run.
fn in_child_process(name: &str, body: impl FnOnce()) {
    const CHILD: &str = "SAMPLER_TEST_IN_CHILD_PROCESS";
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    let test_name = format!("{module}::{name}");
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = std::process::Command::new(exe)
        .args([
            test_name.as_str(),
            "--exact",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test_name} in a child process: {}\n{stdout}\n{stderr}",
        output.status
    );
}

/// Fuzzer finds are often aborts (stack overflows), so the corpus runs in a child process,
/// which names each file before it loads it.
#[test]
fn decode_robustness_fuzz_corpus_seeds_never_panic() {
    in_child_process("decode_robustness_fuzz_corpus_seeds_never_panic", || {
        for (target, format) in [
            ("decode_json", Format::Json),
            ("decode_msgpack", Format::Msgpack),
        ] {
            let files = corpus_files(target);
            let mut tally = Tally::default();
            for (i, (name, bytes)) in files.iter().enumerate() {
                let what = format!("fuzz/corpus_seed/{target}/{name}");
                eprintln!("loading {what}");
                tally.add(check_no_panic(&what, format, bytes, i as u64));
            }
            assert!(
                tally.evaluated >= 5,
                "{target}: {tally:?} over {} files",
                files.len()
            );
        }
    });
}
