"""kraftlake: the KRaft metadata log as first-class data."""

__version__ = "0.1.0"
