"""The kinds of job admitter queues, each behind one interface (`interface.GenericJob`), in
the way of Kueue's jobframework: the controller and the webhook read pod sets, suspend,
start and restore a job through it, never by looking at its kind."""
