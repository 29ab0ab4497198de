"""The project's Kafka clients: its own asyncio Kafka-protocol connection, which the quorum node,
the watcher and the launchers share, and how every client is configured and why it fails: Kafka's
client properties (as Kafka's tools take them) turned into kafka-python's and librdkafka's settings,
the wire client's TLS and SASL login, Java keystores and truststores read in Python, and Kafka's
errors explained to an operator."""
