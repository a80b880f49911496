//! The MySQL wire protocol server: packet framing, handshake and authentication
//! (`mysql_native_password`, `caching_sha2_password`), text queries, binary prepared
//! statements and result sets, TLS (rustls), driving one `sql::Session` per connection.

pub mod auth;
pub mod codec;
pub mod conn;
pub mod packet;
pub mod server;
pub mod tls;

pub use server::{Server, ServerOptions};
pub use tls::TlsConfig;
