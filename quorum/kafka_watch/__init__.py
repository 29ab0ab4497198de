"""The watcher of unmodified Apache Kafka clusters: `quorum collect` polls DescribeQuorum (through
the brokers, or the controllers directly), reads the nodes' own metrics, and publishes what it
sees to the events topic as contract records (`quorum.events`)."""
