-- Retention deletes card_execution rows by age (src/db/retention.ts). A BRIN index on started_at
-- finds them without scanning the table: rows arrive in started_at order, so the index stays a
-- few pages per gigabyte and costs inserts next to nothing (a B-tree would cost every insert).
CREATE INDEX card_execution_started_brin ON card_execution USING brin (started_at);
