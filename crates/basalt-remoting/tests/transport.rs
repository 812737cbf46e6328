//! Transport integration tests on 127.0.0.1, port 0.

use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::codec::{FrameDecoder, encode_frame};
use basalt_remoting::command::FLAG_ONEWAY;
use basalt_remoting::{
    Channel, RemotingClient, RemotingClientConfig, RemotingCommand, RemotingError, RemotingServer,
    RequestProcessor, SerializeType,
};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc};

const ECHO: i32 = 1000;
const NEVER: i32 = 1001;
const GATED: i32 = 1002;
const REMEMBER: i32 = 1003;
const ONEWAY_LOG: i32 = 1004;
const PANIC: i32 = 1005;

/// Echoes body and ext fields; `GATED` waits for a notification; `NEVER`
/// does not answer; `REMEMBER` keeps the channel for server→client requests.
#[derive(Default)]
struct TestProcessor {
    gate: Notify,
    channels: Mutex<Vec<Channel>>,
    oneways: Mutex<Vec<i32>>,
    closed: Mutex<Vec<u64>>,
}

impl RequestProcessor for TestProcessor {
    async fn process(&self, channel: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        match req.code {
            ECHO => {
                let mut resp = RemotingCommand::response_to(&req);
                resp.ext_fields = req.ext_fields.clone();
                resp.body = req.body.clone();
                Some(resp)
            }
            GATED => {
                self.gate.notified().await;
                Some(RemotingCommand::response_to(&req).with_remark("released"))
            }
            NEVER => None,
            PANIC => panic!("processor bug (expected by the test)"),
            REMEMBER => {
                self.channels.lock().push(channel.clone());
                Some(RemotingCommand::response_to(&req))
            }
            ONEWAY_LOG => {
                self.oneways.lock().push(req.opaque);
                // A reply the server must not send for a oneway request.
                Some(RemotingCommand::response_to(&req))
            }
            _ => Some(RemotingCommand::not_supported(&req)),
        }
    }

    fn on_channel_closed(&self, channel: &Channel) {
        self.closed.lock().push(channel.id());
    }
}

async fn start() -> (basalt_remoting::ServerHandle, Arc<TestProcessor>, String) {
    let p = Arc::new(TestProcessor::default());
    let server = RemotingServer::bind("127.0.0.1:0", p.clone())
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    (server, p, addr)
}

