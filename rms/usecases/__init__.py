"""The use cases of RMS, one home each: prepare, confirm, cancel and ack (over HTTP and the ack
topic alike), operator actions, resends and dead-letter operations. HTTP routes, the ack-topic
consumer, the command line and the workers all go through this layer; it knows no transport.
"""
