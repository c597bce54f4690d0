"""Credentials in a results directory's URI, kept in the process: `shown` is the one redaction
of a location, what every line, log and record of clocksweep names it by (`Location.where`);
the URI as given is read only where its store is opened (pyarrow, the lease's boto3 client, a
Ray worker's copy of the location).

A URI's credentials are its userinfo (``s3://KEY:SECRET@bucket/...``: pyarrow's S3 and Azure
filesystems take an access key and its secret, or an account and its key, there) and the
value of each query key named like a secret (Azure's ``client_secret`` and a SAS token's
``sig``; an HDFS URI's extra settings, such as ``fs.s3a.secret.key``; S3's ``access_key``,
``secret_key`` and ``session_token``, which pyarrow refuses in a URI but a user may try).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

REDACTED = "***"
SECRET_QUERY_KEY = re.compile(
    r"secret|passw|token|signature|credential(?!_kind)|^sig$|(^|[._-])key([._-]|$)",
    re.IGNORECASE,
)
# Where each scheme's store reads credentials from the environment instead (pyarrow's
# filesystems, and boto3 for the lease on S3).
ENVIRONMENT = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)",
    "abfs": "AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET",
    "abfss": "AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET",
}
OTHER_ENVIRONMENT = "the store's own environment variables"
# Where the docs say how (docs/operations.md).
DOCS = "docs/operations.md, results on S3"


def shown(where: str) -> str:
    """``where`` as it may be shown, logged or recorded: each credential of a URI replaced by
    ``***`` (``s3://***:***@bucket/x?endpoint_override=...``); a path, or a URI without
    credentials, as it is."""
    parts, end = [], 0
    for start, stop in _credential_spans(where):
        parts += [where[end:start], REDACTED]
        end = stop
    return "".join(parts) + where[end:]


def scrubbed(text: str, where: str) -> str:
    """``text`` (a message of pyarrow's or a store's, which may quote the URI it was given)
    with ``where`` in it shown as `shown` shows it, and any other copy of its credentials,
    as given or percent-decoded, replaced by ``***``."""
    text = text.replace(where, shown(where))
    found = {where[start:stop] for start, stop in _credential_spans(where)}
    for secret in sorted(found | {unquote(value) for value in found}, key=len, reverse=True):
        if secret and secret != REDACTED:
            text = text.replace(secret, REDACTED)
    return text


def userinfo(where: str) -> tuple[str | None, str | None]:
    """The user and password of a URI's userinfo, percent-decoded as pyarrow reads them
    (None for each not given)."""
    spans = _userinfo_spans(where)
    named = [unquote(where[start:stop]) for start, stop in spans]
    return (named + [None, None])[0], (named + [None, None])[1]


def carries_credentials(where: str) -> bool:
    return bool(_credential_spans(where))


def redacted_given(where: str) -> bool:
    """Whether ``where`` is a shown URI given back: a credential of it is ``***``, which no
    store takes (its real credentials are in the environment, or in the URI, not there)."""
    return any(where[start:stop] == REDACTED for start, stop in _credential_spans(where))


def environment_of(where: str) -> str:
    """The environment variables ``where``'s store reads its credentials from."""
    return ENVIRONMENT.get(where.partition("://")[0], OTHER_ENVIRONMENT)


def note(where: str) -> str | None:
    """The line that points a user who put credentials in the URI to the environment (None
    for a location without any, or one whose credentials are ``***``: refused, saying so)."""
    if not carries_credentials(where) or redacted_given(where):
        return None
    return (
        f"note: {shown(where)}: the URI's credentials are shown as {REDACTED} and never "
        f"recorded; to keep them out of your shell history and config too, give them in "
        f"{environment_of(where)} instead ({DOCS})"
    )


def _credential_spans(where: str) -> list[tuple[int, int]]:
    """Where in ``where`` each credential lies ((start, stop), in order): its userinfo's
    user and password, and the value of each query key named like a secret."""
    spans = _userinfo_spans(where)
    query = where.find("?", where.find("://") + 3) if "://" in where else -1
    if query < 0:
        return spans
    at = query + 1
    for item in where[at:].split("&"):
        key, equals, _ = item.partition("=")
        if equals and SECRET_QUERY_KEY.search(unquote(key)):
            spans.append((at + len(key) + 1, at + len(item)))
        at += len(item) + 1
    return spans


def _userinfo_spans(where: str) -> list[tuple[int, int]]:
    """Where a URI's userinfo's user and (if given) password lie. The userinfo ends at the
    last ``@`` before the query: a secret pasted as it is may hold a ``/`` (an AWS secret key
    often does), so one before it does not end the search, unless what comes before that
    ``/`` has no ``:`` (a bucket, its key holding an ``@``: shown as it is)."""
    scheme, sep, rest = where.partition("://")
    if not sep:
        return []
    start = len(scheme) + len(sep)
    head = rest.partition("?")[0]
    user_and_password, at, _ = head.rpartition("@")
    if not at or ("/" in user_and_password and ":" not in user_and_password.split("/")[0]):
        return []
    user, colon, _ = user_and_password.partition(":")
    if not colon:
        return [(start, start + len(user))]
    return [(start, start + len(user)), (start + len(user) + 1, start + len(user_and_password))]
