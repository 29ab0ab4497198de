"""Harnesses for the tests and the benchmarks: the project's own processes started on this machine
and driven from outside (a quorum of `quorum node` processes on loopback). No product code imports
this package."""
