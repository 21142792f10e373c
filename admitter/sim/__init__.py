"""`admitter simulate`: a discrete-event simulator around the controller's own decision core."""
