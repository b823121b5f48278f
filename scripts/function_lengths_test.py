"""scripts/function_lengths.py finds the functions it should and their lengths."""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).with_name("function_lengths.py")


def run(tmp_path, *args):
    return subprocess.run([sys.executable, str(SCRIPT), *args, str(tmp_path)], capture_output=True, text=True)


def write(tmp_path, body_lines):
    body = "\n".join(f"  x += {i};" for i in range(body_lines))
    (tmp_path / "a.cc").write_text(
        "namespace edt {\n"
        "struct S {\n  S(int a) : a_(a), b_(2) {\n  }\n  int a_, b_;\n};\n"
        f"int long_one(int x) {{\n  auto f = [&] {{\n{body}\n  }};\n  f();\n  return x;\n}}\n"
        "int short_one() const {\n  return 1;\n}\n"
        "}  // namespace edt\n")


def test_a_function_over_the_limit_is_named_and_fails(tmp_path):
    write(tmp_path, 160)
    result = run(tmp_path, "--max", "150")
    assert result.returncode == 1, result.stdout
    assert "long_one" in result.stdout and "  166  long_one" in result.stdout, result.stdout
    assert "1 functions longer than 150 lines" in result.stdout


def test_within_the_limit_passes_and_lists_every_function(tmp_path):
    write(tmp_path, 10)
    assert run(tmp_path, "--max", "150").returncode == 0
    listed = run(tmp_path, "--top", "10").stdout
    for name in ("long_one", "short_one", "S"):
        assert f"  {name}  " in listed, listed
