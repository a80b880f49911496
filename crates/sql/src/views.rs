//! Views: CREATE [OR REPLACE] VIEW, DROP VIEW and SHOW CREATE VIEW. A view is stored as
//! its query's text, with table names rewritten so that they mean, read in the view's
//! database, what they meant when the view was created (`normalize_tables`); reading a
//! view binds that query as a derived table (`Binder::view_query`). Views are read-only,
//! as in TiDB.

use std::ops::ControlFlow;

use sqlparser::ast::{self, VisitMut, VisitorMut};
use strata_common::{Code, Error, Result, Value};

use crate::binder::{split_name, Binder, SessionInfo};
use crate::catalog::ViewInfo;
use crate::result::QueryResult;
use crate::session::Engine;

/// Rewrites the table names of `q` for storage in a view of database `view_db`, created
/// while `current` was the current database: a name without a database gets `current`
/// when that is another database; a name in `view_db` loses its qualifier (it resolves
/// there when read, so a dump of the view restores into a database of another name).
/// Names of CTEs are left alone.
fn normalize_tables(q: &mut ast::Query, view_db: &str, current: Option<&str>) {
    struct Ctes(Vec<String>);
    impl VisitorMut for Ctes {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
            if let Some(with) = &q.with {
                self.0.extend(with.cte_tables.iter().map(|c| c.alias.name.value.to_ascii_lowercase()));
            }
            ControlFlow::Continue(())
        }
    }
    struct Normalize<'a> {
        view_db: &'a str,
        current: Option<&'a str>,
        ctes: Vec<String>,
    }
    impl VisitorMut for Normalize<'_> {
        type Break = ();
        fn pre_visit_relation(&mut self, name: &mut ast::ObjectName) -> ControlFlow<()> {
            let part = |i: usize| name.0.get(i).and_then(|p| p.as_ident()).map(|i| i.value.clone());
            match name.0.len() {
                1 => {
                    let bare = part(0).unwrap_or_default().to_ascii_lowercase();
                    if let Some(cur) = self.current.filter(|c| !c.eq_ignore_ascii_case(self.view_db)) {
                        if !self.ctes.contains(&bare) {
                            name.0.insert(0, ast::ObjectNamePart::Identifier(ast::Ident::with_quote('`', cur)));
                        }
                    }
                }
                2 if part(0).is_some_and(|d| d.eq_ignore_ascii_case(self.view_db)) => {
                    name.0.remove(0);
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let mut ctes = Ctes(Vec::new());
    let _ = q.visit(&mut ctes);
    let _ = q.visit(&mut Normalize { view_db, current, ctes: ctes.0 });
}

/// Backquotes an identifier the way SHOW CREATE prints it.
fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `user`@`host` from Strata's `user@host` account text.
fn definer_text(account: &str) -> String {
    let (u, h) = account.rsplit_once('@').unwrap_or((account, "%"));
    format!("{}@{}", quote(u), quote(h))
}

/// The text of a definer written in the statement (`DEFINER = user@host`).
fn given_definer(g: &ast::GranteeName) -> String {
    match g {
        ast::GranteeName::UserHost { user, host } => format!("{}@{}", quote(&user.value), quote(&host.value)),
        ast::GranteeName::ObjectName(n) => {
            let (_, name) = split_name(n).unwrap_or((None, n.to_string()));
            format!("{}@{}", quote(&name), quote("%"))
        }
    }
}

/// The SHOW CREATE VIEW text of a view.
pub fn create_view_sql(v: &ViewInfo) -> String {
    let cols = if v.columns.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.columns.iter().map(|c| quote(c)).collect::<Vec<_>>().join(","))
    };
    let check = match v.check_option.as_str() {
        "CASCADED" => " WITH CASCADED CHECK OPTION",
        "LOCAL" => " WITH LOCAL CHECK OPTION",
        _ => "",
    };
    format!(
        "CREATE ALGORITHM={} DEFINER={} SQL SECURITY {} VIEW {}{} AS {}{}",
        v.algorithm,
        v.definer,
        v.security,
        quote(&v.name),
        cols,
        v.query,
        check
    )
}

