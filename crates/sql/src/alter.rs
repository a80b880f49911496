//! ALTER TABLE changes that rewrite rows: MODIFY / CHANGE COLUMN (type, nullability,
//! position), ADD / DROP PRIMARY KEY, ADD COLUMN with a key, AUTO_INCREMENT or a position.
//!
//! Such a change copies the table (MySQL's ALGORITHM=COPY): the rows are converted into a
//! new table id and the new definition is published under the old name in one transaction
//! that also schedules the old rows for deletion. While it copies, the table is READ
//! locked (writers wait, readers go on); a transaction that wrote the table before fails at
//! commit (8028). Conversion follows strict mode: a value the new type cannot hold stops
//! the change with MySQL's error and the table is left as it was. The rows of a copy a
//! crash interrupted are deleted at the next start (`building/` records).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use strata_codec::keys::{prefix_end, row_prefix, table_prefix};
use strata_common::{Code, Error, Result, Value};

use crate::catalog::{default_value, ColumnInfo, IndexState, TableInfo};
use crate::session::Engine;
use crate::table::{decode_row, encode_row, handle_of, index_entry, is_unique_entry, row_key};
use crate::table_locks::Mode;

/// Rows copied per transaction.
const COPY_BATCH: usize = 1_000;

impl Engine {
    /// Copies `old`'s rows into `new` and publishes `new` under the same name. `from[i]` is
    /// the column of `old` that feeds column `i` of `new` (None: its default). `conn` is the
    /// session running the change and whether its statement entered on the table locks'
    /// fast path; it READ-locks the table unless it holds table locks.
    pub(crate) async fn rebuild_table(
        &self,
        (conn, own_fast): (u32, bool),
        lock_timeout: Duration,
        old: Arc<TableInfo>,
        mut new: TableInfo,
        from: Vec<Option<usize>>,
    ) -> Result<()> {
        new.id = self.catalog.new_id().await?;
        for i in &mut new.indexes {
            i.state = IndexState::Public;
        }
        let locked = !self.table_locks.holds(conn);
        if locked {
            let key = (old.db.to_ascii_lowercase(), old.name.to_ascii_lowercase());
            self.table_locks.lock_tables_within(conn, vec![(key, Mode::Read)], lock_timeout, own_fast).await?;
        }
        let r = self.copy_and_publish(&old, new, &from).await;
        if locked {
            self.table_locks.unlock_tables(conn);
        }
        self.wake_cleanup();
        r
    }

    async fn copy_and_publish(&self, old: &TableInfo, new: TableInfo, from: &[Option<usize>]) -> Result<()> {
        // Transactions that began before and wrote the table fail at commit from now on;
        // wait out those already committing, then read a snapshot that has all the rest.
        self.catalog.mark_changed(old.id);
        self.catalog.wait_for_commits().await;
        let built = table_prefix(new.table_id());
        self.catalog.start_building(&built).await?;
        match self.copy_rows(old, &new, from).await {
            Ok(max_auto) => {
                if let Some(m) = max_auto {
                    self.catalog.rebase_auto_id(new.id, m).await?;
                }
                self.catalog.replace_table(new, &built, table_prefix(old.table_id())).await?;
                self.catalog.mark_changed(old.id);
                Ok(())
            }
            Err(e) => {
                self.catalog.abandon_building(&built).await?;
                Err(e)
            }
        }
    }

