"""Constants shared by the critical-path stages: point kinds, CPU span kinds, cross edge types."""

NEG = -(1 << 50)  # "no bound" for point times (about 13 days before the origin)
SYNC_TOLERANCE_NS = 2_000  # Kineto rounds to microseconds: a waited-for op may end 1 us after the call
BLOCKED_OVERLAP_FRACTION = 0.1  # a thread doing less than this much op work during another's burst waits on it

# point kinds
CPU_S, CPU_E, GPU_S, GPU_E = 0, 1, 2, 3
# span kinds on CPU threads (bit flags: cudaMemcpy is a launch and a sync)
SPAN_LAUNCH, SPAN_SYNC, SPAN_DATALOADER, SPAN_STEP, SPAN_BLOCKED = 1, 2, 4, 8, 16  # BLOCKED: on a full launch queue
# cross edge types
E_LAUNCH, E_SYNC, E_EVENT, E_FORK, E_JOIN, E_QUEUE = 0, 1, 2, 3, 4, 5
EDGE_NAMES = {
    E_LAUNCH: "launch",
    E_SYNC: "sync",
    E_EVENT: "event_wait",
    E_FORK: "fork",
    E_JOIN: "join",
    E_QUEUE: "queue_slot",
}
