//! A driver fetches while the job's client keeps up, waits while it is behind, and polls
//! for the lease every `KEEPALIVE` meanwhile.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::*;

#[tokio::test(start_paused = true)]
async fn a_driver_waits_while_the_client_is_behind_and_keeps_the_lease() {
    let (backlog, mut watched) = watch::channel(0);
    // Caught up: at once.
    assert!(client_caught_up(&mut watched).await);
    // Behind: no fetching until the keepalive is due.
    backlog.send_replace(JOB_BACKLOG_BYTES + 1);
    let start = Instant::now();
    assert!(!client_caught_up(&mut watched).await);
    assert_eq!(start.elapsed(), KEEPALIVE);
    // The client acknowledges: the driver goes on then, not at the keepalive.
    let start = Instant::now();
    let acknowledging = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        backlog.send_replace(JOB_BACKLOG_BYTES);
        backlog
    });
    assert!(client_caught_up(&mut watched).await);
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    // A job that is gone counts as caught up.
    let backlog = acknowledging.await.unwrap();
    backlog.send_replace(usize::MAX);
    drop(backlog);
    assert!(client_caught_up(&mut watched).await);
}
