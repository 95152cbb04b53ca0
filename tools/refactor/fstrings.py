"""Strings put inside f-strings by the passes (a mode constant, a helper's argument): Python before 3.12 rejects
a replacement field that holds the f-string's own quote or a backslash, so ``f"{mode}_out"`` specialised to
``f"{"decode"}_out"`` would not compile on 3.10 / 3.11. A plain string alone in a replacement field becomes
literal text (``f"decode_out"``); a string deeper in the field takes the other quote."""

from __future__ import annotations

import libcst as cst

from .walk import walk


def _quote(node: cst.FormattedString) -> tuple[str, bool]:
    """The f-string's quote (``"``, ``'``, or a triple quote) and whether it is raw."""
    prefix = node.start.rstrip("\"'")
    return node.start[len(prefix) :], "r" in prefix.lower()


def _as_text(value: str, quote: str, raw: bool) -> str | None:
    """``value`` written as literal f-string text between ``quote``s; None when it cannot be."""
    text = value.replace("{", "{{").replace("}", "}}")
    if raw:
        return None if ("\\" in text or quote[0] in text or "\n" in text or "\r" in text) else text
    text = text.replace("\\", "\\\\").replace(quote[0], "\\" + quote[0])
    if len(quote) == 1:
        text = text.replace("\n", "\\n").replace("\r", "\\r")
    return text


def _other_quote(node: cst.SimpleString, quote: str) -> cst.SimpleString | None:
    """``node`` with the quote that is not ``quote``; None when its text needs a backslash or holds that quote."""
    prefix = node.prefix
    body = node.value[len(prefix) :]
    inner = body[len(node.quote) : -len(node.quote)]
    other = "'" if quote[0] == '"' else '"'
    if "\\" in inner or other in inner or quote[0] in inner or "\n" in inner:
        return None
    return node.with_changes(value=f"{prefix}{other}{inner}{other}")


class _Fix(cst.CSTTransformer):
    def __init__(self) -> None:
        super().__init__()
        self.quotes: list[str] = []  # the quotes of the f-strings we are inside, innermost last

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.quotes.append(_quote(node)[0])

    def leave_SimpleString(self, original_node, updated_node):
        if not self.quotes or self.quotes[-1][0] not in updated_node.quote:
            return updated_node
        return _other_quote(updated_node, self.quotes[-1]) or updated_node

    def leave_FormattedString(self, original_node, updated_node):
        self.quotes.pop()
        quote, raw = _quote(updated_node)
        parts: list[cst.BaseFormattedStringContent] = []
        for part in updated_node.parts:
            text = None
            if (
                isinstance(part, cst.FormattedStringExpression)
                and isinstance(part.expression, cst.SimpleString)
                and part.conversion is None
                and part.format_spec is None
                and "b" not in part.expression.prefix.lower()
            ):
                text = _as_text(part.expression.evaluated_value, quote, raw)
            if text is None:
                parts.append(part)
            elif parts and isinstance(parts[-1], cst.FormattedStringText):
                parts[-1] = cst.FormattedStringText(parts[-1].value + text)
            else:
                parts.append(cst.FormattedStringText(text))
        if len(parts) == len(updated_node.parts) and all(a is b for a, b in zip(parts, updated_node.parts)):
            return updated_node
        merged: list[cst.BaseFormattedStringContent] = []
        for part in parts:  # text next to text (the original's text after an inlined field) is one part
            if (
                merged
                and isinstance(part, cst.FormattedStringText)
                and isinstance(merged[-1], cst.FormattedStringText)
            ):
                merged[-1] = cst.FormattedStringText(merged[-1].value + part.value)
            else:
                merged.append(part)
        if all(isinstance(p, cst.FormattedStringText) for p in merged):  # no field left: a plain string
            text = "".join(p.value for p in merged).replace("{{", "{").replace("}}", "}")
            prefix = updated_node.start[: -len(quote)].replace("f", "").replace("F", "")
            return cst.SimpleString(
                f"{prefix}{quote}{text}{quote}", lpar=updated_node.lpar, rpar=updated_node.rpar
            )
        return updated_node.with_changes(parts=merged)


def compatible_fstring(node: cst.FormattedString) -> cst.FormattedString:
    """``node`` with every string inside its replacement fields written so that Python 3.10 / 3.11 accept it
    (see the module docstring). Called by the passes that put strings where names were."""
    if not _needs_fix(node):
        return node  # the same node: passes find nodes by identity
    return node.visit(_Fix())


def _needs_fix(node: cst.FormattedString) -> bool:
    """A string in a replacement field with the f-string's quote or a backslash (rejected before 3.12)."""
    quote = _quote(node)[0][0]
    return any(
        type(n) is cst.SimpleString and (quote in n.quote or "\\" in n.value)
        for part in node.parts
        if isinstance(part, cst.FormattedStringExpression)
        for n in walk(part.expression)
    )
