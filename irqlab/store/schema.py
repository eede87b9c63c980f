"""Database schema, versioned (docs/formats.md section 3 keeps the history)."""

SCHEMA_VERSION = 1

SCHEMA_V1 = [
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
]