    /// Writes every row of `old` (one snapshot) into `new`, converted; returns the largest
    /// AUTO_INCREMENT value written.
    async fn copy_rows(&self, old: &TableInfo, new: &TableInfo, from: &[Option<usize>]) -> Result<Option<i64>> {
        let reader = self.begin_internal().await?;
        let now = Value::DateTime(crate::session::now());
        let prefix = row_prefix(old.table_id());
        let end = prefix_end(&prefix);
        let mut start = prefix;
        let auto = new.auto_increment_column();
        let mut max_auto: Option<i64> = None;
        let mut row_no = 0usize;
        loop {
            crate::interrupt::checkpoint().await?;
            let batch = reader.scan_once(&start, &end, COPY_BATCH).await?;
            let Some((last, _)) = batch.last() else { break };
            start = last.clone();
            start.push(0);
            let mut w = self.begin_internal().await?;
            let mut unique_keys: Vec<(Vec<u8>, String)> = Vec::new();
            let mut puts = Vec::with_capacity(batch.len() * (1 + new.indexes.len()));
            for (_, v) in &batch {
                row_no += 1;
                let (row, _) = decode_row(old, v)?;
                let mut nr = Vec::with_capacity(new.columns.len());
                for (i, c) in new.columns.iter().enumerate() {
                    if c.generated.is_some() {
                        nr.push(Value::Null);
                        continue;
                    }
                    let v = match from[i] {
                        Some(o) => row[o].clone(),
                        None if c.auto_increment => Value::Null,
                        None => default_value(c, &now)?,
                    };
                    nr.push(convert(c, v, row_no)?);
                }
                crate::dml::fill_generated(&self.catalog, &Default::default(), &mut w, new, &mut nr).await?;
                for (c, v) in new.columns.iter().zip(&nr) {
                    if c.generated.is_some() {
                        convert(c, v.clone(), row_no)?;
                    }
                }
                if let Some(a) = auto {
                    if nr[a].is_null() || nr[a].as_i64() == Some(0) {
                        let id = self.catalog.next_auto_id(new.id, false).await?;
                        nr[a] = convert(&new.columns[a], Value::Int(id), row_no)?;
                    }
                    max_auto = max_auto.max(nr[a].as_i64());
                }
                let row_id = match new.pk {
                    Some(_) => None,
                    None => Some(self.catalog.next_auto_id(new.id, true).await?),
                };
                let handle = handle_of(new, &nr, row_id)?;
                let key = row_key(new, &handle);
                if let Some(pk) = &new.pk {
                    let vals: Vec<String> = pk.iter().map(|c| nr[*c].to_display()).collect();
                    unique_keys.push((key.clone(), format!("'{}' for key '{}.PRIMARY'", vals.join("-"), new.name)));
                }
                for index in &new.indexes {
                    let (ik, iv) = index_entry(new, index, &nr, &handle);
                    if is_unique_entry(index, &nr) {
                        let vals: Vec<String> = index.columns.iter().map(|c| nr[*c].to_display()).collect();
                        unique_keys
                            .push((ik.clone(), format!("'{}' for key '{}.{}'", vals.join("-"), new.name, index.name)));
                    }
                    puts.push((ik, iv));
                }
                puts.push((key, encode_row(new, &nr, row_id)));
            }
            // A key written by an earlier batch or twice in this one is a duplicate.
            let keys: Vec<Vec<u8>> = unique_keys.iter().map(|(k, _)| k.clone()).collect();
            let existing = w.batch_get(&keys).await?;
            let mut seen = HashSet::new();
            for ((k, what), found) in unique_keys.iter().zip(existing) {
                if found.is_some() || !seen.insert(k) {
                    let _ = w.rollback().await;
                    return Err(Error::user(Code::DupEntry, format!("Duplicate entry {what}")));
                }
            }
            for (k, v) in puts {
                w.put(k, v);
            }
            w.commit().await?;
        }
        Ok(max_auto)
    }
}

/// A value converted for a column of the rebuilt table, as strict mode converts it; row
/// numbers in messages count from the first row copied.
fn convert(c: &ColumnInfo, v: Value, row_no: usize) -> Result<Value> {
    if v.is_null() {
        if !c.nullable && !c.auto_increment {
            return Err(Error::user(Code::InvalidUseOfNull, "Invalid use of NULL value"));
        }
        return Ok(Value::Null);
    }
    c.coerce(v).map_err(|e| {
        let msg = e.to_string().replace("at row 1", &format!("at row {row_no}"));
        Error::user(e.code(), msg)
    })
}

/// Where a column lands: `FIRST`, `AFTER name`, or (None) where `default` says.
pub(crate) fn position_of(
    cols: &[ColumnInfo],
    pos: Option<&sqlparser::ast::MySQLColumnPosition>,
    default: usize,
    table: &str,
) -> Result<usize> {
    match pos {
        None => Ok(default),
        Some(sqlparser::ast::MySQLColumnPosition::First) => Ok(0),
        Some(sqlparser::ast::MySQLColumnPosition::After(name)) => cols
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(&name.value))
            .map(|i| i + 1)
            .ok_or_else(|| Error::user(Code::BadField, format!("Unknown column '{}' in '{table}'", name.value))),
    }
}

/// Moves column `at` of `t` to offset `to` (after removing it), remapping key offsets;
/// returns the old offset of each new column.
pub(crate) fn move_column(t: &mut TableInfo, at: usize, to: usize) -> Vec<Option<usize>> {
    let n = t.columns.len();
    let mut order: Vec<usize> = (0..n).filter(|&i| i != at).collect();
    order.insert(to.min(n - 1), at);
    let col_of_old = |old: usize| order.iter().position(|&o| o == old).unwrap_or(old);
    t.columns = order.iter().map(|&o| t.columns[o].clone()).collect();
    if let Some(pk) = &mut t.pk {
        for c in pk.iter_mut() {
            *c = col_of_old(*c);
        }
    }
    for i in &mut t.indexes {
        for c in &mut i.columns {
            *c = col_of_old(*c);
        }
    }
    order.into_iter().map(Some).collect()
}
