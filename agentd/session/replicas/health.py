"""What a replica says of its leases (`/readyz`, the metrics): the mode it runs in and its
renewals' figures (agentd/session/replicas/leases.py keeps them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LeaseMode(StrEnum):
    SINGLE_PROCESS = "single_process"  # SQLite: no leases, every session is this process's
    POSTGRES = "postgres"


@dataclass(frozen=True)
class LeaseHealth:
    replica_id: str
    mode: LeaseMode
    owned: int = 0  # sessions whose lease this replica holds
    ttl_s: float = 0.0
    renewals: int = 0  # renewal statements that went through (rounds holding leases)
    renewal_failures: int = 0  # rounds that failed (over the process's life)
    consecutive_failures: int = 0
    last_renewal_age_s: float | None = None  # since the last round that succeeded (None: none yet)
    lost: int = 0  # leases lost: taken over, run out unrenewed, or a write fenced out
    healthy: bool = True
    detail: str = ""

    def as_json(self) -> dict[str, object]:
        body: dict[str, object] = {"mode": self.mode.value, "healthy": self.healthy}
        if self.mode is LeaseMode.POSTGRES:
            age = self.last_renewal_age_s
            body.update(
                owned=self.owned,
                ttlS=self.ttl_s,
                lastRenewalAgeS=None if age is None else round(age, 3),
                renewals=self.renewals,
                renewalFailures=self.renewal_failures,
                consecutiveFailures=self.consecutive_failures,
                lost=self.lost,
            )
        if self.detail:
            body["detail"] = self.detail
        return body
