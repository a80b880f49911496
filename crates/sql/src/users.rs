//! Accounts, passwords and privileges: what MySQL keeps in `mysql.user`, `mysql.db` and
//! `mysql.tables_priv`, here one record per account, persisted in the store's meta keyspace
//! and cached in memory.
//!
//! Passwords are kept as the two digests the login plugins check against:
//! `SHA1(SHA1(pw))` for `mysql_native_password` (MySQL's own format) and
//! `SHA256(SHA256(pw))` for `caching_sha2_password` (what MySQL holds in its fast-auth cache),
//! so either plugin's scramble can be verified and the plain password is never stored.
//!
//! Privileges are bit sets at three levels: global (`*.*`), database (`db.*`) and table
//! (`db.t`). A statement needs each of its privileges at one of the levels that cover its
//! object (`Users::allowed`).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use strata_codec::keys::prefix_end;
use strata_codec::Key;
use strata_common::{Code, Error, Result};
use strata_kv::{Client, LockMode, Oracle};
use strata_txn::{Isolation, Transaction, TxnOptions};

/// Privilege bits.
pub mod privs {
    /// SELECT.
    pub const SELECT: u32 = 1;
    /// INSERT.
    pub const INSERT: u32 = 1 << 1;
    /// UPDATE.
    pub const UPDATE: u32 = 1 << 2;
    /// DELETE.
    pub const DELETE: u32 = 1 << 3;
    /// CREATE (databases, tables).
    pub const CREATE: u32 = 1 << 4;
    /// DROP (databases, tables; TRUNCATE).
    pub const DROP: u32 = 1 << 5;
    /// PROCESS (see every connection in SHOW PROCESSLIST).
    pub const PROCESS: u32 = 1 << 6;
    /// INDEX (CREATE/DROP INDEX).
    pub const INDEX: u32 = 1 << 7;
    /// ALTER.
    pub const ALTER: u32 = 1 << 8;
    /// SUPER (KILL other users' connections, SET GLOBAL).
    pub const SUPER: u32 = 1 << 9;
    /// CREATE USER (also DROP/ALTER/RENAME USER and others' passwords).
    pub const CREATE_USER: u32 = 1 << 10;
    /// GRANT OPTION.
    pub const GRANT_OPTION: u32 = 1 << 11;
    /// FILE (LOAD DATA of a server-side file).
    pub const FILE: u32 = 1 << 12;
    /// What `ALL [PRIVILEGES]` means on a database or table.
    pub const ALL_OBJECT: u32 = SELECT | INSERT | UPDATE | DELETE | CREATE | DROP | INDEX | ALTER;
    /// What `ALL [PRIVILEGES]` means on `*.*`.
    pub const ALL_GLOBAL: u32 = ALL_OBJECT | PROCESS | FILE | SUPER | CREATE_USER;
    /// Names, in the order SHOW GRANTS prints them.
    pub const NAMES: [(u32, &str); 12] = [
        (SELECT, "SELECT"),
        (INSERT, "INSERT"),
        (UPDATE, "UPDATE"),
        (DELETE, "DELETE"),
        (CREATE, "CREATE"),
        (DROP, "DROP"),
        (PROCESS, "PROCESS"),
        (FILE, "FILE"),
        (INDEX, "INDEX"),
        (ALTER, "ALTER"),
        (SUPER, "SUPER"),
        (CREATE_USER, "CREATE USER"),
    ];

    /// The bit of a privilege name (upper case; "CREATE USER" as two words).
    pub fn by_name(name: &str) -> Option<u32> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(b, _)| *b)
    }

    /// `SELECT, INSERT` for the bits set (`USAGE` for none).
    pub fn list(bits: u32, all: u32) -> String {
        if bits & all == all {
            return "ALL PRIVILEGES".into();
        }
        let names: Vec<&str> = NAMES.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| *n).collect();
        if names.is_empty() {
            "USAGE".into()
        } else {
            names.join(", ")
        }
    }
}

/// One account: `'user'@'host'`, its password digests and its privileges.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Account {
    /// User name (case-sensitive, as in MySQL).
    pub user: String,
    /// Host pattern (`%` and `_` wildcards; `localhost` also matches loopback addresses).
    pub host: String,
    /// The authentication plugin named at CREATE USER.
    pub plugin: String,
    /// Hex of SHA1(SHA1(password)); empty for no password.
    pub native: String,
    /// Hex of SHA256(SHA256(password)); empty for no password.
    pub sha2: String,
    /// Privileges on `*.*`.
    pub global: u32,
    /// Privileges per database (lower-case name).
    pub dbs: BTreeMap<String, u32>,
    /// Privileges per table: (database, table) lower case.
    pub tables: Vec<(String, String, u32)>,
    /// REQUIRE SSL.
    pub require_ssl: bool,
}

