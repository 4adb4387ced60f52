"""Traffic: request length distributions and arrival processes."""
