"""Question-type classification (nf-cats taxonomy)."""
