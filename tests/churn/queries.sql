-- Churn program: sqlite3 on an in-memory database (the pages live in the
-- process's heap): tables from recursive CTEs, indexes, joins, grouping,
-- window functions, updates, deletes, each step printing aggregates.
--   sqlite3 :memory: '.read queries.sql' ['.read queries.sql']...
-- (each reading starts over).
PRAGMA cache_size = -262144;
DROP TABLE IF EXISTS u;
DROP TABLE IF EXISTS t;
CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, g INTEGER, s TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x, (x * 2654435761) % 1000003, x % 97, printf('%08x-%d', (x * x * 31) % 4294967291, x) FROM c;
CREATE INDEX t_v ON t(v);
CREATE INDEX t_s ON t(s);
SELECT 'rows', count(*), sum(v), sum(length(s)) FROM t;
SELECT 'groups', count(*), sum(m), sum(n) FROM (SELECT g, max(v) AS m, count(*) AS n FROM t GROUP BY g);
CREATE TABLE u AS SELECT id, v % 1000 AS k, substr(s, 1, 4) AS p FROM t WHERE id % 3 = 0;
CREATE INDEX u_k ON u(k);
SELECT 'join', count(*), sum(t.v % 1000) FROM t JOIN u ON u.k = t.v % 1000 WHERE t.id % 50 = 0;
SELECT 'window', sum(r), max(r) FROM (SELECT v - lag(v, 1, 0) OVER (PARTITION BY g ORDER BY id) AS r FROM t);
UPDATE t SET v = (v * 7 + id) % 1000003, s = s || '/' || g WHERE id % 2 = 0;
SELECT 'updated', sum(v), sum(length(s)), count(DISTINCT substr(s, 1, 3)) FROM t;
DELETE FROM t WHERE v % 5 = 0;
SELECT 'deleted', count(*), sum(v) FROM t;
SELECT 'like', count(*) FROM t WHERE s LIKE '%a%b%';
SELECT 'order', group_concat(id) FROM (SELECT id FROM t ORDER BY s DESC LIMIT 12);
SELECT 'integrity', quick_check FROM pragma_quick_check;
