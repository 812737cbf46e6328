//! The cluster-secret handshake of replication links (HA, ledger).
//!
//! Run on a fresh connection (after TLS, if any) before any protocol byte,
//! when a secret is configured on both sides. The dialer speaks first, as
//! it does in the HA and remoting protocols, so a permissive listener can
//! still tell TLS from plain text by the first byte:
//!
//! 1. dialer → listener: `BSLT-AUTH1` (10 bytes) and a random 32-byte nonce `Nd`;
//! 2. listener → dialer: its own nonce `Ns` (32) and
//!    `HMAC-SHA256(secret, "listener" 0 purpose 0 Nd Ns)` (32);
//! 3. the dialer checks that tag (constant time) and closes on a mismatch
//!    (an impostor listener); otherwise it sends
//!    `HMAC-SHA256(secret, "dialer" 0 purpose 0 Ns Nd)` (32), which the
//!    listener checks before it reads a protocol byte, closing the
//!    connection on a mismatch.
//!
//! Fresh nonces on both sides make a recorded exchange worthless; the role
//! labels keep a listener's tag from serving as a dialer's, and the purpose
//! ("ha", "ledger") a tag of one link from opening another. The secret
//! never crosses the wire. Without TLS the data that follows is neither
//! encrypted nor integrity-protected: the handshake proves who connected,
//! TLS protects what they say.

use std::time::Duration;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The greeting that opens the handshake.
pub const MAGIC: &[u8; 10] = b"BSLT-AUTH1";
const NONCE_LEN: usize = 32;
const TAG_LEN: usize = 32;
/// The whole handshake must finish within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A shared cluster secret (never logged, never sent).
#[derive(Clone)]
pub struct PeerSecret {
    key: hmac::Key,
}

impl std::fmt::Debug for PeerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerSecret(..)")
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("peer did not prove the cluster secret (wrong or missing replication secret)")]
    BadProof,
    #[error(
        "peer did not open with the cluster-secret handshake (no replication secret configured there?)"
    )]
    NoGreeting,
    #[error("cluster-secret handshake timed out")]
    Timeout,
    #[error("cluster-secret handshake: {0}")]
    Io(#[from] std::io::Error),
}

impl PeerSecret {
    /// None for an empty secret (replication then stays open).
    pub fn new(secret: &str) -> Option<PeerSecret> {
        (!secret.is_empty()).then(|| PeerSecret {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()),
        })
    }

    fn tag(&self, role: &[u8], purpose: &str, a: &[u8], b: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(role);
        ctx.update(&[0]);
        ctx.update(purpose.as_bytes());
        ctx.update(&[0]);
        ctx.update(a);
        ctx.update(b);
        ctx.sign()
    }

    fn verify(&self, role: &[u8], purpose: &str, a: &[u8], b: &[u8], tag: &[u8]) -> bool {
        let mut msg = Vec::with_capacity(role.len() + purpose.len() + 2 + a.len() + b.len());
        msg.extend_from_slice(role);
        msg.push(0);
        msg.extend_from_slice(purpose.as_bytes());
        msg.push(0);
        msg.extend_from_slice(a);
        msg.extend_from_slice(b);
        hmac::verify(&self.key, &msg, tag).is_ok()
    }

    /// The listener's side; Ok once the dialer proved the secret.
    pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut S,
        purpose: &str,
    ) -> Result<(), AuthError> {
        tokio::time::timeout(HANDSHAKE_TIMEOUT, self.accept_inner(io, purpose))
            .await
            .map_err(|_| AuthError::Timeout)?
    }

    async fn accept_inner<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut S,
        purpose: &str,
    ) -> Result<(), AuthError> {
        let mut hello = [0u8; MAGIC.len() + NONCE_LEN];
        io.read_exact(&mut hello).await?;
        let (magic, nd) = hello.split_at(MAGIC.len());
        if magic != MAGIC {
            return Err(AuthError::NoGreeting);
        }
        let ns = nonce()?;
        let mut answer = Vec::with_capacity(NONCE_LEN + TAG_LEN);
        answer.extend_from_slice(&ns);
        answer.extend_from_slice(self.tag(b"listener", purpose, nd, &ns).as_ref());
        io.write_all(&answer).await?;
        io.flush().await?;
        let mut tag = [0u8; TAG_LEN];
        io.read_exact(&mut tag).await?;
        if !self.verify(b"dialer", purpose, &ns, nd, &tag) {
            return Err(AuthError::BadProof);
        }
        Ok(())
    }

    /// The dialer's side; Ok once both sides proved the secret.
    pub async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut S,
        purpose: &str,
    ) -> Result<(), AuthError> {
        tokio::time::timeout(HANDSHAKE_TIMEOUT, self.dial_inner(io, purpose))
            .await
            .map_err(|_| AuthError::Timeout)?
    }

    async fn dial_inner<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut S,
        purpose: &str,
    ) -> Result<(), AuthError> {
        let nd = nonce()?;
        let mut hello = Vec::with_capacity(MAGIC.len() + NONCE_LEN);
        hello.extend_from_slice(MAGIC);
        hello.extend_from_slice(&nd);
        io.write_all(&hello).await?;
        io.flush().await?;
        let mut answer = [0u8; NONCE_LEN + TAG_LEN];
        io.read_exact(&mut answer).await?;
        let (ns, tag) = answer.split_at(NONCE_LEN);
        if !self.verify(b"listener", purpose, &nd, ns, tag) {
            return Err(AuthError::BadProof);
        }
        io.write_all(self.tag(b"dialer", purpose, ns, &nd).as_ref())
            .await?;
        io.flush().await?;
        Ok(())
    }
}

