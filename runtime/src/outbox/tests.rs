//! The outbox: numbering, acknowledgement, repeated polls and the byte budget.

use std::time::Duration;

use super::*;

#[test]
fn events_are_numbered_acknowledged_and_repeated_until_acknowledged() {
    let mut outbox = Outbox::new();
    assert_eq!(outbox.last_seq(), 0);
    assert!(!outbox.has_after(0));
    for word in ["a", "b", "c"] {
        outbox.push(word.to_owned());
    }
    assert_eq!(outbox.last_seq(), 3);
    let first = outbox.after(0, usize::MAX, |_| 1);
    assert_eq!(
        first.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // A retried poll with the same ack sees the same events.
    assert_eq!(outbox.after(0, usize::MAX, |_| 1), first);
    outbox.ack(2);
    assert_eq!(outbox.len(), 1);
    assert!(outbox.has_after(2));
    assert!(!outbox.has_after(3));
    let rest = outbox.after(2, usize::MAX, |_| 1);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].event, "c");
    // An old ack (a late retry) drops nothing more and sees what is left.
    outbox.ack(1);
    assert_eq!(outbox.after(1, usize::MAX, |_| 1), rest);
}

#[test]
fn a_poll_answer_stops_at_the_budget_but_carries_one_event_at_least() {
    let mut outbox = Outbox::new();
    for size in [600, 600, 600] {
        outbox.push(size);
    }
    assert_eq!(outbox.after(0, 1000, |&s| s).len(), 1);
    assert_eq!(outbox.after(0, 1200, |&s| s).len(), 2);
    assert_eq!(outbox.after(0, 10, |&s| s).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_answers_before_its_caller_gives_up() {
    let start = Instant::now();
    let waiter = Waiter::new((), 0, 10_000, Some(Duration::from_secs(3)));
    assert_eq!(waiter.deadline - start, Duration::from_millis(2500));
    let waiter = Waiter::new((), 0, 1000, Some(Duration::from_secs(3)));
    assert_eq!(waiter.deadline - start, Duration::from_secs(1));
    let waiter = Waiter::new((), 0, 1000, None);
    assert_eq!(waiter.deadline - start, Duration::from_secs(1));
}

#[test]
fn a_producer_waits_while_its_backlog_is_over_budget() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    let backlog = Arc::new(Backlog::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Under the budget: no wait.
    backlog.add(100);
    backlog.wait_below(100, &stop);
    backlog.add(100);
    assert_eq!(backlog.bytes(), 200);
    // Over it: waits until an acknowledgement brings it down.
    let (passed, passes) = std::sync::mpsc::channel();
    let producer = {
        let (backlog, stop) = (Arc::clone(&backlog), Arc::clone(&stop));
        std::thread::spawn(move || {
            backlog.wait_below(100, &stop);
            passed.send(backlog.bytes()).unwrap();
            backlog.add(1000);
            backlog.wait_below(100, &stop);
            passed.send(backlog.bytes()).unwrap();
        })
    };
    assert!(
        passes.recv_timeout(Duration::from_millis(200)).is_err(),
        "the producer waits while over budget"
    );
    backlog.remove(150);
    assert_eq!(passes.recv_timeout(Duration::from_secs(10)), Ok(50));
    // Stopped: it goes on though still over budget.
    assert!(passes.recv_timeout(Duration::from_millis(200)).is_err());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    backlog.wake();
    assert_eq!(passes.recv_timeout(Duration::from_secs(10)), Ok(1050));
    producer.join().unwrap();
    // Acknowledging more than was counted leaves zero, not a wrap-around.
    backlog.remove(usize::MAX);
    assert_eq!(backlog.bytes(), 0);
}

#[test]
fn acknowledged_events_are_handed_over_and_the_rest_is_counted() {
    let mut outbox = Outbox::new();
    for size in [10, 20, 30] {
        outbox.push(size);
    }
    assert_eq!(outbox.unacked_bytes(|&s| s), 60);
    let mut dropped = Vec::new();
    outbox.ack_each(2, |&s| dropped.push(s));
    assert_eq!(dropped, [10, 20]);
    assert_eq!(outbox.unacked_bytes(|&s| s), 30);
}
