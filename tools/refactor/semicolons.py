"""``a = 1; b = 2`` on one line becomes two lines before the passes run: the passes move, drop and bind code one
line at a time, so a static statement that shares its line with run-time code would otherwise stay behind (and a
field computed at construction would read a name that is never set there)."""

from __future__ import annotations

import io
import tokenize

import libcst as cst

from .track import Provenance, StatementTransformer


def has_semicolons(text: str) -> bool:
    """Whether the source has a ``;`` between statements (not one inside a string or a comment)."""
    if ";" not in text:
        return False
    try:
        return any(
            t.type == tokenize.OP and t.string == ";"
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
        )
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - the file parsed with libcst already
        return True


class _OnePerLine(StatementTransformer):
    def leave_SimpleStatementLine(self, original_node, updated_node):
        if len(updated_node.body) < 2:
            return updated_node
        lines = []
        last = len(updated_node.body) - 1
        for index, small in enumerate(updated_node.body):
            alone = small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            if self.prov is not None:
                self.prov.note(alone, small)
            line = cst.SimpleStatementLine(
                body=[alone],
                leading_lines=updated_node.leading_lines if index == 0 else [],
                trailing_whitespace=updated_node.trailing_whitespace
                if index == last
                else cst.TrailingWhitespace(),
            )
            if self.prov is not None:
                self.prov.note(line, updated_node)
            lines.append(line)
        return cst.FlattenSentinel(lines)


def one_statement_per_line(func: cst.FunctionDef, prov: Provenance | None) -> cst.FunctionDef:
    """``func`` with every ``;``-separated line split into one line per statement (comments stay on the last)."""
    return func.visit(_OnePerLine(prov))
