"""grader.submission.load: every kind of submission, and every bad input giving a message instead of a crash."""

import json
import os
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader.submission import load
from grader.submission.ids import name_hash, student_id
from grader.submission.load import load_submission, neutralise_magics

DATA = Path(__file__).parent.parent / "data" / "load"


def notebook(path, cells, tags=None):
    nb = nbformat.v4.new_notebook()
    for i, src in enumerate(cells):
        if src.startswith("md:"):
            nb.cells.append(nbformat.v4.new_markdown_cell(src[3:]))
        else:
            cell = nbformat.v4.new_code_cell(src)
            if tags and tags[i]:
                cell.metadata["tags"] = tags[i]
            cell.outputs = [nbformat.v4.new_output("stream", text="stored output, ignored")]
            nb.cells.append(cell)
    nbformat.write(nb, str(path))
    return path


def test_py_file(tmp_path):
    p = tmp_path / "alice.py"
    p.write_text("def f():\n    return 1\n")
    sub = load_submission(p)
    assert (sub.id, sub.kind, sub.error) == ("alice", "py", None)
    assert sub.units == (load.CodeUnit(label="alice.py", cell=None, source="def f():\n    return 1\n"),)
    assert len(sub.sha256) == 64


def test_empty_file(tmp_path):
    p = tmp_path / "bob.py"
    p.write_text("  \n")
    assert str(load_submission(p).error) == "bob.py is empty"


def test_missing_file(tmp_path):
    assert str(load_submission(tmp_path / "ghost.py").error) == "ghost.py does not exist"


def test_non_utf8_names_the_byte_offset(tmp_path):
    p = tmp_path / "latin.py"
    p.write_bytes(b"x = 'caf\xe9'\n")
    err = str(load_submission(p).error)
    assert "not UTF-8" in err and "byte offset 8" in err and "0xe9" in err


def test_notebook_code_cells_numbered_without_markdown(tmp_path):
    # Jupyter numbers no cell; "code cell 2" is the second code cell, whatever prose sits between.
    p = notebook(tmp_path / "nb.ipynb", ["md:# Title", "x = 1", "md:text", "\n\ndef f():\n    return x"])
    sub = load_submission(p)
    assert sub.error is None and sub.kind == "ipynb"
    assert [(u.label, u.cell) for u in sub.units] == [("code cell 1", 1), ("code cell 2", 2)]
    assert [str(load.unit_title(u)) for u in sub.units] == ["code cell 1 (x = 1)", "code cell 2 (def f():)"]
    assert load.unit_title(sub.units[0]).render("zh-CN") == "代码单元格 1（x = 1）"
    assert "stored output" not in "".join(u.source for u in sub.units)


def test_unit_title_shortens_a_long_first_line_and_names_a_module_by_its_file():
    cell = load.CodeUnit("code cell 3", 3, "causal_mask = causal_mask(" + "x, " * 40 + ")")
    title = str(load.unit_title(cell, width=30))
    assert title.startswith("code cell 3 (causal_mask = causal_mask(x") and title.endswith("…)")
    assert len(title) == len("code cell 3 ()") + 30
    assert str(load.unit_title(load.CodeUnit("attention.py", None, "x = 1"))) == "attention.py"


def test_magics_neutralised_keeping_line_numbers(tmp_path):
    src = "%matplotlib inline\nimport torch\n!pip install x\nif True:\n    %time f()\nfiles = !ls\ny = 2"
    out = neutralise_magics(src)
    lines = out.split("\n")
    assert len(lines) == 7
    assert lines[0].startswith("pass") and lines[2].startswith("pass")
    assert lines[4] == "    pass  # magic not run"
    assert lines[5].startswith("files = None")
    assert lines[1] == "import torch" and lines[6] == "y = 2"
    compile(out, "x", "exec")


