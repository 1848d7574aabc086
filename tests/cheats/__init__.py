"""The catalog of planted cheats (issue 55, item 11) and the one test that runs it."""
