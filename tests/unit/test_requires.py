"""The packages torch requires, found from the installed distributions' metadata."""

import os

from grader.sandbox.jail import requires


def test_torchs_closure_holds_sympy_and_what_sympy_requires():
    names = {requires.normal_name(d.metadata["Name"]) for d in requires.required_closure(("torch",))}
    assert {"sympy", "mpmath", "filelock"} <= names
    assert "torch" not in names


def test_a_requirement_of_an_extra_is_left_out():
    assert requires.required_name("sympy>=1.13.3") == "sympy"
    assert requires.required_name("typing-extensions>=4.10.0") == "typing-extensions"
    assert requires.required_name("Jinja2") == "jinja2"
    assert requires.required_name('optree>=0.13.0; extra == "optree"') is None
    assert requires.required_name("pytest-cov ; (platform_python_implementation != 'PyPy') and extra == 'testing'") is None
    assert requires.required_name("colorama; sys_platform == 'win32'") == "colorama"


def test_required_packages_are_folders_or_compiled_files_that_exist():
    found = requires.required_packages(("torch",))
    assert any(os.path.basename(p) == "sympy" and os.path.isdir(p) for p in found)
    assert all(os.path.exists(p) for p in found)
    assert all(os.path.isdir(p) or p.endswith(".pyc") for p in found)


def test_a_name_not_installed_requires_nothing():
    assert requires.required_closure(("no-such-distribution-here",)) == []
