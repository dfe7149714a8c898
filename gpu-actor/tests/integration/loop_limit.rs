//! Devices that stop loops after a number of iterations per invocation (lavapipe: 65,535,
//! `wgsl/cost.rs`): models whose one gradient evaluation takes more are refused with an error
//! (never sampled wrongly) and run on the CPU through the supervisor; models that fit match
//! the CPU; and the per-dispatch budgets that keep the kernels under the cap change no draw.
//!
//! The probes are issue 22's: `-0.5 * sum((b * matvec(A, exp(a * j)))^2)` with `A` an n x n
//! data matrix, and the same with two matrices, at sizes on both sides of lavapipe's cap (at
//! 178 x 178 one evaluation takes more than 65,535 iterations; before the cap was known,
//! lavapipe returned the prior's gradient for `a` there).

use gpu_actor::wgsl::{LoopBudget, LoopLimitExceeded};
use gpu_actor::{
    GpuError, GpuKernel, GpuSampleRequest, GpuSupervisor, GpuSupervisorArgs, KernelOverrides,
    LogpGradRequest, Precision, RanOn, SampleJob, sample_on_device_with,
};
use ractor::Actor;
use sampler::{
    AdaptationKind, ChainId, ChainRng, ChainSpec, ChainTrace, CheckedModel, Limits, NoObserver,
    SamplerSettings, Seed,
};

use crate::support::{self, compare, reference, tolerance};

/// The probe with `matrices` data matrices of `n` x `n`: `mu = sum_k matvec(A_k, exp(a * j))`
/// and the factor `-0.5 * sum((b * mu)^2)`, `a ~ normal(0, 1)`, `b ~ exponential(1)`.
fn probe(n: usize, matrices: usize) -> CheckedModel {
    let mut rng = ChainRng::new(Seed(22), ChainId(n as u32));
    let matrix = |rng: &mut ChainRng| {
        let rows: Vec<String> = (0..n)
            .map(|_| {
                let row: Vec<String> = (0..n)
                    .map(|_| format!("{:e}", rng.uniform_in(-1.0, 1.0) / n as f64))
                    .collect();
                format!("[{}]", row.join(","))
            })
            .collect();
        format!("{{\"matrix\": [{}]}}", rows.join(","))
    };
    let j: Vec<String> = (0..n).map(|i| format!("{}", 0.01 * i as f64)).collect();
    let mut data = vec![format!("\"j\": {{\"vector\": [{}]}}", j.join(","))];
    let mut terms = Vec::new();
    for k in 0..matrices {
        data.push(format!("\"A{k}\": {}", matrix(&mut rng)));
        terms.push(format!(
            "{{\"matvec\": [\"A{k}\", {{\"exp\": {{\"mul\": [\"a\", \"j\"]}}}}]}}"
        ));
    }
    let mu = terms
        .into_iter()
        .reduce(|left, right| format!("{{\"add\": [{left}, {right}]}}"))
        .expect("at least one matrix");
    let json = format!(
        r#"{{ "ir_version": 1, "name": "probe{n}x{matrices}", "data": {{ {data} }},
            "parameters": [ {{ "name": "a" }}, {{ "name": "b", "constraint": "positive" }} ],
            "model": [
              {{ "sample": {{ "value": "a", "dist": {{ "normal": {{ "mu": 0, "sigma": 1 }} }} }} }},
              {{ "sample": {{ "value": "b", "dist": {{ "exponential": {{ "rate": 1 }} }} }} }},
              {{ "factor": {{ "value": {{ "mul": [-0.5, {{ "sum": {{ "pow": [{{ "mul": ["b", {mu}] }}, 2] }} }}] }} }} }} ] }}"#,
        data = data.join(",")
    );
    CheckedModel::from_json(&json, &Limits::default()).expect("the probe checks")
}

/// Whether the device runs one evaluation of `model` (no cap, or under it).
fn fits(device: &gpu_actor::GpuDevice, model: &CheckedModel) -> bool {
    device
        .report()
        .loop_limit()
        .is_none_or(|limit| LoopBudget::check_logp_grad(model.program(), limit).is_ok())
}

#[test]
fn loop_limit_probes_match_the_cpu_or_are_refused() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let (mut matched, mut refused) = (0, 0);
    for (n, matrices) in [(100, 1), (178, 1), (200, 1), (60, 2), (150, 2)] {
        let model = probe(n, matrices);
        let program = model.program();
        let key = device
            .upload_model(&model, Precision::F32)
            .wait()
            .expect("upload");
        let points = support::random_points(n as u64, 6, program.dim, 1.0);
        let result = device
            .logp_grad(LogpGradRequest {
                model: key,
                points: points.clone(),
                placement: None,
                lanes: None,
            })
            .wait();
        if !fits(&device, &model) {
            match result {
                Err(GpuError::LoopLimit { exceeded, .. }) => {
                    assert!(exceeded.needed > exceeded.usable, "{exceeded}");
                    refused += 1;
                    continue;
                }
                other => panic!("probe {n} x {matrices}: expected a refusal, got {other:?}"),
            }
        }
        let batch = result.unwrap_or_else(|e| panic!("probe {n} x {matrices}: {e}"));
        for c in 0..6 {
            let theta = &points[c * program.dim..(c + 1) * program.dim];
            compare(
                batch.logp[c],
                &batch.grad[c * program.dim..(c + 1) * program.dim],
                &reference(program, theta),
                tolerance(Precision::F32),
            )
            .unwrap_or_else(|what| panic!("probe {n} x {matrices}, point {c}: {what}"));
        }
        matched += 1;
    }
    eprintln!("probes: {matched} matched the CPU, {refused} refused");
    if device.report().loop_limit().is_some() {
        // lavapipe: the sizes straddle the cap.
        assert!(
            matched > 0 && refused > 0,
            "{matched} matched, {refused} refused"
        );
    } else {
        assert_eq!(refused, 0);
    }
}