/// Where a privilege applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Level {
    /// `*.*`.
    Global,
    /// `db.*`.
    Db(String),
    /// `db.table`.
    Table(String, String),
}

impl Account {
    /// A new account with a password and no privileges.
    pub fn new(user: &str, host: &str, password: &str) -> Account {
        let mut a = Account {
            user: user.to_string(),
            host: host.to_string(),
            plugin: "mysql_native_password".into(),
            ..Default::default()
        };
        a.set_password(password);
        a
    }

    /// Replaces the password.
    pub fn set_password(&mut self, password: &str) {
        if password.is_empty() {
            self.native.clear();
            self.sha2.clear();
        } else {
            self.native = hex(&Sha1::digest(Sha1::digest(password.as_bytes())));
            self.sha2 = hex(&Sha256::digest(Sha256::digest(password.as_bytes())));
        }
    }

    /// Whether the account has a password.
    pub fn has_password(&self) -> bool {
        !self.native.is_empty()
    }

    /// `'user'@'host'`.
    pub fn name(&self) -> String {
        format!("'{}'@'{}'", self.user, self.host)
    }

    /// The privileges held at exactly `level`.
    pub fn at(&self, level: &Level) -> u32 {
        match level {
            Level::Global => self.global,
            Level::Db(d) => self.dbs.get(d).copied().unwrap_or(0),
            Level::Table(d, t) => self.tables.iter().find(|(x, y, _)| x == d && y == t).map_or(0, |e| e.2),
        }
    }

    /// Sets the privileges at `level` (removing the entry when none are left).
    pub fn set_at(&mut self, level: &Level, bits: u32) {
        match level {
            Level::Global => self.global = bits,
            Level::Db(d) => {
                if bits == 0 {
                    self.dbs.remove(d);
                } else {
                    self.dbs.insert(d.clone(), bits);
                }
            }
            Level::Table(d, t) => {
                self.tables.retain(|(x, y, _)| !(x == d && y == t));
                if bits != 0 {
                    self.tables.push((d.clone(), t.clone(), bits));
                }
            }
        }
    }

    /// Whether the account holds `privilege` on table `table` of `db` (or on the database
    /// itself when `table` is None) at any level that covers it.
    pub fn allows(&self, privilege: u32, db: &str, table: Option<&str>) -> bool {
        if self.global & privilege == privilege {
            return true;
        }
        let db = db.to_ascii_lowercase();
        let mut have = self.global | self.dbs.get(&db).copied().unwrap_or(0);
        if let Some(t) = table {
            let t = t.to_ascii_lowercase();
            have |= self.tables.iter().filter(|(x, y, _)| *x == db && *y == t).map(|e| e.2).sum::<u32>();
        }
        have & privilege == privilege
    }

    /// Whether the account holds any privilege on table `table` of `db` (SHOW CREATE TABLE,
    /// DESCRIBE).
    pub fn allows_any(&self, db: &str, table: &str) -> bool {
        let (db, table) = (db.to_ascii_lowercase(), table.to_ascii_lowercase());
        (self.global | self.dbs.get(&db).copied().unwrap_or(0)) & privs::ALL_OBJECT != 0
            || self.tables.iter().any(|(x, y, b)| *x == db && *y == table && b & privs::ALL_OBJECT != 0)
    }

    /// Whether the account holds anything on `db` (USE, SHOW DATABASES).
    pub fn sees_db(&self, db: &str) -> bool {
        let db = db.to_ascii_lowercase();
        self.global & privs::ALL_GLOBAL != 0
            || self.dbs.get(&db).is_some_and(|b| *b != 0)
            || self.tables.iter().any(|(x, _, b)| *x == db && *b != 0)
    }

    /// Whether a login scramble `response` proves the password, under `plugin`.
    pub fn verify(&self, plugin: &str, scramble: &[u8], response: &[u8]) -> bool {
        if !self.has_password() {
            return response.is_empty();
        }
        // Both plugins send SHA(pw) XOR mask, where the mask hashes the stored digest
        // (SHA(SHA(pw))) with the scramble; unmasking gives SHA(pw), whose hash must be the
        // stored digest.
        let unmask = |mask: &[u8]| -> Option<Vec<u8>> {
            (response.len() == mask.len()).then(|| response.iter().zip(mask).map(|(a, b)| a ^ b).collect())
        };
        if plugin == "caching_sha2_password" {
            let Some(stored) = unhex(&self.sha2) else { return false };
            let mask = Sha256::new().chain_update(&stored).chain_update(scramble).finalize();
            unmask(&mask).is_some_and(|h1| Sha256::digest(&h1).as_slice() == stored.as_slice())
        } else {
            let Some(stored) = unhex(&self.native) else { return false };
            let mask = Sha1::new().chain_update(scramble).chain_update(&stored).finalize();
            unmask(&mask).is_some_and(|h1| Sha1::digest(&h1).as_slice() == stored.as_slice())
        }
    }

