"""A statement's text laid out for a reader: one clause per line, indented by its nesting, the
items of a ``SET``, ``SELECT`` or ``RETURNING`` list and the conditions of a ``WHERE`` or
``ON`` one per line. Only whitespace outside literals and quoted names changes, so the laid
out text is the same statement (the golden files under ``rms/store/sql`` are written so)."""

from __future__ import annotations

import re

INDENT = "    "
# the keywords a clause starts with, longest first (matched at a word boundary, any case)
CLAUSES = ("LEFT OUTER JOIN", "ON CONFLICT", "UNION ALL", "INSERT INTO", "DELETE FROM",
           "FOR UPDATE", "FOR SHARE", "GROUP BY", "ORDER BY", "LEFT JOIN", "JOIN", "WITH",
           "SELECT", "FROM", "WHERE", "SET", "RETURNING", "VALUES", "UPDATE", "LIMIT",
           "HAVING", "ON")
# the clauses that open a statement (anywhere); the others continue one (only where a
# statement is open at their depth: ``extract(epoch FROM ...)`` and ``array_agg(x ORDER BY x)``
# stay on their line)
OPENING = frozenset({"WITH", "SELECT", "INSERT INTO", "UPDATE", "DELETE FROM", "VALUES"})
# the clauses whose items go one per line (split at their commas) ...
LISTS = frozenset({"SET", "SELECT", "RETURNING", "WITH", "GROUP BY", "ORDER BY"})
# ... and those whose conditions do (split before AND)
CONDITIONS = frozenset({"WHERE", "ON", "HAVING"})
_CLAUSE = re.compile(r"(?:" + "|".join(c.replace(" ", r"\s+") for c in CLAUSES) + r")\b",
                     re.IGNORECASE)
_AND = re.compile(r"AND\b", re.IGNORECASE)
_WRAP = re.compile(r"(?:WHEN|ELSE)\b", re.IGNORECASE)
WRAP_AT = 80  # a CASE whose line runs past this many characters puts each branch on a line
_QUOTES = {"'": "'", '"': '"'}


def layout(sql: str) -> str:
    """``sql`` laid out (see the module's docstring)."""
    writer = _Writer(_squeezed(sql))
    while writer.i < len(writer.text):
        writer.step()
    lines = "".join(writer.out).split("\n")
    return "\n".join(line.rstrip() for line in lines if line.strip()).strip() + "\n"


class _Writer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.out: list[str] = []
        self.clause: list[str | None] = [None]  # the clause in force at each depth

    def step(self) -> None:
        text, i = self.text, self.i
        char = text[i]
        if char in _QUOTES:
            end = _literal_end(text, i)
            self.out.append(text[i:end])
            self.i = end
            return
        if char == " " and self.out and self.out[-1].startswith("\n"):
            self.i += 1  # the line starts at its indentation
            return
        if _word_start(text, i) and self._word():
            return
        if char == "(":
            self.clause.append(None)
        elif char == ")" and len(self.clause) > 1:
            self.clause.pop()
        self.out.append(char)
        self.i += 1
        if char == "," and self.clause[-1] in LISTS:
            _newline(self.out, len(self.clause) - 1, extra=1)

    def _word(self) -> bool:
        """Lay out a clause keyword, an ``AND`` or a ``CASE`` branch starting here; whether
        the word was written."""
        text, i, depth = self.text, self.i, len(self.clause) - 1
        match = _CLAUSE.match(text, i)
        keyword = " ".join(match.group(0).upper().split()) if match else ""
        if match and (keyword in OPENING or self.clause[-1] is not None) \
                and not _inside_case(self.out):
            written = "".join(self.out).rstrip().upper()
            if keyword != "ON":
                _newline(self.out, depth)
            if keyword != "ON" or not written.endswith("DISTINCT"):  # SELECT DISTINCT ON (..)
                self.clause[-1] = keyword  # (a join's ON stays on the line of its join)
            self.out.append(keyword)
            self.i = match.end()
            return True
        if _WRAP.match(text, i) and _line_length(self.out) > WRAP_AT and _inside_case(self.out):
            _newline(self.out, depth, extra=2)  # a long CASE: its branches one per line
        elif self.clause[-1] in CONDITIONS and _AND.match(text, i) \
                and not _inside_case(self.out):
            _newline(self.out, depth, extra=1)
            self.out.append("AND")
            self.i += 3
            return True
        return False


def _squeezed(sql: str) -> str:
    """Every run of whitespace outside literals as one space."""
    parts: list[str] = []
    i = 0
    while i < len(sql):
        if sql[i] in _QUOTES:
            end = _literal_end(sql, i)
            parts.append(sql[i:end])
            i = end
        elif sql[i].isspace():
            while i < len(sql) and sql[i].isspace():
                i += 1
            parts.append(" ")
        else:
            parts.append(sql[i])
            i += 1
    return "".join(parts).strip()


def _literal_end(text: str, start: int) -> int:
    """The index just past the quoted literal or name that starts at ``start`` (a doubled
    quote inside it is part of it)."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == quote:
            if i + 1 < len(text) and text[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return len(text)


def _word_start(text: str, i: int) -> bool:
    return text[i].isalpha() and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_."))


def _inside_case(out: list[str]) -> bool:
    """Whether the text written so far is inside an open ``CASE`` at its own depth: its ``ON``,
    ``AND`` and ``WHEN`` stay on the line."""
    written = "".join(out)
    depth = 0
    open_cases = 0
    for token in re.finditer(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[()]|\bCASE\b|\bEND\b",
                             written, re.IGNORECASE):
        word = token.group(0).upper()
        if word == "(":
            depth += 1
        elif word == ")":
            depth -= 1
        elif word == "CASE":
            open_cases += 1
        elif word == "END" and open_cases:
            open_cases -= 1
    return open_cases > 0


def _line_length(out: list[str]) -> int:
    written = "".join(out[-200:])
    return len(written) - written.rfind("\n") - 1


def _newline(out: list[str], depth: int, extra: int = 0) -> None:
    while out and out[-1] == " ":
        out.pop()
    out.append("\n" + INDENT * (depth + extra))
