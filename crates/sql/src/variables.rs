//! System variables: the values drivers and tools read at connect time (`SELECT @@...`,
//! `SHOW VARIABLES`) and the ones Strata acts on (autocommit, isolation, lock wait timeout,
//! transaction mode). Unknown variables set by clients are accepted with a warning.

use std::collections::BTreeMap;

use strata_common::Value;

/// Default values of known variables (session scope unless set).
pub fn defaults() -> BTreeMap<String, Value> {
    let s = |v: &str| Value::str(v);
    let i = Value::Int;
    let pairs: Vec<(&str, Value)> = vec![
        ("auto_increment_increment", i(1)),
        ("auto_increment_offset", i(1)),
        ("autocommit", i(1)),
        ("character_set_client", s("utf8mb4")),
        ("character_set_connection", s("utf8mb4")),
        ("character_set_database", s("utf8mb4")),
        ("character_set_results", s("utf8mb4")),
        ("character_set_server", s("utf8mb4")),
        ("character_set_system", s("utf8")),
        ("collation_connection", s("utf8mb4_bin")),
        ("collation_database", s("utf8mb4_bin")),
        ("collation_server", s("utf8mb4_bin")),
        ("cte_max_recursion_depth", i(1000)),
        ("default_storage_engine", s("InnoDB")),
        ("div_precision_increment", i(4)),
        ("foreign_key_checks", i(1)),
        ("group_concat_max_len", i(1024)),
        ("have_ssl", s("DISABLED")),
        ("have_openssl", s("DISABLED")),
        ("require_secure_transport", i(0)),
        ("ssl_cert", s("")),
        ("ssl_key", s("")),
        ("tls_version", s("TLSv1.2,TLSv1.3")),
        ("hostname", s("localhost")),
        ("init_connect", s("")),
        ("local_infile", i(1)),
        ("long_query_time", Value::Double(10.0)),
        ("max_error_count", i(1024)),
        ("secure_file_priv", Value::Null),
        ("slow_query_log", i(0)),
        // The server's start-up puts it in the data directory.
        ("slow_query_log_file", s("strata-slow.log")),
        ("innodb_lock_wait_timeout", i(50)),
        ("lock_wait_timeout", i(31_536_000)),
        ("interactive_timeout", i(28800)),
        ("license", s("Apache-2.0")),
        ("lower_case_table_names", i(2)),
        ("max_allowed_packet", i(67_108_864)),
        ("max_execution_time", i(0)),
        ("max_prepared_stmt_count", i(16_382)),
        ("max_connections", i(151)),
        ("connect_timeout", i(10)),
        ("net_buffer_length", i(16384)),
        ("net_read_timeout", i(30)),
        ("net_write_timeout", i(60)),
        ("optimizer_trace", s("enabled=off,one_line=off")),
        ("optimizer_trace_max_mem_size", i(1_048_576)),
        ("performance_schema", i(0)),
        ("query_cache_size", i(0)),
        ("query_cache_type", s("OFF")),
        ("sql_auto_is_null", i(0)),
        // Dumps save and restore these (`SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, ...`):
        // accepted and shown; Strata checks unique keys and logs nothing either way.
        ("sql_log_bin", i(1)),
        ("sql_notes", i(1)),
        ("unique_checks", i(1)),
        ("sql_mode", s("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")),
        ("sql_select_limit", Value::UInt(u64::MAX)),
        ("system_time_zone", s("UTC")),
        ("tidb_auto_analyze_ratio", Value::Double(0.5)),
        ("tidb_build_stats_concurrency", i(2)),
        ("tidb_default_string_match_selectivity", Value::Double(crate::stats::DEFAULT_LIKE_SELECTIVITY)),
        ("tidb_distsql_scan_concurrency", i(15)),
        ("tidb_enable_1pc", i(1)),
        ("tidb_enable_auto_analyze", i(1)),
        ("tidb_index_serial_scan_concurrency", i(1)),
        ("tidb_isolation_read_engines", s(crate::column::ReadEngines::DEFAULT)),
        ("tidb_mem_quota_query", i(crate::context::DEFAULT_MEM_QUOTA as i64)),
        ("tidb_txn_mode", s("pessimistic")),
        ("tidb_enable_prepared_plan_cache", i(1)),
        ("tidb_enable_non_prepared_plan_cache", i(1)),
        ("tidb_prepared_plan_cache_size", i(100)),
        ("tidb_ignore_prepared_cache_close_stmt", i(0)),
        ("tidb_enable_stmt_summary", i(1)),
        ("tidb_rc_read_check_ts", i(0)),
        ("tidb_stmt_summary_refresh_interval", i(1800)),
        ("tidb_stmt_summary_history_size", i(24)),
        ("tidb_stmt_summary_max_stmt_count", i(3000)),
        ("tidb_stmt_summary_max_sql_length", i(4096)),
        ("last_plan_from_cache", i(0)),
        ("time_zone", s("SYSTEM")),
        ("transaction_isolation", s("REPEATABLE-READ")),
        ("transaction_read_only", i(0)),
        ("tx_isolation", s("REPEATABLE-READ")),
        ("tx_read_only", i(0)),
        ("version", s(crate::VERSION)),
        ("version_comment", s("Strata, a MySQL-compatible HTAP database")),
        ("version_compile_machine", s("x86_64")),
        ("version_compile_os", s("Linux")),
        ("wait_timeout", i(28800)),
        ("warning_count", i(0)),
        ("error_count", i(0)),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Where a system variable lives, as in MySQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Server-wide only: `SET GLOBAL`; a session reads the global value.
    Global,
    /// Per session only: `SET GLOBAL` is 1228.
    Session,
    /// A global default each new session copies, and a session value.
    Both,
}

/// Variables with only a global value.
const GLOBAL_ONLY: &[&str] = &[
    "character_set_system",
    "connect_timeout",
    "have_openssl",
    "have_ssl",
    "hostname",
    "init_connect",
    "license",
    "local_infile",
    "lower_case_table_names",
    "max_connections",
    "max_prepared_stmt_count",
    "performance_schema",
    "query_cache_size",
    "require_secure_transport",
    "secure_file_priv",
    "slow_query_log",
    "slow_query_log_file",
    "ssl_cert",
    "ssl_key",
    "system_time_zone",
    "tidb_auto_analyze_ratio",
    "tidb_enable_auto_analyze",
    "tidb_enable_stmt_summary",
    "tidb_stmt_summary_refresh_interval",
    "tidb_stmt_summary_history_size",
    "tidb_stmt_summary_max_stmt_count",
    "tidb_stmt_summary_max_sql_length",
    "tidb_server_memory_limit",
    "tls_version",
    "version",
    "version_comment",
    "version_compile_machine",
    "version_compile_os",
];

/// Variables with only a session value.
const SESSION_ONLY: &[&str] =
    &["error_count", "warning_count", "last_insert_id", "insert_id", "timestamp", "last_plan_from_cache"];

/// Variables no SET may change (1238).
const READ_ONLY: &[&str] = &[
    "character_set_system",
    "last_plan_from_cache",
    "error_count",
    "have_openssl",
    "have_ssl",
    "hostname",
    "license",
    "lower_case_table_names",
    "performance_schema",
    "secure_file_priv",
    "ssl_cert",
    "ssl_key",
    "system_time_zone",
    "tls_version",
    "version",
    "version_comment",
    "version_compile_machine",
    "version_compile_os",
    "warning_count",
];

/// The scope of a (lower-case) variable; unknown ones are treated as having both values.
pub fn scope(name: &str) -> Scope {
    if GLOBAL_ONLY.contains(&name) {
        Scope::Global
    } else if SESSION_ONLY.contains(&name) {
        Scope::Session
    } else {
        Scope::Both
    }
}

/// Whether a (lower-case) variable is read-only.
pub fn is_read_only(name: &str) -> bool {
    READ_ONLY.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_global_only_or_read_only_variable_has_a_default() {
        let d = defaults();
        for name in GLOBAL_ONLY.iter().chain(READ_ONLY) {
            let known = d.contains_key(*name) || ["init_connect", "tidb_server_memory_limit"].contains(name);
            assert!(known, "{name} has no default");
        }
        assert_eq!(scope("max_connections"), Scope::Global);
        assert_eq!(scope("sql_mode"), Scope::Both);
        assert_eq!(scope("warning_count"), Scope::Session);
        assert!(is_read_only("version") && !is_read_only("sql_mode"));
    }
}