    /// The statements SHOW GRANTS prints for this account.
    pub fn grants(&self) -> Vec<String> {
        let name = self.name();
        let option = |bits: u32| if bits & privs::GRANT_OPTION != 0 { " WITH GRANT OPTION" } else { "" };
        let mut out = vec![format!(
            "GRANT {} ON *.* TO {name}{}",
            privs::list(self.global, privs::ALL_GLOBAL),
            option(self.global)
        )];
        for (db, bits) in &self.dbs {
            out.push(format!("GRANT {} ON `{db}`.* TO {name}{}", privs::list(*bits, privs::ALL_OBJECT), option(*bits)));
        }
        for (db, t, bits) in &self.tables {
            out.push(format!(
                "GRANT {} ON `{db}`.`{t}` TO {name}{}",
                privs::list(*bits, privs::ALL_OBJECT),
                option(*bits)
            ));
        }
        out
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// Whether `host` (a client address or name) matches the account host `pattern`.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let loopback = matches!(host, "127.0.0.1" | "::1" | "localhost");
    if pattern.eq_ignore_ascii_case("localhost") {
        return loopback;
    }
    crate::expr::like_match(host.to_ascii_lowercase().as_bytes(), pattern.to_ascii_lowercase().as_bytes(), 0)
}

/// How specific a host pattern is: MySQL tries literal hosts before patterns, `%` last.
fn specificity(pattern: &str) -> (u8, usize) {
    let wild = pattern.contains(['%', '_']);
    let rank = if !wild {
        0
    } else if pattern == "%" {
        2
    } else {
        1
    };
    (rank, usize::MAX - pattern.len())
}

fn user_key(user: &str, host: &str) -> Vec<u8> {
    Key::Meta(format!("user/{}/{}", hex(user.as_bytes()), hex(host.to_ascii_lowercase().as_bytes())).into_bytes())
        .encode()
}

/// The accounts, cached, with their persistence.
pub struct Users {
    client: Arc<dyn Client>,
    oracle: Arc<dyn Oracle>,
    accounts: RwLock<BTreeMap<(String, String), Account>>,
}

impl Users {
    /// Loads every account from the store.
    pub async fn load(client: Arc<dyn Client>, oracle: Arc<dyn Oracle>) -> Result<Users> {
        let users = Users { client, oracle, accounts: RwLock::new(BTreeMap::new()) };
        let txn = users.begin().await?;
        let prefix = Key::Meta(b"user/".to_vec()).encode();
        for (_, v) in txn.scan(&prefix, &prefix_end(&prefix), usize::MAX).await? {
            let a: Account = serde_json::from_slice(&v).map_err(|e| Error::internal(format!("account record: {e}")))?;
            users.accounts.write().insert((a.user.clone(), a.host.to_ascii_lowercase()), a);
        }
        Ok(users)
    }

    async fn begin(&self) -> Result<Transaction> {
        Transaction::begin(
            self.client.clone(),
            self.oracle.clone(),
            TxnOptions {
                mode: LockMode::Optimistic,
                isolation: Isolation::RepeatableRead,
                lock_wait_timeout_ms: 50_000,
                one_pc: true,
            },
        )
        .await
    }

