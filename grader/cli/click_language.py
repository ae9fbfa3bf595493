"""click's own words (usage errors, ``--help``) in the student's language, for the commands a student
runs (``grader check``, and ``grader`` itself, which a kit installs); the operator's commands keep
click's English.

click marks its strings for gettext (``from gettext import gettext as _`` in each of its modules)
but looks them up in gettext's process-wide domain, which only ``.mo`` files on disk and the
locale's variables could fill. So while a student command parses its arguments, prints its help or
shows a usage error, the ``_`` and ``ngettext`` of click's modules are pointed at our catalog in
the student's language (chosen as ``grader check`` chooses it: ``--lang``, else the kit's, else the
locale), and put back afterwards. The language is worked out only when click first asks for a
word: a run whose arguments parse reads no spec.toml for it. `CLICK_WORDS` lists the msgids of
click's we translate (so the catalog test checks them); one a newer click adds is shown in English.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import gettext
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click

from grader.i18n import DEFAULT, N_, choose, normalise, translate

CLICK_WORDS = (
    N_("Usage:"), N_("Options"), N_("Commands"), N_("Error: {message}"), N_("Try '{command} {option}' for help."),
    N_("No such option {name!r}."), N_("No such command {name!r}."), N_("Missing command."),
    N_("Missing argument"), N_("Missing option"), N_("Missing parameter"),
    N_("Invalid value: {message}"), N_("Invalid value for {param_hint}: {message}"),
    N_("Option {name!r} does not take a value."), N_("Choose from:\n\t{choices}"),
    N_("env var: {var}"), N_("default: {default}"), N_("required"),
    N_("{value!r} is not a valid {number_type}."), N_("{value} is not in the range {range}."),
    # ngettext's pairs, each form its own msgid (`_ngettext` looks up the form click picked)
    N_("Did you mean {possibility}?"), N_("(Did you mean one of: {possibilities}?)"),
    N_("Got unexpected extra argument ({args})"), N_("Got unexpected extra arguments ({args})"),
    N_("Option {name!r} requires an argument."), N_("Option {name!r} requires {nargs} arguments."),
    N_("{value!r} is not {choice}."), N_("{value!r} is not one of {choices}."),
)
"""click's own msgids (click 8.x) that a student command can print."""

HELP_OPTION = N_("Show this message and exit.")
"""``--help``'s own help: click words it once per command (and keeps it), so it is kept English
there and translated where it is shown, like every other option's help."""

_CLICK_MODULES = ("click.core", "click.exceptions", "click.parser", "click.types", "click.formatting",
                  "click.decorators", "click.termui", "click.utils")

_language: contextvars.ContextVar[Callable[[], str]] = contextvars.ContextVar("click_language",
                                                                              default=lambda: DEFAULT)


def current() -> str:
    """The language click speaks now (English outside `speaking`)."""
    return _language.get()()


def _gettext(message: str) -> str:
    return message if message == HELP_OPTION else translate(message, current())


def _ngettext(singular: str, plural: str, n: int) -> str:
    # English's choice of form, then that form translated: enough for a language without plurals.
    return translate(singular if n == 1 else plural, current())


@contextlib.contextmanager
def speaking(language: Callable[[], str]) -> Iterator[None]:
    """click's words through our catalog in `language()` (asked once, when first needed)."""
    token = _language.set(functools.cache(language))
    swapped = []
    for name in _CLICK_MODULES:
        module = sys.modules.get(name)
        for attr, theirs, ours in (("_", gettext.gettext, _gettext), ("ngettext", gettext.ngettext, _ngettext)):
            if module is not None and getattr(module, attr, None) is theirs:
                setattr(module, attr, ours)
                swapped.append((module, attr, theirs))
    try:
        yield
    finally:
        for module, attr, theirs in swapped:
            setattr(module, attr, theirs)
        _language.reset(token)


def _value(args: Sequence[str], names: tuple[str, ...]) -> str | None:
    """The value of option `names` in `args` (``--lang zh-CN`` or ``--lang=zh-CN``), else None."""
    for i, a in enumerate(args):
        if a == "--":
            break
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "=") and n.startswith("--"):
                return a[len(n) + 1:]
    return None


def student_language(args: Sequence[str]) -> str:
    """The language of a student command run with `args`, as its feedback chooses it: ``--lang``,
    else the kit's (beside the submission named, or in the working directory), else the locale."""
    wanted = normalise(_value(args, ("--lang",)))
    if wanted:
        return wanted
    from grader.assignment.kit import language_near

    submission = next((Path(a) for a in args if not a.startswith("-") and Path(a).exists()), None)
    return choose(None, language_near(submission, _value(args, ("-a", "--assignment"))))


class _Formatter(click.HelpFormatter):
    """click's help layout, with the catalog's punctuation: "用法：grader check", "选项：" (click
    itself appends an ASCII colon and a space to the words)."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        lang = current()
        if prefix is None and lang != DEFAULT:
            prefix = translate("Usage:", lang)
        super().write_usage(prog, args, prefix)

    def write_heading(self, heading: str) -> None:
        if current() == DEFAULT:
            return super().write_heading(heading)
        self.write(f"{'':>{self.current_indent}}{heading}：\n")


class _Context(click.Context):
    formatter_class = _Formatter


class _Speaks:
    """What a student's command (or group) adds to click's: it runs speaking the student's
    language, and its help text and options' help are looked up in the catalog."""

    context_class: type[click.Context] = _Context

    def speaks_for(self, args: list[str]) -> bool:
        return True

    def main(self, args: Sequence[str] | None = None, *more: Any, **kwargs: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        if not self.speaks_for(args):
            return super().main(args, *more, **kwargs)  # type: ignore[misc]
        with speaking(lambda: student_language(args)):
            return super().main(args, *more, **kwargs)  # type: ignore[misc]

    def _help_text(self) -> str:
        help_text: str = getattr(self, "help", None) or ""
        return inspect.cleandoc(translate(help_text, current()))

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        text = self._help_text().partition("\f")[0]
        if text:
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(text)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        lang = current()
        rows = []
        for param in self.get_params(ctx):  # type: ignore[attr-defined]
            if getattr(param, "help", None):
                param = copy.copy(param)  # shown in the language, the command's own left as it is
                param.help = translate(param.help, lang)
            row = param.get_help_record(ctx)
            if row is not None:
                rows.append(row)
        if rows:
            with formatter.section(translate("Options", lang)):
                formatter.write_dl(rows)
        if isinstance(self, click.Group):
            self.format_commands(ctx, formatter)

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        option: click.Option | None = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.help = HELP_OPTION
        return option

    def get_short_help_str(self, limit: int = 45) -> str:
        if current() == DEFAULT:
            short: str = super().get_short_help_str(limit)  # type: ignore[misc]
            return short
        first = self._help_text().split("\n\n")[0]
        if "。" in first:  # the first sentence, as English help is cut at its first full stop
            return first.split("。")[0] + "。"
        return first if len(first) <= limit else first[: limit - 1] + "…"


class StudentCommand(_Speaks, click.Command):
    """A command a student runs: click's usage errors and ``--help`` in the student's language."""


class StudentGroup(_Speaks, click.Group):
    """``grader``: its help and its usage errors in the student's language, unless the command
    named is an operator's (``grader grade --bogus`` stays English)."""

    def speaks_for(self, args: list[str]) -> bool:
        named = next((a for a in args if not a.startswith("-")), None)
        command = self.commands.get(named) if named else None
        return command is None or isinstance(command, StudentCommand)
