"""Floor 5, orchestration: running the properties of :mod:`kernel_harness.checks` as a
check session under every front end (the request, the session, worker processes and their
supervisor, results as JSON and JUnit, the failure corpus)."""
