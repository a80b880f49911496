// go-sql-driver/mysql against a running Strata: connect, DDL, server-side prepared inserts
// and selects, commit and rollback. The server address comes from STRATA_HOST / STRATA_PORT.
package main

import (
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
)

func check(cond bool, format string, args ...any) {
	if !cond {
		fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
		os.Exit(1)
	}
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func open(db string) *sql.DB {
	host := os.Getenv("STRATA_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	dsn := fmt.Sprintf("root@tcp(%s:%s)/%s?parseTime=true", host, os.Getenv("STRATA_PORT"), db)
	d, err := sql.Open("mysql", dsn)
	must(err, "open")
	d.SetMaxOpenConns(4)
	return d
}

func main() {
	admin := open("")
	_, err := admin.Exec("DROP DATABASE IF EXISTS client_go")
	must(err, "drop database")
	_, err = admin.Exec("CREATE DATABASE client_go")
	must(err, "create database")
	admin.Close()

	db := open("client_go")
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE item (id BIGINT PRIMARY KEY, name VARCHAR(32) NOT NULL,
		price DECIMAL(10,2), qty INT UNSIGNED, seen DATETIME, KEY idx_name (name))`)
	must(err, "create table")

	// Server-side prepared statements (the driver's default without interpolateParams).
	ins, err := db.Prepare("INSERT INTO item (id, name, price, qty, seen) VALUES (?, ?, ?, ?, ?)")
	must(err, "prepare insert")
	base := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	for i := 1; i <= 100; i++ {
		res, err := ins.Exec(i, fmt.Sprintf("item%03d", i), fmt.Sprintf("%d.99", i), uint32(i*3), base.Add(time.Duration(i)*time.Hour))
		must(err, "insert")
		n, _ := res.RowsAffected()
		check(n == 1, "rows affected %d", n)
	}
	must(ins.Close(), "close insert")

	sel, err := db.Prepare("SELECT id, name, price, qty, seen FROM item WHERE id = ?")
	must(err, "prepare select")
	var (
		id    int64
		name  string
		price string
		qty   uint32
		seen  time.Time
	)
	must(sel.QueryRow(42).Scan(&id, &name, &price, &qty, &seen), "select 42")
	check(id == 42 && name == "item042" && price == "42.99" && qty == 126, "row %d %s %s %d", id, name, price, qty)
	check(seen.Equal(base.Add(42*time.Hour)), "datetime %v", seen)
	must(sel.Close(), "close select")

	rows, err := db.Query("SELECT name FROM item WHERE name >= ? AND qty < ? ORDER BY name LIMIT ?", "item090", 285, 100)
	must(err, "range query")
	var names []string
	for rows.Next() {
		var n string
		must(rows.Scan(&n), "scan")
		names = append(names, n)
	}
	must(rows.Err(), "rows")
	check(len(names) == 5 && names[0] == "item090" && names[4] == "item094", "range rows %v", names)

	// A NULL parameter and a NULL result.
	_, err = db.Exec("UPDATE item SET price = ? WHERE id = ?", nil, 1)
	must(err, "update null")
	var p sql.NullString
	must(db.QueryRow("SELECT price FROM item WHERE id = ?", 1).Scan(&p), "select null")
	check(!p.Valid, "price should be NULL, got %v", p)

	// Rollback discards, commit keeps.
	tx, err := db.Begin()
	must(err, "begin")
	_, err = tx.Exec("INSERT INTO item (id, name) VALUES (?, ?)", 1000, "gone")
	must(err, "insert in tx")
	must(tx.Rollback(), "rollback")
	var cnt int
	must(db.QueryRow("SELECT COUNT(*) FROM item WHERE id = ?", 1000).Scan(&cnt), "count")
	check(cnt == 0, "rolled back row visible")

	tx, err = db.Begin()
	must(err, "begin")
	_, err = tx.Exec("INSERT INTO item (id, name) VALUES (?, ?)", 1001, "kept")
	must(err, "insert in tx")
	_, err = tx.Exec("UPDATE item SET qty = qty + ? WHERE id = ?", 1, 2)
	must(err, "update in tx")
	must(tx.Commit(), "commit")
	must(db.QueryRow("SELECT COUNT(*) FROM item WHERE id = ?", 1001).Scan(&cnt), "count")
	check(cnt == 1, "committed row missing")
	must(db.QueryRow("SELECT qty FROM item WHERE id = ?", 2).Scan(&qty), "qty")
	check(qty == 7, "qty %d", qty)

	// Errors carry MySQL numbers.
	_, err = db.Exec("INSERT INTO item (id, name) VALUES (?, ?)", 1, "dup")
	me, ok := err.(*mysql.MySQLError)
	check(ok && me.Number == 1062, "duplicate key error %v", err)
	_, err = db.Query("SELECT nope FROM item WHERE id = ?", 1)
	me, ok = err.(*mysql.MySQLError)
	check(ok && me.Number == 1054, "unknown column error %v", err)

	// TLS: tls=skip-verify encrypts without checking the (self-signed) certificate.
	if os.Getenv("STRATA_TLS") != "" {
		host := os.Getenv("STRATA_HOST")
		if host == "" {
			host = "127.0.0.1"
		}
		t, err := sql.Open("mysql", fmt.Sprintf("root@tcp(%s:%s)/?tls=skip-verify", host, os.Getenv("STRATA_PORT")))
		must(err, "open tls")
		var name, cipher string
		must(t.QueryRow("SHOW STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher), "tls status")
		if cipher == "" {
			fmt.Fprintln(os.Stderr, "FAIL: no TLS cipher in use")
			os.Exit(1)
		}
		t.Close()
	}
	fmt.Println("go-sql-driver client: ok")
}
