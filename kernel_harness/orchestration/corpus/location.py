"""A Redis corpus location, its credentials, and the one rule that keeps them out of logs.

``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`` or ``rediss://...`` (TLS), with TLS options
as query parameters of ``rediss://`` (:data:`TLS_OPTIONS`). The password is best kept out of
the URL (a command line is visible to every user of the host, in ``ps`` and in CI logs): it
is taken, in this order, from the URL, from ``$KH_CORPUS_PASSWORD``, or from
``$REDISCLI_AUTH`` (the variable ``redis-cli`` reads); the user likewise from the URL or
``$KH_CORPUS_USERNAME``. Whatever the harness prints or writes shows a location through
:func:`redact` (``redis://:***@host:6379/0``), and every error message about a location
passes through :func:`scrub`, which masks the password wherever it appears.
A ``github:`` corpus takes its token from ``$GITHUB_TOKEN`` only (Hypothesis's
``GitHubArtifactDatabase`` reads it), never from the location.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from kernel_harness.orchestration.corpus.entry import CorpusError
from kernel_harness.orchestration.corpus.outage import StoreUnreachable

PASSWORD_ENV = ("KH_CORPUS_PASSWORD", "REDISCLI_AUTH")
USERNAME_ENV = "KH_CORPUS_USERNAME"
#: Query options of ``rediss://`` (redis-py's names): CA bundle, client certificate and
#: key, whether the server's certificate is required, whether its host name is checked.
TLS_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs",
               "ssl_check_hostname")
MASK = "***"
SCHEMES = ("redis://", "rediss://")


def _secrets(location: str) -> list[str]:
    found = [os.environ.get(name, "") for name in PASSWORD_ENV]
    for part in str(location).split(","):
        spec = part.strip().removeprefix("ro:")
        if "://" in spec:
            url = urllib.parse.urlsplit(spec)
            found.append(urllib.parse.unquote(url.password or ""))
            found.append(url.password or "")
            found += [v for k, v in urllib.parse.parse_qsl(url.query) if "pass" in k.lower()]
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def redact(location: str) -> str:
    """``location`` with every password shown as ``***`` (the user name kept): what any
    output says of a corpus."""
    parts = []
    for part in str(location).split(","):
        prefix = "ro:" if part.strip().startswith("ro:") else ""
        spec = part.strip().removeprefix("ro:")
        if "://" in spec:
            url = urllib.parse.urlsplit(spec)
            netloc = url.netloc
            if url.password is not None:
                netloc = f"{url.username or ''}:{MASK}@{netloc.rsplit('@', 1)[1]}"
            query = urllib.parse.urlencode(
                [(k, MASK if "pass" in k.lower() else v)
                 for k, v in urllib.parse.parse_qsl(url.query)], safe="/*")
            spec = urllib.parse.urlunsplit((url.scheme, netloc, url.path, query, url.fragment))
        parts.append(prefix + spec)
    return scrub(",".join(parts), location)


def scrub(text: str, location: str) -> str:
    """``text`` (a message that may quote ``location``) with every password of
    ``location`` and of the password variables masked."""
    for secret in _secrets(location):
        text = text.replace(secret, MASK)
    return text


def _flag(name: str, value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise CorpusError(f"--corpus: {name}={value}: give true or false")


def redis_options(spec: str) -> dict[str, Any]:
    """The ``redis.Redis`` keyword arguments ``spec`` spells (host, port, db, credentials,
    TLS), or a :class:`CorpusError` saying what to write. Credentials not in the URL come
    from the environment (module docstring)."""
    tls = spec.startswith("rediss://")
    form = f"{'rediss' if tls else 'redis'}://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
    url = urllib.parse.urlsplit(spec)
    try:
        port = url.port or 6379
        db_path = url.path.strip("/")
        db = int(db_path) if db_path else 0
    except ValueError:
        raise CorpusError(f"--corpus {redact(spec)}: give {form} with numbers for PORT and "
                          "DB") from None
    if not url.hostname or url.fragment:
        raise CorpusError(f"--corpus {redact(spec)}: give {form}")
    query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    if query and not tls:
        raise CorpusError(f"--corpus {redact(spec)}: query options are TLS options, for "
                          f"rediss:// only ({', '.join(TLS_OPTIONS)})")
    unknown = sorted(set(query) - set(TLS_OPTIONS))
    if unknown:
        raise CorpusError(f"--corpus {redact(spec)}: unknown option(s) {unknown}; rediss:// "
                          f"takes {', '.join(TLS_OPTIONS)} (the password: in "
                          f"${PASSWORD_ENV[0]})")
    password = (urllib.parse.unquote(url.password) if url.password is not None
                else next((os.environ[n] for n in PASSWORD_ENV if os.environ.get(n)), None))
    username = (urllib.parse.unquote(url.username) if url.username
                else os.environ.get(USERNAME_ENV) or None)
    options: dict[str, Any] = {"host": url.hostname, "port": port, "db": db,
                               "password": password, "username": username,
                               "socket_connect_timeout": 5, "socket_timeout": 30}
    if tls:
        options["ssl"] = True
        for name, value in query.items():
            if name == "ssl_check_hostname":
                options[name] = _flag(name, value)
            elif name == "ssl_cert_reqs":
                if value not in ("none", "optional", "required"):
                    raise CorpusError(f"--corpus: ssl_cert_reqs={value}: give none, optional "
                                      "or required")
                options[name] = value
            else:
                options[name] = value
    return options


def redis_database(spec: str, expire_after: Any) -> Any:
    """A ``RedisExampleDatabase`` on the Redis ``spec`` names, pinged now (an
    unreachable one, or refused credentials, is a :class:`CorpusError` without the
    password)."""
    options = redis_options(spec)
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise CorpusError(f"--corpus {redact(spec)}: the redis client is not installed "
                          "(pip install 'kernel-harness[redis]')") from None
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # The first contact has a short limit and no retries: a TLS client facing a plain
    # server (or the reverse) waits for an answer that never comes.
    probe = redis.Redis(**{**options, "socket_timeout": 5}, retry=Retry(NoBackoff(), 0))
    client = redis.Redis(**options)
    try:
        probe.ping()
    except redis.RedisError as e:
        hint = ("; give its password in the URL or in $KH_CORPUS_PASSWORD"
                if isinstance(e, redis.AuthenticationError) or "NOAUTH" in str(e) else "")
        # Not answering is an outage (a run survives it); refused credentials are not.
        kind = (StoreUnreachable if isinstance(e, (redis.ConnectionError, redis.TimeoutError))
                and not hint else CorpusError)
        raise kind(scrub(f"--corpus {redact(spec)}: cannot reach Redis: "
                                f"{type(e).__name__}: {e}{hint}", spec)) from None
    return RedisExampleDatabase(client, expire_after=expire_after, key_prefix=b"")
