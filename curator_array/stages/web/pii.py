"""E-mail addresses and public IPv4 addresses replaced, as FineWeb's last step does.

An address is replaced by the next of a few placeholders in turn (FineWeb's own: addresses at
example.com/.org, and IPs that did not answer when FineWeb chose them). The turn starts
again with every document, so a document's output does not depend on which documents a
worker saw before it (FineWeb's counter runs on across a worker's documents). Private,
loopback and reserved IPs are kept: they identify no one. Only documents with an ``@`` or
something shaped like an IPv4 address are looked at in Python.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import replace
from itertools import cycle

import pyarrow as pa
import pyarrow.compute as pc

from ..base import ProcessingStage
from ..defaults import TEXT_FIELD
from ..tasks import DocumentBatch, Task

EMAIL_PLACEHOLDERS = ("email@example.com", "firstname.lastname@example.org")
IP_PLACEHOLDERS = ("22.214.171.124", "126.96.36.199", "188.8.131.52", "184.108.40.206", "220.127.116.11",
                   "18.104.22.168")

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
_IPV4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
# RFC 5322's dot-atom local part; a host name, or an IPv4 literal in brackets.
EMAIL = re.compile(rf"\b{_ATOM}(?:\.{_ATOM})*@(?:(?:{_LABEL}\.)+{_LABEL}|\[(?:{_OCTET}\.){{3}}"
                   rf"(?:{_OCTET}|[A-Za-z0-9-]*[A-Za-z0-9]:)\])")
IPV4 = re.compile(_IPV4)


def _public(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_global
    except ValueError:  # leading zeros, say: not an address Python reads
        return False


def anonymised(text: str) -> str:
    """The text with its e-mail addresses, then its public IPv4 addresses, replaced."""
    emails, ips = cycle(EMAIL_PLACEHOLDERS), cycle(IP_PLACEHOLDERS)
    text = EMAIL.sub(lambda _: next(emails), text)
    return IPV4.sub(lambda match: next(ips) if _public(match.group(0)) else match.group(0), text)


class PiiFormatter(ProcessingStage):
    name = "pii"
    pinned = ("text_field",)

    def __init__(self, text_field: str = TEXT_FIELD):
        self.text_field = text_field
        super().__init__()

    def reads(self) -> tuple[str, ...]:
        return (self.text_field,)

    def writes(self) -> tuple[str, ...]:
        return (self.text_field,)

    def process(self, task: DocumentBatch) -> Task:
        table = task.table
        if table.num_rows == 0 or self.text_field not in table.column_names:
            return task
        column = table.column(self.text_field)
        candidates = pc.or_(pc.match_substring(column, "@"), pc.match_substring_regex(column, r"\d\.\d+\.\d+\.\d"))
        if not pc.any(candidates).as_py():
            return task
        texts = [anonymised(text) if chosen else text
                 for text, chosen in zip(column.to_pylist(), candidates.to_pylist())]
        table = table.set_column(table.schema.get_field_index(self.text_field), self.text_field,
                                 pa.array(texts, column.type))
        return replace(task, table=table)