def test_cell_magics(tmp_path):
    timed = neutralise_magics("%%time\nx = 1\ny = 2")
    assert timed.split("\n")[1:] == ["x = 1", "y = 2"]
    bash = neutralise_magics("%%bash\nrm -rf /\necho hi")
    assert bash.count("\n") == 2 and "rm" in bash and all(
        line.startswith(("pass", "#")) for line in bash.split("\n"))
    compile(bash, "x", "exec")


def test_cell_tag_restricts_cells(tmp_path):
    p = notebook(tmp_path / "nb.ipynb", ["a = 1", "b = 2", "c = 3"], tags=[["graded"], None, ["graded", "x"]])
    sub = load_submission(p, cell_tag="graded")
    assert [u.cell for u in sub.units] == [1, 3]
    none = load_submission(p, cell_tag="missing-tag")
    assert "no code cell tagged 'missing-tag'" in str(none.error)


def test_invalid_json_notebook(tmp_path):
    p = tmp_path / "broken.ipynb"
    p.write_text('{"cells": [')
    assert "invalid JSON" in str(load_submission(p).error)


def test_empty_notebook(tmp_path):
    p = tmp_path / "e.ipynb"
    p.write_text("")
    assert str(load_submission(p).error) == "e.ipynb is empty"


def test_notebook_without_code_cells(tmp_path):
    p = notebook(tmp_path / "md.ipynb", ["md:only prose"])
    assert str(load_submission(p).error) == "md.ipynb has no code cells"


def test_notebook_v3_converted():
    sub = load_submission(DATA / "notebook_v3.ipynb")
    assert sub.error is None
    assert [(u.cell, u.source) for u in sub.units] == [(1, "def f(x):\n    return x + 1")]  # its only code cell


def test_notebook_v2_refused(tmp_path):
    p = tmp_path / "old.ipynb"
    p.write_text(json.dumps({"nbformat": 2, "worksheets": []}))
    assert "version 2" in str(load_submission(p).error)


def test_huge_notebook_refused_without_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "MAX_FILE_BYTES", 1000)
    p = notebook(tmp_path / "big.ipynb", ["x = 1"])
    with open(p, "a") as f:
        f.write(" " * 2000)
    err = str(load_submission(p).error)
    assert "larger than" in err and "clear the notebook's outputs" in err


def test_folder_with_main_and_helpers(tmp_path):
    d = tmp_path / "carol"
    (d / "pkg").mkdir(parents=True)
    (d / "submission.py").write_text("from helper import h\n")
    (d / "helper.py").write_text("def h(): return 1\n")
    (d / "pkg" / "mod.py").write_text("X = 1\n")
    sub = load_submission(d)
    assert (sub.id, sub.kind, sub.error) == ("carol", "folder", None)
    assert sub.units[0].label == "submission.py"
    assert sorted(sub.files) == ["helper.py", "pkg/mod.py"]


def test_folder_missing_main(tmp_path):
    d = tmp_path / "dave"
    d.mkdir()
    (d / "a.py").write_text("x=1")
    (d / "b.py").write_text("y=1")
    err = str(load_submission(d, main_module="attention.py").error)
    assert err == "the submission has no attention.py; found: a.py, b.py. Rename your main file to attention.py"


def test_folder_lone_file_used_as_main(tmp_path):
    d = tmp_path / "erin"
    d.mkdir()
    notebook(d / "work.ipynb", ["x = 1"])
    sub = load_submission(d)
    assert sub.error is None and sub.units[0].cell == 1


def test_folder_symlink_outside_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden cases")
    d = tmp_path / "frank"
    d.mkdir()
    (d / "submission.py").write_text("x=1")
    os.symlink(secret, d / "data.txt")
    assert "symbolic link pointing outside" in str(load_submission(d).error)


def test_folder_digest_is_stable(tmp_path):
    d = tmp_path / "gina"
    d.mkdir()
    (d / "submission.py").write_text("x=1")
    assert load_submission(d).sha256 == load_submission(d).sha256


