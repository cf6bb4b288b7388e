"""indexes package."""
