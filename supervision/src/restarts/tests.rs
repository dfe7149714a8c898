//! The restart decisions without actors: each case against the rule it states, on a clock
//! moved by hand.

use std::time::Duration;

use tokio::time::Instant;

use super::*;

fn failed() -> Exit {
    Exit::Abnormal {
        reason: "boom".to_owned(),
    }
}

fn rules(strategy: Strategy, max_restarts: u32) -> Restarts {
    Restarts::new(
        strategy,
        Intensity {
            max_restarts,
            window: Duration::from_secs(10),
        },
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(1000),
        },
    )
}

fn delay(decision: &Decision) -> u128 {
    match decision {
        Decision::Restart { delay, .. } => delay.as_millis(),
        other => panic!("expected a restart, got {other:?}"),
    }
}

#[test]
fn exceeding_the_intensity_escalates() {
    let mut restarts = rules(Strategy::OneForOne, 2);
    let t0 = Instant::now();
    let at = |s| t0 + Duration::from_secs(s);
    assert_eq!(
        delay(&restarts.child_exited(0, 2, Restart::Permanent, &failed(), at(0))),
        100
    );
    assert_eq!(
        delay(&restarts.child_exited(1, 2, Restart::Permanent, &failed(), at(1))),
        200
    );
    // The third restart within 10 s is one too many, whichever child asks.
    assert_eq!(
        restarts.child_exited(0, 2, Restart::Permanent, &failed(), at(2)),
        Decision::Escalate
    );
    // A child that is not restarted asks for nothing, so it cannot escalate.
    assert_eq!(
        restarts.child_exited(0, 2, Restart::Temporary, &failed(), at(3)),
        Decision::Leave { remove: true }
    );
}

#[test]
fn backoff_doubles_caps_and_resets_as_the_window_empties() {
    let mut restarts = rules(Strategy::OneForOne, 10);
    let t0 = Instant::now();
    let delays: Vec<u128> = (0..6)
        .map(|n| {
            let now = t0 + Duration::from_millis(n);
            delay(&restarts.child_exited(0, 1, Restart::Permanent, &failed(), now))
        })
        .collect();
    assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
    // 10 s after the first restart it leaves the window: five remain, so the wait is the
    // sixth's again.
    let later = t0 + Duration::from_secs(10);
    assert_eq!(
        delay(&restarts.child_exited(0, 1, Restart::Permanent, &failed(), later)),
        1000
    );
    // Once every restart has left the window, the backoff starts from its initial wait.
    let much_later = t0 + Duration::from_secs(21);
    assert_eq!(
        delay(&restarts.child_exited(0, 1, Restart::Permanent, &failed(), much_later)),
        100
    );
    assert_eq!(Backoff::default().delay(u32::MAX), Duration::from_secs(5));
}

#[test]
fn rest_for_one_restarts_the_younger_siblings_and_one_for_one_none() {
    let now = Instant::now();
    let siblings = |strategy, index, count| match rules(strategy, 5).child_exited(
        index,
        count,
        Restart::Permanent,
        &failed(),
        now,
    ) {
        Decision::Restart { siblings, .. } => siblings,
        other => panic!("expected a restart, got {other:?}"),
    };
    assert_eq!(siblings(Strategy::RestForOne, 1, 4), 2..4);
    assert_eq!(siblings(Strategy::RestForOne, 3, 4), 4..4);
    assert_eq!(siblings(Strategy::RestForOne, 0, 1), 1..1);
    assert_eq!(siblings(Strategy::OneForOne, 1, 4), 2..2);
}

#[test]
fn restart_types_decide_who_comes_back() {
    let mut restarts = rules(Strategy::OneForOne, 10);
    let now = Instant::now();
    let mut decide = |restart, exit: &Exit| restarts.child_exited(0, 1, restart, exit, now);
    assert!(matches!(
        decide(Restart::Permanent, &Exit::Normal),
        Decision::Restart { .. }
    ));
    assert!(matches!(
        decide(Restart::Permanent, &failed()),
        Decision::Restart { .. }
    ));
    assert!(matches!(
        decide(Restart::Transient, &failed()),
        Decision::Restart { .. }
    ));
    assert_eq!(
        decide(Restart::Transient, &Exit::Normal),
        Decision::Leave { remove: false }
    );
    assert_eq!(
        decide(Restart::Temporary, &failed()),
        Decision::Leave { remove: true }
    );
    assert_eq!(
        decide(Restart::Temporary, &Exit::Normal),
        Decision::Leave { remove: true }
    );
}
