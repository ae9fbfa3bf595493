"""The translation catalogs cannot rot: every student-facing English string the code holds has a
zh_CN entry, every entry is translated with the same placeholders, and the glossary's terms are used.

Strings are extracted with Babel exactly as docs/translating.md says (babel.cfg for the grader,
babel-assignment.cfg for each assignment), then compared with the committed .po files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {"tr": None, "ntr": (1, 2), "N_": None, "_": None, "gettext": None, "ngettext": (1, 2)}
LANGS = ["zh_CN"]
ASSIGNMENTS = sorted(p.parent.name for p in (ROOT / "assignments").glob("*/spec.toml"))
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}|%\([A-Za-z_]+\)[sd]")


def _domains() -> list[tuple[str, Path, Path, Path]]:
    """(name, folder to extract from, mapping config, locales folder) of every catalog."""
    out = [("grader", ROOT / "grader", ROOT / "babel.cfg", ROOT / "grader" / "i18n" / "locales")]
    for a in ASSIGNMENTS:
        out.append((a, ROOT / "assignments" / a, ROOT / "babel-assignment.cfg", ROOT / "assignments" / a / "locales"))
    return out


DOMAINS = _domains()


def _po(locales: Path, lang: str, name: str):
    path = locales / lang / "LC_MESSAGES" / ("grader.po" if name == "grader" else "assignment.po")
    assert path.is_file(), f"{path} is missing: create it with pybabel init (docs/translating.md)"
    with path.open("rb") as f:
        return read_po(f, locale=lang)


def _extracted(folder: Path, cfg: Path) -> set:
    with cfg.open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    return {msgid for _, _, msgid, _, _ in extract_from_dir(str(folder), method_map, options_map, keywords=KEYWORDS)
            if msgid}


def _translated(m) -> bool:
    forms = m.string if isinstance(m.string, (list, tuple)) else [m.string]
    return not m.fuzzy and all(forms) and bool(forms)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name, folder, cfg, locales", DOMAINS, ids=[d[0] for d in DOMAINS])
def test_every_english_string_in_the_code_has_an_entry(name, folder, cfg, locales, lang):
    """A new tr()/N_()/template string, a new case title or spec.toml concept fails here until the
    catalog has it (pybabel update, then translate)."""
    catalog = {m.id for m in _po(locales, lang, name) if m.id}
    missing = sorted(str(i) for i in _extracted(folder, cfg) - catalog)
    assert not missing, f"{len(missing)} string(s) of {name} have no {lang} entry:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name, folder, cfg, locales", DOMAINS, ids=[d[0] for d in DOMAINS])
def test_no_entry_is_left_without_a_use(name, folder, cfg, locales, lang):
    catalog = {m.id for m in _po(locales, lang, name) if m.id}
    stale = sorted(str(i) for i in catalog - _extracted(folder, cfg))
    assert not stale, f"{len(stale)} {lang} entr(ies) of {name} match no string in the code (pybabel update " \
                      "removes them):\n  " + "\n  ".join(stale)


@pytest.mark.parametrize("lang", LANGS)
def test_the_student_facing_domain_is_fully_translated(lang, capsys):
    """Coverage (translated / total) per catalog, printed; anything below 100 % is listed."""
    lines, untranslated = [], []
    total_done = total_all = 0
    for name, _, _, locales in DOMAINS:
        entries = [m for m in _po(locales, lang, name) if m.id]
        done = [m for m in entries if _translated(m)]
        untranslated += [f"{name}: {m.id}" for m in entries if not _translated(m)]
        total_done, total_all = total_done + len(done), total_all + len(entries)
        lines.append(f"{lang} {name}: {len(done)}/{len(entries)} ({100 * len(done) / len(entries):.1f} %)")
    lines.append(f"{lang} all: {total_done}/{total_all} ({100 * total_done / total_all:.1f} %)")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not untranslated, "untranslated (shown in English):\n  " + "\n  ".join(untranslated)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name, folder, cfg, locales", DOMAINS, ids=[d[0] for d in DOMAINS])
def test_translations_keep_every_placeholder(name, folder, cfg, locales, lang):
    bad = []
    for m in _po(locales, lang, name):
        if not m.id or not _translated(m):
            continue
        ids = m.id if isinstance(m.id, (list, tuple)) else [m.id]
        forms = m.string if isinstance(m.string, (list, tuple)) else [m.string]
        want = set().union(*(set(PLACEHOLDER.findall(i)) for i in ids))
        for form in forms:
            if set(PLACEHOLDER.findall(form)) != want or form.count("%%") != ids[-1].count("%%"):
                bad.append(f"{m.id!r} -> {form!r}")
    assert not bad, "placeholders differ:\n  " + "\n  ".join(bad)


def _checked_terms() -> list[tuple[str, str]]:
    rows = []
    for line in (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and "**checked**" in cells[2]:
            english = cells[0].split(" (")[0].split(" / ")[0]
            rows.append((english, cells[1]))
    return rows


def test_the_glossary_lists_the_tutorials_terms():
    terms = dict(_checked_terms())
    for zh in ("因果掩码", "填充掩码", "整行被屏蔽", "右下角对齐", "KV 缓存"):
        assert zh in terms.values()


@pytest.mark.parametrize("lang", LANGS)
def test_checked_glossary_terms_are_used_wherever_the_english_term_is(lang):
    terms = _checked_terms()
    if "fully masked row" in dict(terms):  # the glossary's row names the phrase; messages say "fully masked"
        terms = [("fully masked", zh) if en == "fully masked row" else (en, zh) for en, zh in terms]
    bad = []
    for name, _, _, locales in DOMAINS:
        for m in _po(locales, lang, name):
            if not m.id or not _translated(m):
                continue
            english = m.id if isinstance(m.id, str) else m.id[0]
            text = m.string if isinstance(m.string, str) else m.string[0]
            for en, zh in terms:
                if re.search(rf"(?<![\w-]){re.escape(en)}", english, re.IGNORECASE) and zh not in text:
                    bad.append(f"{name}: {en!r} -> {zh!r} expected in {text!r}")
    assert not bad, "glossary terms not used:\n  " + "\n  ".join(bad)