const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_response_json_and_binary() {
    let (server, _p, addr) = start().await;
    let client = RemotingClient::default();
    for ty in [SerializeType::Json, SerializeType::Rocketmq] {
        for size in [0usize, 10, 5000, 1 << 20] {
            let mut req = RemotingCommand::request(ECHO);
            req.serialize_type = ty;
            req.ext_fields.insert("k", "v\u{1}é");
            req.body = Bytes::from((0..size).map(|i| i as u8).collect::<Vec<_>>());
            let resp = client.invoke(&addr, req.clone(), T).await.unwrap();
            assert!(resp.is_response());
            assert_eq!(resp.code, 0);
            assert_eq!(resp.ext_fields.get("k"), Some("v\u{1}é"));
            assert_eq!(resp.body, req.body);
        }
    }
    let resp = client
        .invoke(&addr, RemotingCommand::request(4242), T)
        .await
        .unwrap();
    assert_eq!(resp.code, 3);
    assert_eq!(
        resp.remark.as_deref(),
        Some(" request type 4242 not supported")
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_in_flight_and_out_of_order() {
    let (server, p, addr) = start().await;
    let client = RemotingClient::default();
    // A gated request stays unanswered while a later one completes.
    let c2 = client.clone();
    let a2 = addr.clone();
    let gated =
        tokio::spawn(async move { c2.invoke(&a2, RemotingCommand::request(GATED), T).await });
    let mut tasks = Vec::new();
    for i in 0..2000u32 {
        let c = client.clone();
        let a = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut req = RemotingCommand::request(ECHO);
            req.body = Bytes::from(i.to_be_bytes().to_vec());
            let resp = c.invoke(&a, req, T).await.unwrap();
            assert_eq!(&resp.body[..], &i.to_be_bytes());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(!gated.is_finished());
    // Release the gated request: its waiter may register after notify_one,
    // which stores a permit, so this cannot be lost.
    p.gate.notify_one();
    let resp = gated.await.unwrap().unwrap();
    assert_eq!(resp.remark.as_deref(), Some("released"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oneway_gets_no_reply() {
    let (server, p, addr) = start().await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let mut oneway = RemotingCommand::request(ONEWAY_LOG);
    oneway.opaque = 77;
    oneway.flag = FLAG_ONEWAY;
    let mut echo = RemotingCommand::request(ECHO);
    echo.opaque = 78;
    let mut bytes = encode_frame(&oneway).unwrap();
    bytes.extend_from_slice(&encode_frame(&echo).unwrap());
    s.write_all(&bytes).await.unwrap();
    let resp = read_frame(&mut s).await.unwrap();
    assert_eq!(resp.opaque, 78, "the first reply must be the echo's");
    assert_eq!(*p.oneways.lock(), vec![77]);

    // Through the client API as well.
    let client = RemotingClient::default();
    client
        .invoke_oneway(&addr, RemotingCommand::request(ONEWAY_LOG))
        .await
        .unwrap();
    client
        .invoke(&addr, RemotingCommand::request(ECHO), T)
        .await
        .unwrap();
    server.shutdown().await;
}

async fn read_frame(s: &mut TcpStream) -> Option<RemotingCommand> {
    let d = FrameDecoder::default();
    let mut buf = BytesMut::new();
    loop {
        if let Some(c) = d.decode(&mut buf).unwrap() {
            return Some(c);
        }
        let n = tokio::time::timeout(T, s.read_buf(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
    }
}

/// Handles NOTIFY-style requests a server sends to the client.
#[derive(Default)]
struct ClientSide {
    got: Mutex<Vec<i32>>,
}

impl RequestProcessor for ClientSide {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        self.got.lock().push(req.code);
        Some(RemotingCommand::response_to(&req).with_remark(format!("client saw {}", req.code)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_to_client_requests() {
    let (server, p, addr) = start().await;
    let handler = Arc::new(ClientSide::default());
    let client = RemotingClient::with_handler(RemotingClientConfig::default(), handler.clone());
    client
        .invoke(&addr, RemotingCommand::request(REMEMBER), T)
        .await
        .unwrap();
    let ch = p.channels.lock()[0].clone();
    let resp = ch.request(RemotingCommand::request(307), T).await.unwrap();
    assert_eq!(resp.remark.as_deref(), Some("client saw 307"));
    ch.send_oneway(RemotingCommand::request(40)).await.unwrap();
    // The oneway arrives before this round trip's reply (same connection, in order).
    ch.request(RemotingCommand::request(307), T).await.unwrap();
    assert_eq!(*handler.got.lock(), vec![307, 40, 307]);

    // A client without a handler answers NOT_SUPPORTED.
    let plain = RemotingClient::default();
    plain
        .invoke(&addr, RemotingCommand::request(REMEMBER), T)
        .await
        .unwrap();
    let ch = p.channels.lock()[1].clone();
    let resp = ch.request(RemotingCommand::request(40), T).await.unwrap();
    assert_eq!(resp.code, 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_name_address_and_code() {
    let (server, _p, addr) = start().await;
    let client = RemotingClient::default();
    let err = client
        .invoke(
            &addr,
            RemotingCommand::request(NEVER),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
    match &err {
        RemotingError::Timeout {
            addr: a,
            code,
            millis,
        } => {
            assert_eq!(a, &addr);
            assert_eq!(*code, NEVER);
            assert_eq!(*millis, 100);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(err.to_string().contains(&addr));
    // The connection still works afterwards.
    client
        .invoke(&addr, RemotingCommand::request(ECHO), T)
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_request_does_not_take_the_connection_down() {
    let (server, _p, addr) = start().await;
    let client = RemotingClient::default();
    let err = client
        .invoke(
            &addr,
            RemotingCommand::request(PANIC),
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Timeout { .. }), "{err:?}");
    let resp = client
        .invoke(&addr, RemotingCommand::request(ECHO), T)
        .await
        .unwrap();
    assert_eq!(resp.code, 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_errors_and_reconnect() {
    let (server, p, addr) = start().await;
    let client = RemotingClient::default();
    // Nothing listens on a just-closed port.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let err = client
        .invoke(&dead, RemotingCommand::request(ECHO), T)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RemotingError::Io { ref addr, .. } if *addr == dead),
        "{err:?}"
    );

    client
        .invoke(&addr, RemotingCommand::request(REMEMBER), T)
        .await
        .unwrap();
    let first = p.channels.lock()[0].clone();
    first.close();
    // The next calls reconnect once the client has seen the close.
    let mut ok = false;
    for _ in 0..50 {
        match client
            .invoke(&addr, RemotingCommand::request(REMEMBER), T)
            .await
        {
            Ok(_) => {
                ok = true;
                break;
            }
            Err(RemotingError::ConnectionClosed { .. }) => continue,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert!(ok);
    let second = p.channels.lock().last().unwrap().clone();
    assert_ne!(first.id(), second.id());
    server.shutdown().await;
    // After shutdown the server's connections are closed and callbacks ran.
    assert!(p.closed.lock().contains(&first.id()));
    assert!(second.is_closed());
}

async fn expect_closed_by_server(mut s: TcpStream) {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(T, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => continue,
            Err(_) => panic!("server did not close a connection that sent garbage"),
        }
    }
}

fn frame_with_header(ty: u8, header: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((4 + header.len()) as i32).to_be_bytes());
    v.extend_from_slice(&(((ty as u32) << 24) | header.len() as u32).to_be_bytes());
    v.extend_from_slice(header);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_closes_only_that_connection() {
    let (server, _p, addr) = start().await;
    let client = RemotingClient::default();
    client
        .invoke(&addr, RemotingCommand::request(ECHO), T)
        .await
        .unwrap();

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("oversized length", 0x7fff_fff0i32.to_be_bytes().to_vec()),
        ("negative length", (-5i32).to_be_bytes().to_vec()),
        ("not json", frame_with_header(0, b"this is not json")),
        (
            "wrong types",
            frame_with_header(0, br#"{"code":"abc","opaque":1}"#),
        ),
        (
            "ext not an object",
            frame_with_header(0, br#"{"code":1,"extFields":[1]}"#),
        ),
        ("unknown serialize type", frame_with_header(9, b"{}")),
        ("binary truncated", frame_with_header(1, &[0, 1, 0])),
    ];
    for (name, bytes) in cases {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        expect_closed_by_server(s).await;
        // The server keeps serving others.
        let resp = client
            .invoke(&addr, RemotingCommand::request(ECHO), T)
            .await
            .unwrap_or_else(|e| panic!("after {name}: {e}"));
        assert_eq!(resp.code, 0);
    }

    // A truncated frame, then the peer closes.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let frame = encode_frame(&RemotingCommand::request(ECHO)).unwrap();
    s.write_all(&frame[..frame.len() - 3]).await.unwrap();
    drop(s);
    // A connection that sends good frames after all that still works.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let mut req = RemotingCommand::request(ECHO);
    req.opaque = 5;
    s.write_all(&encode_frame(&req).unwrap()).await.unwrap();
    assert_eq!(read_frame(&mut s).await.unwrap().opaque, 5);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_limit_is_configurable() {
    let p = Arc::new(TestProcessor::default());
    let mut cfg = basalt_remoting::ServerConfig::default();
    cfg.connection.max_frame_size = 1024;
    let server = RemotingServer::bind_with_config("127.0.0.1:0", p, cfg)
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    let client = RemotingClient::default();
    let mut small = RemotingCommand::request(ECHO);
    small.body = Bytes::from(vec![1; 100]);
    client.invoke(&addr, small, T).await.unwrap();
    let mut big = RemotingCommand::request(ECHO);
    big.body = Bytes::from(vec![1; 4096]);
    let err = client.invoke(&addr, big, T).await.unwrap_err();
    assert!(
        matches!(err, RemotingError::ConnectionClosed { .. }),
        "{err:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_raw_frames_all_answered() {
    // A deep pipeline written in one go: every request gets its reply.
    let (server, _p, addr) = start().await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let mut out = BytesMut::new();
    for i in 0..5000 {
        let mut r = RemotingCommand::request(ECHO);
        r.opaque = i;
        out.extend_from_slice(&encode_frame(&r).unwrap());
    }
    let (mut rd, mut wr) = s.split();
    let write = async { wr.write_all(&out).await.unwrap() };
    let read = async {
        let d = FrameDecoder::default();
        let mut buf = BytesMut::new();
        let mut seen = vec![false; 5000];
        let mut n = 0;
        while n < 5000 {
            while let Some(c) = d.decode(&mut buf).unwrap() {
                assert!(!seen[c.opaque as usize]);
                seen[c.opaque as usize] = true;
                n += 1;
            }
            if n < 5000 {
                let r = tokio::time::timeout(T, rd.read_buf(&mut buf))
                    .await
                    .unwrap()
                    .unwrap();
                assert!(r > 0);
            }
        }
    };
    tokio::join!(write, read);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_client_closes_its_connections() {
    let (server, p, addr) = start().await;
    let client = RemotingClient::default();
    client
        .invoke(&addr, RemotingCommand::request(REMEMBER), T)
        .await
        .unwrap();
    let server_side = p.channels.lock()[0].clone();
    drop(client);
    for _ in 0..1000 {
        if server_side.is_closed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(server_side.is_closed());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_closed_errors() {
    let (server, p, addr) = start().await;
    let client = RemotingClient::default();
    client
        .invoke(&addr, RemotingCommand::request(REMEMBER), T)
        .await
        .unwrap();
    let ch = p.channels.lock()[0].clone();
    ch.close();
    assert!(ch.is_closed());
    let err = ch
        .request(RemotingCommand::request(40), T)
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::ConnectionClosed { .. }));
    // Pending requests fail when the connection closes under them.
    let (tx, mut rx) = mpsc::channel(1);
    let c = client.clone();
    let a = addr.clone();
    tokio::spawn(async move {
        let _ = tx
            .send(c.invoke(&a, RemotingCommand::request(NEVER), T).await)
            .await;
    });
    // Wait until the server has the connection, then close it from the server side.
    let mut tries = 0;
    let resp = loop {
        if let Ok(r) = rx.try_recv() {
            // The client was still on the connection closed above.
            break r;
        }
        let open = server.channels();
        if let Some(live) = open.iter().find(|c| !c.is_closed()) {
            live.close();
            break rx.recv().await.unwrap();
        }
        tries += 1;
        assert!(tries < 1000);
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(
        matches!(resp, Err(RemotingError::ConnectionClosed { .. })),
        "{resp:?}"
    );
    server.shutdown().await;
}

const HELD: i32 = 1006;

/// Holds every HELD request until the test releases it; answers the rest.
struct Holding {
    held: std::sync::atomic::AtomicUsize,
    arrived: Notify,
    release: tokio::sync::Semaphore,
}

impl Holding {
    fn new() -> Arc<Self> {
        Arc::new(Holding {
            held: Default::default(),
            arrived: Notify::new(),
            release: tokio::sync::Semaphore::new(0),
        })
    }

    /// Waits until `n` HELD requests are being processed.
    async fn wait_held(&self, n: usize) {
        loop {
            let arrived = self.arrived.notified();
            if self.held.load(std::sync::atomic::Ordering::SeqCst) >= n {
                return;
            }
            arrived.await;
        }
    }
}

impl RequestProcessor for Holding {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        if req.code == HELD {
            self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.arrived.notify_waiters();
            if let Ok(p) = self.release.acquire().await {
                p.forget();
            }
        }
        Some(RemotingCommand::response_to(&req))
    }
}

/// Starts `n` HELD requests from `client` and waits until all are held.
async fn hold(
    p: &Arc<Holding>,
    client: &RemotingClient,
    addr: &str,
    n: usize,
) -> Vec<tokio::task::JoinHandle<()>> {
    let tasks = (0..n)
        .map(|_| {
            let (c, a) = (client.clone(), addr.to_string());
            tokio::spawn(async move {
                c.invoke(&a, RemotingCommand::request(HELD), T)
                    .await
                    .unwrap();
            })
        })
        .collect();
    p.wait_held(n).await;
    tasks
}

const SHORT: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_at_its_inflight_limit_is_not_read_but_others_are() {
    let p = Holding::new();
    let mut cfg = basalt_remoting::ServerConfig::default();
    cfg.connection.max_inflight_requests = 2;
    let server = RemotingServer::bind_with_config("127.0.0.1:0", p.clone(), cfg)
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    let full = RemotingClient::default();
    let held = hold(&p, &full, &addr, 2).await;
    let err = full
        .invoke(&addr, RemotingCommand::request(ECHO), SHORT)
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Timeout { .. }), "{err:?}");
    // Another connection is served meanwhile.
    let other = RemotingClient::default();
    other
        .invoke(&addr, RemotingCommand::request(ECHO), T)
        .await
        .unwrap();
    p.release.add_permits(2);
    for t in held {
        t.await.unwrap();
    }
    full.invoke(&addr, RemotingCommand::request(ECHO), T)
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_wide_inflight_limit_pauses_every_connection() {
    let p = Holding::new();
    let cfg = basalt_remoting::ServerConfig {
        max_inflight_requests: 2,
        ..Default::default()
    };
    let server = RemotingServer::bind_with_config("127.0.0.1:0", p.clone(), cfg)
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    let first = RemotingClient::default();
    let held = hold(&p, &first, &addr, 2).await;
    let other = RemotingClient::default();
    let err = other
        .invoke(&addr, RemotingCommand::request(ECHO), SHORT)
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Timeout { .. }), "{err:?}");
    p.release.add_permits(2);
    for t in held {
        t.await.unwrap();
    }
    other
        .invoke(&addr, RemotingCommand::request(ECHO), T)
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_closed_at_once() {
    let p = Arc::new(TestProcessor::default());
    let cfg = basalt_remoting::ServerConfig {
        max_connections: 3,
        ..Default::default()
    };
    let server = RemotingServer::bind_with_config("127.0.0.1:0", p, cfg)
        .await
        .unwrap();
    let addr = server.local_addr().to_string();
    let clients: Vec<RemotingClient> = (0..3).map(|_| RemotingClient::default()).collect();
    for c in &clients {
        c.invoke(&addr, RemotingCommand::request(ECHO), T)
            .await
            .unwrap();
    }
    for _ in 0..3 {
        let s = TcpStream::connect(&addr).await.unwrap();
        expect_closed_by_server(s).await;
    }
    for c in &clients {
        c.invoke(&addr, RemotingCommand::request(ECHO), T)
            .await
            .unwrap();
    }
    assert_eq!(server.channels().len(), 3);
    server.shutdown().await;
}
