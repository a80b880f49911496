//! Account management statements, parsed from tokens (sqlparser's grammar for them is not
//! MySQL's): CREATE/DROP/ALTER/RENAME USER, SET PASSWORD, GRANT, REVOKE and SHOW GRANTS.

use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};
use strata_common::{Code, Error, Result};

use crate::users::{privs, Level};

/// An account as written: user and host pattern (`%` when left out).
pub type AccountName = (String, String);

/// What `ON ...` names in GRANT/REVOKE, before the current database is filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `*.*`.
    Global,
    /// `*` (the current database) or `db.*`.
    Db(Option<String>),
    /// `t` (in the current database) or `db.t`.
    Table(Option<String>, String),
}

impl Target {
    /// The level, with the current database for names that leave it out.
    pub fn level(&self, current: Option<&str>) -> Result<Level> {
        let db = |d: &Option<String>| -> Result<String> {
            d.clone()
                .or_else(|| current.map(str::to_string))
                .map(|d| d.to_ascii_lowercase())
                .ok_or_else(|| Error::user(Code::NoDb, "No database selected"))
        };
        Ok(match self {
            Target::Global => Level::Global,
            Target::Db(d) => Level::Db(db(d)?),
            Target::Table(d, t) => Level::Table(db(d)?, t.to_ascii_lowercase()),
        })
    }
}

/// A parsed account statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountStmt {
    /// CREATE USER: accounts with passwords (None: no IDENTIFIED clause).
    CreateUser { if_not_exists: bool, users: Vec<(AccountName, Option<String>)>, require_ssl: Option<bool> },
    /// DROP USER.
    DropUser { if_exists: bool, users: Vec<AccountName> },
    /// ALTER USER (None: the current user, `USER()`).
    AlterUser { if_exists: bool, users: Vec<(Option<AccountName>, Option<String>)>, require_ssl: Option<bool> },
    /// RENAME USER a TO b, ...
    RenameUser(Vec<(AccountName, AccountName)>),
    /// SET PASSWORD [FOR account] = 'pw'.
    SetPassword(Option<AccountName>, String),
    /// GRANT privileges ON target TO accounts [WITH GRANT OPTION].
    Grant { privs: u32, all: bool, target: Target, users: Vec<AccountName> },
    /// REVOKE privileges ON target FROM accounts.
    Revoke { privs: u32, all: bool, target: Target, users: Vec<AccountName> },
    /// SHOW GRANTS [FOR account] (None: the current user).
    ShowGrants(Option<AccountName>),
}

/// MySQL privileges Strata accepts in GRANT/REVOKE but does not model (nothing it runs
/// needs them); granting them is a no-op.
const UNMODELLED: [&str; 13] = [
    "REFERENCES",
    "EXECUTE",
    "RELOAD",
    "SHUTDOWN",
    "EVENT",
    "TRIGGER",
    "SHOW DATABASES",
    "SHOW VIEW",
    "CREATE VIEW",
    "LOCK TABLES",
    "CREATE TEMPORARY TABLES",
    "REPLICATION CLIENT",
    "REPLICATION SLAVE",
];

/// For the table options parsed here (`ALTER TABLE [db.]t SET .. REPLICA`, `.. CACHE`): the
/// cursor after `ALTER TABLE [db.]t` and the name, when `sql` starts so and mentions
/// `marker` at all (a cheap test before tokenizing).
pub(crate) fn alter_table_head(sql: &str, marker: &str) -> Option<(TokenCursor, Option<String>, String)> {
    let head = leading_words(sql, 2);
    if head.iter().map(String::as_str).collect::<Vec<_>>() != ["ALTER", "TABLE"]
        || !sql.to_ascii_uppercase().contains(marker)
    {
        return None;
    }
    let mut p = TokenCursor::new(sql)?;
    if !p.eat_seq(&["ALTER", "TABLE"]) {
        return None;
    }
    let first = p.name().ok()?;
    let (db, table) = if p.eat_token(&Token::Period) { (Some(first), p.name().ok()?) } else { (None, first) };
    Some((p, db, table))
}

