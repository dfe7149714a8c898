//! Supervisor behaviour, observed from the outside: test workers report their starts and stops
//! on a channel, and each test waits on those events (with a deadline), never on a sleep.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::RactorMessage;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::Instant;

use super::*;

const DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Started(&'static str),
    Stopped(&'static str),
    Escalated(String),
}

/// A worker that reports its lifecycle and fails on request (or right after every start).
struct Worker;

#[derive(Clone)]
struct WorkerArgs {
    name: &'static str,
    events: UnboundedSender<(Event, Instant)>,
    fail_after_start: bool,
}

#[derive(RactorMessage)]
enum WorkerMsg {
    Fail,
    Stop,
}

impl Actor for Worker {
    type Msg = WorkerMsg;
    type State = WorkerArgs;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: WorkerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let _ = args
            .events
            .send((Event::Started(args.name), Instant::now()));
        Ok(args)
    }

    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.fail_after_start {
            return Err("failing right after start".into());
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = state
            .events
            .send((Event::Stopped(state.name), Instant::now()));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerMsg::Fail => Err("asked to fail".into()),
            WorkerMsg::Stop => {
                myself.stop(None);
                Ok(())
            }
        }
    }
}

/// The supervisor's own supervisor: reports the supervisor's failure (escalation).
struct Parent;

#[derive(RactorMessage)]
enum ParentMsg {}

impl Actor for Parent {
    type Msg = ParentMsg;
    type State = UnboundedSender<(Event, Instant)>;
    type Arguments = (SupervisorArgs, UnboundedSender<(Event, Instant)>);

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        (args, events): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Supervisor::spawn_linked(None, Supervisor, args, myself.get_cell()).await?;
        Ok(events)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        events: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(_, error) = event {
            let _ = events.send((Event::Escalated(error.to_string()), Instant::now()));
        }
        Ok(())
    }
}

struct Check {
    events: UnboundedReceiver<(Event, Instant)>,
    sender: UnboundedSender<(Event, Instant)>,
}

impl Check {
    fn new() -> Self {
        let (sender, events) = unbounded_channel();
        Self { events, sender }
    }

    fn child(&self, name: &'static str, restart: Restart) -> ChildSpec {
        self.child_with(name, restart, false)
    }

    fn child_with(&self, name: &'static str, restart: Restart, fail: bool) -> ChildSpec {
        let args = WorkerArgs {
            name,
            events: self.sender.clone(),
            fail_after_start: fail,
        };
        ChildSpec::actor(name, restart, None, move || (Worker, args.clone()))
    }

    async fn next(&mut self) -> (Event, Instant) {
        tokio::time::timeout(DEADLINE, self.events.recv())
            .await
            .expect("an event before the deadline")
            .expect("event channel open")
    }

    async fn expect(&mut self, expected: &[Event]) {
        for want in expected {
            let (got, _) = self.next().await;
            assert_eq!(&got, want);
        }
    }

    fn assert_quiet(&mut self) {
        if let Ok((event, _)) = self.events.try_recv() {
            panic!("unexpected event {event:?}");
        }
    }
}

fn args(strategy: Strategy, children: Vec<ChildSpec>) -> SupervisorArgs {
    SupervisorArgs {
        strategy,
        intensity: Intensity {
            max_restarts: 5,
            window: Duration::from_secs(60),
        },
        backoff: Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(10),
        },
        children,
    }
}

async fn worker(sup: &ActorRef<SupervisorMsg>, id: &str) -> ActorRef<WorkerMsg> {
    let children = ractor::call_t!(sup, SupervisorMsg::Children, 5_000).expect("children");
    let child = children
        .into_iter()
        .find(|c| c.id.as_str() == id)
        .expect("child exists");
    child.actor.expect("child running").into()
}

async fn restarts(sup: &ActorRef<SupervisorMsg>) -> Vec<(String, u32)> {
    let children = ractor::call_t!(sup, SupervisorMsg::Children, 5_000).expect("children");
    children
        .into_iter()
        .map(|c| (c.id.as_str().to_owned(), c.restarts))
        .collect()
}

#[tokio::test]
async fn one_for_one_restarts_only_the_failed_child() {
    let mut check = Check::new();
    let children = vec![
        check.child("a", Restart::Permanent),
        check.child("b", Restart::Permanent),
        check.child("c", Restart::Permanent),
    ];
    let (sup, handle) = Actor::spawn(None, Supervisor, args(Strategy::OneForOne, children))
        .await
        .unwrap();
    use Event::*;
    check
        .expect(&[Started("a"), Started("b"), Started("c")])
        .await;

    worker(&sup, "b").await.cast(WorkerMsg::Fail).unwrap();
    check.expect(&[Started("b")]).await;
    assert_eq!(
        restarts(&sup).await,
        [("a".into(), 0), ("b".into(), 1), ("c".into(), 0)]
    );
    check.assert_quiet();

    sup.stop(None);
    handle.await.unwrap();
    check
        .expect(&[Stopped("c"), Stopped("b"), Stopped("a")])
        .await;
}

