//! The process list: what each connection is doing, for `SHOW [FULL] PROCESSLIST` (and so
//! users can find the id to `KILL`). Each session owns a [`Process`], registered in the
//! `Engine` by connection id, and updates it when a statement starts and ends.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use strata_common::Value;

use crate::interrupt::Interrupt;
use crate::result::{Column, QueryResult};

/// One connection, as other connections see it.
#[derive(Debug)]
pub struct Process {
    /// Its kill switch.
    pub interrupt: Arc<Interrupt>,
    activity: Mutex<Activity>,
}

#[derive(Debug)]
struct Activity {
    user: String,
    host: String,
    db: Option<String>,
    /// The statement running, if any.
    statement: Option<Arc<str>>,
    /// When the connection entered its current command (statement or sleep).
    since: Instant,
}

/// Info is cut to this many characters unless `SHOW FULL PROCESSLIST`, as in MySQL.
const INFO_CHARS: usize = 100;

impl Process {
    /// A connection of `user`, sleeping.
    pub fn new(user: &str) -> Process {
        Process {
            interrupt: Arc::new(Interrupt::default()),
            activity: Mutex::new(Activity {
                user: user.to_string(),
                host: String::new(),
                db: None,
                statement: None,
                since: Instant::now(),
            }),
        }
    }

    /// The logged-in user.
    pub fn set_user(&self, user: &str) {
        self.activity.lock().user = user.to_string();
    }

    /// The user it runs as.
    pub fn user(&self) -> String {
        self.activity.lock().user.clone()
    }

    /// The client's address (`host:port`).
    pub fn set_host(&self, host: String) {
        self.activity.lock().host = host;
    }

    /// The current database.
    pub fn set_db(&self, db: Option<String>) {
        self.activity.lock().db = db;
    }

    /// A statement starts (`Some(text)`) or ends (`None`).
    pub fn set_statement(&self, statement: Option<Arc<str>>) {
        let mut a = self.activity.lock();
        a.statement = statement;
        a.since = Instant::now();
    }

    fn row(&self, id: u32, full: bool) -> Vec<Value> {
        let a = self.activity.lock();
        let info: Option<String> =
            a.statement.as_deref().map(|s| if full { s.to_string() } else { s.chars().take(INFO_CHARS).collect() });
        vec![
            Value::Int(i64::from(id)),
            Value::str(a.user.clone()),
            Value::str(a.host.clone()),
            a.db.clone().map_or(Value::Null, Value::str),
            Value::str(if info.is_some() { "Query" } else { "Sleep" }),
            Value::Int(a.since.elapsed().as_secs() as i64),
            Value::str(if info.is_some() { "executing" } else { "" }),
            info.map_or(Value::Null, Value::str),
        ]
    }
}

/// `SHOW [FULL] PROCESSLIST` over the registered connections, by id.
pub fn show(processes: &[(u32, Arc<Process>)], full: bool) -> QueryResult {
    let mut rows: Vec<Vec<Value>> = processes.iter().map(|(id, p)| p.row(*id, full)).collect();
    rows.sort_by_key(|r| r[0].as_i64());
    let columns = ["Id", "User", "Host", "db", "Command", "Time", "State", "Info"]
        .iter()
        .map(|n| if matches!(*n, "Id" | "Time") { Column::int(n) } else { Column::text(n) })
        .collect();
    QueryResult::Rows { columns, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_show_each_connection_and_cut_long_statements() {
        let a = Arc::new(Process::new("root"));
        a.set_host("127.0.0.1:5000".into());
        a.set_db(Some("tpcc".into()));
        let long = format!("SELECT {}", "x".repeat(200));
        a.set_statement(Some(Arc::from(long.as_str())));
        let b = Arc::new(Process::new("app"));
        let QueryResult::Rows { columns, rows } = show(&[(7, b.clone()), (3, a.clone())], false) else {
            panic!("rows expected")
        };
        assert_eq!(columns.len(), 8);
        assert_eq!(rows[0][0], Value::Int(3), "sorted by id");
        assert_eq!(rows[0][2], Value::str("127.0.0.1:5000"));
        assert_eq!(rows[0][3], Value::str("tpcc"));
        assert_eq!(rows[0][4], Value::str("Query"));
        assert!(matches!(&rows[0][7], Value::Bytes(b) if b.len() == INFO_CHARS));
        assert_eq!(rows[1][4], Value::str("Sleep"));
        assert_eq!(rows[1][3], Value::Null);
        assert_eq!(rows[1][7], Value::Null);
        let QueryResult::Rows { rows, .. } = show(&[(3, a)], true) else { panic!("rows expected") };
        assert_eq!(rows[0][7], Value::str(long));
    }
}