    /// Creates `root@%` with every privilege when it does not exist (first start). With a
    /// non-empty `password`, an existing root's password is reset to it (the way back in
    /// when it is lost).
    pub async fn bootstrap_root(&self, password: &str) -> Result<()> {
        match self.get("root", "%") {
            None => {
                let mut root = Account::new("root", "%", password);
                root.global = privs::ALL_GLOBAL | privs::GRANT_OPTION;
                self.put(root).await
            }
            Some(mut root) => {
                // A root made before FILE existed held every privilege there was then.
                let before_file = privs::ALL_GLOBAL & !privs::FILE;
                let upgrade = root.global & privs::ALL_GLOBAL == before_file;
                if upgrade {
                    root.global |= privs::FILE;
                }
                if !password.is_empty() {
                    root.set_password(password);
                }
                if upgrade || !password.is_empty() {
                    self.put(root).await
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The account `user@host` (host pattern as written, case-blind).
    pub fn get(&self, user: &str, host: &str) -> Option<Account> {
        self.accounts.read().get(&(user.to_string(), host.to_ascii_lowercase())).cloned()
    }

    /// Runs `f` on the account `user@host` (None when it does not exist).
    pub fn with<T>(&self, user: &str, host: &str, f: impl FnOnce(&Account) -> T) -> Option<T> {
        self.accounts.read().get(&(user.to_string(), host.to_ascii_lowercase())).map(f)
    }

    /// The account a client `user` connecting from `client_host` logs in as: the most
    /// specific matching host pattern.
    pub fn find(&self, user: &str, client_host: &str) -> Option<Account> {
        self.accounts
            .read()
            .values()
            .filter(|a| a.user == user && host_matches(&a.host, client_host))
            .min_by_key(|a| specificity(&a.host))
            .cloned()
    }

    /// Every account.
    pub fn all(&self) -> Vec<Account> {
        self.accounts.read().values().cloned().collect()
    }

    /// Stores an account (new or changed).
    pub async fn put(&self, a: Account) -> Result<()> {
        let mut txn = self.begin().await?;
        let v = serde_json::to_vec(&a).map_err(|e| Error::internal(format!("account record: {e}")))?;
        txn.put(user_key(&a.user, &a.host), v);
        txn.commit().await?;
        self.accounts.write().insert((a.user.clone(), a.host.to_ascii_lowercase()), a);
        Ok(())
    }

    /// Removes an account.
    pub async fn remove(&self, user: &str, host: &str) -> Result<()> {
        let mut txn = self.begin().await?;
        txn.delete(user_key(user, host));
        txn.commit().await?;
        self.accounts.write().remove(&(user.to_string(), host.to_ascii_lowercase()));
        Ok(())
    }
}

/// 1142: `command` denied on a table.
pub fn table_denied(command: &str, who: &str, table: &str) -> Error {
    Error::user(Code::TableAccessDenied, format!("{command} command denied to user {who} for table '{table}'"))
}

/// 1044: no access to a database.
pub fn db_denied(who: &str, db: &str) -> Error {
    Error::user(Code::DbAccessDenied, format!("Access denied for user {who} to database '{db}'"))
}

/// 1227: a global privilege is missing.
pub fn specific_denied(privilege: &str) -> Error {
    Error::user(
        Code::SpecificAccessDenied,
        format!("Access denied; you need (at least one of) the {privilege} privilege(s) for this operation"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_under_both_plugins_from_their_digests() {
        let a = Account::new("app", "%", "s3cret");
        let scramble = b"abcdefghij0123456789";
        // What clients send (see server::auth).
        let native = {
            let h1 = Sha1::digest(b"s3cret");
            let h2 = Sha1::digest(h1);
            let mut h = Sha1::new();
            h.update(scramble);
            h.update(h2);
            let h3 = h.finalize();
            h1.iter().zip(h3.iter()).map(|(a, b)| a ^ b).collect::<Vec<u8>>()
        };
        let sha2 = {
            let h1 = Sha256::digest(b"s3cret");
            let h2 = Sha256::digest(h1);
            let mut h = Sha256::new();
            h.update(h2);
            h.update(scramble);
            let h3 = h.finalize();
            h1.iter().zip(h3.iter()).map(|(a, b)| a ^ b).collect::<Vec<u8>>()
        };
        assert!(a.verify("mysql_native_password", scramble, &native));
        assert!(a.verify("caching_sha2_password", scramble, &sha2));
        assert!(!a.verify("mysql_native_password", scramble, &sha2[..20]));
        assert!(!a.verify("caching_sha2_password", scramble, b""));
        let open = Account::new("guest", "%", "");
        assert!(open.verify("mysql_native_password", scramble, b""));
        assert!(!open.verify("mysql_native_password", scramble, &native));
    }

    #[test]
    fn hosts_match_patterns_and_the_most_specific_wins() {
        assert!(host_matches("%", "10.0.0.7"));
        assert!(host_matches("10.0.0.%", "10.0.0.7"));
        assert!(!host_matches("10.0.1.%", "10.0.0.7"));
        assert!(host_matches("localhost", "127.0.0.1"));
        assert!(!host_matches("localhost", "10.0.0.7"));
        assert!(specificity("localhost") < specificity("127.0.0.%"));
        assert!(specificity("127.0.0.%") < specificity("%"));
    }

    #[test]
    fn privileges_combine_across_levels() {
        let mut a = Account::new("u", "%", "");
        a.set_at(&Level::Db("shop".into()), privs::SELECT | privs::INSERT);
        a.set_at(&Level::Table("hr".into(), "pay".into()), privs::UPDATE);
        assert!(a.allows(privs::SELECT, "Shop", Some("orders")));
        assert!(!a.allows(privs::DELETE, "shop", Some("orders")));
        assert!(a.allows(privs::UPDATE, "hr", Some("pay")));
        assert!(!a.allows(privs::UPDATE, "hr", Some("other")));
        assert!(a.sees_db("hr") && !a.sees_db("secret"));
        a.set_at(&Level::Db("shop".into()), 0);
        assert!(!a.sees_db("shop"));
        assert_eq!(a.grants()[0], "GRANT USAGE ON *.* TO 'u'@'%'");
        assert_eq!(a.grants()[1], "GRANT UPDATE ON `hr`.`pay` TO 'u'@'%'");
    }
}
