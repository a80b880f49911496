//! The listener: accepts connections and runs each on its own task until shutdown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use strata_sql::Engine;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::conn::Connection;
use crate::tls::TlsConfig;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// max_allowed_packet.
    pub max_packet: usize,
    /// max_connections: logged-in sessions allowed at once; one more is refused with 1040.
    pub max_connections: usize,
    /// connect_timeout: a client that has not finished logging in by then is disconnected.
    pub connect_timeout: Duration,
    /// Certificate and key clients may switch to TLS with (CLIENT_SSL is offered only then).
    pub tls: Option<TlsConfig>,
    /// require_secure_transport: unencrypted logins are refused (3159).
    pub require_secure_transport: bool,
}

impl Default for ServerOptions {
    fn default() -> ServerOptions {
        ServerOptions {
            max_packet: 64 << 20,
            max_connections: 151,
            connect_timeout: Duration::from_secs(10),
            tls: None,
            require_secure_transport: false,
        }
    }
}

/// A bound MySQL protocol server.
pub struct Server {
    listener: TcpListener,
    engine: Arc<Engine>,
    opts: Arc<ServerOptions>,
    connections: Arc<AtomicUsize>,
    sessions: Arc<AtomicUsize>,
}

impl Server {
    /// Binds `addr` (fails if the port is taken).
    pub async fn bind(addr: &str, engine: Arc<Engine>, opts: ServerOptions) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Server {
            listener,
            engine,
            opts: Arc::new(opts),
            connections: Arc::new(AtomicUsize::new(0)),
            sessions: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Open connections.
    pub fn connection_count(&self) -> Arc<AtomicUsize> {
        self.connections.clone()
    }

    /// Serves until `shutdown` becomes true.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(x) => x,
                        Err(e) => {
                            // Out of file descriptors, most likely: back off instead of
                            // spinning on the same error.
                            warn!("accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    let mut session = self.engine.session("root");
                    session.set_client_host(peer.to_string());
                    let opts = self.opts.clone();
                    let count = self.connections.clone();
                    let sessions = self.sessions.clone();
                    count.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(async move {
                        let id = session.conn_id;
                        let conn = Connection::new(stream, session, opts).with_session_count(sessions);
                        if let Err(e) = conn.run().await {
                            info!(conn = id, %peer, "connection ended: {e}");
                        }
                        count.fetch_sub(1, Ordering::Relaxed);
                    });
                }
                _ = shutdown.changed() => {
                    if *shutdown.borrow() {
                        return;
                    }
                }
            }
        }
    }
}
