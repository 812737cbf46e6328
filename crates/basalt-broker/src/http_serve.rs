//! A small HTTP/1 server (hyper) for the metrics endpoint and the
//! dashboard: GET and POST with query strings, no request bodies, whole
//! responses. Each connection is a task of the accept loop's set, so
//! stopping the loop closes them all.

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// Most connections served at once; further ones wait in the backlog.
const MAX_CONNECTIONS: usize = 256;

/// What a handler is asked.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: Method,
    pub path: String,
    /// Decoded `key=value` pairs of the query string, in order.
    pub query: Vec<(String, String)>,
    /// The request carries `X-Requested-With` (a browser sends it only
    /// from a script of the same origin: write actions require it).
    pub same_origin_script: bool,
    /// The `Authorization` header (HTTP Basic credentials), if any.
    pub authorization: Option<String>,
    /// The caller's address.
    pub remote: Option<IpAddr>,
}

impl HttpRequest {
    /// The first value of query parameter `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A whole response.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
    /// Ask for HTTP Basic credentials (`WWW-Authenticate`).
    pub challenge: bool,
}

impl HttpReply {
    pub fn ok(content_type: &'static str, body: impl Into<Bytes>) -> Self {
        HttpReply {
            status: StatusCode::OK,
            content_type,
            body: body.into(),
            challenge: false,
        }
    }

    /// A plain-text error.
    pub fn error(status: StatusCode, why: impl Into<String>) -> Self {
        HttpReply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(why.into()),
            challenge: false,
        }
    }

    /// 401 with a Basic challenge, so a browser asks for credentials.
    pub fn unauthorized(why: impl Into<String>) -> Self {
        HttpReply {
            challenge: true,
            ..HttpReply::error(StatusCode::UNAUTHORIZED, why)
        }
    }

    /// A JSON body (500 if the value does not serialise).
    pub fn json<T: serde::Serialize>(v: &T) -> Self {
        match serde_json::to_vec(v) {
            Ok(b) => HttpReply::ok("application/json", b),
            Err(e) => HttpReply::error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

/// Answers requests. Invariant: never panics on what a client sends.
pub type Handler =
    Arc<dyn Fn(HttpRequest) -> Pin<Box<dyn Future<Output = HttpReply> + Send>> + Send + Sync>;

/// Decodes `%XX` and `+` in a query component (invalid escapes are kept).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

async fn answer(
    h: Handler,
    remote: Option<IpAddr>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let r = HttpRequest {
        method: req.method().clone(),
        path: req.uri().path().to_string(),
        query: parse_query(req.uri().query()),
        same_origin_script: req.headers().contains_key("x-requested-with"),
        authorization: req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        remote,
    };
    let reply = h(r).await;
    let mut resp = Response::new(Full::new(reply.body));
    *resp.status_mut() = reply.status;
    let headers = resp.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.content_type),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    if reply.challenge {
        headers.insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static(
                "Basic realm=\"basalt dashboard\", charset=\"UTF-8\"",
            ),
        );
    }
    Ok(resp)
}

/// Serves `handler` on `listener` until the returned task is aborted.
pub fn spawn(listener: TcpListener, handler: Handler) -> JoinHandle<()> {
    spawn_secure(listener, handler, None)
}

/// As [`spawn`], with TLS (`tls.server.mode`) on each accepted connection
/// when `security` is given: HTTPS, and in permissive mode plain HTTP too.
pub fn spawn_secure(
    listener: TcpListener,
    handler: Handler,
    security: Option<Arc<basalt_tls::ServerSecurity>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            while conns.len() >= MAX_CONNECTIONS {
                let _ = conns.join_next().await;
            }
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, peer)) = accepted else { continue };
                    let h = Arc::clone(&handler);
                    let sec = security.clone();
                    conns.spawn(async move {
                        match sec {
                            None => serve_http(stream, h, peer.ip()).await,
                            Some(sec) => {
                                if let Ok(up) = sec.accept(stream, peer).await {
                                    serve_http(up, h, peer.ip()).await;
                                }
                            }
                        }
                    });
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    })
}

/// Serves HTTP/1 on one connection until it closes.
async fn serve_http<S>(io: S, h: Handler, remote: IpAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| answer(Arc::clone(&h), Some(remote), req));
    let _ = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_components_are_decoded() {
        let q = parse_query(Some("topic=a%20b&key=x+y&bad=%zz&flag"));
        assert_eq!(
            q,
            vec![
                ("topic".into(), "a b".into()),
                ("key".into(), "x y".into()),
                ("bad".into(), "%zz".into()),
                ("flag".into(), "".into()),
            ]
        );
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%4"), "%4");
    }
}
