"""``--segrobust-malloc``: glibc's allocator tuned, or left alone, and never a number changed."""

from __future__ import annotations

import fnmatch
import json
import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_segrobust.report import without_timing
from pytest_segrobust.runtime import allocator
from tests.plugin_project import NO_FIGURES

ROOT = Path(__file__).resolve().parent.parent
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# Where a 64 MiB block comes from, and whether freeing it gives memory back, in a fresh process.
PROBE = textwrap.dedent(
    """
    import ctypes, json, sys
    from pytest_segrobust.runtime import allocator

    class Info(ctypes.Structure):  # glibc's struct mallinfo2
        _fields_ = [(name, ctypes.c_size_t) for name in
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    setting = allocator.configure(sys.argv[1])
    block = libc.malloc(64 << 20)
    mapped = libc.mallinfo2().hblkhd >= 64 << 20
    libc.free(block)
    print(json.dumps({"tuned": setting.tuned, "mapped": mapped, "heap_kept": libc.mallinfo2().arena >= 64 << 20}))
    """
)


@pytest.fixture(autouse=True)
def fresh_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a process where nothing was configured (the record is per process)."""
    monkeypatch.setattr(allocator, "_current", None)


@pytest.mark.skipif(not GLIBC, reason="tunes glibc's malloc only")
@pytest.mark.parametrize(("choice", "expected"), [
    ("system", {"tuned": False, "mapped": True, "heap_kept": False}),
    ("tuned", {"tuned": True, "mapped": False, "heap_kept": True}),
])
def test_tuned_serves_large_blocks_from_the_heap_and_keeps_them(choice: str, expected: dict[str, bool]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, choice], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == expected


@pytest.mark.skipif(not GLIBC, reason="tunes glibc's malloc only")
def test_tuned_names_glibc_and_what_it_does() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from pytest_segrobust.runtime import allocator; print(allocator.configure('tuned').describe())"],
        capture_output=True, text=True, check=True,
    )
    assert done.stdout.strip() == (
        f"tuned (glibc {platform.libc_ver()[1]}: blocks up to 2 GiB from the heap, freed memory kept for reuse)"
    )


def test_system_leaves_malloc_alone() -> None:
    assert allocator.current() is None
    setting = allocator.configure("system")
    assert setting == allocator.current() == allocator.AllocatorSetting("system", False, "malloc left as the C library set it")


def test_system_after_tuned_in_one_process_does_not_claim_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "_current", allocator.AllocatorSetting("tuned", True, "glibc"))
    setting = allocator.configure("system")
    assert setting.tuned and setting.describe() == "system (glibc's malloc was tuned earlier in this process and stays so)"


@pytest.mark.parametrize(("platform_name", "libc", "reason"), [
    ("darwin", ("", ""), "not Linux (darwin); only glibc's malloc is tuned"),
    ("win32", ("", ""), "not Linux (win32); only glibc's malloc is tuned"),
    ("linux", ("", ""), "the C library is not glibc (musl?); only glibc's malloc is tuned"),
])
def test_tuned_does_nothing_elsewhere_and_says_why(
    monkeypatch: pytest.MonkeyPatch, platform_name: str, libc: tuple[str, str], reason: str
) -> None:
    monkeypatch.setattr(sys, "platform", platform_name)
    monkeypatch.setattr(platform, "libc_ver", lambda: libc)
    setting = allocator.configure("tuned")
    assert setting == allocator.current() == allocator.AllocatorSetting("tuned", False, f"does nothing here: {reason}")


class RefusingLibc:
    """A C library whose ``mallopt`` takes the first ``accepted`` calls and refuses the rest."""

    def __init__(self, accepted: int) -> None:
        self.accepted = accepted

    def mallopt(self, parameter: int, value: int) -> int:
        self.accepted -= 1
        return int(self.accepted >= 0)


@pytest.mark.parametrize(("accepted", "tuned", "detail"), [
    (0, False, "glibc's mallopt refused M_MMAP_THRESHOLD"),
    (1, True, "glibc's mallopt refused M_TRIM_THRESHOLD (M_MMAP_THRESHOLD was set)"),
])
def test_a_refused_mallopt_says_what_was_set(monkeypatch: pytest.MonkeyPatch, accepted: int, tuned: bool, detail: str) -> None:
    monkeypatch.setattr(allocator, "_glibc", lambda: RefusingLibc(accepted))
    assert allocator.configure("tuned") == allocator.AllocatorSetting("tuned", tuned, detail)


class CappingLibc:
    """A C library whose ``mallopt`` refuses an mmap threshold above 32 MiB, as older glibc does."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return int(parameter != -3 or value <= 32 << 20)


def test_a_capped_mmap_threshold_takes_the_cap_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = CappingLibc()
    monkeypatch.setattr(allocator, "_glibc", lambda: libc)
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.31"))
    setting = allocator.configure("tuned")
    assert setting == allocator.AllocatorSetting(
        "tuned", True, "glibc 2.31: blocks up to 32 MiB from the heap, freed memory kept for reuse"
    )
    assert libc.calls == [(-3, 2**31 - 1), (-3, 32 << 20), (-1, -1)]


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="allocator setting must be one of tuned, system, not 'fast'"):
        allocator.configure("fast")
    assert allocator.current() is None


def test_plain_pytest_leaves_malloc_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="from pytest_segrobust.runtime import allocator\n\ndef test_untouched():\n    assert allocator.current() is None\n"
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.slow
def test_the_demo_report_is_the_same_either_way_and_says_which(pytester: pytest.Pytester) -> None:
    """Fresh processes (the allocator is the process's): the header and the report name the
    setting, and nothing but the report's timing and environment differs. (Under xdist each
    worker tunes its own: the demo gate, ``pytest --segrobust -n 2`` tuned against baselines
    stored untuned, is that check.)"""
    # The demo network on its first 16 images and one corrupted cell (and the clean one it needs):
    # the report's numbers are the check, not their precision. The report's figures and worst
    # images (half a run's CPU) are no number the allocator could change: left out.
    demo = (ROOT / "suites" / "demo.yaml").read_text() + "limit: 16\n"
    pytester.mkdir("suites").joinpath("demo.yaml").write_text(demo)
    tuned = "glibc *: blocks up to 2 GiB from the heap, freed memory kept for reuse" if GLIBC else "does nothing here: *"
    described = {"system": "system (malloc left as the C library set it)", "tuned": f"tuned ({tuned})"}
    reports = []
    for choice in ("system", "tuned"):
        result = pytester.runpytest_subprocess(
            "--segrobust", "--segrobust-update-baselines", "-p", "no:cacheprovider", "--segrobust-malloc", choice,
            NO_FIGURES, "-k", "tiny-unet and not smoothed and rotate and 5",
        )
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"segrobust: malloc {described[choice]}"])
        report = json.loads((pytester.path / "segrobust-report-partial.json").read_text())
        assert fnmatch.fnmatch(report["environment"]["malloc"], described[choice])
        assert f"| malloc | {report['environment']['malloc']} |" in (pytester.path / "segrobust-report-partial.md").read_text()
        reports.append(without_timing(report))
        shutil.rmtree(pytester.path / "baselines")  # each run writes the baselines afresh: nothing else differs
    assert reports[0] == reports[1]