/// A cursor over a statement's tokens (whitespace dropped), for the statements parsed
/// here and in `load`.
pub(crate) struct TokenCursor {
    toks: Vec<Token>,
    pos: usize,
}

type P = TokenCursor;

fn syntax(near: &str) -> Error {
    Error::parse(format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{near}'"
    ))
}

impl P {
    pub(crate) fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    pub(crate) fn word(&self) -> Option<String> {
        match self.peek() {
            Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
            _ => None,
        }
    }

    pub(crate) fn eat(&mut self, kw: &str) -> bool {
        if self.word().as_deref() == Some(kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn eat_seq(&mut self, kws: &[&str]) -> bool {
        let save = self.pos;
        for k in kws {
            if !self.eat(k) {
                self.pos = save;
                return false;
            }
        }
        true
    }

    pub(crate) fn expect(&mut self, kw: &str) -> Result<()> {
        if self.eat(kw) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    pub(crate) fn eat_token(&mut self, t: &Token) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn error(&self) -> Error {
        let rest: String =
            self.toks[self.pos.min(self.toks.len())..].iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" ");
        syntax(&rest.chars().take(80).collect::<String>())
    }

    pub(crate) fn done(&self) -> Result<()> {
        if self.pos == self.toks.len() {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// A name: quoted string, backquoted or plain word.
    pub(crate) fn name(&mut self) -> Result<String> {
        let n = match self.peek() {
            Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => s.clone(),
            Some(Token::Word(w)) => w.value.clone(),
            _ => return Err(self.error()),
        };
        self.pos += 1;
        Ok(n)
    }

    pub(crate) fn string(&mut self) -> Result<String> {
        match self.peek() {
            Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.error()),
        }
    }

    /// `'user'@'host'`, `user@host` or `user`.
    pub(crate) fn account(&mut self) -> Result<AccountName> {
        // `u@host` unquoted is one word in the MySQL dialect.
        if let Some(Token::Word(w)) = self.peek() {
            if w.quote_style.is_none() {
                if let Some((u, h)) = w.value.split_once('@') {
                    let (u, h) = (u.to_string(), h.to_string());
                    self.pos += 1;
                    return Ok((u, if h.is_empty() { "%".into() } else { h }));
                }
            }
        }
        let user = self.name()?;
        if let Some(Token::Word(w)) = self.peek() {
            if w.quote_style.is_none() && w.value.starts_with('@') && w.value.len() > 1 {
                let host = w.value[1..].to_string();
                self.pos += 1;
                return Ok((user, host));
            }
        }
        if self.eat_token(&Token::AtSign) {
            let host = self.name()?;
            return Ok((user, host));
        }
        Ok((user, "%".into()))
    }

    pub(crate) fn accounts(&mut self) -> Result<Vec<AccountName>> {
        let mut out = vec![self.account()?];
        while self.eat_token(&Token::Comma) {
            out.push(self.account()?);
        }
        Ok(out)
    }

    /// `IDENTIFIED [WITH plugin] [BY 'pw']`.
    pub(crate) fn identified(&mut self) -> Result<Option<String>> {
        if !self.eat("IDENTIFIED") {
            return Ok(None);
        }
        if self.eat("WITH") {
            let plugin = self.name()?;
            if !matches!(plugin.as_str(), "mysql_native_password" | "caching_sha2_password") {
                return Err(Error::user(Code::NotSupported, format!("Plugin '{plugin}' is not loaded")));
            }
            if !self.eat("BY") {
                return Ok(Some(String::new()));
            }
        } else {
            self.expect("BY")?;
        }
        Ok(Some(self.string()?))
    }

    pub(crate) fn require(&mut self) -> Result<Option<bool>> {
        if !self.eat("REQUIRE") {
            return Ok(None);
        }
        if self.eat("SSL") || self.eat("X509") {
            Ok(Some(true))
        } else if self.eat("NONE") {
            Ok(Some(false))
        } else {
            Err(self.error())
        }
    }

    /// Privilege list: bits, and whether it said ALL.
    pub(crate) fn privileges(&mut self) -> Result<(u32, bool)> {
        let mut bits = 0;
        let mut all = false;
        loop {
            if self.eat("ALL") {
                self.eat("PRIVILEGES");
                all = true;
            } else if self.eat("USAGE") {
            } else if self.eat_seq(&["GRANT", "OPTION"]) {
                bits |= privs::GRANT_OPTION;
            } else if self.eat_seq(&["CREATE", "USER"]) {
                bits |= privs::CREATE_USER;
            } else if UNMODELLED.iter().any(|n| self.eat_seq(&n.split(' ').collect::<Vec<_>>())) {
                // Accepted, not modelled: nothing to record.
            } else {
                let w = self.word().ok_or_else(|| self.error())?;
                let b = privs::by_name(&w).ok_or_else(|| self.error())?;
                self.pos += 1;
                bits |= b;
            }
            // Column lists (`SELECT (a, b)`) are not supported.
            if !self.eat_token(&Token::Comma) {
                return Ok((bits, all));
            }
        }
    }

    pub(crate) fn target(&mut self) -> Result<Target> {
        self.eat("TABLE");
        if self.eat_token(&Token::Mul) {
            if self.eat_token(&Token::Period) {
                if self.eat_token(&Token::Mul) {
                    return Ok(Target::Global);
                }
                return Err(self.error());
            }
            return Ok(Target::Db(None));
        }
        let first = self.name()?;
        if self.eat_token(&Token::Period) {
            if self.eat_token(&Token::Mul) {
                return Ok(Target::Db(Some(first)));
            }
            let t = self.name()?;
            return Ok(Target::Table(Some(first), t));
        }
        Ok(Target::Table(None, first))
    }
    /// The tokens of `sql` without whitespace and trailing semicolons; None if it does not
    /// tokenize (the SQL parser reports the error).
    pub(crate) fn new(sql: &str) -> Option<TokenCursor> {
        let toks = Tokenizer::new(&MySqlDialect {}, sql).tokenize().ok()?;
        let mut toks: Vec<Token> = toks.into_iter().filter(|t| !matches!(t, Token::Whitespace(_))).collect();
        while toks.last() == Some(&Token::SemiColon) {
            toks.pop();
        }
        Some(TokenCursor { toks, pos: 0 })
    }

    /// `name` or `db.name`, each part plain, backquoted or double-quoted.
    pub(crate) fn object_name(&mut self) -> Result<sqlparser::ast::ObjectName> {
        let mut parts = Vec::new();
        loop {
            match self.peek() {
                Some(Token::Word(w)) => {
                    parts.push(match w.quote_style {
                        Some(q) => sqlparser::ast::Ident::with_quote(q, w.value.clone()),
                        None => sqlparser::ast::Ident::new(w.value.clone()),
                    });
                    self.pos += 1;
                }
                _ => return Err(self.error()),
            }
            if !self.eat_token(&Token::Period) {
                return Ok(sqlparser::ast::ObjectName::from(parts));
            }
        }
    }

    /// An unsigned integer.
    pub(crate) fn number(&mut self) -> Result<u64> {
        match self.peek() {
            Some(Token::Number(n, _)) => {
                let n = n.parse().map_err(|_| self.error())?;
                self.pos += 1;
                Ok(n)
            }
            _ => Err(self.error()),
        }
    }

    /// A column name or a user variable (`@name`) of a LOAD DATA column list.
    pub(crate) fn load_target(&mut self) -> Result<crate::load::Target> {
        if self.eat_token(&Token::AtSign) {
            return Ok(crate::load::Target::Var(self.name()?.to_ascii_lowercase()));
        }
        match self.peek() {
            Some(Token::Word(w)) if w.quote_style.is_none() && w.value.starts_with('@') => {
                let v = w.value[1..].to_ascii_lowercase();
                self.pos += 1;
                Ok(crate::load::Target::Var(v))
            }
            Some(Token::Word(w)) => {
                let n = w.value.clone();
                self.pos += 1;
                Ok(crate::load::Target::Column(n))
            }
            _ => Err(self.error()),
        }
    }

    /// The tokens not read yet.
    pub(crate) fn rest(&mut self) -> Vec<Token> {
        let rest = self.toks.split_off(self.pos.min(self.toks.len()));
        self.pos = self.toks.len();
        rest
    }
}

/// The first `n` words of `sql`, upper case (a cheap look before tokenizing).
pub fn leading_words(sql: &str, n: usize) -> Vec<String> {
    sql.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// Parses an account statement; None when `sql` is not one.
pub fn parse(sql: &str) -> Option<Result<AccountStmt>> {
    // Only account statements are tokenized: every other SET, SHOW or DDL passes through.
    let head = leading_words(sql, 2);
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    if !matches!(
        head.as_slice(),
        ["GRANT", ..]
            | ["REVOKE", ..]
            | ["CREATE" | "DROP" | "ALTER" | "RENAME", "USER"]
            | ["SET", "PASSWORD"]
            | ["SHOW", "GRANTS"]
    ) {
        return None;
    }
    let mut p = TokenCursor::new(sql)?;
    let stmt = if p.eat_seq(&["CREATE", "USER"]) {
        let if_not_exists = p.eat_seq(&["IF", "NOT", "EXISTS"]);
        Some((|| {
            let mut users = Vec::new();
            loop {
                let a = p.account()?;
                users.push((a, p.identified()?));
                if !p.eat_token(&Token::Comma) {
                    break;
                }
            }
            let require_ssl = p.require()?;
            p.done()?;
            Ok(AccountStmt::CreateUser { if_not_exists, users, require_ssl })
        })())
    } else if p.eat_seq(&["DROP", "USER"]) {
        let if_exists = p.eat_seq(&["IF", "EXISTS"]);
        Some(p.accounts().and_then(|users| p.done().map(|_| AccountStmt::DropUser { if_exists, users })))
    } else if p.eat_seq(&["ALTER", "USER"]) {
        let if_exists = p.eat_seq(&["IF", "EXISTS"]);
        Some((|| {
            let mut users = Vec::new();
            loop {
                let a = if p.eat("USER") {
                    if !(p.eat_token(&Token::LParen) && p.eat_token(&Token::RParen)) {
                        return Err(p.error());
                    }
                    None
                } else {
                    Some(p.account()?)
                };
                users.push((a, p.identified()?));
                if !p.eat_token(&Token::Comma) {
                    break;
                }
            }
            let require_ssl = p.require()?;
            p.done()?;
            Ok(AccountStmt::AlterUser { if_exists, users, require_ssl })
        })())
    } else if p.eat_seq(&["RENAME", "USER"]) {
        Some((|| {
            let mut pairs = Vec::new();
            loop {
                let from = p.account()?;
                p.expect("TO")?;
                pairs.push((from, p.account()?));
                if !p.eat_token(&Token::Comma) {
                    break;
                }
            }
            p.done()?;
            Ok(AccountStmt::RenameUser(pairs))
        })())
    } else if p.eat_seq(&["SET", "PASSWORD"]) {
        Some((|| {
            let who = if p.eat("FOR") { Some(p.account()?) } else { None };
            if !p.eat_token(&Token::Eq) {
                return Err(p.error());
            }
            let pw = p.string()?;
            p.done()?;
            Ok(AccountStmt::SetPassword(who, pw))
        })())
    } else if p.eat("GRANT") || p.eat("REVOKE") {
        let grant = matches!(p.toks.first(), Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("grant"));
        Some((|| {
            let (bits, all) = p.privileges()?;
            // REVOKE ALL PRIVILEGES, GRANT OPTION FROM u: every level.
            if !grant && all && p.eat("FROM") {
                let users = p.accounts()?;
                p.done()?;
                return Ok(AccountStmt::Revoke {
                    privs: bits | privs::GRANT_OPTION,
                    all: true,
                    target: Target::Global,
                    users,
                });
            }
            p.expect("ON")?;
            let target = p.target()?;
            p.expect(if grant { "TO" } else { "FROM" })?;
            let users = p.accounts()?;
            let mut bits = bits;
            if grant && p.eat_seq(&["WITH", "GRANT", "OPTION"]) {
                bits |= privs::GRANT_OPTION;
            }
            p.done()?;
            Ok(if grant {
                AccountStmt::Grant { privs: bits, all, target, users }
            } else {
                AccountStmt::Revoke { privs: bits, all, target, users }
            })
        })())
    } else if p.eat_seq(&["SHOW", "GRANTS"]) {
        Some((|| {
            let who = if p.eat("FOR") {
                if p.eat("CURRENT_USER") {
                    if p.eat_token(&Token::LParen) && !p.eat_token(&Token::RParen) {
                        return Err(p.error());
                    }
                    None
                } else {
                    Some(p.account()?)
                }
            } else {
                None
            };
            p.done()?;
            Ok(AccountStmt::ShowGrants(who))
        })())
    } else {
        None
    };
    stmt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(sql: &str) -> AccountStmt {
        match parse(sql) {
            Some(Ok(s)) => s,
            other => panic!("{sql}: {other:?}"),
        }
    }

    fn acct(u: &str, h: &str) -> AccountName {
        (u.to_string(), h.to_string())
    }

    #[test]
    fn account_statements_parse_as_mysql_writes_them() {
        assert_eq!(
            ok("CREATE USER IF NOT EXISTS 'app'@'10.0.%' IDENTIFIED BY 'pw', bob REQUIRE SSL"),
            AccountStmt::CreateUser {
                if_not_exists: true,
                users: vec![(acct("app", "10.0.%"), Some("pw".into())), (acct("bob", "%"), None)],
                require_ssl: Some(true),
            }
        );
        assert_eq!(
            ok("create user u@localhost identified with caching_sha2_password by 'x'"),
            AccountStmt::CreateUser {
                if_not_exists: false,
                users: vec![(acct("u", "localhost"), Some("x".into()))],
                require_ssl: None
            }
        );
        assert_eq!(
            ok("GRANT SELECT, INSERT ON shop.* TO 'app'@'%' WITH GRANT OPTION"),
            AccountStmt::Grant {
                privs: privs::SELECT | privs::INSERT | privs::GRANT_OPTION,
                all: false,
                target: Target::Db(Some("shop".into())),
                users: vec![acct("app", "%")],
            }
        );
        assert_eq!(
            ok("GRANT ALL PRIVILEGES ON *.* TO `admin`@`localhost`"),
            AccountStmt::Grant { privs: 0, all: true, target: Target::Global, users: vec![acct("admin", "localhost")] }
        );
        assert_eq!(
            ok("REVOKE UPDATE ON `hr`.`pay` FROM u"),
            AccountStmt::Revoke {
                privs: privs::UPDATE,
                all: false,
                target: Target::Table(Some("hr".into()), "pay".into()),
                users: vec![acct("u", "%")],
            }
        );
        assert_eq!(
            ok("SET PASSWORD FOR 'u'@'%' = 'new'"),
            AccountStmt::SetPassword(Some(acct("u", "%")), "new".into())
        );
        assert_eq!(ok("SET PASSWORD = 'mine'"), AccountStmt::SetPassword(None, "mine".into()));
        assert_eq!(ok("SHOW GRANTS FOR CURRENT_USER()"), AccountStmt::ShowGrants(None));
        assert_eq!(ok("show grants for 'u'@'h'"), AccountStmt::ShowGrants(Some(acct("u", "h"))));
        assert_eq!(ok("RENAME USER a TO b"), AccountStmt::RenameUser(vec![(acct("a", "%"), acct("b", "%"))]));
        assert_eq!(
            ok("ALTER USER USER() IDENTIFIED BY 'z'"),
            AccountStmt::AlterUser { if_exists: false, users: vec![(None, Some("z".into()))], require_ssl: None }
        );
        assert!(matches!(parse("GRANT SELEKT ON *.* TO u"), Some(Err(_))));
        assert!(parse("SELECT 1").is_none());
        assert!(parse("SET @a = 1").is_none());
        assert!(parse("CREATE TABLE t (a INT)").is_none());
    }
}
