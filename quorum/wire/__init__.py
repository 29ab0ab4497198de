"""Kafka's wire protocol for the quorum node: size-prefixed frames, request and response
headers, and the message classes of the APIs the node speaks (`apis`)."""
