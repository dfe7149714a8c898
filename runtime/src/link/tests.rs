use super::*;
use crate::transport::preamble::{LINK_HELLO_BYTES, PreambleError};

fn token(byte: u8) -> LinkToken {
    LinkToken([byte; LINK_TOKEN_BYTES])
}

#[test]
fn a_token_round_trips_as_bytes_and_is_never_printed() {
    let fresh = LinkToken::fresh().unwrap();
    assert_ne!(fresh, LinkToken::fresh().unwrap());
    let bytes = rmp_serde::to_vec_named(&fresh).unwrap();
    // 32 bytes as one MessagePack bin, not 32 numbers.
    assert_eq!(bytes.len(), 2 + LINK_TOKEN_BYTES);
    assert_eq!(rmp_serde::from_slice::<LinkToken>(&bytes).unwrap(), fresh);
    assert_eq!(format!("{fresh:?}"), "LinkToken(..)");
    let short = rmp_serde::to_vec_named(&serde_bytes::ByteBuf::from(vec![1u8; 31])).unwrap();
    let error = rmp_serde::from_slice::<LinkToken>(&short).unwrap_err();
    assert!(error.to_string().contains("31 bytes"), "{error}");
}

/// Whether `token` opens a link of `job` (closed again at once).
fn admits(links: &Links, job: JobId, token: &[u8; LINK_TOKEN_BYTES]) -> bool {
    links.open(job, token).is_ok()
}

#[test]
fn links_admit_only_a_live_job_s_own_token() {
    let links = Links::default();
    let (a, b) = (JobId(1), JobId(2));
    let ta = links.issue(a).unwrap();
    let tb = links.issue(b).unwrap();
    assert!(admits(&links, a, &ta.0));
    assert!(!admits(&links, a, &tb.0), "another job's token");
    assert!(!admits(&links, JobId(3), &ta.0), "an unknown job");
    let mut near = ta.0;
    near[LINK_TOKEN_BYTES - 1] ^= 1;
    assert!(!admits(&links, a, &near), "one bit off");
    // A new token replaces the old one.
    let ta2 = links.issue(a).unwrap();
    assert!(!admits(&links, a, &ta.0) || ta == ta2);
    links.revoke(a);
    assert!(!admits(&links, a, &ta2.0));
    assert!(admits(&links, b, &tb.0));
    links.clear();
    assert!(!admits(&links, b, &tb.0));
}

#[test]
fn a_link_hello_parses_back_and_refuses_other_bytes() {
    let hello = LinkHello {
        version: VERSION,
        job: 0x0123_4567_89ab_cdef,
        token: [7; LINK_TOKEN_BYTES],
    };
    let bytes = hello.encode();
    assert_eq!(bytes.len(), LINK_HELLO_BYTES);
    for cut in 0..LINK_HELLO_BYTES {
        assert_eq!(LinkHello::parse(&bytes[..cut]), Ok(None), "{cut} bytes");
    }
    assert_eq!(LinkHello::parse(&bytes), Ok(Some(hello.clone())));
    assert!(!format!("{hello:?}").contains('7'), "{hello:?}");
    let mut other = bytes;
    other[4..6].copy_from_slice(&(VERSION + 1).to_be_bytes());
    assert_eq!(
        LinkHello::parse(&other),
        Err(PreambleError::Version {
            theirs: VERSION + 1
        })
    );
    assert!(matches!(
        LinkHello::parse(b"BYCL\x00\x01"),
        Err(PreambleError::BadMagic { .. })
    ));
}

#[tokio::test]
async fn frames_over_their_limit_are_refused_before_anything_is_allocated() {
    let (mut near, mut far) = tokio::io::duplex(1024);
    // Announces 4 GiB - 1 and sends nothing more.
    far.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    let error = read_frame(&mut near, MAX_REQUEST_BYTES).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("at most 65536"), "{error}");
    // A frame within the limit comes back whole; a clean end is no frame.
    write_frame(&mut far, b"hello").await.unwrap();
    drop(far);
    assert_eq!(
        read_frame(&mut near, 8).await.unwrap(),
        Some(b"hello".to_vec())
    );
    assert_eq!(read_frame(&mut near, 8).await.unwrap(), None);
}

