"""The reference step cost of docs/method.md §3, the seed figures `slo`, the simulator's
reference workload and their pinned tests share: one definition, imported by each."""

# t(B) = a + b x B with a = 5.00 ms (one pass over the weights plus overhead) and b = 0.086 ms
# per running sequence (its KV read); 47 us per prefill token; 0.3 ms of launch overhead per
# step (docs/method.md §3, the "reference" cost model).
REFERENCE_A_MS = 5.0
REFERENCE_B_MS = 0.086
REFERENCE_PREFILL_MS_PER_TOKEN = 0.047
REFERENCE_OVERHEAD_MS = 0.3
