//! The two authentication plugins MySQL 8 clients use. The handshake sends a scramble;
//! `sql::users::Account::verify` checks a client's answer against the account's stored
//! digests, so `caching_sha2_password` always takes its fast path. The client side of both
//! scrambles is here too, for tests.

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// `mysql_native_password`.
pub const NATIVE: &str = "mysql_native_password";
/// `caching_sha2_password`.
pub const CACHING_SHA2: &str = "caching_sha2_password";

/// 20 random printable bytes, the scramble of a handshake.
pub fn scramble() -> [u8; 20] {
    let mut s = [0u8; 20];
    for b in &mut s {
        *b = rand::random::<u8>() % 94 + 33;
    }
    s
}

/// SHA1(password) XOR SHA1(scramble ++ SHA1(SHA1(password))).
pub fn native_response(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let h1 = Sha1::digest(password);
    let h2 = Sha1::digest(h1);
    let mut h = Sha1::new();
    h.update(scramble);
    h.update(h2);
    let h3 = h.finalize();
    h1.iter().zip(h3.iter()).map(|(a, b)| a ^ b).collect()
}

/// SHA256(password) XOR SHA256(SHA256(SHA256(password)) ++ scramble).
pub fn sha2_response(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let h1 = Sha256::digest(password);
    let h2 = Sha256::digest(h1);
    let mut h = Sha256::new();
    h.update(h2);
    h.update(scramble);
    let h3 = h.finalize();
    h1.iter().zip(h3.iter()).map(|(a, b)| a ^ b).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_responses_verify_against_stored_digests() {
        use strata_sql::users::Account;
        let s = scramble();
        let a = Account::new("u", "%", "pw");
        assert!(a.verify(NATIVE, &s, &native_response(b"pw", &s)));
        assert!(!a.verify(NATIVE, &s, &native_response(b"other", &s)));
        assert!(a.verify(CACHING_SHA2, &s, &sha2_response(b"pw", &s)));
        assert!(!a.verify(CACHING_SHA2, &s, &sha2_response(b"other", &s)));
        let open = Account::new("v", "%", "");
        assert!(open.verify(NATIVE, &s, b""));
        assert!(!open.verify(NATIVE, &s, b"x"));
    }
}
