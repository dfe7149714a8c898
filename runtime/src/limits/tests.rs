//! The arithmetic of a job's size (saturating, overflow is over the limit), which limit a
//! request is over, and the messages, node-side and on the wire.

use super::*;

const EIGHT_SCHOOLS: &str = include_str!("../../../models/eight_schools_noncentered.json");

fn shape(chains: u64, warmup: u64, draws: u64, save_warmup: bool) -> JobShape {
    JobShape {
        chains,
        warmup,
        draws,
        save_warmup,
        columns: 18,
        data_bytes: 128,
    }
}

fn node() -> Holder {
    Holder::Node("a@127.0.0.1".to_owned())
}

fn byte_limit(max_job_bytes: u64) -> JobLimits {
    JobLimits {
        max_job_bytes,
        ..JobLimits::for_memory(0)
    }
}

#[test]
fn a_jobs_bytes_are_its_chains_rows_values_and_data() {
    // 18 columns and 7 statistics per draw.
    assert_eq!(shape(1, 1000, 1000, false).bytes(), 1000 * 25 * 8 + 128);
    assert_eq!(shape(4, 1000, 1000, false).bytes(), 4 * 1000 * 25 * 8 + 128);
    // Saved warmup draws are kept too.
    assert_eq!(
        shape(4, 500, 1000, true).bytes(),
        4 * 1500 * 25 * 8 + 128,
        "warmup draws count when saved"
    );
    assert_eq!(shape(1, 10, 0, false).bytes(), 128, "data alone");
}

#[test]
fn a_shape_counts_the_models_columns_data_and_burn_in() {
    let model = CheckedModel::from_json(EIGHT_SCHOOLS, &sampler::Limits::default()).unwrap();
    let settings = SamplerSettings {
        num_warmup: 300,
        num_draws: 200,
        save_warmup: true,
        ..SamplerSettings::default()
    };
    let shape = JobShape::new(&model, &settings, 3, 50);
    assert_eq!(shape.columns, model.columns().len() as u64);
    assert_eq!(shape.columns, 18);
    assert_eq!((shape.chains, shape.warmup, shape.draws), (3, 350, 200));
    assert!(shape.save_warmup);
    assert!(shape.data_bytes >= 16 * 8, "{}", shape.data_bytes);
}

#[test]
fn products_that_overflow_saturate_and_are_over_every_limit() {
    let huge = shape(u64::MAX, 0, u64::MAX, false);
    assert_eq!(huge.bytes(), u64::MAX);
    let warmup = shape(2, u64::MAX, 5, true);
    assert_eq!(warmup.rows_per_chain(), u64::MAX);
    assert_eq!(warmup.bytes(), u64::MAX);
    let columns = JobShape {
        columns: u64::MAX,
        ..shape(1, 0, 1, false)
    };
    assert_eq!(columns.values_per_draw(), u64::MAX);
    // Even with no byte limit at all, an overflowing size is refused.
    let unlimited = JobLimits {
        max_chains: u32::MAX,
        max_warmup: u64::MAX,
        max_draws: u64::MAX,
        max_job_bytes: u64::MAX,
    };
    let error = unlimited
        .check(&shape(1, 0, u64::MAX, false), "job", &node())
        .unwrap_err();
    assert_eq!(error.limit, Limit::JobBytes);
    assert!(
        error.to_string().starts_with("job needs more than 18.4 EB"),
        "{error}"
    );
}

#[test]
fn the_1e9_draws_request_is_over_the_byte_limit_and_says_how_to_fix_it() {
    let limits = byte_limit(11_700_000_000);
    let error = limits
        .check(&shape(1, 1000, 1_000_000_000, false), "job", &node())
        .unwrap_err();
    assert_eq!(error.limit, Limit::JobBytes);
    assert_eq!(error.value, 200_000_000_128);
    assert_eq!(error.max, 11_700_000_000);
    assert_eq!(
        error.to_string(),
        "job needs 200.0 GB (1 chain x 1000000000 draws x 25 values), over node \
         a@127.0.0.1's limit of 11.7 GB: lower --draws/--chains or start the node with a \
         larger --max-job-bytes"
    );
    // The same job fits a limit just above its size, and not one just below.
    assert!(
        JobLimits {
            max_draws: u64::MAX,
            ..byte_limit(200_000_000_128)
        }
        .check(&shape(1, 1000, 1_000_000_000, false), "job", &node())
        .is_ok()
    );
    assert!(
        byte_limit(200_000_000_127)
            .check(&shape(1, 1000, 1_000_000_000, false), "job", &node())
            .is_err()
    );
}

