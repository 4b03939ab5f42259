"""precdx: an expert system that diagnoses accuracy problems in large-model training."""
__version__ = "0.1.0"
