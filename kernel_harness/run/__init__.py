"""Floor 3, run: running one case on a backend (runner), TPU-interpret diagnostics
and waivers, reports, profiles, kernel selection."""
