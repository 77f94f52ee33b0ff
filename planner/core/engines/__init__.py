"""Each engine's own KV-pool arithmetic (vLLM, SGLang), as pure functions of specs and settings."""
