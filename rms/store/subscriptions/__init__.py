"""The subscription (design section 3), in one home: who a message's consumers are (fixed at
its confirm from the apps' ``consume_topics``: :mod:`.terms`), their acks (:mod:`.acks`),
releasing a consumer when its app is deleted or stops consuming a topic (:mod:`.release`), and
what each consumer owes (:mod:`.views`). :class:`.store.SubscriptionStore` is the one store
object the use cases reach them through.

This package's ``__init__`` imports nothing: the transition statements read :mod:`.terms`
while :mod:`.acks` and :mod:`.release` render transitions."""
