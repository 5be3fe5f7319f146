"""systemd socket activation and readiness notification (filled by the brokerd issue)."""
