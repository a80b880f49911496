package strata;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.LocalDateTime;

/**
 * Connector/J against a running Strata with the URL options performance-minded users set:
 * server-side prepared statements, a statement cache, and maxPerformance. Connects, creates a
 * table, runs prepared inserts (single and batched) and selects, reads result metadata, and
 * commits and rolls back a transaction. The address comes from STRATA_HOST / STRATA_PORT.
 */
public final class ClientTest {
    private static void check(boolean cond, String what) {
        if (!cond) {
            System.err.println("FAIL: " + what);
            System.exit(1);
        }
    }

    private static Connection connect(String db) throws SQLException {
        String host = System.getenv().getOrDefault("STRATA_HOST", "127.0.0.1");
        String url = "jdbc:mysql://" + host + ":" + System.getenv("STRATA_PORT") + "/" + db
                + "?useServerPrepStmts=true&cachePrepStmts=true&prepStmtCacheSize=1000"
                + "&prepStmtCacheSqlLimit=20480&useConfigs=maxPerformance&useSSL=false"
                + "&allowPublicKeyRetrieval=true";
        return DriverManager.getConnection(url, "root", "");
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = connect(""); Statement s = c.createStatement()) {
            s.execute("DROP DATABASE IF EXISTS client_java");
            s.execute("CREATE DATABASE client_java");
        }
        try (Connection c = connect("client_java")) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE orders (id INT NOT NULL, line INT NOT NULL, item VARCHAR(24) NOT NULL,"
                        + " amount DECIMAL(8,2), placed DATETIME, PRIMARY KEY (id, line))");
            }

            // Prepared inserts: one at a time, then a batch.
            LocalDateTime t0 = LocalDateTime.of(2024, 3, 4, 5, 6, 7);
            try (PreparedStatement ps = c.prepareStatement(
                    "INSERT INTO orders (id, line, item, amount, placed) VALUES (?, ?, ?, ?, ?)")) {
                for (int i = 1; i <= 20; i++) {
                    ps.setInt(1, i);
                    ps.setInt(2, 1);
                    ps.setString(3, "item-" + i);
                    ps.setBigDecimal(4, new BigDecimal(i + ".50"));
                    ps.setTimestamp(5, Timestamp.valueOf(t0.plusMinutes(i)));
                    check(ps.executeUpdate() == 1, "insert count");
                }
                for (int i = 1; i <= 20; i++) {
                    ps.setInt(1, i);
                    ps.setInt(2, 2);
                    ps.setString(3, "extra-" + i);
                    ps.setNull(4, Types.DECIMAL);
                    ps.setNull(5, Types.TIMESTAMP);
                    ps.addBatch();
                }
                int[] counts = ps.executeBatch();
                check(counts.length == 20, "batch size " + counts.length);
            }

            // Prepared select, with metadata read before and after execution.
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT id, item, amount, placed FROM orders WHERE id = ? AND line = ?")) {
                ResultSetMetaData pre = ps.getMetaData();
                check(pre != null && pre.getColumnCount() == 4, "metadata at prepare");
                check("item".equals(pre.getColumnName(2)), "column name at prepare: " + pre.getColumnName(2));
                for (int round = 0; round < 3; round++) { // the cached statement is re-executed
                    ps.setInt(1, 7);
                    ps.setInt(2, 1);
                    try (ResultSet rs = ps.executeQuery()) {
                        check(rs.next(), "row 7 found");
                        check(rs.getInt(1) == 7, "id");
                        check("item-7".equals(rs.getString(2)), "item " + rs.getString(2));
                        check(new BigDecimal("7.50").compareTo(rs.getBigDecimal(3)) == 0, "amount " + rs.getBigDecimal(3));
                        check(Timestamp.valueOf(t0.plusMinutes(7)).equals(rs.getTimestamp(4)), "placed " + rs.getTimestamp(4));
                        check(!rs.next(), "one row");
                        ResultSetMetaData md = rs.getMetaData();
                        check(md.getColumnType(3) == Types.DECIMAL, "DECIMAL type " + md.getColumnType(3));
                        check(md.getColumnType(1) == Types.INTEGER, "INTEGER type " + md.getColumnType(1));
                    }
                }
                ps.setInt(1, 3);
                ps.setInt(2, 2);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next(), "row (3,2)");
                    rs.getBigDecimal(3);
                    check(rs.wasNull(), "NULL amount");
                }
            }
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT COUNT(*), SUM(amount) FROM orders WHERE id BETWEEN ? AND ?")) {
                ps.setInt(1, 1);
                ps.setInt(2, 4);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next(), "aggregate row");
                    check(rs.getLong(1) == 8, "count " + rs.getLong(1));
                    check(new BigDecimal("12.00").compareTo(rs.getBigDecimal(2)) == 0, "sum " + rs.getBigDecimal(2));
                }
            }

            // Transactions.
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO orders (id, line, item) VALUES (?, ?, ?)")) {
                ps.setInt(1, 500);
                ps.setInt(2, 1);
                ps.setString(3, "gone");
                ps.executeUpdate();
                c.rollback();
                ps.setInt(1, 501);
                ps.setString(3, "kept");
                ps.executeUpdate();
                c.commit();
            }
            c.setAutoCommit(true);
            try (Connection other = connect("client_java"); Statement s = other.createStatement();
                    ResultSet rs = s.executeQuery("SELECT id FROM orders WHERE id >= 500 ORDER BY id")) {
                check(rs.next() && rs.getInt(1) == 501, "committed row visible");
                check(!rs.next(), "rolled back row invisible");
            }

            // Errors carry MySQL numbers and SQLSTATEs.
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO orders (id, line, item) VALUES (?, ?, ?)")) {
                ps.setInt(1, 1);
                ps.setInt(2, 1);
                ps.setString(3, "dup");
                ps.executeUpdate();
                check(false, "duplicate insert succeeded");
            } catch (SQLException e) {
                check(e.getErrorCode() == 1062 && "23000".equals(e.getSQLState()),
                        "duplicate error " + e.getErrorCode() + " " + e.getSQLState());
            }
        }
        // TLS: sslMode=REQUIRED encrypts without checking the certificate (the test's is
        // self-signed); the session sees a cipher.
        if (System.getenv("STRATA_TLS") != null) {
            String host = System.getenv().getOrDefault("STRATA_HOST", "127.0.0.1");
            String url = "jdbc:mysql://" + host + ":" + System.getenv("STRATA_PORT") + "/?sslMode=REQUIRED";
            try (Connection c = DriverManager.getConnection(url, "root", "");
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SHOW STATUS LIKE 'Ssl_cipher'")) {
                check(rs.next() && !rs.getString(2).isEmpty(), "TLS cipher in use");
            }
        }
        System.out.println("Connector/J client: ok");
    }
}