#[tokio::test]
async fn a_reused_buffer_holds_exactly_the_next_frame_and_a_cut_frame_fails() {
    let (mut near, mut far) = tokio::io::duplex(64);
    let long: Vec<u8> = (0..200u8).collect();
    let writer = {
        let long = long.clone();
        tokio::spawn(async move {
            write_frame(&mut far, &long).await.unwrap();
            write_frame(&mut far, b"short").await.unwrap();
            // A frame announced at 10 bytes, cut after 3.
            far.write_all(&10u32.to_be_bytes()).await.unwrap();
            far.write_all(b"abc").await.unwrap();
        })
    };
    let mut buffer = Vec::new();
    assert!(read_frame_into(&mut near, 1024, &mut buffer).await.unwrap());
    assert_eq!(
        buffer, long,
        "a frame longer than the duplex's buffer, read in pieces"
    );
    let room = buffer.capacity();
    assert!(read_frame_into(&mut near, 1024, &mut buffer).await.unwrap());
    assert_eq!(buffer, b"short");
    assert_eq!(buffer.capacity(), room, "the room is kept");
    writer.await.unwrap();
    let error = read_frame_into(&mut near, 1024, &mut buffer)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn a_link_passes_only_polls_and_cancels_of_its_own_job() {
    let envelope = |body| {
        Envelope::new(
            crate::ids::RequestId(1),
            &crate::ids::NodeName::new("c", "127.0.0.1").unwrap(),
            body,
        )
        .encode()
        .unwrap()
    };
    let job = JobId(9);
    let poll = |job| JobRequest::Poll {
        job,
        ack: 3,
        wait_ms: 1500,
        follow: true,
    };
    assert_eq!(
        request_of(&envelope(poll(job)), job),
        Ok(Duration::from_millis(1500))
    );
    assert_eq!(
        request_of(&envelope(JobRequest::Cancel { job }), job),
        Ok(Duration::ZERO)
    );
    let other = request_of(&envelope(poll(JobId(10))), job).unwrap_err();
    assert!(other.contains("about job"), "{other}");
    assert!(request_of(b"\xc1garbage", job).is_err());
    let _ = token(0);
}

/// A job's links are counted while open: past `MAX_LINKS_PER_JOB` the next is refused until
/// one closes (each holds answers at the node); a wrong token or a revoked job opens none.
#[test]
fn a_job_opens_at_most_its_share_of_links() {
    let links = Links::default();
    let job = JobId(5);
    let token = links.issue(job).unwrap();
    let mut open: Vec<_> = (0..MAX_LINKS_PER_JOB)
        .map(|_| links.open(job, &token.0).unwrap())
        .collect();
    assert_eq!(
        links.open(job, &token.0).unwrap_err(),
        Refused::TooManyLinks
    );
    open.pop();
    let again = links.open(job, &token.0).unwrap();
    let mut wrong = token.0;
    wrong[0] ^= 1;
    assert_eq!(links.open(job, &wrong).unwrap_err(), Refused::UnknownToken);
    links.revoke(job);
    drop(again);
    assert_eq!(
        links.open(job, &token.0).unwrap_err(),
        Refused::UnknownToken
    );
}

/// A link keeps its polls at the node: three where the node follows (the first from the
/// link's ack, the others following, all sent before any answer), one where it does not
/// (the next sent once the answer before it is decoded, acknowledging its events).
#[tokio::test]
async fn a_link_keeps_its_polls_at_the_node_or_one_at_a_time() {
    use crate::wire::{JobRequest, WireError, WireEvent, WireJobEvent};
    let job = JobId(4);
    let me: crate::ids::NodeName = "client@127.0.0.1".parse().unwrap();
    let poll_of = |bytes: &[u8]| match Envelope::<JobRequest>::decode(bytes).unwrap().body {
        JobRequest::Poll { ack, follow, .. } => (ack, follow),
        other => panic!("{other:?}"),
    };
    for in_flight in [IN_FLIGHT, 1] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let near = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut far, _) = listener.accept().await.unwrap();
        let mut link = JobLink {
            job,
            in_flight: IN_FLIGHT,
            state: LinkState::Open(crate::transport::LinkIo::Plain(near)),
            timing: Arc::default(),
        }
        .in_flight(in_flight);
        let node = tokio::spawn(async move {
            let mut polls = Vec::new();
            for _ in 0..in_flight {
                polls.push(poll_of(
                    &read_frame(&mut far, 1 << 20).await.unwrap().unwrap(),
                ));
            }
            let events = (1..=2)
                .map(|seq| WireEvent {
                    seq,
                    event: WireJobEvent::Progress {
                        chain: 0,
                        attempt: 1,
                        iteration: seq,
                        total: 10,
                        draws: None,
                    },
                })
                .collect();
            let answer = JobReply::Events {
                job,
                events,
                notes: Vec::new(),
            };
            let node: crate::ids::NodeName = "node@127.0.0.1".parse().unwrap();
            let answer = Envelope::new(crate::ids::RequestId(1), &node, Ok::<_, WireError>(answer));
            write_frame(&mut far, &answer.encode().unwrap())
                .await
                .unwrap();
            // The next poll the link sends after the answer.
            polls.push(poll_of(
                &read_frame(&mut far, 1 << 20).await.unwrap().unwrap(),
            ));
            polls
        });
        let follow = || Follow {
            ack: 0,
            wait_ms: 10,
            timeout: Duration::from_secs(30),
            me: me.clone(),
            peer: "node@127.0.0.1".to_owned(),
        };
        let answer = link.next(follow).await.expect("an answer");
        assert!(matches!(answer, Ok(Ok(_))), "{answer:?}");
        let polls = node.await.unwrap();
        let expected = if in_flight == 1 {
            vec![(0, false), (2, true)]
        } else {
            vec![(0, false), (0, true), (0, true), (2, true)]
        };
        assert_eq!(polls, expected, "{in_flight} in flight");
    }
}
