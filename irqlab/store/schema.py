"""Database schema and its migrations (docs/formats.md section 3 keeps the history).

Each version is a list of statements applied in order to a database at the previous
version; a new database gets them all. Never edit a released version: add the next one.
"""

SCHEMA_VERSION = 5

MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS meta (
            key VARCHAR PRIMARY KEY,
            value VARCHAR NOT NULL)""",
        "CREATE SEQUENCE IF NOT EXISTS run_id_seq START 1",
        """CREATE TABLE IF NOT EXISTS runs (
            run_id BIGINT PRIMARY KEY DEFAULT nextval('run_id_seq'),
            name VARCHAR NOT NULL,
            target VARCHAR NOT NULL,
            arch VARCHAR,
            accel VARCHAR,
            emulated BOOLEAN,
            status VARCHAR NOT NULL,
            started_at TIMESTAMP NOT NULL,
            ended_at TIMESTAMP,
            tick_hz BIGINT,
            period_ns BIGINT,
            threshold_ns BIGINT,
            message VARCHAR,
            params JSON,
            metadata JSON,
            summary JSON)""",
        """CREATE TABLE IF NOT EXISTS windows (
            run_id BIGINT NOT NULL,
            idx INTEGER NOT NULL,
            start_s DOUBLE NOT NULL,
            samples BIGINT NOT NULL,
            mean_ns BIGINT,
            stddev_ns BIGINT,
            min_ns BIGINT,
            max_ns BIGINT,
            above_threshold BIGINT NOT NULL,
            global_min_ns BIGINT,
            global_max_ns BIGINT,
            PRIMARY KEY (run_id, idx))""",
        """CREATE TABLE IF NOT EXISTS samples (
            run_id BIGINT NOT NULL,
            seq UBIGINT NOT NULL,
            deadline_tick UBIGINT NOT NULL,
            entry_tick UBIGINT NOT NULL,
            flags UINTEGER NOT NULL,
            cpu UINTEGER NOT NULL)""",
    ],
    2: [
        # kind: "latency" (timer/IRQ latency) or "network" (round trips); source: "irqlab"
        # or the import format it came from; tags: {key: value}; suite: a suite or matrix
        # this run belongs to, cell: that suite's coordinates of the run.
        "ALTER TABLE runs ADD COLUMN kind VARCHAR DEFAULT 'latency'",
        "ALTER TABLE runs ADD COLUMN source VARCHAR DEFAULT 'irqlab'",
        "ALTER TABLE runs ADD COLUMN tags JSON DEFAULT '{}'",
        "ALTER TABLE runs ADD COLUMN suite VARCHAR",
        "ALTER TABLE runs ADD COLUMN cell JSON",
        # Source-specific window details (raw ticks, a rounded percentage kept as a bound).
        "ALTER TABLE windows ADD COLUMN extra JSON",
        # Histograms at the resolution the source had: [lower_ns, upper_ns) buckets per
        # series ("all", "cpu0", "irq", ...); upper_ns NULL = overflow bucket.
        """CREATE TABLE IF NOT EXISTS histograms (
            run_id BIGINT NOT NULL,
            series VARCHAR NOT NULL,
            lower_ns BIGINT NOT NULL,
            upper_ns BIGINT,
            count UBIGINT NOT NULL)""",
    ],
    3: [
        # Imported windows may not know their sample count (rt_eval never prints it) or
        # may only bound the threshold crossings (a rounded percentage): NULL, never a guess.
        "ALTER TABLE windows ALTER COLUMN samples DROP NOT NULL",
        "ALTER TABLE windows ALTER COLUMN above_threshold DROP NOT NULL",
    ],
    4: [
        # Runs that write big batches keep their samples in Parquet files beside the
        # database, one row per file in sequence order (irqlab/store/sample_files.py).
        """CREATE TABLE IF NOT EXISTS sample_files (
            run_id BIGINT NOT NULL,
            first_seq UBIGINT NOT NULL,
            samples UBIGINT NOT NULL,
            name VARCHAR NOT NULL)""",
    ],
    5: [
        # A traced native run's IRQ/thread split (issue 44, irqlab/explain/parts.py): per
        # split sample, when the timer's hard IRQ was entered, in the sample's ticks. IRQ
        # latency = irq_tick - deadline_tick, thread latency = entry_tick - irq_tick.
        """CREATE TABLE IF NOT EXISTS sample_parts (
            run_id BIGINT NOT NULL,
            seq UBIGINT NOT NULL,
            cpu UINTEGER NOT NULL,
            irq_tick UBIGINT NOT NULL)""",
    ],
}
