"""Time and idle: steps and the window, busy/compute/communication breakdown, idle causes, kernel gaps, timeline
excerpts, the pre-window backlog, periodic iterations, GPU utilization figures."""
