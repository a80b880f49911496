//! Columnar replica settings: `ALTER TABLE t SET TIFLASH REPLICA n [LOCATION LABELS
//! 'l', ...]` (TiDB's syntax, as go-tpc sends it) and its synonym `SET COLUMNAR REPLICA n`.
//!
//! The setting is part of the table's definition (`TableInfo::columnar_replica`), so it
//! survives restarts and follows the table through TRUNCATE and ALTER. The column engine
//! (`column::ColumnEngine`) builds, keeps current and drops the replicas to match; this
//! module only records what is wanted. One node holds at most one columnar copy, so a count
//! above 1 is refused as TiDB refuses a count above its number of TiFlash stores.

use serde::{Deserialize, Serialize};
use sqlparser::tokenizer::Token;
use strata_common::{Code, Error, Result};

use crate::grants::{alter_table_head, TokenCursor};

/// How many columnar replicas a table should have, and TiDB's placement labels for them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSetting {
    /// Replicas wanted (0 or 1 on one node).
    pub count: u64,
    /// `LOCATION LABELS`, kept for information_schema (one node has no placement).
    #[serde(default)]
    pub labels: Vec<String>,
}

/// A parsed `ALTER TABLE .. SET {TIFLASH | COLUMNAR} REPLICA ..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetReplica {
    /// Database, if the name was qualified.
    pub db: Option<String>,
    /// Table name.
    pub table: String,
    /// What to set.
    pub setting: ReplicaSetting,
}

/// Column stores this node has (the embedded column engine).
pub const STORES: u64 = 1;

/// Parses the statement; None when `sql` is not one.
pub fn parse(sql: &str) -> Option<Result<SetReplica>> {
    let (mut p, db, table) = alter_table_head(sql, "REPLICA")?;
    if !(p.eat_seq(&["SET", "TIFLASH", "REPLICA"]) || p.eat_seq(&["SET", "COLUMNAR", "REPLICA"])) {
        return None; // some other ALTER TABLE: the SQL parser's
    }
    Some(rest(&mut p).map(|setting| SetReplica { db, table, setting }))
}

fn rest(p: &mut TokenCursor) -> Result<ReplicaSetting> {
    let (count, tok) = match p.peek() {
        Some(t @ Token::Number(n, _)) => (n.parse::<u64>().map_err(|_| p.error())?, t.clone()),
        _ => return Err(p.error()),
    };
    p.eat_token(&tok);
    let mut labels = Vec::new();
    if p.eat_seq(&["LOCATION", "LABELS"]) {
        loop {
            labels.push(p.string()?);
            if !p.eat_token(&Token::Comma) {
                break;
            }
        }
    }
    p.eat_token(&Token::SemiColon);
    p.done()?;
    if count > STORES {
        // TiDB's message when the count exceeds its TiFlash stores.
        return Err(Error::user(
            Code::UnknownError,
            format!("the tiflash replica count: {count} should be less than the total tiflash server count: {STORES}"),
        ));
    }
    Ok(ReplicaSetting { count, labels })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidb_and_strata_spellings_parse_and_other_alters_pass_through() {
        let s = parse("ALTER TABLE tpch.lineitem SET TIFLASH REPLICA 1").expect("ours").expect("parses");
        assert_eq!(
            s,
            SetReplica {
                db: Some("tpch".into()),
                table: "lineitem".into(),
                setting: ReplicaSetting { count: 1, labels: vec![] }
            }
        );
        let s = parse("alter table `t` set columnar replica 0;").expect("ours").expect("parses");
        assert_eq!((s.db, s.table.as_str(), s.setting.count), (None, "t", 0));
        let s = parse("ALTER TABLE t SET TIFLASH REPLICA 1 LOCATION LABELS 'zone', 'host'").expect("ours").expect("ok");
        assert_eq!(s.setting.labels, vec!["zone".to_string(), "host".to_string()]);
        assert!(parse("ALTER TABLE t ADD COLUMN replica INT").is_none());
        assert!(parse("SELECT 'ALTER TABLE t SET TIFLASH REPLICA 1'").is_none());
        let err = parse("ALTER TABLE t SET TIFLASH REPLICA 2").expect("ours").expect_err("two");
        assert!(err.to_string().contains("total tiflash server count: 1"), "{err}");
        let err = parse("ALTER TABLE t SET TIFLASH REPLICA x").expect("ours").expect_err("bad");
        assert_eq!(err.code(), Code::Parse);
        assert!(parse("ALTER TABLE t SET TIFLASH REPLICA 1 extra").expect("ours").is_err());
    }
}
