"""Tests of the harness (mirrors kernel_harness/)."""
