"""Admission webhooks: suspend queued Jobs, guard their admission, and validate admitter's CRs.

Handlers are pure functions of an AdmissionReview request and a `Lookup` of cluster state;
`server.py` serves them over HTTPS with a certificate that follows rotation on disk.
"""
