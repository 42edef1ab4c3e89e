"""Refuse what a hostile web page can send a local endpoint: foreign Host (DNS rebinding), Origin and media type."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.server.errors import ApiError

# Names a loopback-bound server is reached by; a rebinding attack arrives under the attacker's domain instead.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
_BODY_METHODS = frozenset({b"POST", b"PUT", b"PATCH"})


@dataclass(frozen=True)
class BrowserPolicy:
    """`allowed_hosts` None: no Host check (bound beyond loopback, where the API key guards). Origins: CORS list."""

    allowed_origins: frozenset[str] = frozenset()
    allowed_hosts: frozenset[str] | None = LOOPBACK_HOSTS

    @classmethod
    def for_bind(
        cls, loopback: bool, cors_origins: Iterable[str] = (), extra_hosts: Iterable[str] = ()
    ) -> BrowserPolicy:
        hosts = LOOPBACK_HOSTS | {normal_host(h) for h in extra_hosts if h.strip()} if loopback else None
        return cls(frozenset(o.rstrip("/") for o in cors_origins), hosts)


def normal_host(host: str) -> str:
    """A Host header's name without port, lower-cased, without a trailing dot ("[::1]:8080" -> "[::1]")."""
    h = host.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        return h[: end + 1] if end > 0 else h
    if h.count(":") == 1:
        h = h.split(":", 1)[0]
    return h.rstrip(".")


def host_allowed(host: str, allowed: frozenset[str]) -> bool:
    name = normal_host(host)
    if name in allowed or name.endswith(".localhost"):
        return True
    return any(a.startswith("*.") and name.endswith(a[1:]) for a in allowed)


def is_json_media_type(content_type: str) -> bool:
    """application/json or any structured-syntax "+json" type (RFC 6839), parameters ignored."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def check_request(method: bytes, headers: Mapping[bytes, bytes], policy: BrowserPolicy) -> ApiError | None:
    """The error to answer instead of serving this request, or None when it may go on."""
    host = headers.get(b"host")
    if policy.allowed_hosts is not None and host is not None:
        text = host.decode("latin-1")
        if not host_allowed(text, policy.allowed_hosts):
            return ApiError(
                403,
                f"host {normal_host(text)!r} is not allowed (DNS rebinding protection); "
                "start the server with --allowed-host NAME to permit it",
                code="host_not_allowed",
            )
    origin = headers.get(b"origin")
    if origin is not None and "*" not in policy.allowed_origins:
        text = origin.decode("latin-1").rstrip("/")
        if text not in policy.allowed_origins:
            return ApiError(
                403,
                f"origin {text!r} is not allowed; start the server with --cors-origin {text} to permit it",
                code="origin_not_allowed",
            )
    content_type = headers.get(b"content-type")
    if method in _BODY_METHODS and content_type is not None and not is_json_media_type(content_type.decode("latin-1")):
        return ApiError(
            415,
            f"unsupported media type {content_type.decode('latin-1')!r}: send 'Content-Type: application/json'",
            code="unsupported_media_type",
        )
    return None
