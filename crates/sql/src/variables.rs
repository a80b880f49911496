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
        ("performance_schema", i(0)),
        ("query_cache_size", i(0)),
        ("query_cache_type", s("OFF")),
        ("sql_auto_is_null", i(0)),
        ("sql_mode", s("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")),
        ("sql_select_limit", Value::UInt(u64::MAX)),
        ("system_time_zone", s("UTC")),
        ("tidb_mem_quota_query", i(crate::context::DEFAULT_MEM_QUOTA as i64)),
        ("tidb_txn_mode", s("pessimistic")),
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
