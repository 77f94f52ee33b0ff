"""Step-level serving simulator: traces, scheduling policies, KV block pool, metrics (pure)."""