fn nonce() -> Result<[u8; NONCE_LEN], AuthError> {
    let mut n = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut n)
        .map_err(|_| AuthError::Io(std::io::Error::other("no system randomness")))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(a: &str, b: &str) -> (Result<(), AuthError>, Result<(), AuthError>) {
        let (mut x, mut y) = tokio::io::duplex(1024);
        let sa = PeerSecret::new(a).unwrap();
        let sb = PeerSecret::new(b).unwrap();
        tokio::join!(
            async {
                let r = sa.accept(&mut x, "ha").await;
                drop(x);
                r
            },
            async {
                let r = sb.dial(&mut y, "ha").await;
                drop(y);
                r
            }
        )
    }

    #[tokio::test]
    async fn the_same_secret_passes_both_ways() {
        let (l, d) = run("s3cret", "s3cret").await;
        assert!(l.is_ok() && d.is_ok(), "{l:?} {d:?}");
    }

    #[tokio::test]
    async fn a_wrong_secret_is_refused_by_the_listener() {
        let (l, d) = run("s3cret", "guess").await;
        assert!(matches!(d, Err(AuthError::BadProof)), "{d:?}");
        assert!(l.is_err(), "{l:?}");
    }

    #[tokio::test]
    async fn a_dialer_guessing_the_tag_is_refused() {
        let (mut x, mut y) = tokio::io::duplex(1024);
        let s = PeerSecret::new("s3cret").unwrap();
        let (l, _) = tokio::join!(
            async {
                let r = s.accept(&mut x, "ha").await;
                drop(x);
                r
            },
            async {
                let mut hello = MAGIC.to_vec();
                hello.extend_from_slice(&[7u8; NONCE_LEN]);
                y.write_all(&hello).await.unwrap();
                let mut answer = [0u8; NONCE_LEN + TAG_LEN];
                y.read_exact(&mut answer).await.unwrap();
                y.write_all(&[9u8; TAG_LEN]).await.unwrap();
                drop(y);
            }
        );
        assert!(matches!(l, Err(AuthError::BadProof)), "{l:?}");
    }

    #[tokio::test]
    async fn a_peer_without_the_greeting_is_refused() {
        let (mut x, mut y) = tokio::io::duplex(1024);
        let s = PeerSecret::new("s3cret").unwrap();
        // An HA report, as a slave without the secret would send it.
        y.write_all(&[0u8; 64]).await.unwrap();
        let l = s.accept(&mut x, "ha").await;
        assert!(matches!(l, Err(AuthError::NoGreeting)), "{l:?}");
    }

    #[tokio::test]
    async fn a_tag_for_another_purpose_does_not_open_the_link() {
        let (mut x, mut y) = tokio::io::duplex(1024);
        let s = PeerSecret::new("k").unwrap();
        let (l, d) = tokio::join!(
            async {
                let r = s.accept(&mut x, "ledger").await;
                drop(x);
                r
            },
            async {
                let r = s.dial(&mut y, "ha").await;
                drop(y);
                r
            }
        );
        assert!(matches!(d, Err(AuthError::BadProof)), "{d:?}");
        assert!(l.is_err(), "{l:?}");
    }

    #[test]
    fn an_empty_secret_means_none() {
        assert!(PeerSecret::new("").is_none());
    }
}
