"""Replays of the provider transcripts in the repository's ``providers/`` folder."""
