"""PyMySQL against a running Strata: connect, DDL, prepared-style inserts and selects,
commit and rollback. The server address comes from STRATA_HOST / STRATA_PORT."""

import datetime
import decimal
import os
import sys

import pymysql


def connect(db=None):
    return pymysql.connect(
        host=os.environ.get("STRATA_HOST", "127.0.0.1"),
        port=int(os.environ["STRATA_PORT"]),
        user="root",
        password="",
        database=db,
        autocommit=True,
    )


def tls_check():
    """With STRATA_TLS_CA set, a TLS connection verified against that CA sees a cipher."""
    ca = os.environ.get("STRATA_TLS_CA")
    if not ca:
        return
    conn = pymysql.connect(
        host=os.environ.get("STRATA_HOST", "127.0.0.1"),
        port=int(os.environ["STRATA_PORT"]),
        user="root",
        password="",
        ssl={"ca": ca},
    )
    with conn.cursor() as c:
        c.execute("SHOW STATUS LIKE 'Ssl_cipher'")
        row = c.fetchone()
        check(row is not None and row[1] != "", f"TLS cipher in use: {row}")
    conn.close()


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    conn = connect()
    with conn.cursor() as c:
        c.execute("DROP DATABASE IF EXISTS client_py")
        c.execute("CREATE DATABASE client_py")
    conn.select_db("client_py")
    with conn.cursor() as c:
        c.execute(
            "CREATE TABLE acct (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL, "
            "balance DECIMAL(12,2), opened DATETIME, note TEXT)"
        )
        rows = [
            (i, f"user{i}", decimal.Decimal(f"{i}.25"), datetime.datetime(2024, 1, i % 28 + 1, 12, 30), None)
            for i in range(1, 51)
        ]
        n = c.executemany("INSERT INTO acct (id, name, balance, opened, note) VALUES (%s, %s, %s, %s, %s)", rows)
        check(n == 50, f"executemany inserted {n} rows")

        c.execute("SELECT id, name, balance, opened, note FROM acct WHERE id = %s", (7,))
        row = c.fetchone()
        check(row == (7, "user7", decimal.Decimal("7.25"), datetime.datetime(2024, 1, 8, 12, 30), None), f"row {row}")
        names = [d[0] for d in c.description]
        check(names == ["id", "name", "balance", "opened", "note"], f"description {names}")

        c.execute("SELECT COUNT(*), SUM(balance) FROM acct WHERE id BETWEEN %s AND %s", (1, 10))
        cnt, total = c.fetchone()
        check(cnt == 10 and total == decimal.Decimal("57.50"), f"aggregate {cnt} {total}")

        c.execute("SELECT name FROM acct WHERE name LIKE %s ORDER BY id", ("user1%",))
        got = [r[0] for r in c.fetchall()]
        check(got[:2] == ["user1", "user10"] and len(got) == 11, f"LIKE {got}")

        # Quoting: a parameter with quotes and backslashes round-trips.
        tricky = "it's a \\ \"test\""
        c.execute("UPDATE acct SET note = %s WHERE id = %s", (tricky, 1))
        check(c.rowcount == 1, f"update rowcount {c.rowcount}")
        c.execute("SELECT note FROM acct WHERE id = 1")
        check(c.fetchone()[0] == tricky, "quoted string round trip")

    # Transactions: rollback discards, commit keeps.
    conn.autocommit(False)
    with conn.cursor() as c:
        c.execute("INSERT INTO acct (id, name) VALUES (%s, %s)", (100, "gone"))
        conn.rollback()
        c.execute("SELECT COUNT(*) FROM acct WHERE id = 100")
        check(c.fetchone()[0] == 0, "rolled back row is invisible")
        c.execute("INSERT INTO acct (id, name) VALUES (%s, %s)", (101, "kept"))
        c.execute("UPDATE acct SET balance = balance - 1 WHERE id = %s", (2,))
        conn.commit()
    other = connect("client_py")
    with other.cursor() as c:
        c.execute("SELECT name FROM acct WHERE id = 101")
        check(c.fetchone() == ("kept",), "committed row visible to another session")
        c.execute("SELECT balance FROM acct WHERE id = 2")
        check(c.fetchone()[0] == decimal.Decimal("1.25"), "committed update visible")

    # A duplicate key is a MySQL error 1062 that the driver maps to IntegrityError.
    conn.autocommit(True)
    with conn.cursor() as c:
        try:
            c.execute("INSERT INTO acct (id, name) VALUES (1, 'dup')")
            check(False, "duplicate insert succeeded")
        except pymysql.err.IntegrityError as e:
            check(e.args[0] == 1062, f"duplicate error {e.args}")
    tls_check()
    print("pymysql client: ok")


if __name__ == "__main__":
    main()