#[tokio::test]
async fn rest_for_one_restarts_younger_siblings_in_order() {
    let mut check = Check::new();
    let children = vec![
        check.child("a", Restart::Permanent),
        check.child("b", Restart::Permanent),
        check.child("c", Restart::Permanent),
        check.child("d", Restart::Permanent),
    ];
    let (sup, handle) = Actor::spawn(None, Supervisor, args(Strategy::RestForOne, children))
        .await
        .unwrap();
    use Event::*;
    check
        .expect(&[Started("a"), Started("b"), Started("c"), Started("d")])
        .await;

    worker(&sup, "b").await.cast(WorkerMsg::Fail).unwrap();
    // Younger siblings stop youngest first, then everything from b restarts in order.
    check
        .expect(&[
            Stopped("d"),
            Stopped("c"),
            Started("b"),
            Started("c"),
            Started("d"),
        ])
        .await;
    assert_eq!(
        restarts(&sup).await,
        [
            ("a".into(), 0),
            ("b".into(), 1),
            ("c".into(), 1),
            ("d".into(), 1)
        ]
    );
    check.assert_quiet();

    sup.stop(None);
    handle.await.unwrap();
}

#[tokio::test]
async fn restart_types_decide_who_comes_back() {
    let mut check = Check::new();
    let children = vec![
        check.child("permanent", Restart::Permanent),
        check.child("transient", Restart::Transient),
        check.child("temporary", Restart::Temporary),
    ];
    let (sup, handle) = Actor::spawn(None, Supervisor, args(Strategy::OneForOne, children))
        .await
        .unwrap();
    use Event::*;
    check
        .expect(&[
            Started("permanent"),
            Started("transient"),
            Started("temporary"),
        ])
        .await;

    // A permanent child comes back even after a normal stop.
    worker(&sup, "permanent")
        .await
        .cast(WorkerMsg::Stop)
        .unwrap();
    check
        .expect(&[Stopped("permanent"), Started("permanent")])
        .await;

    // A transient child comes back after a failure, not after a normal stop.
    worker(&sup, "transient")
        .await
        .cast(WorkerMsg::Fail)
        .unwrap();
    check.expect(&[Started("transient")]).await;
    worker(&sup, "transient")
        .await
        .cast(WorkerMsg::Stop)
        .unwrap();
    check.expect(&[Stopped("transient")]).await;

    // A temporary child never comes back and leaves the list.
    worker(&sup, "temporary")
        .await
        .cast(WorkerMsg::Fail)
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    while restarts(&sup).await.len() != 2 {
        assert!(Instant::now() < deadline, "temporary child still listed");
        tokio::task::yield_now().await;
    }
    assert_eq!(
        restarts(&sup).await,
        [("permanent".into(), 1), ("transient".into(), 1)]
    );
    check.assert_quiet();

    sup.stop(None);
    handle.await.unwrap();
    check.expect(&[Stopped("permanent")]).await;
}

#[tokio::test]
async fn exceeding_the_intensity_escalates_to_the_parent() {
    let mut check = Check::new();
    let mut sup_args = args(
        Strategy::OneForOne,
        vec![
            check.child("steady", Restart::Permanent),
            check.child_with("flaky", Restart::Permanent, true),
        ],
    );
    sup_args.intensity = Intensity {
        max_restarts: 2,
        window: Duration::from_secs(60),
    };
    let (_parent, parent_handle) = Actor::spawn(None, Parent, (sup_args, check.sender.clone()))
        .await
        .unwrap();
    use Event::*;
    // Start, then two restarts allowed; the third failure escalates.
    check
        .expect(&[
            Started("steady"),
            Started("flaky"),
            Started("flaky"),
            Started("flaky"),
            Stopped("steady"),
        ])
        .await;
    let (event, _) = check.next().await;
    let Escalated(message) = event else {
        panic!("expected escalation, got {event:?}");
    };
    assert!(
        message.contains("child flaky failed again after 2 restarts"),
        "{message}"
    );
    check.assert_quiet();
    _parent.stop(None);
    parent_handle.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn backoff_doubles_between_restarts_and_caps() {
    let mut check = Check::new();
    let mut sup_args = args(
        Strategy::OneForOne,
        vec![check.child_with("flaky", Restart::Permanent, true)],
    );
    sup_args.intensity = Intensity {
        max_restarts: 6,
        window: Duration::from_secs(600),
    };
    sup_args.backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_millis(1000),
    };
    let (_parent, _handle) = Actor::spawn(None, Parent, (sup_args, check.sender.clone()))
        .await
        .unwrap();
    let mut starts = Vec::new();
    for _ in 0..7 {
        let (event, at) = check.next().await;
        assert_eq!(event, Event::Started("flaky"));
        starts.push(at);
    }
    let gaps: Vec<u128> = starts
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_millis())
        .collect();
    // The paused clock only moves when every task waits, so the gaps are the backoff exactly.
    assert_eq!(gaps, [100, 200, 400, 800, 1000, 1000]);
    let (event, _) = check.next().await;
    assert!(matches!(event, Event::Escalated(_)), "{event:?}");
}

#[tokio::test]
async fn a_child_that_cannot_start_fails_the_supervisor_start() {
    let check = Check::new();
    let children = vec![
        check.child("fine", Restart::Permanent),
        ChildSpec::new("broken", Restart::Permanent, |_sup| async {
            Err(ractor::SpawnErr::StartupFailed("no device".into()))
        }),
    ];
    let error = Actor::spawn(None, Supervisor, args(Strategy::OneForOne, children))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("child broken failed to start"),
        "{error}"
    );
}
