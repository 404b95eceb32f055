"""bench/run's workloads, one module per workload or family (common.py: what they share);
bench/run parses the command line, runs the schedule and prints the report."""