def make_zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_zip_with_top_folder(tmp_path):
    p = make_zip(tmp_path / "hana_12345_hw.zip", {"hw/submission.py": "x = 1", "hw/util.py": "y = 2"})
    sub = load_submission(p)
    assert (sub.id, sub.kind, sub.error) == ("hana_12345", "zip", None)
    assert sub.units[0].source == "x = 1" and sub.files == {"util.py": b"y = 2"}


@pytest.mark.parametrize("member", ["../evil.py", "/etc/evil.py", "a/../../evil.py", "C:/evil.py"])
def test_zip_traversal_refused(tmp_path, member):
    p = make_zip(tmp_path / "z.zip", {"submission.py": "x=1", member: "boom"})
    assert "unsafe path" in str(load_submission(p).error)


def test_zip_symlink_refused(tmp_path):
    p = tmp_path / "link.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("submission.py", "x=1")
        info = zipfile.ZipInfo("data.txt")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    assert "symbolic link" in str(load_submission(p).error)


def test_zip_too_large_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "MAX_TOTAL_BYTES", 100)
    p = make_zip(tmp_path / "big.zip", {"submission.py": "x" * 500})
    assert "unpacks to more than" in str(load_submission(p).error)


def test_not_a_zip(tmp_path):
    p = tmp_path / "fake.zip"
    p.write_bytes(b"not a zip")
    assert "not a valid zip file" in str(load_submission(p).error)


@pytest.mark.parametrize("name, expected", [
    ("alice.py", "alice"),
    ("doe_jane_12345_attention.ipynb", "doe_jane_12345"),
    ("doejane_LATE_12345_67890_attention.py", "doejane_12345"),
    ("Jane Doe_98765_assignsubmission_file_hw.zip", "jane-doe_98765"),
    ("hw_1_alice.py", "hw_1_alice"),
    ("李雷.py", "李雷"),
    ("韩梅梅.ipynb", "韩梅梅"),
    ("अनिल.py", "अनिल"),  # a vowel sign (a combining mark) is kept with its letters
    ("ren\udce9e_4711_hw.py", "ren-e_4711"),  # b'ren\xe9e_4711_hw.py' as os.listdir gives it
    # changed by the rule, or an output's name: readable part plus a hash of the exact name
    ("../weird$name.py", "weird-name-" + name_hash("weird$name.py")),
    ("___.py", "submission-" + name_hash("___.py")),
    ("Alice.py", "alice-" + name_hash("Alice.py")),
    ("index.py", "index-" + name_hash("index.py")),
    ("Grades.ipynb", "grades-" + name_hash("Grades.ipynb")),
    ("summary.zip", "summary-" + name_hash("summary.zip")),
    ("con.py", "con-" + name_hash("con.py")),
    ("a\r\x1b[2K\x1b]0;x\x07b.py", "a-2k-0-x-b-" + name_hash("a\r\x1b[2K\x1b]0;x\x07b.py")),
])
def test_student_id(name, expected):
    assert student_id(name) == expected


def test_student_id_folder(tmp_path):
    d = tmp_path / "bob_smith"
    d.mkdir()
    assert student_id(d) == "bob_smith"
    assert student_id(str(d) + "/") == "bob_smith"
    up = tmp_path / "Bob_Smith"
    up.mkdir()
    assert student_id(up) == "bob_smith-" + name_hash("Bob_Smith")


def test_student_ids_are_unique_without_case_and_fit_a_file_name():
    ids = [student_id(n) for n in ("alice.py", "Alice.py", "ALICE.py", "alice.ipynb", "Alice.ipynb")]
    assert len({i.casefold() for i in ids}) == 4  # alice.py and alice.ipynb: the same student, found by discover
    long = student_id("é" * 300 + ".py")
    assert len((long + ".html").encode()) < 255 and long.endswith("-" + name_hash("é" * 300 + ".py"))