impl Engine {
    /// CREATE [OR REPLACE] VIEW.
    pub async fn create_view(&self, cv: &ast::CreateView, info: &SessionInfo) -> Result<QueryResult> {
        if cv.materialized || cv.temporary || cv.or_alter || cv.to.is_some() {
            return Err(Error::unsupported("this form of CREATE VIEW"));
        }
        let _g = self.catalog.ddl_lock().await;
        let (db, name) = split_name(&cv.name)?;
        let db = db.or_else(|| info.db.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))?;
        if !self.catalog.has_database(&db) {
            return Err(Error::user(Code::BadDb, format!("Unknown database '{db}'")));
        }
        if name.is_empty() || name.len() > 64 || name.ends_with(' ') {
            return Err(Error::user(Code::WrongTableName, format!("Incorrect table name '{name}'")));
        }
        if self.catalog.try_table(&db, &name).is_some() {
            return Err(Error::user(Code::TableExists, format!("Table '{name}' already exists")));
        }
        let existing = self.catalog.try_view(&db, &name);
        if existing.is_some() && !cv.or_replace {
            if cv.if_not_exists {
                return Ok(QueryResult::ok_with_warning(
                    0,
                    Code::TableExists,
                    format!("Table '{name}' already exists"),
                ));
            }
            return Err(Error::user(Code::TableExists, format!("Table '{name}' already exists")));
        }
        let columns: Vec<String> = cv.columns.iter().map(|c| c.name.value.clone()).collect();
        for (i, c) in columns.iter().enumerate() {
            if columns[..i].iter().any(|p| p.eq_ignore_ascii_case(c)) {
                return Err(Error::user(Code::DupFieldName, format!("Duplicate column name '{c}'")));
            }
        }
        let mut query = (*cv.query).clone();
        normalize_tables(&mut query, &db, info.db.as_deref());
        let text = query.to_string();
        let params = cv.params.as_ref();
        let view = ViewInfo {
            db: db.clone(),
            name: name.clone(),
            columns: columns.clone(),
            query: text,
            definer: params
                .and_then(|p| p.definer.as_ref())
                .map(given_definer)
                .unwrap_or_else(|| definer_text(&info.user)),
            security: match params.and_then(|p| p.security.as_ref()) {
                Some(ast::CreateViewSecurity::Invoker) => "INVOKER".into(),
                _ => "DEFINER".into(),
            },
            algorithm: params.and_then(|p| p.algorithm.as_ref()).map(|a| a.to_string()).unwrap_or("UNDEFINED".into()),
            check_option: "NONE".into(),
        };
        // The query must bind now: its tables and columns exist, the column list fits, and
        // it does not read the view itself.
        let mut binder = Binder::new(&self.catalog, info);
        let (_, cols) = binder.bind_view_query(&view)?;
        if !columns.is_empty() && columns.len() != cols.len() {
            return Err(Error::user(
                Code::ViewWrongList,
                "In definition of view, derived table or common table expression, SELECT list and column names list have different column counts",
            ));
        }
        if columns.is_empty() {
            for (i, c) in cols.iter().enumerate() {
                if cols[..i].iter().any(|p| p.name.eq_ignore_ascii_case(&c.name)) {
                    return Err(Error::user(Code::DupFieldName, format!("Duplicate column name '{}'", c.name)));
                }
            }
        }
        if refers_to(&query, &view.db, &view.name) {
            return Err(Error::user(
                Code::ViewRecursive,
                format!("`{}`.`{}` contains view recursion", view.db, view.name),
            ));
        }
        self.catalog.put_view(view).await?;
        Ok(QueryResult::ok(0))
    }

    /// DROP VIEW [IF EXISTS] v, ...
    pub async fn drop_views(
        &self,
        names: &[ast::ObjectName],
        if_exists: bool,
        current_db: &Option<String>,
    ) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        let mut missing = Vec::new();
        let mut found = Vec::new();
        for n in names {
            let (db, v) = split_name(n)?;
            let db = self.db_or_current(db, current_db)?;
            if self.catalog.try_table(&db, &v).is_some() {
                return Err(Error::user(Code::WrongObject, format!("'{db}.{v}' is not VIEW")));
            }
            match self.catalog.try_view(&db, &v) {
                Some(view) => found.push(view),
                None => missing.push(format!("{db}.{v}")),
            }
        }
        crate::ddl::check_missing(&missing, if_exists)?;
        for v in found {
            self.catalog.remove_view(&v.db, &v.name).await?;
        }
        Ok(crate::ddl::dropped(&missing))
    }
}

/// Whether `q` (normalized for a view in `db`) names the table `db`.`name`.
fn refers_to(q: &ast::Query, db: &str, name: &str) -> bool {
    ast::visit_relations(q, |n: &ast::ObjectName| match split_name(n) {
        Ok((d, t)) if d.as_deref().is_none_or(|d| d.eq_ignore_ascii_case(db)) && t.eq_ignore_ascii_case(name) => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// SHOW CREATE VIEW (and SHOW CREATE TABLE of a view) rows.
pub fn show_create_view(v: &ViewInfo) -> QueryResult {
    QueryResult::text_rows(
        &["View", "Create View", "character_set_client", "collation_connection"],
        vec![vec![
            Value::str(v.name.clone()),
            Value::str(create_view_sql(v)),
            Value::str("utf8mb4"),
            Value::str("utf8mb4_bin"),
        ]],
    )
}

/// DESCRIBE / SHOW (FULL) COLUMNS of a view: its columns as binding its query types them.
pub fn view_columns(
    catalog: &crate::catalog::Catalog,
    info: &SessionInfo,
    view: &ViewInfo,
    full: bool,
) -> Result<QueryResult> {
    let mut binder = Binder::new(catalog, info);
    let (_, cols) = binder.view_query(view)?;
    let rows = cols
        .iter()
        .map(|c| {
            let ty = c.ty.as_ref();
            let mut r = vec![
                Value::str(c.name.clone()),
                Value::str(ty.map(|t| t.sql_name()).unwrap_or_else(|| "binary(0)".into())),
            ];
            if full {
                r.push(if ty.is_some_and(|t| t.is_string() && !t.is_binary()) {
                    Value::str("utf8mb4_bin")
                } else {
                    Value::Null
                });
            }
            r.extend([Value::str(if c.not_null { "NO" } else { "YES" }), Value::str(""), Value::Null, Value::str("")]);
            if full {
                r.extend([Value::str("select"), Value::str("")]);
            }
            r
        })
        .collect();
    let names: &[&str] = if full {
        &["Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"]
    } else {
        &["Field", "Type", "Null", "Key", "Default", "Extra"]
    };
    Ok(QueryResult::text_rows(names, rows))
}
