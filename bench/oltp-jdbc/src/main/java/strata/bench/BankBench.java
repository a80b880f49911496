package strata.bench;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A read-heavy banking workload (the seed tuning walkthrough's shape): many small read-only
 * lookup tables and one hot table that is written, READ COMMITTED, 90% of statements
 * SELECT. Each business operation is one transaction of 9 SELECTs (five lookups by key,
 * two account reads, a branch read, a small range count on a lookup table) and one
 * UPDATE, every statement through a PreparedStatement that is closed after use, as
 * applications written against JDBC do.
 *
 * <p>It runs the five client configurations of issue 11 in turn against one server:
 * (1) useServerPrepStmts=false, (2) useServerPrepStmts=true, (3) plus the client-side
 * statement cache and useConfigs=maxPerformance, (4) plus tidb_rc_read_check_ts=ON, (5) plus
 * the lookup tables cached (ALTER TABLE .. CACHE). On a server without the TiDB features
 * (MariaDB: --server mariadb) scenarios 4 and 5 run as scenario 3. For each it prints
 * statements per second, transactions per second, the client's average statement latency
 * and, with --metrics (Strata's /metrics URL), the server's average parse / compile /
 * execute time per statement.
 *
 * <p>Usage: BankBench --url jdbc:mysql://127.0.0.1:4000 [--user root] [--password ""]
 * [--server strata|mariadb] [--threads 8] [--secs 30] [--warmup 5] [--metrics URL]
 * [--scenarios 1,2,3,4,5] [--no-prepare]
 */
public class BankBench {
    static final int LOOKUP_TABLES = 20;
    static final int LOOKUP_ROWS = 100;
    static final int ACCOUNTS = 10_000;
    static final int BRANCHES = 100;
    static final String DB = "bankbench";

    static final String[] SCENARIO_PARAMS = {
        "",
        "useServerPrepStmts=false",
        "useServerPrepStmts=true",
        "useServerPrepStmts=true&cachePrepStmts=true&prepStmtCacheSize=1000&prepStmtCacheSqlLimit=20480"
            + "&useConfigs=maxPerformance",
        "useServerPrepStmts=true&cachePrepStmts=true&prepStmtCacheSize=1000&prepStmtCacheSqlLimit=20480"
            + "&useConfigs=maxPerformance&sessionVariables=tidb_rc_read_check_ts=ON",
        "useServerPrepStmts=true&cachePrepStmts=true&prepStmtCacheSize=1000&prepStmtCacheSqlLimit=20480"
            + "&useConfigs=maxPerformance&sessionVariables=tidb_rc_read_check_ts=ON",
    };

    static String url = "jdbc:mysql://127.0.0.1:4000";
    static String user = "root";
    static String password = "";
    static String server = "strata";
    static String metrics = null;
    static int threads = 8;
    static int secs = 30;
    static int warmup = 5;

    public static void main(String[] args) throws Exception {
        List<Integer> scenarios = List.of(1, 2, 3, 4, 5);
        boolean prepare = true;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--url" -> url = args[++i];
                case "--user" -> user = args[++i];
                case "--password" -> password = args[++i];
                case "--server" -> server = args[++i];
                case "--metrics" -> metrics = args[++i];
                case "--threads" -> threads = Integer.parseInt(args[++i]);
                case "--secs" -> secs = Integer.parseInt(args[++i]);
                case "--warmup" -> warmup = Integer.parseInt(args[++i]);
                case "--no-prepare" -> prepare = false;
                case "--scenarios" -> {
                    List<Integer> s = new ArrayList<>();
                    for (String p : args[++i].split(",")) s.add(Integer.parseInt(p.trim()));
                    scenarios = s;
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        boolean strata = server.equals("strata");
        if (prepare) prepare();
        System.out.printf("server=%s threads=%d secs=%d%n", server, threads, secs);
        System.out.println("| scenario | QPS | TPS | avg latency (ms) | parse (us) | compile (us) | execute (us) |");
        System.out.println("|---|---:|---:|---:|---:|---:|---:|");
        for (int s : scenarios) {
            boolean tidbFeatures = strata && s >= 4;
            String params = tidbFeatures ? SCENARIO_PARAMS[s] : SCENARIO_PARAMS[Math.min(s, 3)];
            setCached(strata && s >= 5);
            Result r = run(url + "/" + DB + "?" + params);
            System.out.printf("| %d | %.0f | %.0f | %.3f | %s | %s | %s |%n", s, r.qps, r.tps, r.latencyMs,
                fmt(r.phases.get("parse")), fmt(r.phases.get("compile")), fmt(r.phases.get("execute")));
        }
        setCached(false);
    }

    static String fmt(Double v) {
        return v == null ? "-" : String.format("%.1f", v);
    }

    static Connection admin() throws SQLException {
        return DriverManager.getConnection(url + "/?useSSL=false&allowPublicKeyRetrieval=true", user, password);
    }

    static void prepare() throws SQLException {
        try (Connection c = admin(); Statement st = c.createStatement()) {
            st.execute("DROP DATABASE IF EXISTS " + DB);
            st.execute("CREATE DATABASE " + DB);
            st.execute("USE " + DB);
            for (int t = 1; t <= LOOKUP_TABLES; t++) {
                st.execute(String.format("CREATE TABLE lk_%02d (id INT PRIMARY KEY, code VARCHAR(16) NOT NULL, "
                    + "name VARCHAR(64) NOT NULL, rate DECIMAL(10,4) NOT NULL, KEY code_idx (code))", t));
                StringBuilder sb = new StringBuilder(String.format("INSERT INTO lk_%02d VALUES ", t));
                for (int i = 1; i <= LOOKUP_ROWS; i++) {
                    if (i > 1) sb.append(',');
                    sb.append(String.format("(%d,'C%02d%03d','lookup %d of table %d',%d.%04d)", i, t, i, i, t, i % 50,
                        (i * 37) % 10000));
                }
                st.execute(sb.toString());
            }
            st.execute("CREATE TABLE branch (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, city VARCHAR(32) NOT NULL)");
            StringBuilder b = new StringBuilder("INSERT INTO branch VALUES ");
            for (int i = 1; i <= BRANCHES; i++) {
                if (i > 1) b.append(',');
                b.append(String.format("(%d,'branch %d','city %d')", i, i, i % 17));
            }
            st.execute(b.toString());
            st.execute("CREATE TABLE account (id INT PRIMARY KEY, branch_id INT NOT NULL, owner VARCHAR(64) NOT NULL, "
                + "balance DECIMAL(16,2) NOT NULL, KEY branch_idx (branch_id))");
            for (int start = 1; start <= ACCOUNTS; start += 1000) {
                StringBuilder a = new StringBuilder("INSERT INTO account VALUES ");
                for (int i = start; i < start + 1000 && i <= ACCOUNTS; i++) {
                    if (i > start) a.append(',');
                    a.append(String.format("(%d,%d,'owner %d',%d.00)", i, 1 + i % BRANCHES, i, 1000 + i % 500));
                }
                st.execute(a.toString());
            }
        }
    }

    /** ALTER TABLE .. CACHE / NOCACHE on the read-only tables (Strata only). */
    static void setCached(boolean cached) throws SQLException {
        if (!server.equals("strata")) return;
        try (Connection c = admin(); Statement st = c.createStatement()) {
            for (int t = 1; t <= LOOKUP_TABLES; t++) {
                st.execute(String.format("ALTER TABLE %s.lk_%02d %s", DB, t, cached ? "CACHE" : "NOCACHE"));
            }
            st.execute(String.format("ALTER TABLE %s.branch %s", DB, cached ? "CACHE" : "NOCACHE"));
        }
    }

    record Result(double qps, double tps, double latencyMs, Map<String, Double> phases) {}

    static Result run(String jdbcUrl) throws Exception {
        AtomicBoolean measuring = new AtomicBoolean(false);
        AtomicBoolean stop = new AtomicBoolean(false);
        AtomicLong statements = new AtomicLong();
        AtomicLong txns = new AtomicLong();
        AtomicLong nanos = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        List<Thread> workers = new ArrayList<>();
        for (int w = 0; w < threads; w++) {
            Thread t = new Thread(() -> {
                try (Connection c = DriverManager.getConnection(jdbcUrl, user, password)) {
                    c.setAutoCommit(false);
                    c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
                    while (!stop.get()) {
                        long[] stmtNanos = new long[1];
                        try {
                            int n = operation(c, stmtNanos);
                            if (measuring.get()) {
                                statements.addAndGet(n);
                                txns.incrementAndGet();
                                nanos.addAndGet(stmtNanos[0]);
                            }
                        } catch (SQLException e) {
                            errors.incrementAndGet();
                            try {
                                c.rollback();
                            } catch (SQLException ignored) {
                                // the next operation reports a broken connection
                            }
                        }
                    }
                } catch (SQLException e) {
                    throw new RuntimeException(e);
                }
            });
            t.start();
            workers.add(t);
        }
        Thread.sleep(warmup * 1000L);
        Map<String, double[]> before = scrape();
        measuring.set(true);
        long t0 = System.nanoTime();
        Thread.sleep(secs * 1000L);
        measuring.set(false);
        double elapsed = (System.nanoTime() - t0) / 1e9;
        Map<String, double[]> after = scrape();
        stop.set(true);
        for (Thread t : workers) t.join();
        if (errors.get() > 0) System.err.printf("%d operations failed and were rolled back%n", errors.get());
        Map<String, Double> phases = new HashMap<>();
        for (String p : List.of("parse", "compile", "execute")) {
            double[] b = before.get(p), a = after.get(p);
            if (a != null && b != null && a[1] > b[1]) phases.put(p, 1e6 * (a[0] - b[0]) / (a[1] - b[1]));
        }
        long n = Math.max(1, statements.get());
        return new Result(statements.get() / elapsed, txns.get() / elapsed, nanos.get() / 1e6 / n, phases);
    }

    /** One transaction: 9 SELECTs and 1 UPDATE (90% reads); returns the statements run. */
    static int operation(Connection c, long[] nanos) throws SQLException {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        for (int k = 0; k < 5; k++) {
            int table = 1 + r.nextInt(LOOKUP_TABLES);
            query(c, nanos, String.format("SELECT code, name, rate FROM lk_%02d WHERE id = ?", table), 1 + r.nextInt(LOOKUP_ROWS));
        }
        int from = 1 + r.nextInt(ACCOUNTS);
        int to = 1 + r.nextInt(ACCOUNTS);
        query(c, nanos, "SELECT balance, branch_id FROM account WHERE id = ?", from);
        query(c, nanos, "SELECT balance, branch_id FROM account WHERE id = ?", to);
        query(c, nanos, "SELECT name, city FROM branch WHERE id = ?", 1 + r.nextInt(BRANCHES));
        int table = 1 + r.nextInt(LOOKUP_TABLES);
        query(c, nanos, String.format("SELECT COUNT(*) FROM lk_%02d WHERE id BETWEEN ? AND ? + 9", table),
            1 + r.nextInt(LOOKUP_ROWS - 10));
        long t = System.nanoTime();
        try (PreparedStatement ps = c.prepareStatement("UPDATE account SET balance = balance + 1 WHERE id = ?")) {
            ps.setInt(1, from);
            ps.executeUpdate();
        }
        c.commit();
        nanos[0] += System.nanoTime() - t;
        return 10;
    }

    static void query(Connection c, long[] nanos, String sql, int id) throws SQLException {
        long t = System.nanoTime();
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            int params = (int) sql.chars().filter(ch -> ch == '?').count();
            for (int i = 1; i <= params; i++) ps.setInt(i, id);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    rs.getString(1);
                }
            }
        }
        nanos[0] += System.nanoTime() - t;
    }

    /** Strata's statement phase histograms: phase -> {sum seconds, count}. */
    static Map<String, double[]> scrape() {
        Map<String, double[]> out = new HashMap<>();
        if (metrics == null) return out;
        try {
            HttpResponse<String> resp = HttpClient.newHttpClient()
                .send(HttpRequest.newBuilder(URI.create(metrics)).build(), HttpResponse.BodyHandlers.ofString());
            for (String line : resp.body().split("\n")) {
                for (String p : List.of("parse", "compile", "execute")) {
                    String label = "{phase=\"" + p + "\"} ";
                    if (line.startsWith("strata_session_statement_duration_seconds_sum" + label)) {
                        out.computeIfAbsent(p, k -> new double[2])[0] = Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                    } else if (line.startsWith("strata_session_statement_duration_seconds_count" + label)) {
                        out.computeIfAbsent(p, k -> new double[2])[1] = Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                    }
                }
            }
        } catch (Exception e) {
            System.err.println("cannot read " + metrics + ": " + e);
        }
        return out;
    }
}
