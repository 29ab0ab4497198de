"""How the project's Kafka clients are configured and why they fail: Kafka's client properties
(as Kafka's tools take them) turned into kafka-python's and librdkafka's settings, Java keystores
and truststores read in Python, and Kafka's errors explained to an operator."""
