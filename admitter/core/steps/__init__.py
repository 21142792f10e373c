"""The steps of one admission cycle, one file each, numbered in the order `cycle` runs them
(as KAI has one file per action). Each is a function of the cycle's state
(`cycle_state.CycleState`), which it changes only through that state's `Statement` and
bookkeeping:

1. `step1_evict_expired`: evictions that depend on no one pending.
2. `step2_admit_short`: short (debug) jobs, before any capacity is held.
3. `step3_drain_for_starving`: one starving gang gets a domain drained and held for it.
4. `step4_admit_long`: the rest of the funded work, backfilling the held capacity.
5. `step5_give_up_room`: long work only the short jobs' room turned away, on idle GPUs.
6. `step6_admit_unfunded`: unfunded work takes what is still idle.

What the admitting steps share: `funded` (one funded workload admitted, or told why not),
`held_capacity` (starting on the drain's hold) and `offer` (capacity offered queue by queue).
"""