#[test]
fn each_count_limit_names_its_value_maximum_and_flag() {
    let limits = JobLimits {
        max_chains: 8,
        max_warmup: 2000,
        max_draws: 5000,
        max_job_bytes: u64::MAX - 1,
    };
    let check = |shape: JobShape| limits.check(&shape, "job", &node()).unwrap_err();
    let chains = check(shape(9, 0, 1, false));
    assert_eq!(
        (chains.limit, chains.value, chains.max),
        (Limit::Chains, 9, 8)
    );
    assert_eq!(
        chains.to_string(),
        "job asks for 9 chains, over node a@127.0.0.1's limit of 8: lower --chains or start \
         the node with a larger --max-chains"
    );
    let draws = check(shape(1, 0, 5001, false));
    assert_eq!(
        draws.to_string(),
        "job asks for 5001 draws per chain, over node a@127.0.0.1's limit of 5000: lower \
         --draws or start the node with a larger --max-draws"
    );
    let warmup = check(shape(1, 2001, 10, false));
    assert_eq!(
        warmup.to_string(),
        "job asks for 2001 warmup iterations per chain, over node a@127.0.0.1's limit of \
         2000: lower --warmup (or --burn-in) or start the node with a larger --max-warmup"
    );
    assert!(
        limits
            .check(&shape(8, 2000, 5000, true), "job", &node())
            .is_ok()
    );
}

#[test]
fn the_machine_and_the_caller_name_no_node_flag() {
    let error = byte_limit(1_000_000)
        .check(&shape(4, 500, 1000, true), "sample", &Holder::Machine)
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "sample needs 1.2 MB (4 chains x (1000 draws + 500 warmup draws) x 25 values), over \
         this machine's available memory of 1.0 MB: lower --draws/--chains"
    );
    let error = byte_limit(1_000_000)
        .check(&shape(4, 500, 2000, false), "job", &Holder::Caller)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("over the limit of 1.0 MB: lower --draws/--chains"),
        "{error}"
    );
}

#[test]
fn a_refusal_reads_the_same_after_the_wire() {
    let error = byte_limit(1_000_000)
        .check(&shape(2, 100, 10_000, false), "task of 2 chains", &node())
        .unwrap_err();
    let wire = error.to_wire();
    let WireError::LimitExceeded(limit) = &wire else {
        panic!("{wire:?}");
    };
    assert_eq!(limit.flag, "--max-job-bytes");
    assert_eq!(limit.node, "a@127.0.0.1");
    // Through the bytes, too.
    let bytes = rmp_serde::to_vec_named(&wire).unwrap();
    let read: WireError = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(read, wire);
    assert_eq!(wire.to_string(), error.to_string());
    assert!(
        wire.to_string()
            .starts_with("task of 2 chains needs 4.0 MB")
    );
}

#[test]
fn the_default_limits_take_half_of_the_memory() {
    let limits = JobLimits::for_memory(16_000_000_000);
    assert_eq!(limits.max_job_bytes, 8_000_000_000);
    assert_eq!(limits.max_chains, MAX_CHAINS);
    assert_eq!(limits.max_draws, DEFAULT_MAX_ITERATIONS);
    assert_eq!(JobLimits::default().max_job_bytes, DEFAULT_MEMORY_BYTES / 2);
}

#[test]
fn bytes_are_shown_in_decimal_units() {
    let cases = [
        (0, "0 B"),
        (999, "999 B"),
        (1000, "1.0 kB"),
        (1_234_567, "1.2 MB"),
        (999_999, "1.0 MB"),
        (144_000_000_000, "144.0 GB"),
        (11_700_000_000, "11.7 GB"),
        (u64::MAX, "18.4 EB"),
    ];
    for (bytes, shown) in cases {
        assert_eq!(format_bytes(bytes), shown, "{bytes}");
    }
}
