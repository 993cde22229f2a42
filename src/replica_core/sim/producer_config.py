"""The simulated producer's Kafka configs and their validation (``ProducerConfig``).

``enable.idempotence`` (default true since Kafka 3.0), ``max.in.flight.requests.per.connection``
(default 5), ``retries`` (default 2147483647) and ``delivery.timeout.ms`` (default 120000), with
Kafka's rules (``ProducerConfig.postProcessAndValidateIdempotenceConfigs`` and
``KafkaProducer.configureDeliveryTimeout``):

* idempotence set explicitly to true needs ``acks=all``, ``retries`` > 0 and at most 5 requests
  in flight, else a ``ConfigException`` (here :class:`InvalidConfigurationError`); left at its
  default, any of those quietly turns it off;
* ``delivery.timeout.ms`` set explicitly below ``linger.ms`` + ``request.timeout.ms`` is an
  error; left at its default it is raised to that sum (the simulated producer does not linger:
  ``linger.ms`` is 0 here).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replica_core.errors import InvalidConfigurationError

__all__ = ["PRODUCER_KEYS", "ProducerSettings", "producer_settings"]

INT32_MAX = 2**31 - 1
DEFAULT_DELIVERY_TIMEOUT_MS = 120_000
DEFAULT_MAX_IN_FLIGHT = 5
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
PRODUCER_KEYS = ("enable.idempotence", "max.in.flight.requests.per.connection", "retries",
                 "delivery.timeout.ms")
"""The producer configs read here (Kafka's names), besides ``request.timeout.ms``."""


@dataclass(frozen=True)
class ProducerSettings:
    """What the simulated producer runs with, after Kafka's adjustments."""

    enable_idempotence: bool
    max_in_flight: int
    retries: int
    delivery_timeout_ms: int


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InvalidConfigurationError(
        f"Invalid value {value!r} for configuration {name}: Expected value to be either true "
        f"or false")


def _int(name: str, value: Any, low: int, high: int = INT32_MAX) -> int:
    if isinstance(value, bool):
        ok = False
    elif isinstance(value, int):
        ok = True
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value, ok = int(value), True
    else:
        ok = False
    if not ok or not low <= value <= high:
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration {name}: must be an int in "
            f"[{low}, {high}]")
    return int(value)


def producer_settings(configs: Mapping[str, Any], acks: int,
                      request_timeout_ms: int) -> ProducerSettings:
    """Validate and resolve the producer configs in ``configs`` (Kafka's dotted names) for a
    producer sending with ``acks`` (-1, 0 or 1)."""
    configured = "enable.idempotence" in configs
    idempotence = _bool("enable.idempotence", configs.get("enable.idempotence", True))
    in_flight = _int("max.in.flight.requests.per.connection",
                     configs.get("max.in.flight.requests.per.connection",
                                 DEFAULT_MAX_IN_FLIGHT), 1)
    retries = _int("retries", configs.get("retries", INT32_MAX), 0)
    if idempotence:
        problems = []
        if retries == 0:
            problems.append("Must set retries to non-zero when using the idempotent producer.")
        if acks != -1:
            problems.append("Must set acks to all in order to use the idempotent producer. "
                            "Otherwise we cannot guarantee idempotence.")
        if in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
            problems.append(f"Must set max.in.flight.requests.per.connection to at most "
                            f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE} to use the idempotent producer "
                            f"(got {in_flight}).")
        if problems and configured:
            raise InvalidConfigurationError(
                f"enable.idempotence=true: {problems[0]}")
        if problems:  # Kafka logs why and turns idempotence off
            idempotence = False
    floor = int(request_timeout_ms)  # linger.ms (0 here) + request.timeout.ms
    if "delivery.timeout.ms" in configs:
        delivery = _int("delivery.timeout.ms", configs["delivery.timeout.ms"], 0)
        if delivery < floor:
            raise InvalidConfigurationError(
                f"delivery.timeout.ms should be equal to or larger than linger.ms + "
                f"request.timeout.ms: {delivery} < 0 + {floor}")
    else:
        delivery = max(DEFAULT_DELIVERY_TIMEOUT_MS, floor)
    return ProducerSettings(idempotence, in_flight, retries, delivery)
