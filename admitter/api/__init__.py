"""API types of admitter.dev/v1alpha1: the single source of truth for CRDs and scenario files."""