fn request(model: &CheckedModel, adaptation: AdaptationKind) -> GpuSampleRequest {
    GpuSampleRequest {
        model: model.clone(),
        settings: SamplerSettings {
            num_warmup: 60,
            num_draws: 30,
            max_depth: 5,
            adaptation,
            ..SamplerSettings::default()
        },
        seed: Seed(5),
        chains: (0..6).map(|c| ChainSpec::new(ChainId(c))).collect(),
        kernel: GpuKernel::default(),
        precision: Precision::F32.into(),
    }
}

/// Each chain's first warmup transition, as bits: it runs at the step size the first search
/// found, before any pooled statistic (whose sums a different split into dispatches may
/// round differently) is used.
fn first_transitions(traces: &[ChainTrace]) -> Vec<[u64; 4]> {
    traces
        .iter()
        .map(|trace| {
            let first = trace
                .warmup_stats
                .first()
                .expect("warmup statistics are kept");
            [
                first.step_size.to_bits(),
                first.lp.to_bits(),
                first.accept_stat.to_bits(),
                u64::from(first.n_leapfrog),
            ]
        })
        .collect()
}

/// With a budget of one try per step-size search dispatch (and one leapfrog step per NUTS
/// dispatch), the first search goes on over many dispatches and finds exactly the step size
/// it finds in one: the first transitions are the same bits, with Stan's and nutpie's
/// searches. (Later warmup may differ in the last bits: a block split over more dispatches
/// sums its pooled moments in another order.)
#[test]
fn loop_limit_budgets_do_not_change_the_search() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let model = probe(12, 1);
    for adaptation in [AdaptationKind::Stan, AdaptationKind::Nutpie] {
        let mut request = request(&model, adaptation);
        // lavapipe runs each of the tight budget's dispatches in milliseconds: few of them.
        request.chains.truncate(2);
        request.settings.num_warmup = 20;
        request.settings.num_draws = 10;
        request.settings.save_warmup = true;
        let needed = match LoopBudget::of(model.program(), request.settings.max_depth, 0) {
            Err(LoopLimitExceeded { needed, .. }) => needed,
            Ok(budget) => panic!("no room at a limit of 0: {budget:?}"),
        };
        // The smallest cap under which one step fits: budgets of one step and one try.
        let tight = (needed * 4).div_ceil(3) + 4;
        let budget = LoopBudget::of(model.program(), request.settings.max_depth, tight)
            .expect("one step fits");
        assert_eq!(
            (budget.nuts_steps, budget.search_tries),
            (1, 1),
            "{budget:?}"
        );
        let run = |loop_limit| {
            let options = KernelOverrides {
                loop_limit,
                ..KernelOverrides::default()
            };
            sample_on_device_with(&device, &request, &options, &NoObserver)
                .expect("sampling")
                .traces
        };
        let own = first_transitions(&run(None));
        let tight = first_transitions(&run(Some(tight)));
        // Stan's search makes at least two tries, nutpie's at least two: with one try per
        // dispatch, each went on over dispatches.
        assert_eq!(own, tight, "{adaptation:?}");
    }
}

/// A model over the cap, sent to the supervisor, runs on the CPU (the CPU sampler's exact
/// draws) and says why; on a device without a cap it runs there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_limit_refused_models_run_on_the_cpu_with_the_reason() {
    let (supervisor, _) = GpuSupervisor::spawn(None, GpuSupervisor, GpuSupervisorArgs::default())
        .await
        .expect("the supervisor starts");
    let report = GpuSupervisor::report(&supervisor, std::time::Duration::from_secs(60))
        .await
        .expect("a report");
    if report.workers.is_empty() {
        assert!(
            std::env::var("REQUIRE_GPU").as_deref() != Ok("1"),
            "REQUIRE_GPU=1 but no worker"
        );
        eprintln!("skipping: no GPU worker");
        return;
    }
    let model = probe(178, 1);
    let mut request = request(&model, AdaptationKind::Stan);
    request.settings.num_warmup = 100;
    request.settings.num_draws = 100;
    let expected = crate::support::cpu_traces(&request);
    let output = GpuSupervisor::sample(
        &supervisor,
        SampleJob::new(request),
        std::time::Duration::from_secs(600),
    )
    .await
    .expect("the job runs");
    let capped = report
        .workers
        .first()
        .is_some_and(|worker| worker.adapter.loop_limit().is_some());
    match &output.ran_on {
        RanOn::Cpu { reason, refused } if capped => {
            assert!(*refused, "{reason}");
            assert!(reason.contains("loop iterations"), "{reason}");
            for (cpu, ours) in expected.iter().zip(&output.traces) {
                assert_eq!(cpu.draws, ours.draws);
            }
        }
        RanOn::Gpu { .. } if !capped => {}
        other => panic!("capped {capped}: ran on {other:?}"),
    }
    supervisor.stop(None);
}
