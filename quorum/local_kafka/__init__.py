"""Apache Kafka on this machine, for the local stack, the tests and the benchmarks: one broker, a
KRaft cluster of any shape, a secured one (SASL, TLS, ACLs), on free loopback ports, logging to
files, stopped with their processes."""
