"""The store's DDL, verbatim: the one definition of ``pi-workflows.store.v2``.

``V1_STATEMENTS`` is the frozen layout of ``pi-workflows.store.v1``;
``CONTROLLER_STATEMENTS`` the tables v2 adds (controllers, issue 24). The
one upgrade there is: a v1 file, exactly as v1 laid it out, gets the
controller tables and the v2 id in one transaction on open (db.py); any
other layout is refused. The DDL spells queue states as SQL text; a test
holds it to ``protocol.states``. Imports nothing.
"""

from __future__ import annotations

SCHEMA_ID = "pi-workflows.store.v2"
V1_SCHEMA_ID = "pi-workflows.store.v1"

V1_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE store_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID""",
    """CREATE TABLE workflow_run_queue (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    source_path TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    definition_digest TEXT NOT NULL,
    private_input TEXT,
    state TEXT NOT NULL CHECK (state IN
        ('queued', 'starting', 'running', 'parked', 'done', 'failed', 'cancelled')),
    origin_session TEXT,
    notify_session TEXT,
    runner_affinity TEXT,
    runner_id TEXT,
    claim_token TEXT,
    lease_expires_at INTEGER,
    parent_run_id TEXT,
    forked_from TEXT,
    fork_node TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    error_code TEXT,
    error_message TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    CHECK ((claim_token IS NOT NULL) = (state IN ('starting', 'running'))),
    CHECK ((runner_id IS NOT NULL) = (claim_token IS NOT NULL)),
    CHECK ((lease_expires_at IS NOT NULL) = (claim_token IS NOT NULL)),
    CHECK ((forked_from IS NOT NULL) = (fork_node IS NOT NULL))
)""",
    # One active reservation per origin session (seed 002).
    """CREATE UNIQUE INDEX workflow_run_queue_session_reservation
    ON workflow_run_queue(origin_session)
    WHERE origin_session IS NOT NULL AND state IN ('queued', 'starting', 'running')""",
    # One live continuation per waiting parent; a failed or cancelled one frees the slot.
    """CREATE UNIQUE INDEX workflow_run_queue_one_continuation
    ON workflow_run_queue(parent_run_id)
    WHERE parent_run_id IS NOT NULL AND state NOT IN ('failed', 'cancelled')""",
    # A run's forks (`pi-workflows fork`): the original's side of the link.
    """CREATE INDEX workflow_run_queue_by_fork ON workflow_run_queue(forked_from)
    WHERE forked_from IS NOT NULL""",
    """CREATE INDEX workflow_run_queue_by_state ON workflow_run_queue(state, created_at)""",
    """CREATE INDEX workflow_run_queue_by_runner ON workflow_run_queue(runner_id)
    WHERE runner_id IS NOT NULL""",
    """CREATE INDEX workflow_run_queue_by_notify ON workflow_run_queue(notify_session)
    WHERE notify_session IS NOT NULL""",
    """CREATE INDEX workflow_run_queue_by_affinity ON workflow_run_queue(runner_affinity)
    WHERE runner_affinity IS NOT NULL""",
    """CREATE INDEX workflow_run_queue_by_lease ON workflow_run_queue(lease_expires_at)
    WHERE lease_expires_at IS NOT NULL""",
    """CREATE TABLE run_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    type TEXT NOT NULL,
    at INTEGER NOT NULL,
    payload TEXT NOT NULL
)""",
    """CREATE INDEX run_events_by_run ON run_events(run_id, seq)""",
    """CREATE TABLE session_watermarks (
    session_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL CHECK (seq >= 0),
    pending_from INTEGER CHECK (pending_from IS NULL OR pending_from <= seq),
    updated_at INTEGER NOT NULL
)""",
    """CREATE TABLE workflow_notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('progress', 'final')),
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    delivery_token TEXT,
    delivery_expires_at INTEGER,
    delivered_at INTEGER,
    UNIQUE (run_id, node_id, idx)
)""",
    """CREATE INDEX workflow_notifications_pending
    ON workflow_notifications(session_id, id) WHERE delivered_at IS NULL""",
    """CREATE TABLE workflow_turn_intents (
    intent_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    source_event TEXT NOT NULL,
    cause TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'resolved')),
    claim_token TEXT,
    claim_expires_at INTEGER,
    created_at INTEGER NOT NULL,
    resolved_at INTEGER
)""",
    """CREATE UNIQUE INDEX workflow_turn_intents_one_pending
    ON workflow_turn_intents(run_id, session_id) WHERE state = 'pending'""",
    """CREATE TABLE effects (
    run_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    effect_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'rejected', 'indeterminate')),
    attempt_id TEXT,
    result TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, node_id, effect_key)
) WITHOUT ROWID""",
    """CREATE TABLE runners (
    runner_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('host', 'session')),
    pid INTEGER NOT NULL,
    pid_start_time REAL NOT NULL,
    host_name TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
)""",
)

# Controllers (issue 24): resources, their work queue, events, reconcile
# effects and child runs. Additive only: nothing of v1 changes.
CONTROLLER_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE controller_resources (
    controller TEXT NOT NULL,
    key TEXT NOT NULL,
    uid TEXT NOT NULL UNIQUE,
    resource_version INTEGER NOT NULL CHECK (resource_version >= 1),
    generation INTEGER NOT NULL CHECK (generation >= 1),
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    deletion_requested INTEGER NOT NULL DEFAULT 0 CHECK (deletion_requested IN (0, 1)),
    finalizers TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (controller, key)
)""",
    """CREATE TABLE controller_queue (
    controller TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'active')),
    due_at INTEGER NOT NULL,
    dirty INTEGER NOT NULL DEFAULT 0 CHECK (dirty IN (0, 1)),
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    runner_id TEXT,
    claim_token TEXT UNIQUE,
    lease_expires_at INTEGER,
    lease_ms INTEGER,
    last_error TEXT,
    enqueued_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (controller, key),
    CHECK ((claim_token IS NOT NULL) = (state = 'active')),
    CHECK ((runner_id IS NOT NULL) = (claim_token IS NOT NULL)),
    CHECK ((lease_expires_at IS NOT NULL) = (claim_token IS NOT NULL)),
    CHECK ((lease_ms IS NOT NULL) = (claim_token IS NOT NULL))
) WITHOUT ROWID""",
    """CREATE INDEX controller_queue_due ON controller_queue(state, due_at)""",
    """CREATE TABLE controller_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    controller TEXT NOT NULL,
    key TEXT NOT NULL,
    uid TEXT,
    type TEXT NOT NULL,
    at INTEGER NOT NULL,
    message TEXT,
    data TEXT NOT NULL
)""",
    """CREATE INDEX controller_events_by_resource ON controller_events(controller, key, seq)""",
    """CREATE TABLE controller_effects (
    controller TEXT NOT NULL,
    key TEXT NOT NULL,
    effect_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    generation INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'rejected', 'indeterminate')),
    result TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (controller, key, effect_key)
) WITHOUT ROWID""",
    """CREATE TABLE controller_children (
    controller TEXT NOT NULL,
    key TEXT NOT NULL,
    request_key TEXT NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    workflow TEXT NOT NULL,
    input_fingerprint TEXT NOT NULL,
    run_id TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL CHECK (state IN ('reserved', 'queued', 'interrupted')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (controller, key, request_key, attempt)
) WITHOUT ROWID""",
)

SCHEMA_STATEMENTS: tuple[str, ...] = V1_STATEMENTS + CONTROLLER_STATEMENTS