def test_student_id_of_a_name_that_is_not_utf8_is_stable_and_readable():
    name = os.fsdecode(b"\xff\xfe_hw.py")
    assert student_id(name) == student_id(name) == "hw-" + name_hash(b"\xff\xfe_hw.py")


def test_a_folder_holding_a_file_name_that_is_not_utf8_loads(tmp_path):
    """Linux file names are bytes: a data file named b'r\\xe9sum\\xe9.txt' (Latin-1) must not stop
    the load, and it keeps its real bytes in the submission's hash."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "main.py").write_text("def f():\n    return 1\n")
    with open(os.path.join(os.fsencode(folder), b"r\xe9sum\xe9.txt"), "wb") as f:
        f.write(b"notes")
    sub = load_submission(folder, main_module="main.py")
    assert sub.error is None and os.fsdecode(b"r\xe9sum\xe9.txt") in sub.files
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    os.rename(os.path.join(os.fsencode(other), b"r\xe9sum\xe9.txt"), os.path.join(os.fsencode(other), b"r\xe8sum\xe9.txt"))
    assert load_submission(other, main_module="main.py").sha256 != sub.sha256


def test_a_magic_line_of_one_identifier_and_300000_blanks_is_left_as_code():
    line = "x" + " " * 300_000
    assert neutralise_magics(line + "\nfiles = !ls\n  a, b = %who_ls") == line + "\nfiles = None  # magic not run\n" \
        "  a, b = None  # magic not run"
    assert neutralise_magics("x == !y\nx != %y") == "x == !y\nx != %y"


def test_magics_after_old_mac_line_breaks_keep_the_rest_of_the_cell():
    assert neutralise_magics("%matplotlib inline\rimport torch\r\n!pip install x\ry = 1") == \
        "pass  # magic not run\rimport torch\r\npass  # magic not run\ry = 1"
    assert neutralise_magics("%%bash\rls\rpwd") == "pass  # cell magic %%bash not run\r# ls\r# pwd"


@pytest.mark.parametrize("source, kind", [(42, "number"), (None, "null"), (True, "boolean"), ({"a": 1}, "object"),
                                          ([1, 2], None)])
def test_a_cell_source_that_is_not_text_is_the_students_load_error(tmp_path, source, kind):
    p = tmp_path / "nb.ipynb"
    p.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x = 1"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}]}))
    sub = load_submission(p)
    assert str(sub.error).startswith("nb.ipynb is not a valid notebook") and not sub.units
    if kind is not None:  # a list of numbers: nbformat's own reader refuses it first
        assert str(sub.error) == (f"nb.ipynb is not a valid notebook: the source of code cell 2 is a JSON {kind}, not "
                             "text; open and save it in Jupyter")


@pytest.mark.parametrize("metadata", [[], "tags", {"tags": "graded"}, {"tags": [1]}])
def test_cell_metadata_or_tags_of_the_wrong_type_are_the_students_load_error(tmp_path, metadata):
    p = tmp_path / "nb.ipynb"
    p.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": metadata, "outputs": [], "execution_count": None, "source": "x = 1"}]}))
    sub = load_submission(p, cell_tag="graded")
    assert str(sub.error).startswith("nb.ipynb is not a valid notebook") and not sub.units
    if isinstance(metadata, dict):  # a list or a string: nbformat's own reader refuses it first
        assert "the metadata or tags of code cell 1 are not what Jupyter writes" in str(sub.error)


def test_a_zip_member_name_flagged_utf8_that_is_not_is_the_students_load_error(tmp_path):
    import hostile_inputs

    sub = load_submission(hostile_inputs.bad_utf8_zip_name(tmp_path))
    assert str(sub.error) == "bad_name.zip holds a file name marked as UTF-8 that is not UTF-8; zip the files again " \
                        "with another tool"
    assert len(sub.sha256) == 64
