//! TLS for client connections (rustls). A client that sees CLIENT_SSL in the server's
//! greeting may send a short SSLRequest packet; the socket then becomes a TLS stream and
//! the handshake response follows inside it. The connection's stream is therefore a
//! [`Stream`], plain or TLS, switched in place.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// What the server's TLS endpoint is configured with.
#[derive(Clone)]
pub struct TlsConfig {
    acceptor: TlsAcceptor,
    /// Certificate file, as `ssl_cert` reports it.
    pub cert_path: String,
    /// Key file, as `ssl_key` reports it.
    pub key_path: String,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig").field("cert_path", &self.cert_path).field("key_path", &self.key_path).finish()
    }
}

impl TlsConfig {
    /// Loads a PEM certificate chain and private key (PKCS#8, PKCS#1 or SEC1).
    pub fn load(cert: &Path, key: &Path) -> Result<TlsConfig, String> {
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read certificate {}: {e}", cert.display()))?;
        if chain.is_empty() {
            return Err(format!("no certificate in {}", cert.display()));
        }
        let key_der =
            PrivateKeyDer::from_pem_file(key).map_err(|e| format!("cannot read private key {}: {e}", key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| {
                format!("certificate {} and key {} do not make a TLS identity: {e}", cert.display(), key.display())
            })?;
        Ok(TlsConfig {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            cert_path: cert.display().to_string(),
            key_path: key.display().to_string(),
        })
    }
}

/// A connection's byte stream: plain until the client asks for TLS.
pub enum Stream<S> {
    /// Unencrypted.
    Plain(S),
    /// After a successful TLS handshake.
    Tls(Box<TlsStream<S>>),
    /// Only while switching (a failed switch leaves it here and the connection ends).
    Switching,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Stream<S> {
    /// Runs the TLS handshake over the plain stream.
    pub async fn start_tls(&mut self, tls: &TlsConfig) -> io::Result<()> {
        let Stream::Plain(s) = std::mem::replace(self, Stream::Switching) else {
            return Err(io::Error::other("TLS requested twice"));
        };
        let t = tls.acceptor.accept(s).await?;
        *self = Stream::Tls(Box::new(t));
        Ok(())
    }

    /// The negotiated protocol version and cipher suite, in MySQL's spelling
    /// (`TLSv1.3`, `TLS_AES_256_GCM_SHA384`), if encrypted.
    pub fn tls_info(&self) -> Option<(String, String)> {
        let Stream::Tls(t) = self else { return None };
        let conn = t.get_ref().1;
        let version = match conn.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
            v => format!("{v:?}"),
        };
        let suite = conn.negotiated_cipher_suite()?.suite();
        let name = suite.as_str().map(str::to_string).unwrap_or_else(|| format!("{suite:?}"));
        Some((version, name))
    }
}

fn switching() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "TLS handshake failed")
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Stream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
            Stream::Switching => Poll::Ready(Err(switching())),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Stream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
            Stream::Switching => Poll::Ready(Err(switching())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
            Stream::Switching => Poll::Ready(Err(switching())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
            Stream::Switching => Poll::Ready(Err(switching())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Switching => Poll::Ready(Err(switching())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(t) => t.is_write_vectored(),
            Stream::Switching => false,
        }
    }
}
